//! How a statement changes a container: grows it, clears it, trims it or rebinds it. Shared by
//! the class/module pre-pass and the per-loop scans.

use ruff_python_ast::visitor::{walk_expr, Visitor};
use ruff_python_ast::{Expr, ExprCall, Stmt};
use ruff_text_size::{Ranged, TextSize};

use super::names::{dotted, is_dotted};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// `.append/.extend/.insert/.add/.appendleft/.setdefault`, `c[k] = v`, `c += [..]`.
    Grow,
    /// `.clear()`, `del c[:]`, `c[:] = []`.
    Clear,
    /// `c = c[-n:]`, `del c[0]`, `.pop()`, `.popleft()`, `.remove()`.
    Trim,
    /// `c = <something else>`.
    Rebind,
}

/// Calls `f(key, mutation, offset)` for each container change the statement makes itself
/// (nested bodies are the caller's business). `key` is the dotted text of the container.
pub fn for_each_mutation(stmt: &Stmt, f: &mut dyn FnMut(String, Mutation, TextSize)) {
    for_each_mutation_inner(stmt, true, Keys::All, f);
}

/// Which containers a caller wants to hear about. Pre-passes over every method look only for
/// `self.<attr>` or bare names; filtering before the key is built saves a string per
/// assignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    All,
    /// `self.<attr>`, one level deep.
    SelfAttrs,
    /// Bare names.
    Names,
}

impl Keys {
    fn key(self, expr: &Expr) -> Option<String> {
        let wanted = match self {
            Keys::All => true,
            Keys::SelfAttrs => matches!(expr, Expr::Attribute(a)
                if matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "self")),
            Keys::Names => matches!(expr, Expr::Name(_)),
        };
        if wanted {
            dotted(expr)
        } else {
            None
        }
    }
}

/// `for_each_mutation`, reporting only the containers `keys` selects.
pub fn for_each_mutation_of(
    stmt: &Stmt,
    keys: Keys,
    f: &mut dyn FnMut(String, Mutation, TextSize),
) {
    for_each_mutation_inner(stmt, true, keys, f);
}

/// The changes a statement makes by assignment and `del`, leaving out the method calls in its
/// expressions: for a caller that visits those expressions anyway and asks `call_mutation`.
pub fn for_each_target_mutation(
    stmt: &Stmt,
    keys: Keys,
    f: &mut dyn FnMut(String, Mutation, TextSize),
) {
    for_each_mutation_inner(stmt, false, keys, f);
}

fn for_each_mutation_inner(
    stmt: &Stmt,
    with_calls: bool,
    keys: Keys,
    f: &mut dyn FnMut(String, Mutation, TextSize),
) {
    let calls_in = |e: &Expr, f: &mut dyn FnMut(String, Mutation, TextSize)| {
        if with_calls {
            calls_in(e, keys, f);
        }
    };
    let target_mutations =
        |t: &Expr, v: Option<&Expr>, f: &mut dyn FnMut(String, Mutation, TextSize)| {
            target_mutations(t, v, keys, f);
        };
    match stmt {
        Stmt::Assign(assign) => {
            for target in &assign.targets {
                target_mutations(target, Some(&assign.value), f);
            }
            calls_in(&assign.value, f);
        }
        Stmt::AnnAssign(assign) => {
            if let Some(value) = &assign.value {
                target_mutations(&assign.target, Some(value), f);
                calls_in(value, f);
            }
        }
        Stmt::AugAssign(aug) => {
            if matches!(&*aug.value, Expr::List(_) | Expr::ListComp(_)) {
                if let Some(key) = keys.key(&aug.target) {
                    f(key, Mutation::Grow, aug.start());
                }
            }
            calls_in(&aug.value, f);
        }
        Stmt::Delete(del) => {
            for target in &del.targets {
                if let Expr::Subscript(sub) = target {
                    if let Some(key) = keys.key(&sub.value) {
                        let m = if is_full_slice(&sub.slice) {
                            Mutation::Clear
                        } else {
                            Mutation::Trim
                        };
                        f(key, m, del.start());
                    }
                } else if let Some(key) = keys.key(target) {
                    f(key, Mutation::Rebind, del.start());
                }
            }
        }
        Stmt::Expr(expr) => calls_in(&expr.value, f),
        Stmt::Return(ret) => {
            if let Some(v) = &ret.value {
                calls_in(v, f);
            }
        }
        Stmt::For(for_) => {
            target_mutations(&for_.target, None, f);
            calls_in(&for_.iter, f);
        }
        Stmt::With(with) => {
            for item in &with.items {
                calls_in(&item.context_expr, f);
                if let Some(vars) = &item.optional_vars {
                    target_mutations(vars, None, f);
                }
            }
        }
        Stmt::If(if_) => calls_in(&if_.test, f),
        Stmt::While(w) => calls_in(&w.test, f),
        _ => {}
    }
}

fn target_mutations(
    target: &Expr,
    value: Option<&Expr>,
    keys: Keys,
    f: &mut dyn FnMut(String, Mutation, TextSize),
) {
    match target {
        Expr::Tuple(t) => {
            for elt in &t.elts {
                target_mutations(elt, None, keys, f);
            }
        }
        Expr::List(l) => {
            for elt in &l.elts {
                target_mutations(elt, None, keys, f);
            }
        }
        Expr::Starred(s) => target_mutations(&s.value, None, keys, f),
        Expr::Subscript(sub) => {
            if let Some(key) = keys.key(&sub.value) {
                let m = if is_full_slice(&sub.slice) {
                    Mutation::Clear
                } else {
                    Mutation::Grow
                };
                f(key, m, sub.start());
            }
        }
        _ => {
            let Some(key) = keys.key(target) else { return };
            let m = match value {
                Some(v) if is_self_update(&key, v) => Mutation::Grow,
                Some(Expr::Subscript(sub))
                    if is_dotted(&sub.value, &key) && matches!(&*sub.slice, Expr::Slice(_)) =>
                {
                    Mutation::Trim
                }
                _ => Mutation::Rebind,
            };
            f(key, m, target.start());
        }
    }
}

fn is_full_slice(slice: &Expr) -> bool {
    matches!(slice, Expr::Slice(s) if s.lower.is_none() && s.upper.is_none() && s.step.is_none())
}

/// The change a method call makes to its receiver (`xs.append(x)` grows `xs`).
pub fn call_mutation(call: &ExprCall) -> Option<(String, Mutation)> {
    call_mutation_of(call, Keys::All)
}

fn call_mutation_of(call: &ExprCall, keys: Keys) -> Option<(String, Mutation)> {
    let Expr::Attribute(attr) = &*call.func else {
        return None;
    };
    let m = match attr.attr.as_str() {
        "append" | "extend" | "insert" | "add" | "appendleft" | "extendleft" | "setdefault"
        | "update" | "push" => Mutation::Grow,
        "clear" => Mutation::Clear,
        "pop" | "popleft" | "popitem" | "remove" | "discard" => Mutation::Trim,
        _ => return None,
    };
    if let Some(key) = keys.key(&attr.value) {
        return Some((key, m));
    }
    // `queues[k].pop(0)`: an entry of the container changes, and what it holds with it. A
    // queue per pipeline stage that takes one item in and one out each iteration is bounded
    // as a single queue is. Clearing one entry trims the whole.
    let mut inner = &*attr.value;
    while let Expr::Subscript(sub) = inner {
        inner = &sub.value;
    }
    if std::ptr::eq(inner, &*attr.value) {
        return None;
    }
    let m = match m {
        Mutation::Clear => Mutation::Trim,
        m => m,
    };
    Some((keys.key(inner)?, m))
}

/// Method calls on containers anywhere inside an expression (lambda bodies excluded: they run
/// later, if ever).
fn calls_in(expr: &Expr, keys: Keys, f: &mut dyn FnMut(String, Mutation, TextSize)) {
    struct V<'f> {
        keys: Keys,
        f: &'f mut dyn FnMut(String, Mutation, TextSize),
    }
    impl<'a> Visitor<'a> for V<'_> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Call(call) = expr {
                if let Some((key, m)) = call_mutation_of(call, self.keys) {
                    (self.f)(key, m, call.start());
                }
            }
            if !matches!(expr, Expr::Lambda(_)) {
                walk_expr(self, expr);
            }
        }
    }
    V { keys, f }.visit_expr(expr);
}

/// `key = key + x` (or `x + key`, any binary operator), or `key = torch.cat([key, x])` (any
/// concatenation that lists `key` itself, also as one branch of `x if key is None else ...`):
/// the new value is built from the old, and holds all of it.
pub fn is_self_update(key: &str, value: &Expr) -> bool {
    match value {
        Expr::BinOp(bin) => is_dotted(&bin.left, key) || is_dotted(&bin.right, key),
        Expr::If(e) => is_self_update(key, &e.body) || is_self_update(key, &e.orelse),
        Expr::Call(call) => {
            let concat = match &*call.func {
                Expr::Attribute(a) => CONCATENATIONS.contains(&a.attr.as_str()),
                Expr::Name(n) => CONCATENATIONS.contains(&n.id.as_str()),
                _ => false,
            };
            concat
                && match call.arguments.args.first() {
                    Some(Expr::List(l)) => l.elts.iter().any(|e| is_dotted(e, key)),
                    Some(Expr::Tuple(t)) => t.elts.iter().any(|e| is_dotted(e, key)),
                    _ => false,
                }
        }
        _ => false,
    }
}

/// The functions that concatenate arrays or tensors (`torch.cat`, `np.concatenate` and their
/// kin), by short name.
pub const CONCATENATIONS: &[&str] = &[
    "cat",
    "concat",
    "concatenate",
    "stack",
    "vstack",
    "hstack",
    "dstack",
    "row_stack",
    "column_stack",
];

/// What a container method call stores, and the method: `xs.append(v)`, `s.add(v)`,
/// `xs.insert(i, v)`, `xs.extend(vs)`. `None` when the call does not have a container store's
/// shape: `q.add(a, b)` (a quantized module's arithmetic, a metric's `add(value, n)`) is not
/// `set.add`.
pub fn stored_values(call: &ExprCall) -> Option<(&str, Vec<&Expr>)> {
    let Expr::Attribute(attr) = &*call.func else {
        return None;
    };
    let method = attr.attr.as_str();
    let args = &call.arguments.args;
    let plain = call.arguments.keywords.is_empty();
    let stored: Vec<&Expr> = match method {
        "append" | "add" | "appendleft" | "extend" | "extendleft" if plain && args.len() == 1 => {
            vec![&args[0]]
        }
        "insert" if plain && args.len() == 2 => vec![&args[1]],
        // A buffer object's own store methods take what they keep in any shape.
        "push" | "store" | "put" | "add_experience" => args
            .iter()
            .chain(call.arguments.keywords.iter().map(|k| &k.value))
            .collect(),
        _ => return None,
    };
    Some((method, stored))
}

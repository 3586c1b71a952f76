//! ## What it does
//! Flags storing, in a container that outlives the iteration, a view that selects part of a
//! tensor or array made in the iteration: a slice or strided slice (`logits[:, -1]`,
//! `frame[::2, ::2]`, `x[0]`), `.narrow(...)`, `.select(...)`, `.diagonal()`, a piece of
//! `.split()`/`.chunk()`/`.unbind()` (reshaping views such as `.view(...)`, `.T`, `.expand(...)`
//! on top of those too); a slice returned by a function of this file
//! (`def first_token(h): return h[:, 0]`); elements got by iterating a tensor or array and kept
//! only some of the time (`for row in batch: if keep(row): rows.append(row)`); and
//! `list.extend(x[:, 1])`, which adds every row of a slice as a view of the whole.
//!
//! ## Why is this bad?
//! A view shares the storage of its base: as long as the small slice is alive, so is the whole
//! base tensor or array. Keeping the last-token logits `logits[:, -1]` of a `(batch, seq, vocab)`
//! tensor keeps all `seq` positions; keeping a downsampled frame `frame[::2, ::2]` keeps the full
//! frame. Memory grows by the size of the base, not of what was kept, with every step, and
//! trimming the container later does not help while any view of a base remains.
//!
//! ## Example
//! ```python
//! def last_token_logits(model, loader):
//!     last_logits = []
//!     with torch.no_grad():
//!         for batch in loader:
//!             logits = model(batch)  # (batch, seq, vocab)
//!             last_logits.append(logits[:, -1])
//!     return last_logits
//! ```
//!
//! ## Use instead
//! ```python
//! def last_token_logits(model, loader):
//!     last_logits = []
//!     with torch.no_grad():
//!         for batch in loader:
//!             logits = model(batch)  # (batch, seq, vocab)
//!             last_logits.append(logits[:, -1].clone())
//!     return last_logits
//! ```
//!
//! ## Fix safety
//! The fix stores a copy: `.clone()` for a tensor, `.copy()` for a numpy array. It is unsafe: the
//! stored entry no longer shares memory with its base, so in-place writes to the base after the
//! store no longer show in it (and writes to the entry no longer reach the base).
//! `list.extend(tensor)` gets no fix: extend with `tensor.tolist()` or with copies of the rows.
//!
//! ## Stays silent on
//! `.clone()`, `.copy()`, `.tolist()`, `.item()`, `.cpu()`, `.to(...)`, `.contiguous()`,
//! `np.array(...)`, `torch.tensor(...)` on the way; views of long-lived bases (`self.buffer[i]`,
//! a data set bound once before the loop), which are kept alive anyway; reshaping views of a
//! whole tensor (`x.view(-1)`, `x.T`, `x[:, None, :]`), which keep no more than they show;
//! every row of a whole tensor or array kept (`rows.extend(out)`, or `for row in out:
//! rows.append(row)` on every iteration): together the rows are the base, so it holds nothing
//! they do not show (how long the container keeps them is another matter, not this rule's);
//! advanced indexing with
//! index tensors or lists (a copy); per-iteration containers; local lists of a function that does
//! not run per iteration, and those filled by a loop that counts its own steps (`for _ in
//! range(num_decode_steps)`) and trains nothing, which the function only reduces into a copy
//! (`torch.stack(outputs)`) and never hands out (an autoregressive decode: the bases die with the
//! call); graph-carrying values (LS002).

use ruff_python_ast::{Expr, ExprCall, Stmt};
use ruff_text_size::{Ranged, TextRange};

use crate::checker::{Checker, Lifetime};
use crate::diagnostic::{Diagnostic, Fix};
use crate::registry::Rule;
use crate::rules::helpers::{append_call, short, until};
use crate::semantic::lifetime::Until;
use crate::semantic::mutation::Mutation;
use crate::semantic::names::dotted;
use crate::semantic::scan::only_grown;
use crate::semantic::value::Kind;

/// Container methods that grow it (a buffer class's `push` may copy what it keeps).
const STORE_METHODS: &[&str] = &["append", "insert", "add", "appendleft"];

/// What a stored expression holds a view of.
struct View {
    /// The tensor or array whose storage the view keeps alive (its source text).
    base: String,
    array: bool,
    /// How the view was made, for the message.
    how: String,
}

pub(crate) fn call(checker: &mut Checker, call: &ExprCall) {
    let Expr::Attribute(attr) = &*call.func else {
        return;
    };
    let method = attr.attr.as_str();
    let receiver = &*attr.value;
    if method == "extend" {
        let Some(arg) = call.arguments.args.first() else {
            return;
        };
        let Some(view) = rows_of(checker, arg) else {
            return;
        };
        let Some(lifetime) = kept(checker, receiver) else {
            return;
        };
        let trimmed = matches!(
            lifetime.until,
            crate::checker::Until::Reset {
                mutation: Mutation::Trim,
                ..
            }
        );
        let until = if trimmed {
            "for as long as one of its rows stays: trimming frees no base while a row of it \
             remains"
                .to_string()
        } else {
            until(checker, &lifetime)
        };
        let message = format!(
            "`{}.extend({})` adds each row of `{}` as a view: every row keeps the whole of `{}` \
             alive, so `{}` holds each base in full {until}; extend with copies \
             (`{}.tolist()` or `[r.clone() for r in {}]`)",
            short(checker, receiver),
            short(checker, arg),
            view.base,
            view.base,
            lifetime.key,
            short(checker, arg),
            short(checker, arg),
        );
        checker.report(Diagnostic::new(Rule::LS005, message, call.range()));
        return;
    }
    if !STORE_METHODS.contains(&method) {
        return;
    }
    let Some(stored) = call
        .arguments
        .args
        .iter()
        .skip(usize::from(method == "insert"))
        .find(|a| view_of(checker, a).is_some())
    else {
        return;
    };
    let Some(lifetime) = kept(checker, receiver) else {
        return;
    };
    let what = format!(
        "`{}.{method}({})`",
        short(checker, receiver),
        short(checker, stored)
    );
    report(checker, &what, stored, &lifetime, call.range());
}

pub(crate) fn stmt(checker: &mut Checker, stmt: &Stmt) {
    let Stmt::Assign(assign) = stmt else {
        return;
    };
    for target in &assign.targets {
        let Expr::Subscript(sub) = target else {
            continue;
        };
        let value = &*assign.value;
        if !checker.in_loop()
            || !checker.key_changes_per_iteration(&sub.slice)
            || view_of(checker, value).is_none()
        {
            continue;
        }
        let Some(lifetime) = kept(checker, &sub.value) else {
            continue;
        };
        let what = format!("`{} = {}`", short(checker, target), short(checker, value));
        report(
            checker,
            &what,
            value,
            &lifetime,
            target.range().cover(value.range()),
        );
    }
}

fn report(checker: &mut Checker, what: &str, stored: &Expr, lifetime: &Lifetime, range: TextRange) {
    let Some(view) = view_of(checker, stored) else {
        return;
    };
    let base = view.base;
    let unit = if checker.in_loop() {
        "iteration"
    } else {
        "call"
    };
    let message =
        format!(
        "{what} stores {}: it shares the storage of `{base}` and keeps the whole of it alive, so \
         `{}` holds one full `{base}` per {unit}, not just the part it shows, {}",
        view.how, lifetime.key, until(checker, lifetime),
    );
    let copy = if view.array { "copy" } else { "clone" };
    let fix = Fix::unsafe_edit(
        format!("Store a copy: `{}.{copy}()`", short(checker, stored)),
        append_call(checker, stored, copy),
    );
    checker.report(Diagnostic::new(Rule::LS005, message, range).with_fix(fix));
}

/// The container outlives the iteration and is not emptied within it. Trimming does not count:
/// each entry that stays still keeps its whole base.
fn kept(checker: &Checker, container: &Expr) -> Option<Lifetime> {
    if !checker.per_step() {
        return None;
    }
    // Writing into a preallocated tensor or array copies the values in; a `deque(maxlen=n)`
    // keeps the bases of its last n rows at most.
    if crate::rules::helpers::keeps_a_bounded_number(checker, container) {
        return None;
    }
    // An object of a class of this file manages its own storage.
    if checker.holds_file_object(container) {
        return None;
    }
    let lifetime = checker.lifetime(container)?;
    // A local of a function whose loop counts its own steps and trains nothing (an
    // autoregressive decode over `range(num_decode_steps)`), which the function only reduces
    // into a copy (`torch.stack(outs)`) and never hands out: the bases die with the call, and
    // there are as many as the call asks for. A pass over data keeps one base per batch of
    // the data set until it ends, and stays reported.
    if matches!(lifetime.until, Until::Return { .. })
        && checker
            .iteration()
            .and_then(|it| checker.iteration_loop(it))
            .is_some_and(|l| !l.trains && counts(l.stmt))
        && checker
            .function()
            .is_some_and(|f| only_grown(&f.body, &lifetime.key, &copies))
    {
        return None;
    }
    let emptied = checker
        .block_facts()
        .changes
        .get(&lifetime.key)
        .is_some_and(|ms| {
            ms.iter()
                .any(|m| matches!(m, Mutation::Clear | Mutation::Rebind))
        });
    if emptied {
        return None;
    }
    Some(lifetime)
}

/// Is the loop a `for ... in range(...)`: a count, not a pass over data?
fn counts(stmt: &Stmt) -> bool {
    matches!(stmt, Stmt::For(f)
        if matches!(&*f.iter, Expr::Call(c) if crate::semantic::names::is_dotted(&c.func, "range")))
}

/// Calls that copy what a list holds into a new tensor or array (or only count it).
fn copies(call: &ExprCall) -> bool {
    match &*call.func {
        Expr::Attribute(a) => matches!(
            a.attr.as_str(),
            "stack" | "cat" | "concat" | "concatenate" | "vstack" | "hstack" | "dstack" | "array"
        ),
        Expr::Name(n) => n.id.as_str() == "len",
        _ => false,
    }
}

/// Is `expr` a view selecting part of a per-iteration tensor or array?
fn view_of(checker: &Checker, expr: &Expr) -> Option<View> {
    if checker.value(expr).has_graph() {
        // Graph-carrying stores are LS002's.
        return None;
    }
    // An element got by iterating a tensor or array: `for row in batch`.
    if let Expr::Name(name) = expr {
        let (base, array, for_) = iterated_base(checker, name.id.as_str())?;
        // Every row stored, one by one: together they are all of the base, no more.
        if keeps_every_row(for_, expr) {
            return None;
        }
        let base = short(checker, base);
        return Some(View {
            how: format!(
                "`{}`, an element got by iterating `{base}` (a view)",
                name.id.as_str(),
            ),
            base,
            array,
        });
    }
    // `first_token(hidden)`: a function of this file that returns a slice of its argument.
    if let Expr::Call(call) = expr {
        if let Expr::Name(f) = &*call.func {
            if let Some(&i) = checker.facts.view_returns.get(f.id.as_str()) {
                let arg = call.arguments.args.get(i)?;
                let (base, array) = fresh_base(checker, arg)?;
                return Some(View {
                    base: short(checker, base),
                    array,
                    how: format!(
                        "`{}`, a slice of `{}` that `{}()` returns (a view)",
                        short(checker, expr),
                        short(checker, arg),
                        f.id.as_str()
                    ),
                });
            }
        }
    }
    let mut cur = expr;
    let mut subset: Option<String> = None;
    loop {
        match cur {
            Expr::Subscript(sub) => {
                let recv = checker.value(&sub.value);
                let array = recv.kind == Kind::Array;
                if !basic_index(checker, &sub.slice, array) {
                    return None;
                }
                // `x[:, None, :]` shows all of `x`, as `x.unsqueeze(1)` does.
                if !whole_index(&sub.slice) {
                    subset.get_or_insert_with(|| format!("`{}`", short(checker, cur)));
                }
                cur = &sub.value;
            }
            Expr::Attribute(a) if matches!(a.attr.as_str(), "T" | "mT" | "H" | "data" | "real") => {
                cur = &a.value;
            }
            Expr::Call(call) => {
                let Expr::Attribute(a) = &*call.func else {
                    return None;
                };
                match a.attr.as_str() {
                    "narrow" | "select" | "diagonal" | "unfold" | "as_strided" => {
                        subset.get_or_insert_with(|| format!("`{}`", short(checker, cur)));
                    }
                    "view" | "view_as" | "reshape" | "squeeze" | "unsqueeze" | "transpose"
                    | "permute" | "flatten" | "expand" | "expand_as" | "detach" | "numpy"
                    | "ravel" | "swapaxes" | "movedim" | "t" => {}
                    "split" | "chunk" | "unbind" | "tensor_split" => {
                        // Only a piece of these is a view: `x.split(n)[0]` (handled above).
                        subset.as_ref()?;
                    }
                    _ => return None,
                }
                cur = &a.value;
            }
            _ => break,
        }
    }
    let how = subset?;
    let (base, array) = fresh_base(checker, cur)?;
    Some(View {
        base: short(checker, base),
        array,
        how: format!("{how}, a view"),
    })
}

/// `arg` of `.extend(arg)` is a tensor or array whose rows become views.
fn rows_of(checker: &Checker, arg: &Expr) -> Option<View> {
    if checker.value(arg).has_graph() {
        return None;
    }
    let mut cur = arg;
    while let Expr::Call(call) = cur {
        match &*call.func {
            Expr::Name(n) if n.id.as_str() == "list" && call.arguments.args.len() == 1 => {
                cur = &call.arguments.args[0];
            }
            Expr::Attribute(a) if matches!(a.attr.as_str(), "unbind" | "detach") => {
                cur = &a.value;
            }
            _ => return None,
        }
    }
    // `rows.extend(x[:, 1])`: the rows of a view are views of its base. The rows of a whole
    // tensor (`rows.extend(out)`) are all of it: together they keep no more than they show.
    let view = view_of(checker, cur)?;
    Some(View {
        how: String::new(),
        ..view
    })
}

/// A tensor or array made in this iteration (or this call of a per-step function): a call's
/// result, or a local rebound in an enclosing loop.
fn fresh_base<'e>(checker: &Checker, base: &'e Expr) -> Option<(&'e Expr, bool)> {
    let v = checker.value(base);
    let array = v.kind == Kind::Array;
    if !(array || v.is_tensor_like() || v.device) {
        return None;
    }
    let fresh = match base {
        Expr::Call(_) => true,
        Expr::Name(n) => {
            let id = n.id.as_str();
            let in_loops = checker.loops().iter().any(|l| l.facts.rebinds(id));
            let scope = checker.scope();
            in_loops
                || checker.in_per_step_function()
                    && (scope.params.contains(id) || scope.bound_depth.contains_key(id))
        }
        _ => false,
    };
    fresh.then_some((base, array))
}

/// `name` is the target of an enclosing `for name in <tensor or array>` (or of
/// `enumerate(...)`/`zip(...)` over one) whose iterable is made per iteration.
fn iterated_base<'a>(
    checker: &Checker<'a>,
    name: &str,
) -> Option<(&'a Expr, bool, &'a ruff_python_ast::StmtFor)> {
    let loops = checker.loops();
    for (depth, frame) in loops.iter().enumerate().rev() {
        let Stmt::For(for_) = frame.stmt else {
            continue;
        };
        let iter: &'a Expr = &for_.iter;
        let elem_iter: Option<&'a Expr> = match &*for_.target {
            Expr::Name(t) if t.id.as_str() == name => Some(iter),
            Expr::Tuple(t) => match iter {
                Expr::Call(c) => {
                    let func = dotted(&c.func);
                    let pos = t
                        .elts
                        .iter()
                        .position(|e| matches!(e, Expr::Name(n) if n.id.as_str() == name));
                    match (func.as_deref(), pos) {
                        (Some("enumerate"), Some(1)) => c.arguments.args.first(),
                        (Some("zip"), Some(i)) => c.arguments.args.get(i),
                        _ => None,
                    }
                }
                _ => None,
            },
            _ => None,
        };
        let Some(elem_iter) = elem_iter else {
            if frame.facts.rebinds(name) && depth + 1 == loops.len() {
                return None;
            }
            continue;
        };
        // The loop target must not be rebound in the body (`row = row * 2` is a new tensor).
        if frame.facts.changes.get(name).is_some_and(|c| c.len() > 1) {
            return None;
        }
        let v = checker.value(elem_iter);
        let array = v.kind == Kind::Array;
        if !(array || v.is_tensor_like() || v.device) || v.has_graph() {
            return None;
        }
        let fresh = match elem_iter {
            Expr::Call(_) => true,
            Expr::Name(n) => {
                let id = n.id.as_str();
                loops[..depth].iter().any(|l| l.facts.rebinds(id))
                    || checker.in_per_step_function()
                        && (checker.scope().params.contains(id)
                            || checker.scope().bound_depth.contains_key(id))
            }
            _ => false,
        };
        return fresh.then_some((elem_iter, array, for_));
    }
    None
}

/// Does the loop store `element` on every iteration: in a statement of its own body (or of a
/// `with` there), not under a condition, with no `break`, `continue`, `return` or `raise` that
/// could skip it? Then every row of the base is kept, and the base holds nothing more.
fn keeps_every_row(for_: &ruff_python_ast::StmtFor, element: &Expr) -> bool {
    fn stored_in(body: &[Stmt], element: &Expr) -> bool {
        body.iter().any(|s| match s {
            Stmt::Expr(_) | Stmt::Assign(_) => s.range().contains_range(element.range()),
            Stmt::With(w) => stored_in(&w.body, element),
            _ => false,
        })
    }
    struct Exits(bool);
    impl<'a> ruff_python_ast::visitor::Visitor<'a> for Exits {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            match stmt {
                Stmt::Break(_) | Stmt::Continue(_) | Stmt::Return(_) | Stmt::Raise(_) => {
                    self.0 = true;
                }
                Stmt::FunctionDef(_) | Stmt::ClassDef(_) => {}
                _ => ruff_python_ast::visitor::walk_stmt(self, stmt),
            }
        }
    }
    let mut exits = Exits(false);
    for s in &for_.body {
        ruff_python_ast::visitor::Visitor::visit_stmt(&mut exits, s);
    }
    !exits.0 && stored_in(&for_.body, element)
}

/// Basic indexing (integers, slices, `None`, `...`) makes a view; index tensors or lists make
/// a copy. For numpy a lone integer of a 1-D array gives a scalar, so arrays need a slice.
fn basic_index(checker: &Checker, slice: &Expr, array: bool) -> bool {
    let parts: Vec<&Expr> = match slice {
        Expr::Tuple(t) => t.elts.iter().collect(),
        e => vec![e],
    };
    let mut has_slice = false;
    for p in &parts {
        match p {
            Expr::Slice(_) => has_slice = true,
            Expr::NumberLiteral(_) | Expr::NoneLiteral(_) | Expr::EllipsisLiteral(_) => {}
            Expr::UnaryOp(u) if matches!(&*u.operand, Expr::NumberLiteral(_)) => {}
            Expr::Name(n) if is_range_index(checker, n.id.as_str()) => {}
            _ => return false,
        }
    }
    has_slice || !array
}

/// An index that only adds axes or takes every element of each (`[:, None]`, `[..., None]`):
/// its view keeps no more than it shows.
fn whole_index(slice: &Expr) -> bool {
    let parts: Vec<&Expr> = match slice {
        Expr::Tuple(t) => t.elts.iter().collect(),
        e => vec![e],
    };
    parts.iter().all(|p| match p {
        Expr::Slice(s) => s.lower.is_none() && s.upper.is_none() && s.step.is_none(),
        Expr::NoneLiteral(_) | Expr::EllipsisLiteral(_) => true,
        _ => false,
    })
}

/// `i` in `for i in range(...)` or `for i, _ in enumerate(...)`.
fn is_range_index(checker: &Checker, name: &str) -> bool {
    checker.loops().iter().any(|l| {
        let Stmt::For(f) = l.stmt else { return false };
        let Expr::Call(c) = &*f.iter else {
            return false;
        };
        match (&*f.target, dotted(&c.func).as_deref()) {
            (Expr::Name(t), Some("range")) => t.id.as_str() == name,
            (Expr::Tuple(t), Some("enumerate")) => {
                matches!(t.elts.first(), Some(Expr::Name(n)) if n.id.as_str() == name)
            }
            _ => false,
        }
    })
}

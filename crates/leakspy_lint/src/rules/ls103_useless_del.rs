//! ## What it does
//! Flags `del x` statements that free nothing:
//! - `del` of a loop variable whose loop iterates a container
//!   (`for agent in old_population: del agent`), or of the loop variable in a loop that does
//!   nothing else;
//! - `del` of a name that the loop rebinds on the next iteration, after the object was stored in
//!   a container or an attribute in the same iteration;
//! - `del` of a local right before a `return` that computes nothing (`return x`, `return
//!   self.out, h`): the return drops every local anyway.
//!
//! ## Why is this bad?
//! `del x` deletes a name, not an object. The object is freed only when its last reference goes,
//! and in these cases another reference remains: the list being iterated, the container the value
//! was appended to, or (before `return`) nothing that would outlive the call anyway. The
//! statement looks like a memory fix and is not one, so the real leak (often the very container
//! that still holds the object) stays unfixed. Our users' reports are full of them:
//! `for agent in old_population: del agent`, `del env` before `return`, `del` of every temporary
//! at the end of a training step "so the garbage collector can free them".
//!
//! ## Example
//! ```python
//! old_population = self.population
//! self.population = create_next_generation(old_population, fitness)
//! for agent in old_population:
//!     del agent
//! ```
//!
//! ## Use instead
//! ```python
//! self.population = create_next_generation(self.population, fitness)
//! ```
//! When memory still grows, find who holds the objects (`leakspy run` names the owner): a `del`
//! of one name cannot free an object that something else refers to.
//!
//! ## Fix safety
//! The fix removes the `del` (or the whole `for` loop when it only deletes its variable). No
//! object is freed earlier or later, except that after a loop the name keeps the last element
//! until the function returns, so the fix is unsafe.
//!
//! ## Stays silent on
//! `del self.attr` and `del d[k]` (they do drop a reference held by an object); `del x` outside
//! loops that is the last reference drop before a large allocation; `del batch` in a loop over a
//! data loader (it frees the batch before the next one is loaded); `del` of temporaries that
//! nothing else holds (it lowers the peak until the name is rebound); `del` of an unused
//! parameter (an idiom that marks it unused); a `del` after a store into a container the analysis
//! does not know to keep the value; a `del` before `return` inside a `with` block of a value
//! made from what the block manages, whose exit runs before the locals are dropped (a
//! `memoryview` of the `BytesIO` it closes must be released first); a `del` before a `return`
//! that computes its value (`return SE + TE`, `return self.head(x)`): the deleted objects are
//! freed before that value is made, which lowers the peak.

use ruff_python_ast::visitor::{walk_expr, Visitor};
use ruff_python_ast::{Expr, Stmt, StmtDelete};
use ruff_text_size::{Ranged, TextSize};

use crate::checker::Checker;
use crate::diagnostic::{Diagnostic, Fix};
use crate::registry::Rule;
use crate::rules::helpers::remove_statement;
use crate::semantic::located::{child_blocks, locate, locate_in_scope, scope_root};
use crate::semantic::mutation::{for_each_mutation, Mutation};
use crate::semantic::names::dotted;
use crate::semantic::scan::{keys_in, visit_block};
use crate::semantic::value::Kind;

enum Why {
    /// The loop variable of the loop at this offset; the iterable's text.
    LoopVariable(TextSize, String),
    /// Stored in this container (text) at this offset, rebound next iteration.
    StoredElsewhere(String, TextSize),
    BeforeReturn,
}

pub(crate) fn stmt(checker: &mut Checker, stmt: &Stmt) {
    let Stmt::Delete(del) = stmt else { return };
    let mut all_useless = true;
    let mut whole_loop = None;
    let mut found = Vec::new();
    for target in &del.targets {
        let Expr::Name(name) = target else {
            all_useless = false;
            continue;
        };
        let n = name.id.as_str();
        // `del unused_arg`: an idiom that says the parameter is not used, not a memory fix.
        if unused_parameter(checker, n) {
            all_useless = false;
            continue;
        }
        let why = loop_variable(checker, del, n)
            .or_else(|| stored_elsewhere(checker, del, n))
            .or_else(|| before_return(checker, stmt, n));
        match why {
            Some(w) => found.push((target, n.to_string(), w)),
            None => all_useless = false,
        }
    }
    if found.is_empty() {
        return;
    }
    // One finding per statement: `del a, b, c` is one decision.
    let mut reasons = Vec::new();
    for (_, n, why) in &found {
        let message = match why {
            Why::LoopVariable(offset, iterable) => {
                if whole_loop.is_none() {
                    whole_loop = Some(*offset);
                }
                format!(
                    "`del {n}` deletes the loop variable of the loop at line {}, not the object: \
                     `{iterable}` still holds every element, so nothing is freed",
                    checker.line(*offset)
                )
            }
            Why::StoredElsewhere(container, offset) => format!(
                "`del {n}` deletes a name, not the object: `{container}` (line {}) still holds \
                 it, so nothing is freed, and the loop rebinds `{n}` on the next iteration anyway",
                checker.line(*offset)
            ),
            Why::BeforeReturn => format!(
                "`del {n}` right before `return` frees nothing: the function drops its locals \
                 when it returns, and an object that something else refers to survives both"
            ),
        };
        reasons.push(message);
    }
    let range = match found.as_slice() {
        [(target, _, _)] => target.range(),
        _ => stmt.range(),
    };
    // Loop variables of one loop: one sentence for all of them.
    let same_loop = match found.as_slice() {
        [(_, _, Why::LoopVariable(first, iterable)), rest @ ..] if !rest.is_empty() => rest
            .iter()
            .all(|(_, _, w)| matches!(w, Why::LoopVariable(o, _) if o == first))
            .then(|| (*first, iterable.clone())),
        _ => None,
    };
    let message = match same_loop {
        Some((offset, iterable)) => format!(
            "`del {}` deletes the loop variables of the loop at line {}, not the objects: \
             `{iterable}` still holds every element, so nothing is freed",
            found
                .iter()
                .map(|(_, n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            checker.line(offset)
        ),
        None => reasons.join("; "),
    };
    let mut diagnostic = Diagnostic::new(Rule::LS103, message, range);
    if all_useless {
        if let Some(edit) = removal(checker, stmt, whole_loop) {
            diagnostic = diagnostic.with_fix(Fix::unsafe_edit(
                "Remove the `del`: it frees no memory",
                vec![edit],
            ));
        }
    }
    checker.report(diagnostic);
}

/// A parameter of the current function that nothing else in it reads.
fn unused_parameter(checker: &Checker, name: &str) -> bool {
    let Some(def) = checker.function() else {
        return false;
    };
    if !checker.scope().params.contains(name) {
        return false;
    }
    struct U<'n> {
        name: &'n str,
        used: bool,
    }
    impl<'a> Visitor<'a> for U<'_> {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            if !matches!(stmt, Stmt::Delete(_)) {
                ruff_python_ast::visitor::walk_stmt(self, stmt);
            }
        }
        fn visit_expr(&mut self, expr: &'a Expr) {
            if matches!(expr, Expr::Name(n) if n.id.as_str() == self.name) {
                self.used = true;
            }
            walk_expr(self, expr);
        }
    }
    let mut u = U { name, used: false };
    for s in &def.body {
        u.visit_stmt(s);
    }
    !u.used
}

/// Removes the `del`, or the whole loop when the loop only deletes its own variable.
fn removal(
    checker: &Checker,
    stmt: &Stmt,
    loop_offset: Option<TextSize>,
) -> Option<crate::diagnostic::Edit> {
    let located = locate_in_scope(checker, stmt)?;
    if located.body.len() == 1 {
        if let Some(parent @ Stmt::For(f)) = located.ancestors.last() {
            if loop_offset == Some(parent.start()) && f.orelse.is_empty() {
                let parent_loc = locate(scope_root(checker)?, parent.range())?;
                return remove_statement(checker, &parent_loc);
            }
        }
    }
    remove_statement(checker, &located)
}

/// `for a in lst: del a`: the iterated container still holds the element.
fn loop_variable(checker: &Checker, del: &StmtDelete, name: &str) -> Option<Why> {
    let frame = checker
        .loops()
        .iter()
        .rev()
        .find(|l| matches!(l.stmt, Stmt::For(f) if keys_in(&f.target).contains(name)))?;
    let Stmt::For(f) = frame.stmt else {
        return None;
    };
    let _ = del;
    // A loop that only deletes (and passes) frees nothing whatever it iterates.
    let only_deletes = f
        .body
        .iter()
        .all(|s| matches!(s, Stmt::Delete(_) | Stmt::Pass(_)));
    if only_deletes || holds_elements(checker, &f.iter) {
        return Some(Why::LoopVariable(
            frame.offset,
            checker.snippet(iterated(&f.iter).range()),
        ));
    }
    None
}

/// `enumerate(x)`, `zip(x, y)`, `x.items()`: the container being iterated.
fn iterated(expr: &Expr) -> &Expr {
    if let Expr::Call(call) = expr {
        if let Expr::Name(n) = &*call.func {
            if matches!(
                n.id.as_str(),
                "enumerate" | "reversed" | "sorted" | "list" | "zip"
            ) {
                if let Some(first) = call.arguments.args.first() {
                    return iterated(first);
                }
            }
        }
        if let Expr::Attribute(a) = &*call.func {
            if matches!(a.attr.as_str(), "items" | "values" | "keys") {
                return &a.value;
            }
        }
    }
    expr
}

/// Does iterating `expr` hand out elements that a container keeps holding?
fn holds_elements(checker: &Checker, expr: &Expr) -> bool {
    let inner = iterated(expr);
    // `d.items()`, `d.values()`: a mapping keeps its values.
    if !std::ptr::eq(inner, expr)
        && !matches!(expr, Expr::Call(c) if matches!(&*c.func, Expr::Name(_)))
    {
        return true;
    }
    match inner {
        Expr::List(_) | Expr::Tuple(_) | Expr::Set(_) | Expr::Dict(_) => true,
        Expr::Name(_) | Expr::Attribute(_) | Expr::Subscript(_) => matches!(
            checker.value(inner).kind,
            Kind::List | Kind::Dict | Kind::Set | Kind::Deque { .. }
        ),
        _ => false,
    }
}

/// `x = f(); self.buffer.append(x); del x` in a loop that rebinds `x`.
fn stored_elsewhere(checker: &Checker, del: &StmtDelete, name: &str) -> Option<Why> {
    let frame = checker.innermost_loop()?;
    let body: &[Stmt] = match frame.stmt {
        Stmt::For(f) => &f.body,
        Stmt::While(w) => &w.body,
        _ => return None,
    };
    let mut rebinds: Vec<TextSize> = Vec::new();
    let mut stored: Option<(String, TextSize, TextSize)> = None;
    visit_block(body, &mut |s| {
        if matches!(s, Stmt::Delete(_)) {
            return;
        }
        for_each_mutation(s, &mut |key, m, _| {
            if m == Mutation::Rebind && key == name {
                rebinds.push(s.start());
            }
        });
        if s.start() < del.start() {
            if let Some((container, at)) = stores(s, name) {
                stored = Some((container, at, s.start()));
            }
        }
    });
    let (container, at, store_stmt) = stored?;
    // Rebound between the store and the `del`: the name no longer holds the stored object.
    if rebinds.is_empty() || rebinds.iter().any(|&r| r > at && r < del.start()) {
        return None;
    }
    // Only a store on every path to the `del` makes it useless: one on a branch (`if t %
    // save_every == 0: saved.append(frame)`) leaves the common path's object to the `del`.
    if !on_every_path(body, store_stmt, del.start()) {
        return None;
    }
    // Only a container the analysis knows keeps what it is given: a list, a dict, a set or a
    // deque. A tensor written into copies the values; a queue or an index may copy or send
    // them away.
    let known = match container.strip_prefix("self.") {
        Some(attr) => checker.attr_facts(attr).map(|p| p.init),
        None => checker.key_value(&container).map(|v| v.kind),
    };
    if !known.is_some_and(|k| matches!(k, Kind::List | Kind::Dict | Kind::Set | Kind::Deque { .. }))
    {
        return None;
    }
    Some(Why::StoredElsewhere(container, at))
}

/// Does the statement starting at `store` run on every path through `body` that reaches the
/// `del` at `del` (which follows it)? It does when it sits in the `del`'s block or in a block
/// around it, reached only through `with` bodies and `try` bodies; not when a branch, a loop or
/// a handler that the `del` is outside of guards it.
fn on_every_path(body: &[Stmt], store: TextSize, del: TextSize) -> bool {
    let Some(stmt) = body.iter().find(|s| s.range().contains(store)) else {
        return false;
    };
    if stmt.start() == store {
        return true;
    }
    let blocks = child_blocks(stmt);
    let Some(inner) = blocks
        .iter()
        .position(|blk| blk.iter().any(|s| s.range().contains(store)))
    else {
        return false;
    };
    if stmt.range().contains(del) {
        // Both inside: on one path only when they share the block.
        let holds_del = blocks
            .iter()
            .position(|blk| blk.iter().any(|s| s.range().contains(del)));
        return holds_del == Some(inner) && on_every_path(blocks[inner], store, del);
    }
    // The store is nested in a statement the `del` comes after: only a block that always runs
    // keeps it on the common path.
    let always = match stmt {
        Stmt::With(_) => true,
        Stmt::Try(t) => std::ptr::eq(blocks[inner].as_ptr(), t.body.as_ptr()),
        _ => false,
    };
    always && on_every_path(blocks[inner], store, del)
}

/// Does the statement put `name` itself into a container or an attribute?
fn stores(stmt: &Stmt, name: &str) -> Option<(String, TextSize)> {
    match stmt {
        Stmt::Assign(a) => {
            // `c[k] = x` grows a container; `obj.attr = x` is one slot, replaced next time.
            if holds_name(&a.value, name) {
                for t in &a.targets {
                    if let Expr::Subscript(s) = t {
                        return Some((dotted(&s.value)?, a.start()));
                    }
                }
            }
            calls_storing(&a.value, name)
        }
        Stmt::Expr(e) => calls_storing(&e.value, name),
        _ => None,
    }
}

/// `name` itself, or a list/tuple/dict literal holding it.
fn holds_name(expr: &Expr, name: &str) -> bool {
    match expr {
        Expr::Name(n) => n.id.as_str() == name,
        Expr::Tuple(t) => t.elts.iter().any(|e| holds_name(e, name)),
        Expr::List(l) => l.elts.iter().any(|e| holds_name(e, name)),
        Expr::Dict(d) => d.items.iter().any(|i| holds_name(&i.value, name)),
        _ => false,
    }
}

fn calls_storing(expr: &Expr, name: &str) -> Option<(String, TextSize)> {
    struct C<'n> {
        name: &'n str,
        found: Option<(String, TextSize)>,
    }
    impl<'a> Visitor<'a> for C<'_> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if self.found.is_some() {
                return;
            }
            if let Expr::Call(call) = expr {
                if let Expr::Attribute(attr) = &*call.func {
                    if matches!(
                        attr.attr.as_str(),
                        "append" | "extend" | "add" | "insert" | "appendleft" | "push" | "put"
                    ) && call.arguments.args.iter().any(|a| holds_name(a, self.name))
                    {
                        if let Some(c) = dotted(&attr.value) {
                            self.found = Some((c, call.start()));
                            return;
                        }
                    }
                }
            }
            walk_expr(self, expr);
        }
    }
    let mut c = C { name, found: None };
    c.visit_expr(expr);
    c.found
}

/// `del env` followed by `return <names>` (or ending the function).
fn before_return(checker: &Checker, stmt: &Stmt, name: &str) -> Option<Why> {
    let function = checker.function()?;
    if checker.scope().declared_global.contains(name) {
        return None;
    }
    // Training code only: elsewhere `del` before `return` is rarer and often deliberate.
    if !(checker.facts.uses_torch || checker.facts.imports.has_alias_for("numpy")) {
        return None;
    }
    let located = locate_in_scope(checker, stmt)?;
    // Inside a `with`, the exit runs after the `return` and before the locals are dropped: a
    // value made from what the block manages must be gone first (a `memoryview` of the
    // `BytesIO` the exit closes).
    let managed: Vec<String> = located
        .ancestors
        .iter()
        .filter_map(|a| match a {
            Stmt::With(w) => Some(w),
            _ => None,
        })
        .flat_map(|w| w.items.iter().filter_map(|i| i.optional_vars.as_deref()))
        .flat_map(keys_in)
        .collect();
    if !managed.is_empty() && made_from(function, name, &managed) {
        return None;
    }
    let next = located.body.get(located.index + 1);
    let ends_function = next.is_none()
        && located.ancestors.is_empty()
        && std::ptr::eq(located.body.as_ptr(), function.body.as_ptr());
    let returns_plainly = match next {
        Some(Stmt::Return(r)) => r
            .value
            .as_deref()
            .is_none_or(|v| computes_nothing(v) && !keys_in(v).contains(name)),
        _ => false,
    };
    ((ends_function || returns_plainly) && plain_local(function, name)).then_some(Why::BeforeReturn)
}

/// Is `name` bound in `function` from a value that reads one of `sources`?
fn made_from(function: &ruff_python_ast::StmtFunctionDef, name: &str, sources: &[String]) -> bool {
    let mut found = false;
    crate::semantic::scan::visit_block(&function.body, &mut |s| {
        if let Stmt::Assign(a) = s {
            if a.targets.iter().any(|t| keys_in(t).contains(name)) {
                let read = keys_in(&a.value);
                found |= sources.iter().any(|src| {
                    read.iter()
                        .any(|r| r == src || r.starts_with(&format!("{src}.")))
                });
            }
        }
    });
    found
}

/// A local that only holds a value: not a nested function, class or import, not captured by a
/// closure, not a traceback or exception (deleting those breaks a reference cycle through the
/// frame, which is what Python's documentation recommends).
fn plain_local(function: &ruff_python_ast::StmtFunctionDef, name: &str) -> bool {
    struct P<'n> {
        name: &'n str,
        depth: usize,
        special: bool,
    }
    impl<'a> Visitor<'a> for P<'_> {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            match stmt {
                Stmt::FunctionDef(f) => {
                    if f.name.as_str() == self.name {
                        self.special = true;
                    }
                    self.depth += 1;
                    ruff_python_ast::visitor::walk_stmt(self, stmt);
                    self.depth -= 1;
                    return;
                }
                Stmt::ClassDef(c) if c.name.as_str() == self.name => self.special = true,
                Stmt::Import(i) => {
                    for a in &i.names {
                        let local = a.asname.as_ref().unwrap_or(&a.name).as_str();
                        if local.split('.').next() == Some(self.name) {
                            self.special = true;
                        }
                    }
                }
                Stmt::ImportFrom(i) => {
                    for a in &i.names {
                        if a.asname.as_ref().unwrap_or(&a.name).as_str() == self.name {
                            self.special = true;
                        }
                    }
                }
                Stmt::Try(t) => {
                    for h in &t.handlers {
                        let ruff_python_ast::ExceptHandler::ExceptHandler(h) = h;
                        if h.name.as_ref().is_some_and(|n| n.as_str() == self.name) {
                            self.special = true;
                        }
                    }
                }
                Stmt::Assign(a)
                    if a.targets.iter().any(|t| keys_in(t).contains(self.name))
                        && mentions_traceback(&a.value) =>
                {
                    self.special = true;
                }
                _ => {}
            }
            ruff_python_ast::visitor::walk_stmt(self, stmt);
        }
        fn visit_expr(&mut self, expr: &'a Expr) {
            match expr {
                Expr::Name(n) if self.depth > 0 && n.id.as_str() == self.name => {
                    self.special = true;
                }
                Expr::Lambda(_) => {
                    self.depth += 1;
                    walk_expr(self, expr);
                    self.depth -= 1;
                    return;
                }
                _ => {}
            }
            walk_expr(self, expr);
        }
    }
    let mut p = P {
        name,
        depth: 0,
        special: false,
    };
    for s in &function.body {
        p.visit_stmt(s);
    }
    !p.special
}

fn mentions_traceback(expr: &Expr) -> bool {
    keys_in(expr).iter().any(|k| {
        k.ends_with("exc_info") || k.ends_with("__traceback__") || k.ends_with("exception")
    })
}

/// A return value that allocates nothing of size before the locals are dropped: names,
/// literals, attributes and items of them, and containers of those. Arithmetic or a call
/// (`return SE + TE`) makes its result first, so a `del` before it frees the deleted objects
/// before that allocation, not at the return: it lowers the peak.
fn computes_nothing(expr: &Expr) -> bool {
    match expr {
        Expr::Name(_)
        | Expr::NumberLiteral(_)
        | Expr::StringLiteral(_)
        | Expr::BytesLiteral(_)
        | Expr::BooleanLiteral(_)
        | Expr::NoneLiteral(_)
        | Expr::EllipsisLiteral(_) => true,
        Expr::Attribute(a) => computes_nothing(&a.value),
        Expr::Subscript(s) => computes_nothing(&s.value) && computes_nothing(&s.slice),
        Expr::Slice(s) => [&s.lower, &s.upper, &s.step]
            .into_iter()
            .flatten()
            .all(|e| computes_nothing(e)),
        Expr::Starred(s) => computes_nothing(&s.value),
        Expr::Tuple(t) => t.elts.iter().all(computes_nothing),
        Expr::List(l) => l.elts.iter().all(computes_nothing),
        Expr::Set(l) => l.elts.iter().all(computes_nothing),
        Expr::Dict(d) => d
            .items
            .iter()
            .all(|i| i.key.as_ref().is_none_or(computes_nothing) && computes_nothing(&i.value)),
        _ => false,
    }
}

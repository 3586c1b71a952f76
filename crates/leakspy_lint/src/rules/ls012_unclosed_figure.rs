//! ## What it does
//! Flags a pyplot figure (`plt.figure()`, `plt.subplots()`, `plt.subplot_mosaic()`) opened once
//! per training iteration (in a training loop, or in a function that runs once per step or epoch,
//! directly or through its callers) that every path leaves open: no `plt.close(fig)`,
//! `plt.close()` or `plt.close("all")` after it, not returned, not stored and not handed to a
//! closer such as `SummaryWriter.add_figure` (which closes the figure unless given
//! `close=False`). Also flags calls that discard a new figure returned by a function of the same
//! file (`plot_curve(h)`, `_ = plot_curve(h)`), a figure whose method is called and the result
//! dropped (`plt.figure().clear()`), and a comprehension that opens a figure per item
//! (`[plt.subplots() for _ in batch]`) unless each is closed in a loop over them or
//! `plt.close("all")` follows (`plt.close()` closes only the current one).
//!
//! ## Why is this bad?
//! pyplot keeps a reference to every figure it opens until `plt.close()`; going out of scope
//! frees nothing. Each figure holds its artists, its data and a canvas with a pixel buffer, so a
//! figure per step or per generation is a steady leak: one of our users measured 50-100 MB per
//! training plot. `fig.clf()` and `plt.clf()` clear the figure but leave it open in pyplot;
//! matplotlib warns once more than 20 figures are open, and the warning is easy to miss in
//! training logs.
//!
//! ## Example
//! ```python
//! for epoch in range(epochs):
//!     fig, ax = plt.subplots()
//!     ax.plot(history)
//!     fig.savefig(f"loss_{epoch}.png")
//! ```
//!
//! ## Use instead
//! ```python
//! for epoch in range(epochs):
//!     fig, ax = plt.subplots()
//!     ax.plot(history)
//!     fig.savefig(f"loss_{epoch}.png")
//!     plt.close(fig)
//! ```
//!
//! ## Fix safety
//! When the figure is a local bound at the top level of the loop body (or of the function) and is
//! never returned or stored, the fix inserts `plt.close(fig)` on its own line after the last
//! statement of that block that uses the figure, its axes or pyplot (`plt.savefig(...)` draws the
//! current figure). Nothing uses the figure after that point, so the fix is safe. No fix is
//! offered when the figure escapes on some path (`continue`, an early `return`), when it is not
//! bound to a name, or when it comes from a helper function.
//!
//! ## Stays silent on
//! `plt.close(...)` in a `finally` block; figures returned, stored or handed to another function
//! or to `add_figure(...)`; `plt.figure(num)` / `plt.subplots(num=...)`, which reuse one figure;
//! `plt.show()` (the user closes the window); `matplotlib.figure.Figure()`, which pyplot does not
//! register; figures closed with `plt.close("all")` after the loop that made them, or at the top
//! of the loop body or function before the next one is made (at most one stays open), or by every
//! caller of the plotting function right after the call (`self.plot()` then `plt.savefig(...)`
//! and `plt.close()`); figures closed on some paths and not
//! others (which path runs is not known); figures made by code that does not run once per
//! training iteration (a plotting script, a report method, an interactive helper); figures in a
//! notebook that picks no backend in its code (`matplotlib.use(...)`): the inline backend shows
//! and closes them at the end of the cell, and closing them earlier would hide the plot.

use ruff_python_ast::visitor::{walk_expr, walk_stmt, Visitor};
use ruff_python_ast::{Expr, ExprCall, Stmt};
use ruff_text_size::{Ranged, TextSize};

use crate::checker::Checker;
use crate::diagnostic::{Diagnostic, Edit, Fix};
use crate::registry::Rule;
use crate::rules::helpers::{line_start, next_line_start, owns_its_lines};
use crate::semantic::located::{child_blocks, locate_in_scope, scope_root, Located};
use crate::semantic::names::last_segment;
use crate::semantic::value::Kind;

/// Every figure this rule tracks is made by `pyplot.figure`, `subplots` or
/// `subplot_mosaic` (directly or in a helper of this file), so their names are in the file.
pub(crate) const NEEDS: &[&str] = &["figure", "subplot"];

pub(crate) fn stmt(_checker: &mut Checker, _stmt: &Stmt) {}

/// How the figure left the block walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Reaches the end of the block with the figure still open.
    Open,
    /// Closed, returned, stored or handed off on every path that reaches the end.
    Closed,
    /// No path reaches the end (every path returned, continued or raised).
    Gone,
}

struct Names<'n> {
    /// The figure and its axes (`fig, ax = plt.subplots()`); empty for a bare `plt.figure()`.
    names: &'n [String],
    /// Only `plt.close("all")` counts (after the loop that made many figures).
    all_only: bool,
    /// The names hold many figures (`[plt.subplots() for _ in batch]`): `plt.close()` closes
    /// only the current one; a loop over them that closes each closes them all.
    many: bool,
    /// Only `plt.close(name)` counts: in a loop over many figures, handing an item to a
    /// function (`ax.imshow(image)`) says nothing of the others.
    close_only: bool,
    /// Set when some branch closes the figure but another leaves it open.
    partly: std::cell::Cell<bool>,
}

pub(crate) fn call(checker: &mut Checker, call: &ExprCall, stmt: &Stmt) {
    let function = checker.function();
    let in_loop = checker.in_loop();
    // A figure per training iteration: opened in a training loop, or in a function that runs
    // once per step or epoch. A plotting script that draws a few figures once does not grow.
    if checker.iteration().is_none() || inline_backend(checker) {
        return;
    }
    let Some(origin) = creation(checker, call) else {
        return;
    };
    // The figure must be the whole value of the statement; `save(plt.figure())` hands it off.
    // A method called on it and the result dropped (`plt.figure().clear()`) leaves it open;
    // a comprehension of figures (`[plt.subplots() for _ in batch]`) makes many.
    let many = match stmt {
        Stmt::Assign(a) if a.targets.len() == 1 => comprehension_of(&a.value, call),
        Stmt::Expr(e) => comprehension_of(&e.value, call),
        _ => false,
    };
    let (names, fig_name): (Vec<String>, Option<String>) = match stmt {
        Stmt::Expr(e) if e.value.range() == call.range() || many => (vec![], None),
        Stmt::Expr(e) if receiver_of_dropped_call(&e.value, call) => (vec![], None),
        Stmt::Assign(a) if many => match &a.targets[0] {
            Expr::Name(n) => (vec![n.id.to_string()], None),
            _ => return,
        },
        Stmt::Assign(a) if a.value.range() == call.range() && a.targets.len() == 1 => {
            match &a.targets[0] {
                Expr::Name(n) => (vec![n.id.to_string()], Some(n.id.to_string())),
                // `self.figure, self.axis = plt.subplots()` stores the figure, as
                // `self.figure = plt.figure()` does.
                Expr::Tuple(t) if stores_first(&t.elts) => return,
                Expr::List(l) if stores_first(&l.elts) => return,
                Expr::Tuple(t) => tuple_names(&t.elts),
                Expr::List(l) => tuple_names(&l.elts),
                _ => return,
            }
        }
        _ => return,
    };
    let Some(located) = locate_in_scope(checker, stmt) else {
        return;
    };
    let Some(root) = scope_root(checker) else {
        return;
    };
    let cx = Names {
        names: &names,
        all_only: false,
        many,
        close_only: false,
        partly: std::cell::Cell::new(false),
    };
    let (mut end, mut leak) = walk(checker, &located.body[located.index + 1..], &cx, 0);
    // Go up through the enclosing blocks until the innermost loop or the function body.
    let mut container: &[Stmt] = root;
    let mut chain: Vec<(&Stmt, &[Stmt])> = Vec::new();
    for ancestor in &located.ancestors {
        chain.push((ancestor, container));
        container = child_blocks(ancestor)
            .into_iter()
            .find(|b| b.iter().any(|s| s.range().contains_range(stmt.range())))
            .unwrap_or(&[]);
    }
    let mut boundary: Option<&Stmt> = None;
    for (ancestor, body) in chain.iter().rev() {
        if end != End::Open {
            break;
        }
        match ancestor {
            Stmt::For(_) | Stmt::While(_) => {
                boundary = Some(ancestor);
                break;
            }
            Stmt::Try(t) => {
                let (fin, _) = walk(checker, &t.finalbody, &cx, 0);
                if fin == End::Closed {
                    end = End::Closed;
                    break;
                }
            }
            _ => {}
        }
        let index = body
            .iter()
            .position(|s| std::ptr::eq(s, *ancestor))
            .unwrap_or(body.len());
        let (e, l) = walk(checker, &body[(index + 1).min(body.len())..], &cx, 0);
        end = e;
        leak = leak.or(l);
    }
    // `plt.close("all")` (or `plt.close(fig)`) before the figure is made, at the top of the
    // loop body or function: at most one figure is open at a time.
    if end == End::Open {
        let body: &[Stmt] = match boundary {
            Some(Stmt::For(f)) => &f.body,
            Some(Stmt::While(w)) => &w.body,
            _ => root,
        };
        if let Some(index) = body
            .iter()
            .position(|s| s.range().contains_range(stmt.range()))
        {
            if walk(checker, &body[..index], &cx, 0).0 == End::Closed {
                return;
            }
        }
    }
    // Figures left open by every iteration of a loop, all closed after it, stay bounded.
    if end == End::Open {
        if let Some(lp) = boundary {
            if let Some((_, body)) = chain.iter().find(|(a, _)| std::ptr::eq(*a, lp)) {
                let index = body.iter().position(|s| std::ptr::eq(s, lp)).unwrap_or(0);
                let after = Names {
                    names: &[],
                    all_only: true,
                    many: false,
                    close_only: false,
                    partly: std::cell::Cell::new(false),
                };
                if walk(checker, &body[index + 1..], &after, 0).0 == End::Closed {
                    return;
                }
            }
        }
    }
    // A plotting helper whose callers close what it leaves open (`plot(h)` then
    // `plt.close("all")` on the next lines).
    if end == End::Open && boundary.is_none() {
        if let Some(f) = function {
            if callers_close(
                checker.source,
                f.name.as_str(),
                checker.class().map(|c| c.name.as_str()),
            ) {
                return;
            }
        }
    }
    let what = match &origin {
        Origin::Pyplot(_) if many => format!(
            "`{}` opens a new figure for each item of the comprehension",
            checker.snippet(call.range())
        ),
        Origin::Pyplot(_) => format!("`{}` opens a new figure", checker.snippet(call.range())),
        Origin::Helper => format!(
            "`{}` returns a new pyplot figure",
            checker.snippet(call.range())
        ),
    };
    let when = match checker.innermost_loop() {
        Some(l) => format!(
            "on every iteration of the loop at line {}",
            checker.line(l.offset)
        ),
        None => format!(
            "on every call of `{}()`",
            function.map_or("?", |f| f.name.as_str())
        ),
    };
    let per = if in_loop { "iteration" } else { "call" };
    // Closed on some paths and not others (a branch, an early `return`): which path runs is
    // not known, so the analysis says nothing.
    // Every path leaves it open: it reaches the end of the block, or a `return` that ends the
    // function without it, and no branch closes it.
    let every_path = match (end, leak) {
        (End::Open, None) => true,
        (End::Gone, Some(exit)) => is_last_return(root, exit),
        _ => false,
    };
    let problem = match (end, leak) {
        _ if every_path && !cx.partly.get() => {
            if fig_name.is_none() && matches!(origin, Origin::Helper) {
                "and this call discards it, so nothing closes it".to_string()
            } else {
                "and nothing closes, returns or stores it".to_string()
            }
        }
        _ => return,
    };
    let grows = if many {
        format!("one figure per item on every {per}")
    } else {
        format!("one figure per {per}")
    };
    let message = format!(
        "{what} {when} {problem}: pyplot keeps every open figure (its artists, data and canvas \
         buffer) alive until `plt.close(fig)`, so memory grows by {grows}"
    );
    let mut diagnostic = Diagnostic::new(Rule::LS012, message, call.range());
    if end == End::Open && leak.is_none() {
        if let (Origin::Pyplot(alias), Some(fig)) = (&origin, &fig_name) {
            if let Some(edit) = close_edit(checker, &located, root, alias, fig, &names, boundary) {
                diagnostic = diagnostic.with_fix(Fix::safe(
                    format!("Insert `{alias}.close({fig})` after the figure's last use"),
                    vec![edit],
                ));
            }
        }
    }
    checker.report(diagnostic);
}

enum Origin {
    /// `plt.figure()` and friends; the pyplot alias as written (`plt`).
    Pyplot(String),
    /// A function of this file that returns a new figure.
    Helper,
}

/// A notebook whose code picks no backend of its own runs matplotlib's inline backend, which
/// shows and closes every figure when the cell ends: `plt.close()` would only hide the plot.
fn inline_backend(checker: &Checker) -> bool {
    checker.source_kind.is_notebook()
        && !checker.source.contains(".use(")
        && !checker.source.contains("switch_backend")
}

fn creation(checker: &Checker, call: &ExprCall) -> Option<Origin> {
    let q = checker.qualified_function(&call.func);
    if let Some(q) = &q {
        if let Some(ctor) = q.strip_prefix("matplotlib.pyplot.") {
            if !matches!(ctor, "figure" | "subplots" | "subplot_mosaic") {
                return None;
            }
            // `plt.figure(1)`, `plt.subplots(num="loss")`: reuse one figure.
            let num_kw = call.arguments.keywords.iter().any(|k| {
                k.arg.as_ref().is_some_and(|a| a.as_str() == "num")
                    && !k.value.is_none_literal_expr()
            });
            let num_pos = ctor == "figure"
                && call
                    .arguments
                    .args
                    .first()
                    .is_some_and(|a| !a.is_none_literal_expr());
            if num_kw || num_pos {
                return None;
            }
            let alias = match &*call.func {
                Expr::Attribute(a) => match &*a.value {
                    Expr::Name(n) => n.id.to_string(),
                    _ => return None,
                },
                _ => return None,
            };
            return Some(Origin::Pyplot(alias));
        }
    }
    // A function or method of this file returning a figure (needs return summaries).
    let local = match &*call.func {
        Expr::Name(n) => checker.facts.functions.contains(n.id.as_str()),
        Expr::Attribute(a) => {
            matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "self")
                && checker
                    .class_facts()
                    .is_some_and(|c| c.methods.contains(a.attr.as_str()))
        }
        _ => false,
    };
    if local && checker.value(&Expr::Call(call.clone())).kind == Kind::Figure {
        return Some(Origin::Helper);
    }
    None
}

/// Is `call` the element of a comprehension that is `value` (a list, set or generator of new
/// figures)?
fn comprehension_of(value: &Expr, call: &ExprCall) -> bool {
    let elt = match value {
        Expr::ListComp(c) => &c.elt,
        Expr::SetComp(c) => &c.elt,
        Expr::Generator(c) => &c.elt,
        _ => return false,
    };
    elt.range() == call.range()
}

/// `plt.figure().clear()`: a method of the new figure called and its result dropped. No
/// method of a figure closes it in pyplot (`clear()`, `clf()` empty it, `savefig()` draws
/// it); nothing else holds it to close it later.
fn receiver_of_dropped_call(value: &Expr, call: &ExprCall) -> bool {
    let mut e = value;
    while let Expr::Call(c) = e {
        let Expr::Attribute(a) = &*c.func else {
            return false;
        };
        if a.value.range() == call.range() {
            return true;
        }
        e = &a.value;
    }
    false
}

/// Is the statement at `offset` the function's last statement, a `return`?
fn is_last_return(root: &[Stmt], offset: TextSize) -> bool {
    matches!(root.last(), Some(Stmt::Return(r)) if r.start() == offset)
}

/// Every name a `for` target binds (`(fig, ax), image`).
fn target_names(target: &Expr, out: &mut Vec<String>) {
    match target {
        Expr::Name(n) if n.id.as_str() != "_" => out.push(n.id.to_string()),
        Expr::Tuple(t) => t.elts.iter().for_each(|e| target_names(e, out)),
        Expr::List(l) => l.elts.iter().for_each(|e| target_names(e, out)),
        _ => {}
    }
}

/// Does the unpacking put the figure (the first element) into an attribute or an entry?
fn stores_first(elts: &[Expr]) -> bool {
    matches!(elts.first(), Some(Expr::Attribute(_) | Expr::Subscript(_)))
}

fn tuple_names(elts: &[Expr]) -> (Vec<String>, Option<String>) {
    let names: Vec<String> = elts
        .iter()
        .filter_map(|e| match e {
            Expr::Name(n) if n.id.as_str() != "_" => Some(n.id.to_string()),
            _ => None,
        })
        .collect();
    let fig = match elts.first() {
        Some(Expr::Name(n)) if n.id.as_str() != "_" => Some(n.id.to_string()),
        _ => None,
    };
    (names, fig)
}

/// Walks a block from its first statement with the figure open. `level` counts loops entered
/// inside the walk (a `continue` there belongs to them). Returns how the block ends and the first
/// exit that leaves the figure open.
fn walk(checker: &Checker, stmts: &[Stmt], cx: &Names, level: usize) -> (End, Option<TextSize>) {
    let mut leak = None;
    for s in stmts {
        if closes(checker, s, cx) {
            return (End::Closed, leak);
        }
        // `for fig, ax in figs: ... plt.close(fig)`: each of many figures closed in turn.
        if let Stmt::For(f) = s {
            if cx.many && mentions_expr(&f.iter, cx) {
                let mut names = Vec::new();
                target_names(&f.target, &mut names);
                let each = Names {
                    names: &names,
                    all_only: false,
                    many: true,
                    close_only: true,
                    partly: std::cell::Cell::new(false),
                };
                if !names.is_empty() && walk(checker, &f.body, &each, level + 1).0 == End::Closed {
                    return (End::Closed, leak);
                }
            }
        }
        match s {
            Stmt::Return(r) => {
                let returns_it = r.value.as_deref().is_some_and(|v| mentions_expr(v, cx));
                if returns_it {
                    return (End::Closed, leak);
                }
                return (End::Gone, leak.or(Some(s.start())));
            }
            Stmt::Continue(_) | Stmt::Break(_) => {
                if level == 0 {
                    return (End::Gone, leak.or(Some(s.start())));
                }
                return (End::Gone, leak);
            }
            Stmt::Raise(_) => return (End::Gone, leak),
            Stmt::If(i) => {
                let mut ends = Vec::new();
                let (e, l) = walk(checker, &i.body, cx, level);
                ends.push(e);
                leak = leak.or(l);
                for c in &i.elif_else_clauses {
                    let (e, l) = walk(checker, &c.body, cx, level);
                    ends.push(e);
                    leak = leak.or(l);
                }
                if !i.elif_else_clauses.iter().any(|c| c.test.is_none()) {
                    ends.push(End::Open);
                }
                if ends.iter().all(|e| *e == End::Gone) {
                    return (End::Gone, leak);
                }
                if ends.iter().all(|e| *e != End::Open) {
                    return (End::Closed, leak);
                }
                if ends.contains(&End::Closed) {
                    cx.partly.set(true);
                }
            }
            Stmt::With(w) => {
                let (e, l) = walk(checker, &w.body, cx, level);
                leak = leak.or(l);
                if e != End::Open {
                    return (e, leak);
                }
            }
            Stmt::Try(t) => {
                if walk(checker, &t.finalbody, cx, level).0 == End::Closed {
                    return (End::Closed, leak);
                }
                let (e, l) = walk(checker, &t.body, cx, level);
                leak = leak.or(l);
                if e != End::Open {
                    return (e, leak);
                }
                let (e, l) = walk(checker, &t.orelse, cx, level);
                leak = leak.or(l);
                if e != End::Open {
                    return (e, leak);
                }
            }
            Stmt::For(_) | Stmt::While(_) | Stmt::Match(_) => {
                // May run zero times: only its exits matter.
                let inner = if matches!(s, Stmt::Match(_)) {
                    level
                } else {
                    level + 1
                };
                for b in child_blocks(s) {
                    let (_, l) = walk(checker, b, cx, inner);
                    leak = leak.or(l);
                }
            }
            _ => {}
        }
    }
    (End::Open, leak)
}

/// Does the statement itself (not its nested blocks) close the figure or hand it off?
fn closes(checker: &Checker, stmt: &Stmt, cx: &Names) -> bool {
    let exprs: Vec<&Expr> = match stmt {
        Stmt::Expr(e) => vec![&e.value],
        Stmt::Assign(a) => {
            // `self.fig = fig`, `figs[k] = fig`: stored.
            if !cx.all_only
                && !cx.close_only
                && mentions_expr(&a.value, cx)
                && a.targets
                    .iter()
                    .any(|t| matches!(t, Expr::Attribute(_) | Expr::Subscript(_)))
                && holds(&a.value, cx)
            {
                return true;
            }
            vec![&a.value]
        }
        Stmt::AnnAssign(a) => a.value.as_deref().into_iter().collect(),
        _ => return false,
    };
    struct C<'c, 'k, 'n> {
        checker: &'c Checker<'k>,
        cx: &'c Names<'n>,
        found: bool,
    }
    impl<'a> Visitor<'a> for C<'_, '_, '_> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if self.found {
                return;
            }
            if let Expr::Yield(y) = expr {
                if y.value.as_deref().is_some_and(|v| holds(v, self.cx)) {
                    self.found = true;
                    return;
                }
            }
            if let Expr::Call(call) = expr {
                if call_closes(self.checker, call, self.cx) {
                    self.found = true;
                    return;
                }
            }
            walk_expr(self, expr);
        }
    }
    let mut c = C {
        checker,
        cx,
        found: false,
    };
    for e in exprs {
        c.visit_expr(e);
    }
    c.found
}

fn call_closes(checker: &Checker, call: &ExprCall, cx: &Names) -> bool {
    let q = checker.qualified_function(&call.func);
    if let Some(q) = q.as_deref() {
        if q == "matplotlib.pyplot.close" {
            return match call.arguments.args.first() {
                None => !cx.all_only && !cx.many,
                Some(Expr::StringLiteral(s)) => s.value.to_str() == "all",
                Some(arg) => !cx.all_only && (mentions_expr(arg, cx) || is_gcf(checker, arg)),
            };
        }
        if q == "matplotlib.pyplot.show" {
            return !cx.all_only;
        }
    }
    if cx.all_only || cx.close_only {
        return false;
    }
    let handed = call
        .arguments
        .args
        .iter()
        .chain(call.arguments.keywords.iter().map(|k| &k.value))
        .any(|a| holds(a, cx));
    if !handed {
        return false;
    }
    let method = match &*call.func {
        Expr::Attribute(a) => a.attr.as_str(),
        Expr::Name(n) => n.id.as_str(),
        _ => return false,
    };
    if method == "add_figure" {
        // `SummaryWriter.add_figure` closes the figure unless `close=False`.
        return !call.arguments.keywords.iter().any(|k| {
            k.arg.as_ref().is_some_and(|a| a.as_str() == "close")
                && matches!(&k.value, Expr::BooleanLiteral(b) if !b.value)
        });
    }
    // Known calls that use a figure without closing it.
    if let Some(q) = q.as_deref() {
        let head = q.split('.').next().unwrap_or(q);
        if matches!(
            head,
            "matplotlib" | "numpy" | "wandb" | "mlflow" | "PIL" | "io" | "os" | "logging"
        ) || matches!(
            q,
            "print"
                | "str"
                | "repr"
                | "len"
                | "isinstance"
                | "id"
                | "type"
                | "list"
                | "tuple"
                // Iterating over figures keeps none of them past the loop.
                | "zip"
                | "enumerate"
                | "reversed"
                | "sorted"
                | "iter"
        ) {
            return false;
        }
    }
    if matches!(
        method,
        "log"
            | "log_dict"
            | "log_image"
            | "log_images"
            | "log_figure"
            | "log_artifact"
            | "savefig"
            | "Image"
            | "info"
            | "debug"
            | "warning"
            | "print"
    ) || last_segment(method) == "format"
    {
        return false;
    }
    // Anything else (a helper of the user, a container method): handed off.
    true
}

fn is_gcf(checker: &Checker, e: &Expr) -> bool {
    let Expr::Call(c) = e else { return false };
    checker.qualified_function(&c.func).as_deref() == Some("matplotlib.pyplot.gcf")
}

/// The figure itself (or its axes), or a list/tuple/dict literal holding it.
fn holds(expr: &Expr, cx: &Names) -> bool {
    match expr {
        Expr::Name(n) => cx.names.iter().any(|x| x == n.id.as_str()),
        Expr::Tuple(t) => t.elts.iter().any(|e| holds(e, cx)),
        Expr::List(l) => l.elts.iter().any(|e| holds(e, cx)),
        Expr::Dict(d) => d.items.iter().any(|i| holds(&i.value, cx)),
        Expr::Attribute(a) => a.attr.as_str() == "figure" && holds(&a.value, cx),
        _ => false,
    }
}

fn mentions_expr(expr: &Expr, cx: &Names) -> bool {
    struct M<'n> {
        names: &'n [String],
        found: bool,
    }
    impl<'a> Visitor<'a> for M<'_> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Name(n) = expr {
                if self.names.iter().any(|x| x == n.id.as_str()) {
                    self.found = true;
                }
            }
            walk_expr(self, expr);
        }
    }
    let mut m = M {
        names: cx.names,
        found: false,
    };
    m.visit_expr(expr);
    m.found
}

fn mentions_stmt(stmt: &Stmt, names: &[String]) -> bool {
    struct M<'n> {
        names: &'n [String],
        found: bool,
    }
    impl<'a> Visitor<'a> for M<'_> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Name(n) = expr {
                if self.names.iter().any(|x| x == n.id.as_str()) {
                    self.found = true;
                }
            }
            walk_expr(self, expr);
        }
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            if !self.found {
                walk_stmt(self, stmt);
            }
        }
    }
    let mut m = M {
        names,
        found: false,
    };
    m.visit_stmt(stmt);
    m.found
}

/// `plt.close(fig)` after the last statement of the creation's block that uses the figure or
/// its axes, when the creation sits at the top of the loop body or function body and the names
/// are used nowhere else.
fn close_edit(
    checker: &Checker,
    located: &Located,
    root: &[Stmt],
    alias: &str,
    fig: &str,
    names: &[String],
    boundary: Option<&Stmt>,
) -> Option<Edit> {
    // The creation's block must be the loop body (or the function body outside loops).
    match (located.ancestors.last(), boundary) {
        (Some(parent), Some(lp)) if std::ptr::eq(*parent, lp) => {}
        (None, None) => {}
        _ => return None,
    }
    let creation = located.stmt();
    if !owns_its_lines(checker.source, creation) {
        return None;
    }
    // Used nowhere outside the block after the creation (before it in the loop body, after the
    // loop in the function).
    let block_start = located.body.first()?.start();
    let block_end = located.body.last()?.end();
    let mut outside = false;
    for s in root {
        if block_start <= s.start() && s.end() <= block_end {
            continue;
        }
        if s.range().contains_range(creation.range()) {
            // Statements of the function outside the creation's block.
            outside |= mentions_outside(s, names, block_start, block_end);
        } else {
            outside |= mentions_stmt(s, names);
        }
    }
    outside |= located.body[..located.index]
        .iter()
        .any(|s| mentions_stmt(s, names));
    if outside {
        return None;
    }
    // pyplot calls (`plt.savefig(...)`, `plt.title(...)`) use the current figure implicitly.
    let mut users: Vec<String> = names.to_vec();
    users.push(alias.to_string());
    let last = located.body[located.index..]
        .iter()
        .rev()
        .find(|s| mentions_stmt(s, &users))
        .unwrap_or(creation);
    if !owns_its_lines(checker.source, last) {
        return None;
    }
    let indent_start = line_start(checker.source, creation.start());
    let indent = &checker.source[indent_start..usize::from(creation.start())];
    let at = next_line_start(checker.source, last.end());
    let mut text = String::new();
    if !checker.source[..at].ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!("{indent}{alias}.close({fig})\n"));
    Some(Edit::insertion(TextSize::try_from(at).ok()?, text))
}

/// Does `stmt` mention the names anywhere but inside `[start, end)`?
fn mentions_outside(stmt: &Stmt, names: &[String], start: TextSize, end: TextSize) -> bool {
    struct M<'n> {
        names: &'n [String],
        start: TextSize,
        end: TextSize,
        found: bool,
    }
    impl<'a> Visitor<'a> for M<'_> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Name(n) = expr {
                if self.names.iter().any(|x| x == n.id.as_str())
                    && (n.start() < self.start || n.start() >= self.end)
                {
                    self.found = true;
                }
            }
            walk_expr(self, expr);
        }
    }
    let mut m = M {
        names,
        start,
        end,
        found: false,
    };
    m.visit_stmt(stmt);
    m.found
}

/// Is every call of `name(...)` in the file followed, within the next three lines, by a
/// `close(` (`plt.close("all")`, `plt.close()`)? Only run when about to report. A method's
/// calls are on objects of its class (`self.plot(...)`, `trainer.plot(...)` after `trainer =
/// Trainer(...)`); a function's are `name(...)` on no object: `ax.plot(...)` is another
/// function of the same name.
fn callers_close(source: &str, name: &str, class: Option<&str>) -> bool {
    let receivers = class.map(|c| instances_of(source, c));
    let needle = format!("{name}(");
    let mut calls = 0;
    for (i, _) in source.match_indices(needle.as_str()) {
        let before = &source[..i];
        if before.ends_with(|c: char| c.is_alphanumeric() || c == '_')
            || before.trim_end().ends_with("def")
        {
            continue;
        }
        let receiver = before.strip_suffix('.').map(|b| {
            let start = b
                .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                .map_or(0, |at| at + 1);
            &b[start..]
        });
        let counts = match (&receivers, receiver) {
            (Some(own), Some(r)) => matches!(r, "self" | "cls") || own.contains(&r),
            (Some(_), None) => false,
            (None, r) => r.is_none(),
        };
        if !counts {
            continue;
        }
        calls += 1;
        let after: String = source[i..].lines().take(4).collect::<Vec<_>>().join("\n");
        if !after.contains(".close(") {
            return false;
        }
    }
    calls > 0
}

/// Names bound in the file to a new object of `class` (`trainer = Trainer(...)`).
fn instances_of<'s>(source: &'s str, class: &str) -> Vec<&'s str> {
    let needle = format!("{class}(");
    source
        .match_indices(needle.as_str())
        .filter_map(|(i, _)| {
            let line_start = source[..i].rfind('\n').map_or(0, |at| at + 1);
            let (target, value) = source[line_start..i].split_once('=')?;
            let target = target.trim();
            let plain = !target.is_empty()
                && target.chars().all(|c| c.is_alphanumeric() || c == '_')
                && value
                    .trim()
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '.');
            plain.then_some(target)
        })
        .collect()
}

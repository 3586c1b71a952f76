//! ## What it does
//! Flags state kept on a module across calls and rebuilt from itself with autograd on:
//! `self.h = self.cell(x, self.h)` in `forward()` (or a method that runs on every step), also
//! through a tuple (`y, self.h = self.cell(x, self.h)`), when no other method of the class resets
//! or detaches it. Each call's graph then links to the graph of the call before.
//!
//! ## Why is this bad?
//! A tensor stored on the module outlives the call that made it, and with it its autograd graph.
//! When the new value is computed from the old one, the graphs are never released: each call
//! links to every earlier call, so the module keeps the graph of every call it has made (their
//! saved activations until a `.backward()` frees them, their autograd nodes after), memory grows
//! for the life of the module, and a `.backward()` through the state walks back through all of
//! them.
//!
//! ## Example
//! ```python
//! class StatefulRNN(nn.Module):
//!     def __init__(self, dim):
//!         super().__init__()
//!         self.cell = nn.GRUCell(dim, dim)
//!         self.h = torch.zeros(1, dim)
//!
//!     def forward(self, x):
//!         self.h = self.cell(x, self.h)
//!         return self.h
//! ```
//!
//! ## Use instead
//! ```python
//! class StatefulRNN(nn.Module):
//!     def __init__(self, dim):
//!         super().__init__()
//!         self.cell = nn.GRUCell(dim, dim)
//!         self.h = torch.zeros(1, dim)
//!
//!     def forward(self, x):
//!         self.h = self.cell(x, self.h.detach())
//!         return self.h
//!
//!     def reset_state(self):
//!         self.h = torch.zeros_like(self.h)
//! ```
//!
//! ## Fix safety
//! The fix stores `value.detach()`. It is unsafe: a recurrent state carried across calls would no
//! longer be backpropagated through time, which a model trained with truncated BPTT over several
//! calls may rely on. Review each case.
//!
//! ## Stays silent on
//! A value replaced on every call (`self.last_weights = weights`: it keeps one call's graph, not
//! one per step); registered buffers (`self.register_buffer(...)`); detached values and values
//! computed under `torch.no_grad()`; state that another method of the class resets or detaches
//! (`reset_state()`, `init_states()` called by each `forward`; a `reset()` inherited from a base
//! class of the file counts, unless the class overrides it), or that the same method sets
//! afresh before it carries it (`self.hidden = self.init_hidden()` as its first line, or in
//! every branch of an `if` before it).

use ruff_python_ast::visitor::{walk_expr, Visitor};
use ruff_python_ast::{Expr, Stmt, StmtClassDef};
use ruff_text_size::Ranged;

use crate::checker::Checker;
use crate::diagnostic::{Diagnostic, Fix};
use crate::registry::Rule;
use crate::rules::helpers::{append_call, detached_text, origin_phrase, short};
use crate::semantic::facts::self_attr;
use crate::semantic::scan::keys_in;

pub(crate) fn stmt(checker: &mut Checker, stmt: &Stmt) {
    if !checker.in_module_class() || !checker.grad_enabled() {
        return;
    }
    match stmt {
        Stmt::Assign(assign) => {
            for target in &assign.targets {
                match (target, &*assign.value) {
                    (Expr::Tuple(t), Expr::Tuple(v)) if t.elts.len() == v.elts.len() => {
                        for (te, ve) in t.elts.iter().zip(v.elts.iter()) {
                            store(checker, te, ve, true);
                        }
                    }
                    (Expr::Tuple(t), value) => {
                        for te in &t.elts {
                            store(checker, te, value, false);
                        }
                    }
                    (target, value) => store(checker, target, value, true),
                }
            }
        }
        Stmt::AnnAssign(assign) => {
            if let Some(value) = &assign.value {
                store(checker, &assign.target, value, true);
            }
        }
        _ => {}
    }
}

/// `self.<attr> = value`; `fixable` when `value` is exactly what the attribute receives.
fn store(checker: &mut Checker, target: &Expr, value_expr: &Expr, fixable: bool) {
    let Some(attr) = self_attr(target) else {
        return;
    };
    let (Some(def), Some(class)) = (checker.function(), checker.class()) else {
        return;
    };
    // Carried: the new value is made from the old one. A value replaced on each call keeps one
    // call's graph, which does not grow.
    let key = format!("self.{attr}");
    let direct = keys_in(value_expr).contains(&key);
    let through = match value_expr {
        Expr::Name(n) if !direct => local_source(def, n.id.as_str(), target.start())
            .is_some_and(|v| keys_in(v).contains(&key))
            .then(|| n.id.as_str()),
        _ => None,
    };
    if !(direct || through.is_some()) || checker.iteration().is_none() {
        return;
    }
    let value = checker.value(value_expr);
    if !value.has_graph() || is_registered_buffer(class, attr) {
        return;
    }
    if checker.attr_facts(attr).is_none() {
        return;
    }
    let current = def.name.as_str();
    // Another method rebinds it (a reset, a detach, `init_states()` run by each forward): the
    // class manages the state itself.
    if checker.class_rebinds_attr(attr, current)
        || checker.class_facts().is_some_and(|c| !c.bases_seen)
    {
        return;
    }
    // Rebound from something else earlier in the same call, on every path (`self.hidden =
    // self.init_hidden()` as the method's first line, or in both branches of an `if`): the
    // value carried is this call's only.
    if crate::semantic::scan::rebound_before(&def.body, &key, target.start()) {
        return;
    }
    let message = format!(
        "`{key} = {}` in `{current}()` is computed from the previous value of `{key}`{} and \
         carries {}: each call links its graph to the previous call's, so the module keeps \
         the graph of every call (their saved activations until a `.backward()` frees them, \
         their autograd nodes after) for the life of the module",
        short(checker, value_expr),
        through.map_or(String::new(), |n| format!(" (through `{n}`)")),
        origin_phrase(checker, &value),
    );
    let mut diagnostic = Diagnostic::new(
        Rule::LS007,
        message,
        target.range().cover(value_expr.range()),
    );
    if fixable
        && value.is_tensor()
        && !matches!(value_expr, Expr::Tuple(_) | Expr::List(_) | Expr::Dict(_))
    {
        diagnostic = diagnostic.with_fix(Fix::unsafe_edit(
            format!("Store `{}`", detached_text(checker, value_expr)),
            append_call(checker, value_expr, "detach"),
        ));
    }
    checker.report(diagnostic);
}

/// What the last assignment to the local `name` before `before` in `def` gave it: `out, state
/// = self.lstm(x, (self.h, self.c))` then `self.h, self.c = state` carries through `state`.
fn local_source<'a>(
    def: &'a ruff_python_ast::StmtFunctionDef,
    name: &str,
    before: ruff_text_size::TextSize,
) -> Option<&'a Expr> {
    struct L<'a, 'n> {
        name: &'n str,
        before: ruff_text_size::TextSize,
        found: Option<&'a Expr>,
    }
    impl<'a> Visitor<'a> for L<'a, '_> {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            if let Stmt::Assign(a) = stmt {
                let binds = |t: &Expr| match t {
                    Expr::Name(n) => n.id.as_str() == self.name,
                    Expr::Tuple(t) => t
                        .elts
                        .iter()
                        .any(|e| matches!(e, Expr::Name(n) if n.id.as_str() == self.name)),
                    _ => false,
                };
                if stmt.end() <= self.before && a.targets.iter().any(binds) {
                    self.found = Some(&a.value);
                }
            }
            // Not into nested functions or classes: their locals are others.
            if !matches!(stmt, Stmt::FunctionDef(_) | Stmt::ClassDef(_)) {
                ruff_python_ast::visitor::walk_stmt(self, stmt);
            }
        }
    }
    let mut l = L {
        name,
        before,
        found: None,
    };
    for stmt in &def.body {
        l.visit_stmt(stmt);
    }
    l.found
}

/// `self.register_buffer("<attr>", ...)` anywhere in the class.
fn is_registered_buffer(class: &StmtClassDef, attr: &str) -> bool {
    struct B<'n> {
        attr: &'n str,
        found: bool,
    }
    impl<'a> Visitor<'a> for B<'_> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Call(call) = expr {
                if let Expr::Attribute(a) = &*call.func {
                    if a.attr.as_str() == "register_buffer"
                        && matches!(call.arguments.args.first(),
                            Some(Expr::StringLiteral(s)) if s.value.to_str() == self.attr)
                    {
                        self.found = true;
                    }
                }
            }
            walk_expr(self, expr);
        }
    }
    let mut b = B { attr, found: false };
    for s in &class.body {
        b.visit_stmt(s);
    }
    b.found
}

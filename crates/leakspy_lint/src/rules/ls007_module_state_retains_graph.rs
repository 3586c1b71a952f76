//! ## What it does
//! Flags `self.<attr> = <graph value>` in the `forward()` of an `nn.Module` (or in a method that
//! `forward()` calls) when the attribute is read outside the forward pass (`get_attention()`,
//! `kl_loss()`, a logging callback of the same class), or when the new value is computed from
//! the attribute's previous value (`self.h = self.cell(x, self.h)`), so each call links to the
//! graph of the one before.
//!
//! ## Why is this bad?
//! A tensor stored on the module outlives the call that made it, and with it its autograd graph:
//! every activation saved for the backward pass, until a `.backward()` through that tensor frees
//! them, and the chain of autograd nodes after that. The module holds the last call's graph until
//! the next call replaces it; in an evaluation loop with autograd on, that is a whole extra
//! forward pass of activations on the GPU. When the new value is computed from the old one, the
//! graphs are never released: each call links to every earlier call, and memory grows for the
//! life of the module.
//!
//! ## Example
//! ```python
//! class Attention(nn.Module):
//!     def __init__(self, dim):
//!         super().__init__()
//!         self.score = nn.Linear(dim, dim)
//!         self.value = nn.Linear(dim, dim)
//!
//!     def forward(self, x):
//!         weights = torch.softmax(self.score(x), dim=-1)
//!         self.last_weights = weights
//!         return weights @ self.value(x)
//!
//!     def attention_map(self):
//!         return self.last_weights
//! ```
//!
//! ## Use instead
//! ```python
//! class Attention(nn.Module):
//!     def __init__(self, dim):
//!         super().__init__()
//!         self.score = nn.Linear(dim, dim)
//!         self.value = nn.Linear(dim, dim)
//!
//!     def forward(self, x):
//!         weights = torch.softmax(self.score(x), dim=-1)
//!         self.last_weights = weights.detach()
//!         return weights @ self.value(x)
//!
//!     def attention_map(self):
//!         return self.last_weights
//! ```
//!
//! ## Fix safety
//! The fix stores `value.detach()`. It is unsafe: a method that builds a loss from the stored
//! tensor (an auxiliary loss such as a KL term returned by `kl_loss()`) would no longer
//! propagate gradients through it, and a recurrent state carried across calls would no longer be
//! backpropagated through time. Review each case.
//!
//! ## Stays silent on
//! Registered buffers (`self.register_buffer(...)`); detached values and values computed under
//! `torch.no_grad()`; attributes only read inside the forward pass of the same call; state that
//! another method of the class resets or detaches (`reset_state()`, `detach_hidden()`).

use ruff_python_ast::visitor::{walk_expr, walk_stmt, Visitor};
use ruff_python_ast::{Expr, Stmt, StmtClassDef};
use ruff_text_size::Ranged;
use rustc_hash::FxHashSet;

use crate::checker::Checker;
use crate::diagnostic::{Diagnostic, Fix};
use crate::registry::Rule;
use crate::rules::helpers::{append_call, origin_phrase, short};
use crate::semantic::facts::self_attr;
use crate::semantic::mutation::Mutation;
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
    let value = checker.value(value_expr);
    if !value.has_graph() {
        return;
    }
    let current = def.name.as_str();
    let forward_path = forward_path(class);
    if !forward_path.contains(current) {
        return;
    }
    if is_registered_buffer(class, attr) {
        return;
    }
    let Some(place) = checker.attr_facts(attr) else {
        return;
    };
    // Another method rebinds it (reset or detach): the class manages the state itself.
    if place.changes.iter().any(|c| {
        c.mutation == Mutation::Rebind
            && c.function != "__init__"
            && !forward_path.contains(c.function.as_str())
    }) {
        return;
    }
    let key = format!("self.{attr}");
    let carried = keys_in(value_expr).contains(&key);
    let mut readers: Vec<&str> = place
        .read_in
        .iter()
        .map(String::as_str)
        .filter(|m| *m != "__init__" && !forward_path.contains(*m))
        .collect();
    readers.sort_unstable();
    let message = if carried {
        format!(
            "`{key} = {}` in `{current}()` is computed from the previous value of `{key}` and \
             carries {}: each call links its graph to the previous call's, so the module keeps \
             the graph of every call (their saved activations until a `.backward()` frees them, \
             their autograd nodes after) for the life of the module",
            short(checker, value_expr),
            origin_phrase(checker, &value),
        )
    } else if let Some(first) = readers.first() {
        format!(
            "`{key} = {}` in `{current}()` keeps {} on the module between calls (read in \
             `{first}()`): it holds the last call's graph (every saved activation until a \
             `.backward()` through it frees them, its autograd nodes after) until the next \
             forward call replaces it",
            short(checker, value_expr),
            origin_phrase(checker, &value),
        )
    } else {
        return;
    };
    let mut diagnostic = Diagnostic::new(
        Rule::LS007,
        message,
        target.range().cover(value_expr.range()),
    );
    if fixable && !matches!(value_expr, Expr::Tuple(_) | Expr::List(_) | Expr::Dict(_)) {
        let text = short(checker, value_expr);
        let shown = if matches!(
            value_expr,
            Expr::Name(_) | Expr::Attribute(_) | Expr::Call(_) | Expr::Subscript(_)
        ) {
            format!("{text}.detach()")
        } else {
            format!("({text}).detach()")
        };
        diagnostic = diagnostic.with_fix(Fix::unsafe_edit(
            format!("Store `{shown}`"),
            append_call(checker, value_expr, "detach"),
        ));
    }
    checker.report(diagnostic);
}

/// `forward` and the methods it calls through `self.<method>(...)`, two levels deep.
pub(crate) fn forward_path(class: &StmtClassDef) -> FxHashSet<String> {
    let mut path: FxHashSet<String> = FxHashSet::default();
    let methods: Vec<&ruff_python_ast::StmtFunctionDef> = class
        .body
        .iter()
        .filter_map(|s| match s {
            Stmt::FunctionDef(f) => Some(f),
            _ => None,
        })
        .collect();
    let mut frontier = vec!["forward".to_string()];
    for _ in 0..3 {
        let mut next = Vec::new();
        for name in frontier.drain(..) {
            if !path.insert(name.clone()) {
                continue;
            }
            if let Some(def) = methods.iter().find(|f| f.name.as_str() == name) {
                let mut calls = SelfCalls::default();
                for s in &def.body {
                    calls.visit_stmt(s);
                }
                next.extend(calls.names);
            }
        }
        frontier = next;
    }
    path
}

#[derive(Default)]
struct SelfCalls {
    names: Vec<String>,
}

impl<'a> Visitor<'a> for SelfCalls {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        if !matches!(stmt, Stmt::FunctionDef(_) | Stmt::ClassDef(_)) {
            walk_stmt(self, stmt);
        }
    }
    fn visit_expr(&mut self, expr: &'a Expr) {
        if let Expr::Call(call) = expr {
            if let Some(m) = self_attr(&call.func) {
                self.names.push(m.to_string());
            }
        }
        walk_expr(self, expr);
    }
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

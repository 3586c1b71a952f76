//! ## What it does
//! Flags tensors that live on an accelerator (moved with `.to(device)` or `.cuda()`, created
//! with `device=...`, or returned by a model whose inputs are on a device) collected into a
//! container for a whole loop: `preds.append(model(x).detach())` in an evaluation loop over a
//! CUDA model, `self.buffer.append(obs.to(device))` in a `push()` that nothing ever trims.
//! The tensors carry no graph (graph-carrying stores are LS002's): the cost is device memory.
//!
//! ## Why is this bad?
//! Each stored tensor keeps its GPU memory until the container is dropped. One per batch means
//! device memory that grows with the length of the loop: an evaluation over a large data set, or
//! a history that is never cleared, ends in `CUDA out of memory` long after the line that caused
//! it, and `torch.cuda.empty_cache()` cannot help because the tensors are alive. Kept on the
//! host, the same values cost host RAM (usually far larger) and free the accelerator for the
//! model.
//!
//! ## Example
//! ```python
//! def predict(model, loader):
//!     model = model.to("cuda")
//!     preds = []
//!     with torch.no_grad():
//!         for x, _ in loader:
//!             preds.append(model(x.to("cuda")))
//!     return torch.cat(preds)
//! ```
//!
//! ## Use instead
//! ```python
//! def predict(model, loader):
//!     model = model.to("cuda")
//!     preds = []
//!     with torch.no_grad():
//!         for x, _ in loader:
//!             preds.append(model(x.to("cuda")).cpu())
//!     return torch.cat(preds)
//! ```
//!
//! ## Fix safety
//! The fix stores `value.cpu()`. It is unsafe: code that later combines the stored tensors with
//! tensors on the device (`torch.cat(preds) == targets.cuda()`) must move them back, and the
//! copy to the host synchronises with the device each step.
//!
//! ## Stays silent on
//! `.cpu()`, `.numpy()`, `.tolist()`, `.item()` on the way; containers created or cleared in the
//! same iteration; lists made afresh by an outer loop (a per-episode list of states, stacked
//! after the episode); bounded `deque(maxlen=...)`s; attributes grown in a per-step method that
//! the class trims or clears somewhere; `push`/`store` methods and objects of the file's own
//! classes (a replay buffer with a capacity manages its storage); writes into a preallocated
//! tensor (`buf[t] = obs`); graph-carrying values (reported by LS002); modules moved to a device.

use ruff_python_ast::{Expr, ExprCall, Stmt};
use ruff_text_size::{Ranged, TextRange};

use crate::checker::{Checker, Holder, Lifetime};
use crate::diagnostic::{Diagnostic, Fix};
use crate::registry::Rule;
use crate::rules::helpers::{append_call, short, varies_per_iteration};
use crate::semantic::facts::self_attr;
use crate::semantic::names::dotted;
use crate::semantic::value::{Kind, Value};

/// Container methods that grow it. A `push`/`store` of a buffer class is not here: such classes
/// usually bound, detach or move what they keep themselves.
const STORE_METHODS: &[&str] = &["append", "extend", "insert", "add", "appendleft"];

pub(crate) fn call(checker: &mut Checker, call: &ExprCall) {
    let Expr::Attribute(attr) = &*call.func else {
        return;
    };
    let method = attr.attr.as_str();
    if !STORE_METHODS.contains(&method) {
        return;
    }
    let Some(stored) = call
        .arguments
        .args
        .iter()
        .skip(usize::from(method == "insert"))
        .find(|a| on_device(checker, a))
    else {
        return;
    };
    let receiver = &*attr.value;
    let Some(lifetime) = collected(checker, receiver) else {
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
    match stmt {
        Stmt::Assign(assign) => {
            for target in &assign.targets {
                let Expr::Subscript(sub) = target else {
                    continue;
                };
                let value = &*assign.value;
                if !checker.in_loop()
                    || !varies_per_iteration(checker, &sub.slice)
                    || !on_device(checker, value)
                {
                    continue;
                }
                let Some(lifetime) = collected(checker, &sub.value) else {
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
        Stmt::AugAssign(aug) => {
            let Expr::List(list) = &*aug.value else {
                return;
            };
            let Some(stored) = list.elts.iter().find(|e| on_device(checker, e)) else {
                return;
            };
            let Some(lifetime) = collected(checker, &aug.target) else {
                return;
            };
            let what = format!(
                "`{} += {}`",
                short(checker, &aug.target),
                short(checker, &aug.value)
            );
            report(checker, &what, stored, &lifetime, stmt.range());
        }
        _ => {}
    }
}

/// A tensor on an accelerator that carries no graph (graph-carrying values are LS002's).
fn on_device(checker: &Checker, expr: &Expr) -> bool {
    let v: Value = checker.value(expr);
    v.device
        && !v.has_graph()
        && !matches!(
            v.kind,
            Kind::Module | Kind::LossFn | Kind::Optimizer | Kind::Plain | Kind::Array
        )
}

/// The container outlives the loop (or the per-step method) and nothing bounds it per iteration.
fn collected(checker: &Checker, container: &Expr) -> Option<Lifetime> {
    if !checker.per_step() {
        return None;
    }
    // An object of a class of this file manages its own storage.
    if is_own_object(checker, container) {
        return None;
    }
    let lifetime = checker.lifetime(container)?;
    if checker.reset_in_iteration(&lifetime.key) {
        return None;
    }
    // A local list filled by a loop over dimensions or inputs is a result being built, not a
    // history: only a loop that does a job's steps (data, a model, training) collects one.
    if matches!(
        lifetime.holder,
        Holder::OuterLocal | Holder::Param | Holder::Closure
    ) && checker.in_loop()
        && !is_work_loop(checker)
    {
        return None;
    }
    // A list made afresh by an outer loop (per episode, per epoch) and consumed after the inner
    // loop: bounded by one pass of the inner loop, and freed every outer iteration.
    let loops = checker.loops();
    if lifetime.holder == Holder::OuterLocal
        && loops
            .iter()
            .take(loops.len().saturating_sub(1))
            .any(|l| l.facts.rebinds(&lifetime.key))
    {
        return None;
    }
    let kind = checker.value(container).kind;
    // Writing into a preallocated tensor or array copies the values in: nothing is collected.
    if matches!(
        kind,
        Kind::Deque { bounded: true } | Kind::Tensor | Kind::Array
    ) {
        return None;
    }
    let place = match self_attr(container) {
        Some(attr) => checker.attr_facts(attr),
        None => dotted(container).and_then(|k| checker.facts.globals.get(&k)),
    };
    if place.is_some_and(|p| p.is_bounded()) {
        return None;
    }
    if !checker.in_loop() {
        // A per-step method: the "loop" is the caller's. Only a place nothing ever trims or
        // clears grows for the whole run.
        if !matches!(lifetime.holder, Holder::Attribute | Holder::Global) {
            return None;
        }
        match place {
            Some(p) if p.resets().next().is_none() => {}
            _ => return None,
        }
    }
    Some(lifetime)
}

fn report(checker: &mut Checker, what: &str, stored: &Expr, lifetime: &Lifetime, range: TextRange) {
    let (span, unit) = match checker.innermost_loop() {
        Some(l) => (
            format!(
                "every iteration of the loop at line {}",
                checker.line(l.offset)
            ),
            "iteration",
        ),
        None => (
            format!(
                "every call of `{}()`",
                checker.function().map_or("", |f| f.name.as_str())
            ),
            "call",
        ),
    };
    let message = format!(
        "{what} keeps a tensor that lives on the accelerator for {span}: `{}` grows by one device \
         tensor per {unit}, and device memory with it, {}",
        lifetime.key, lifetime.until,
    );
    let mut diagnostic = Diagnostic::new(Rule::LS004, message, range);
    if !matches!(
        stored,
        Expr::Tuple(_) | Expr::List(_) | Expr::Dict(_) | Expr::Set(_) | Expr::Starred(_)
    ) {
        diagnostic = diagnostic.with_fix(Fix::unsafe_edit(
            format!("Store `{}.cpu()`", short(checker, stored)),
            append_call(checker, stored, "cpu"),
        ));
    }
    checker.report(diagnostic);
}

/// `container` holds an object of a class of this file (`self.memory = ReplayBuffer(...)`,
/// `buffer = RingBuffer(...)`): such a class manages its own storage.
pub(crate) fn is_own_object(checker: &Checker, container: &Expr) -> bool {
    if checker.class_of(container).is_some() {
        return true;
    }
    let (Some(attr), Some(class)) = (self_attr(container), checker.class()) else {
        return false;
    };
    let mut found = false;
    crate::semantic::facts::visit_body(&class.body, &mut |stmt| {
        if let Stmt::Assign(assign) = stmt {
            if assign.targets.iter().any(|t| self_attr(t) == Some(attr)) {
                if let Expr::Call(call) = &*assign.value {
                    if let Some(q) = checker.facts.imports.qualify(&call.func) {
                        found |= checker.facts.classes.contains_key(q.as_str());
                    }
                }
            }
        }
    });
    found
}

/// The innermost loop steps through a job's work: it trains, iterates data (a loader, batches,
/// episodes, steps), or calls a model.
fn is_work_loop(checker: &Checker) -> bool {
    let Some(frame) = checker.innermost_loop() else {
        return false;
    };
    if frame.facts.calls_backward || frame.facts.steps_optimizer {
        return true;
    }
    let (iter, body) = match frame.stmt {
        Stmt::For(f) => (Some(&*f.iter), &f.body[..]),
        Stmt::While(w) => (None, &w.body[..]),
        _ => return false,
    };
    // Names of what a job iterates: parts of a name, or whole names.
    const DATA_PART: &[&str] = &["loader", "batch", "episode", "rollout", "epoch"];
    const DATA_NAME: &[&str] = &[
        "data",
        "dataset",
        "env",
        "envs",
        "steps",
        "samples",
        "num_steps",
        "n_steps",
        "iterations",
    ];
    if let Some(iter) = iter {
        let data_like = crate::semantic::scan::keys_in(iter).iter().any(|k| {
            let last = k.rsplit('.').next().unwrap_or(k).to_ascii_lowercase();
            DATA_PART.iter().any(|d| last.contains(d)) || DATA_NAME.contains(&last.as_str())
        });
        if data_like {
            return true;
        }
    }
    let mut calls_model = false;
    crate::semantic::scan::visit_block(body, &mut |stmt| {
        if calls_model {
            return;
        }
        let exprs: Vec<&Expr> = match stmt {
            Stmt::Expr(e) => vec![&*e.value],
            Stmt::Assign(a) => vec![&*a.value],
            Stmt::AugAssign(a) => vec![&*a.value],
            Stmt::Return(r) => r.value.as_deref().into_iter().collect(),
            _ => vec![],
        };
        for e in exprs {
            if calls_module(checker, e) {
                calls_model = true;
            }
        }
    });
    calls_model
}

fn calls_module(checker: &Checker, expr: &Expr) -> bool {
    use ruff_python_ast::visitor::{walk_expr, Visitor};
    struct V<'c, 'a> {
        checker: &'c Checker<'a>,
        found: bool,
    }
    impl<'e> Visitor<'e> for V<'_, '_> {
        fn visit_expr(&mut self, expr: &'e Expr) {
            if self.found {
                return;
            }
            if let Expr::Call(call) = expr {
                if matches!(self.checker.value(&call.func).kind, Kind::Module) {
                    self.found = true;
                    return;
                }
            }
            walk_expr(self, expr);
        }
    }
    let mut v = V {
        checker,
        found: false,
    };
    v.visit_expr(expr);
    v.found
}

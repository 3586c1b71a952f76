//! ## What it does
//! Flags tensors that live on an accelerator (moved with `.to(device)` or `.cuda()`, created with
//! `device=...`, or returned by a model whose inputs are on a device) collected into a container
//! that outlives the function that fills it (an attribute, a module global, a closure cell):
//! `self.predictions.append(model(x))` in an evaluation method over a CUDA model,
//! `self.buffer.append(obs.to(device))` in a `push()` that nothing ever trims. The tensors carry
//! no graph (graph-carrying stores are LS002's): the cost is device memory.
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
//! class Evaluator:
//!     def __init__(self, model):
//!         self.model = model.to("cuda")
//!         self.predictions = []
//!
//!     @torch.no_grad()
//!     def evaluate(self, loader):
//!         for x, _ in loader:
//!             self.predictions.append(self.model(x.to("cuda")))
//!         return torch.cat(self.predictions)
//!
//!
//! def fit(model, train_loader, val_loader, epochs):
//!     evaluator = Evaluator(model)
//!     for epoch in range(epochs):
//!         train_one_epoch(model, train_loader)
//!         print(epoch, evaluator.evaluate(val_loader).mean().item())
//! ```
//!
//! ## Use instead
//! ```python
//! class Evaluator:
//!     def __init__(self, model):
//!         self.model = model.to("cuda")
//!
//!     @torch.no_grad()
//!     def evaluate(self, loader):
//!         predictions = []
//!         for x, _ in loader:
//!             predictions.append(self.model(x.to("cuda")).cpu())
//!         return torch.cat(predictions)
//!
//!
//! def fit(model, train_loader, val_loader, epochs):
//!     evaluator = Evaluator(model)
//!     for epoch in range(epochs):
//!         train_one_epoch(model, train_loader)
//!         print(epoch, evaluator.evaluate(val_loader).mean().item())
//! ```
//!
//! ## Fix safety
//! The fix stores `value.cpu()`. It is unsafe: code that later combines the stored tensors with
//! tensors on the device (`torch.cat(preds) == targets.cuda()`) must move them back, and the copy
//! to the host synchronises with the device each step.
//!
//! ## Stays silent on
//! `.cpu()`, `.numpy()`, `.tolist()`, `.item()` on the way; local lists of a function (its
//! working set: predictions gathered for a metric, returned or stacked into a batch); containers
//! created or cleared in the same iteration; lists made afresh by an outer loop; bounded
//! `deque(maxlen=...)`s; attributes that some method trims, clears or rebinds; `push`/`store`
//! methods and objects of the file's own classes (a replay buffer with a capacity manages its
//! storage); writes into a preallocated tensor (`buf[t] = obs`); graph-carrying values (reported
//! by LS002); modules moved to a device.

use ruff_python_ast::{Expr, ExprCall, Stmt};
use ruff_text_size::{Ranged, TextRange};

use crate::checker::{Checker, Holder, Lifetime, Until};
use crate::diagnostic::{Diagnostic, Fix};
use crate::registry::Rule;
use crate::rules::helpers::{append_call, call_text, short, until};
use crate::semantic::mutation::stored_values;
use crate::semantic::value::{Kind, Value};

/// Container methods that grow it. A `push`/`store` of a buffer class is not here: such classes
/// usually bound, detach or move what they keep themselves.
const STORE_METHODS: &[&str] = &["append", "extend", "insert", "add", "appendleft"];

pub(crate) fn call(checker: &mut Checker, call: &ExprCall) {
    let Some((method, args)) = stored_values(call) else {
        return;
    };
    if !STORE_METHODS.contains(&method) {
        return;
    }
    let Expr::Attribute(attr) = &*call.func else {
        return;
    };
    let Some(stored) = args.into_iter().find(|a| on_device(checker, a)) else {
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
                    || !checker.key_changes_per_iteration(&sub.slice)
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

/// The container outlives the training iteration and nothing bounds it per iteration.
fn collected(checker: &Checker, container: &Expr) -> Option<Lifetime> {
    // An object of a class of this file manages its own storage.
    if checker.holds_file_object(container) {
        return None;
    }
    let lifetime = checker.lifetime(container)?;
    if checker.reset_in_iteration(&lifetime.key) {
        return None;
    }
    match (&lifetime.holder, &lifetime.until) {
        // A list made afresh by an outer loop (per episode, per epoch) and consumed after the
        // inner loop: bounded by one pass of the inner loop, and freed every outer iteration.
        // An attribute some method trims or clears is bounded by whatever calls it.
        (_, Until::OuterLoop { .. } | Until::Reset { .. }) => return None,
        // A local list of a function is its working set (predictions gathered for a metric,
        // returned, stacked into a batch): what is kept beyond the call is the object's and the
        // process's state.
        (Holder::OuterLocal | Holder::Param, _) => return None,
        _ => {}
    }
    if crate::rules::helpers::keeps_a_bounded_number(checker, container) {
        return None;
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
        lifetime.key,
        until(checker, lifetime),
    );
    let mut diagnostic = Diagnostic::new(Rule::LS004, message, range);
    if !matches!(
        stored,
        Expr::Tuple(_) | Expr::List(_) | Expr::Dict(_) | Expr::Set(_) | Expr::Starred(_)
    ) {
        diagnostic = diagnostic.with_fix(Fix::unsafe_edit(
            format!("Store `{}`", call_text(checker, stored, "cpu")),
            append_call(checker, stored, "cpu"),
        ));
    }
    checker.report(diagnostic);
}

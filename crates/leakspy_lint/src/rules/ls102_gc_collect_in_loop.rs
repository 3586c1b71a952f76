//! ## What it does
//! Flags `gc.collect()` called on every training step: in the body of a step loop, or in a method
//! that runs once per step (`training_step`, `update`, `on_train_batch_end`...).
//!
//! ## Why is this bad?
//! CPython frees an object as soon as its last reference goes; the cyclic collector is only
//! needed for objects that refer to each other in a cycle. A tensor that leaks because a list, an
//! attribute or an autograd graph still refers to it is not garbage, and `gc.collect()` leaves it
//! where it is. Meanwhile each full collection walks every object the collector tracks: measured
//! on CPython 3.11, about 60 ms per call with 0.3 M tracked objects (roughly what `import torch`
//! alone creates) and about 3 s with 5 M. Run every step, that is pure slowdown.
//!
//! The seed reports added `gc.collect()` after each agent, plot or episode "to prevent memory
//! leaks"; the leaks were lists holding tensors, which it cannot free.
//!
//! ## Example
//! ```python
//! for step, batch in enumerate(loader):
//!     loss = model(batch).loss
//!     loss.backward()
//!     optimizer.step()
//!     gc.collect()
//! ```
//!
//! ## Use instead
//! ```python
//! for step, batch in enumerate(loader):
//!     loss = model(batch).loss
//!     loss.backward()
//!     optimizer.step()
//! ```
//! Find what holds the memory instead (`leakspy run -- python train.py` names the owner). If
//! reference cycles really pile up, collect every few hundred steps.
//!
//! ## Fix safety
//! The fix removes the call (replacing it by `pass` when it is the only statement of its block).
//! Objects in reference cycles are still collected by the automatic collector, later; code that
//! relies on finalizers (`__del__`, weakref callbacks) running at that exact point would see a
//! change, so the fix is unsafe.
//!
//! ## Stays silent on
//! Calls guarded by a step modulo such as `if step % 1000 == 0:` (they do not run every step); a
//! few deliberate rounds (`for _ in range(5): gc.collect()`, until finalizers have run); calls in
//! an `except` handler; calls in an epoch, generation or episode loop, or in per-epoch methods
//! (`on_train_epoch_end`); calls outside loops and per-step methods.

use ruff_python_ast::{ExprCall, Stmt};

use crate::checker::Checker;
use crate::registry::Rule;
use crate::rules::helpers::report_every_step;

/// The rule looks for `gc.collect` calls, under whatever alias.
pub(crate) const NEEDS: &[&str] = &["collect"];

pub(crate) fn call(checker: &mut Checker, call: &ExprCall, stmt: &Stmt) {
    if checker.qualified_function(&call.func).as_deref() != Some("gc.collect") {
        return;
    }
    report_every_step(
        checker,
        call,
        stmt,
        Rule::LS102,
        "each call walks every object the cyclic collector tracks (about 60 ms at 0.3 M \
         objects) and frees only reference cycles; a tensor still held by a list, an attribute \
         or a graph is not garbage and stays",
        "Remove the call: it frees only reference cycles, which the automatic collector frees \
         anyway",
    );
}

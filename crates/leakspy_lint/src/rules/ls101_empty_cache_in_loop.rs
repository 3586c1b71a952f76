//! ## What it does
//! Flags `torch.cuda.empty_cache()` (and `torch.mps.empty_cache()`, `torch.xpu.empty_cache()`)
//! called on every training step: in the body of a step loop, or in a method that runs once per
//! step (`training_step`, `update`, `on_train_batch_end`...).
//!
//! ## Why is this bad?
//! `empty_cache()` frees no live tensor. It only returns to the driver the blocks that PyTorch's
//! caching allocator keeps for reuse, blocks that no tensor uses any more. Memory held by a leak
//! (a list of losses with their graphs, a history tensor) is live: it stays exactly where it is,
//! so the call cannot fix a leak. It does cost something on every step: the next step's
//! allocations must get memory from the driver again instead of from the cache, so every step
//! gets slower. And it hides real leaks: `nvidia-smi` and `torch.cuda.memory_reserved()` drop
//! after each call, while `torch.cuda.memory_allocated()` (the live tensors) keeps growing.
//!
//! Several of our users' reports added it "to prevent memory leaks"; in each, the leak was a
//! stored tensor that `empty_cache()` could not free.
//!
//! ## Example
//! ```python
//! for step, (x, y) in enumerate(loader):
//!     loss = criterion(model(x), y)
//!     loss.backward()
//!     optimizer.step()
//!     optimizer.zero_grad()
//!     torch.cuda.empty_cache()
//! ```
//!
//! ## Use instead
//! ```python
//! for step, (x, y) in enumerate(loader):
//!     loss = criterion(model(x), y)
//!     loss.backward()
//!     optimizer.step()
//!     optimizer.zero_grad()
//! ```
//! Find what holds the memory instead (`leakspy run -- python train.py` names it). Call
//! `empty_cache()` once, after freeing a large object, only when another process needs the memory
//! back.
//!
//! ## Fix safety
//! The fix removes the call (replacing it by `pass` when it is the only statement of its block,
//! or removing an `if torch.cuda.is_available():` that only guards it). It changes no tensor and
//! no result, but another process sharing the device may have relied on the memory being handed
//! back, so the fix is unsafe.
//!
//! ## Stays silent on
//! Calls guarded by a step modulo such as `if step % 1000 == 0:` (they do not run every step); a
//! few deliberate rounds (`for _ in range(3):`); calls in an `except` handler (freeing the cache
//! before retrying after an out-of-memory error is legitimate); calls in an epoch, generation or
//! episode loop, or in per-epoch methods (`on_train_epoch_end`); calls outside loops and per-step
//! methods.

use ruff_python_ast::{ExprCall, Stmt};

use crate::checker::Checker;

use crate::registry::Rule;
use crate::rules::helpers::report_every_step;

/// The rule looks for `empty_cache` calls, under whatever alias.
pub(crate) const NEEDS: &[&str] = &["empty_cache"];

pub(crate) fn call(checker: &mut Checker, call: &ExprCall, stmt: &Stmt) {
    let Some(q) = checker.qualified_function(&call.func) else {
        return;
    };
    if !matches!(
        &*q,
        "torch.cuda.empty_cache"
            | "torch.cuda.memory.empty_cache"
            | "torch.mps.empty_cache"
            | "torch.xpu.empty_cache"
    ) {
        return;
    }
    report_every_step(
        checker,
        call,
        stmt,
        Rule::LS101,
        "it frees no live tensor, only the allocator's cached free blocks, so it cannot fix a \
         leak; the following step must get those blocks from the driver again (every step gets \
         slower), and `nvidia-smi` shows less memory while a real leak keeps growing in \
         `memory_allocated()`",
        "Remove the call: it frees no live tensor",
    );
}

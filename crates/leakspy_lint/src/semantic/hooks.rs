//! Framework hooks as data: the methods and events training frameworks call on the user's
//! code, how often, with autograd on or off, and what they do with the value returned. One
//! table that `iteration.rs` (how often a function runs), `summary.rs` (autograd off in a hook)
//! and the rules' wording (a returned loss the framework backpropagates) read; names no entry
//! lists fall back to the naming patterns of `iteration::hook_grain`.

use super::iteration::Grain;

/// The framework that calls a hook, for messages and documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framework {
    Lightning,
    Transformers,
    StableBaselines3,
    Skorch,
    Ignite,
}

/// What the framework does with the value a hook returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returned {
    /// Backpropagates it, after the hook returns (Lightning's `training_step` loss).
    Backpropagated,
    /// Keeps it until the end of the loop (Lightning's `predict_step` outputs, gathered by
    /// `Trainer.predict`).
    Kept,
    /// Looks at it for control flow only, or drops it.
    Ignored,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hook {
    pub framework: Framework,
    /// The method name, or for an event-driven engine the event (`ITERATION_COMPLETED`).
    pub name: &'static str,
    pub grain: Grain,
    /// Does the framework run it with autograd recording?
    pub grad: bool,
    pub returns: Returned,
}

const fn hook(
    framework: Framework,
    name: &'static str,
    grain: Grain,
    grad: bool,
    returns: Returned,
) -> Hook {
    Hook {
        framework,
        name,
        grain,
        grad,
        returns,
    }
}

use Framework::*;
use Grain::{Epoch, Step};
use Returned::*;

/// Every hook the analysis knows by name. Lightning runs validation, test and prediction under
/// `torch.no_grad()` (`inference_mode` by default); its `*_epoch_end` hooks are where the
/// `self.*_outputs` lists its documentation recommends are cleared.
pub const HOOKS: &[Hook] = &[
    hook(Lightning, "training_step", Step, true, Backpropagated),
    hook(Lightning, "validation_step", Step, false, Ignored),
    hook(Lightning, "test_step", Step, false, Ignored),
    hook(Lightning, "predict_step", Step, false, Kept),
    hook(Lightning, "on_train_batch_end", Step, true, Ignored),
    hook(Lightning, "on_validation_batch_end", Step, false, Ignored),
    hook(Lightning, "on_test_batch_end", Step, false, Ignored),
    hook(Lightning, "on_predict_batch_end", Step, false, Ignored),
    hook(Lightning, "on_before_backward", Step, true, Ignored),
    hook(Lightning, "on_after_backward", Step, true, Ignored),
    hook(Lightning, "on_before_optimizer_step", Step, true, Ignored),
    hook(Lightning, "on_train_epoch_end", Epoch, true, Ignored),
    hook(Lightning, "on_validation_epoch_end", Epoch, false, Ignored),
    hook(Lightning, "on_test_epoch_end", Epoch, false, Ignored),
    hook(Lightning, "on_predict_epoch_end", Epoch, false, Ignored),
    // transformers' `TrainerCallback`: `on_evaluate` runs once per evaluation.
    hook(Transformers, "on_step_end", Step, true, Ignored),
    hook(Transformers, "on_substep_end", Step, true, Ignored),
    hook(Transformers, "on_log", Step, true, Ignored),
    hook(Transformers, "on_evaluate", Epoch, true, Ignored),
    hook(Transformers, "on_epoch_end", Epoch, true, Ignored),
    // stable-baselines3's `BaseCallback`: `_on_step` returns whether to go on.
    hook(StableBaselines3, "_on_step", Step, true, Ignored),
    hook(StableBaselines3, "_on_rollout_end", Epoch, true, Ignored),
    // skorch callbacks.
    hook(Skorch, "on_batch_end", Step, true, Ignored),
    hook(Skorch, "on_epoch_end", Epoch, true, Ignored),
    // ignite's `Events`, as `@trainer.on(Events.X)` or `add_event_handler(Events.X, f)`.
    hook(Ignite, "ITERATION_COMPLETED", Step, true, Ignored),
    hook(Ignite, "ITERATION_STARTED", Step, true, Ignored),
    hook(Ignite, "GET_BATCH_COMPLETED", Step, true, Ignored),
    hook(Ignite, "GET_BATCH_STARTED", Step, true, Ignored),
    hook(Ignite, "EPOCH_COMPLETED", Epoch, true, Ignored),
    hook(Ignite, "EPOCH_STARTED", Epoch, true, Ignored),
];

/// Base classes whose objects a framework drives through the hooks above and keeps for the
/// run: the user makes one and hands it over (`trainer.fit(model)`, `model.learn(callback=cb)`,
/// `NeuralNet(callbacks=[cb])`, `Trainer(callbacks=[cb])`), and the framework never touches the
/// attributes the subclass adds. What its hooks keep, only the class itself can release.
const FRAMEWORK_OWNED: &[&str] = &[
    "pytorch_lightning.LightningModule",
    "pytorch_lightning.core.LightningModule",
    "pytorch_lightning.core.module.LightningModule",
    "lightning.LightningModule",
    "lightning.pytorch.LightningModule",
    "lightning.pytorch.core.LightningModule",
    "lightning.pytorch.core.module.LightningModule",
    "stable_baselines3.common.callbacks.BaseCallback",
    "skorch.callbacks.Callback",
    "skorch.callbacks.base.Callback",
    "transformers.TrainerCallback",
    "transformers.trainer_callback.TrainerCallback",
];

/// Is the qualified name one of those bases?
pub fn framework_owned(qualified: &str) -> bool {
    FRAMEWORK_OWNED.contains(&qualified)
}

/// The hook of that method name (leading underscores kept: SB3's `_on_step` is its own).
pub fn method(name: &str) -> Option<&'static Hook> {
    HOOKS
        .iter()
        .find(|h| h.framework != Ignite && h.name == name)
}

/// The hook of an event-driven engine's event (`Events.ITERATION_COMPLETED`, or with a filter:
/// `Events.ITERATION_COMPLETED(every=10)` is named the same).
pub fn event(name: &str) -> Option<&'static Hook> {
    HOOKS
        .iter()
        .find(|h| h.framework == Ignite && h.name.eq_ignore_ascii_case(name))
}

/// Methods accelerate's `Accelerator` offers in place of torch's: `backward(loss)` trains,
/// `gather(x)` returns `x`'s values from every process (on one process `x` itself, with its
/// graph). Called with one argument on something that is not a tensor (a tensor's own
/// `gather` takes a dimension and an index).
pub fn accelerate_passes_value(method: &str) -> bool {
    matches!(
        method,
        "gather" | "gather_for_metrics" | "pad_across_processes"
    )
}

/// Collective operations that return their tensor argument's values reduced or gathered across
/// processes, with its graph: horovod's are autograd functions (so is the functional
/// `torch.distributed.nn`), made for averaging losses and metrics across ranks.
const VALUE_COLLECTIVES: &[&str] = &[
    "horovod.torch.allreduce",
    "horovod.torch.allgather",
    "horovod.torch.broadcast",
    "horovod.torch.alltoall",
    "horovod.torch.reducescatter",
    "horovod.torch.mpi_ops.allreduce",
    "horovod.torch.mpi_ops.allgather",
    "torch.distributed.nn.all_reduce",
    "torch.distributed.nn.all_gather",
    "torch.distributed.nn.functional.all_reduce",
    "torch.distributed.nn.functional.all_gather",
];

/// Does the function (qualified) return its first argument's values, graph included?
pub fn collective_passes_value(qualified: &str) -> bool {
    VALUE_COLLECTIVES.contains(&qualified)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_and_events_are_found_by_their_names() {
        assert_eq!(method("training_step").unwrap().returns, Backpropagated);
        assert!(!method("validation_step").unwrap().grad);
        assert_eq!(method("_on_step").unwrap().framework, StableBaselines3);
        assert!(method("ITERATION_COMPLETED").is_none());
        assert_eq!(event("iteration_completed").unwrap().grain, Step);
        assert!(event("training_step").is_none());
    }
}

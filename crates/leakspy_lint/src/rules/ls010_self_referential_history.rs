//! ## What it does
//! Flags a tensor history that is rebuilt from itself every step with `torch.cat`/`torch.stack`
//! (`history = torch.cat([history, x])`, `self.buf = torch.cat((self.buf[1:], x))`, also when the
//! result is sliced to a fixed length: `torch.cat([h, x])[-N:]`, or started on the first step:
//! `h = x if h is None else torch.cat([h, x])`) while the old history is not
//! detached and the result carries an autograd graph (because `x` or the history carries one).
//!
//! ## Why is this bad?
//! `torch.cat` records a node that points at each of its inputs. When one input is the previous
//! history, every new history points at the previous one, which points at the one before: the
//! graph reaches back to the very first step, and everything it saved (the graph of every `x`
//! ever appended) stays alive. Slicing the result to the last `N` rows bounds the tensor, not the
//! graph: `[-N:]` is one more node in the chain. Memory grows with every step and a `.backward()`
//! through the history walks all of them. One of our users lost a training run to exactly this:
//! an `ability_history` concatenated each step from policy-derived values.
//!
//! ## Example
//! ```python
//! def rollout(policy, state, steps, max_len=32):
//!     history = torch.zeros(0, 8)
//!     ability = torch.zeros(8)
//!     for step in range(steps):
//!         ability = ability + policy(state)
//!         history = torch.cat([history, ability.unsqueeze(0)])[-max_len:]
//!     return history
//! ```
//!
//! ## Use instead
//! ```python
//! def rollout(policy, state, steps, max_len=32):
//!     history = torch.zeros(0, 8)
//!     ability = torch.zeros(8)
//!     for step in range(steps):
//!         ability = (ability + policy(state)).detach()
//!         history = torch.cat([history, ability.unsqueeze(0)])[-max_len:]
//!     return history
//! ```
//!
//! ## Fix safety
//! The fix detaches the old history inside the `cat` (`history.detach()`), which cuts the chain
//! to earlier steps: gradients no longer flow back into earlier steps through the history, which
//! a model that attends over its own past on purpose may rely on (then bound the window and
//! detach the part that falls out of it instead). It is safe only where every other use of the
//! history ends in numbers (logging, a metric ending in `.item()`, also inside a function of the
//! same file it is passed to): nothing backpropagates through it. Otherwise it is unsafe.
//!
//! ## Stays silent on
//! Histories detached on the way (`torch.cat([h.detach(), x])`), updates under
//! `torch.no_grad()`/`inference_mode()`, and concatenations whose inputs carry no graph; a local
//! concatenated within one forward pass (in a module's `forward`, or in a loop over layers or
//! blocks, as in DenseNet), whose graph is freed with the step; code that does not run once per
//! training iteration (a loop over layers, heads or time steps of one forward pass, whose graph
//! dies with the step, also in a method only `forward` calls, whatever the loop is named;
//! set-up code; code that runs once, as under `if step == 0:` or `if self.x is None:`, or only
//! with a debugging option on).

use ruff_python_ast::{Expr, Stmt};
use ruff_text_size::Ranged;

use crate::checker::Checker;
use crate::diagnostic::Diagnostic;
use crate::registry::Rule;
use crate::rules::helpers::{
    append_call, concat_function, detach_fix, detached_text, origin_phrase, refers_to, short,
    unwrap_result,
};
use crate::semantic::facts::self_attr;
use crate::semantic::model::Iteration;
use crate::semantic::names::{dotted, is_dotted};
use crate::semantic::value::Graph;

pub(crate) fn stmt(checker: &mut Checker, stmt: &Stmt) {
    if !checker.grad_enabled() {
        return;
    }
    let (target, value) = match stmt {
        Stmt::Assign(a) if a.targets.len() == 1 => (&a.targets[0], &*a.value),
        Stmt::AnnAssign(a) => match &a.value {
            Some(v) => (&*a.target, &**v),
            None => return,
        },
        _ => return,
    };
    let Some(key) = dotted(target) else { return };
    // `h = x if h is None else torch.cat([h.to(dev), x])`: the branch that rebuilds `h` from
    // itself.
    let value = match value {
        Expr::If(e) if rebuilt_from(checker, &key, &e.orelse).is_some() => &*e.orelse,
        Expr::If(e) if rebuilt_from(checker, &key, &e.body).is_some() => &*e.body,
        v => v,
    };
    let Some((concat_expr, sliced, elts, func)) = rebuilt_from(checker, &key, value) else {
        return;
    };
    let Some(old) = elts.iter().find(|e| refers_to(e, &key)) else {
        return;
    };
    // Rebuilt from itself once per training iteration and kept across iterations: an
    // attribute or a global, or a local bound before the training loop. A local of a call
    // that runs per step (a model's `forward` concatenating features) dies with the call.
    if !carried_across_iterations(checker, target, &key) {
        return;
    }
    // A detached old history (`h.detach()`) links nothing. The bare name itself holds what the
    // previous iteration made, whatever it started as (`history = torch.empty(0, 1)`).
    let old_value = checker.value(old);
    if old_value.graph == Graph::No && !is_dotted(old, &key) {
        return;
    }
    let whole = checker.value(concat_expr);
    if !whole.has_graph() {
        return;
    }
    // Name the element that brings the graph in, when it is not the history itself.
    let source = elts
        .iter()
        .filter(|e| !refers_to(e, &key))
        .map(|e| (e, checker.value(e)))
        .find(|(_, v)| v.has_graph());
    let carrier = match &source {
        Some((e, v)) => format!(
            "`{}` carries {}",
            short(checker, e),
            origin_phrase(checker, v)
        ),
        None => format!(
            "`{key}` itself carries {}",
            origin_phrase(checker, &old_value)
        ),
    };
    let slice_note = if sliced {
        "; slicing the result to a fixed length bounds the tensor, not the graph"
    } else {
        ""
    };
    let message = format!(
        "`{key} = {func}([{}, ...])` builds each new `{key}` from the previous one without \
         `.detach()`, and {carrier}: every step's graph links to all earlier steps, so `{key}` \
         keeps the graph of every step since the first alive (memory grows with each step){slice_note}",
        short(checker, old),
    );
    // Safe where nothing can backpropagate through the history: every other use of it ends
    // in numbers (logging, a metric ending in `.item()`, in this file's own functions too).
    let fix = detach_fix(
        checker,
        &key,
        stmt.range(),
        format!("Detach the old history: `{}`", detached_text(checker, old)),
        append_call(checker, old, "detach"),
    );
    checker.report(Diagnostic::new(Rule::LS010, message, stmt.range()).with_fix(fix));
}

/// The concatenation `value` rebuilds `key` from (`torch.cat([key, x])`, `torch.cat([key[1:],
/// x])[-N:]`), with whether its result is sliced, its elements and the function's name.
fn rebuilt_from<'a>(
    checker: &Checker,
    key: &str,
    value: &'a Expr,
) -> Option<(&'a Expr, bool, &'a [Expr], String)> {
    let (concat_expr, sliced) = unwrap_result(value);
    let Expr::Call(call) = concat_expr else {
        return None;
    };
    let func = concat_function(checker, call)?;
    let seq = call.arguments.args.first().or_else(|| {
        call.arguments
            .keywords
            .iter()
            .find(|k| k.arg.as_ref().is_some_and(|a| a.as_str() == "tensors"))
            .map(|k| &k.value)
    })?;
    let elts = match seq {
        Expr::List(l) => &l.elts,
        Expr::Tuple(t) => &t.elts,
        _ => return None,
    };
    elts.iter()
        .any(|e| refers_to(e, key))
        .then_some((concat_expr, sliced, &elts[..], func))
}

/// Is `key` carried from one training iteration to the next by this assignment?
fn carried_across_iterations(checker: &Checker, target: &Expr, key: &str) -> bool {
    let Some(it) = checker.iteration() else {
        return false;
    };
    if self_attr(target).is_some() || checker.function().is_none() {
        return true;
    }
    if checker.scope().declared_global.contains(key) {
        return true;
    }
    match it {
        // A local of a per-step call.
        Iteration::Call { .. } => false,
        // Bound before the training loop (or first bound by this very assignment inside it).
        Iteration::Loop { depth, .. } => checker.carried_by_loop(depth, key),
    }
}

//! ## What it does
//! Flags new numpy arrays and CPU tensors of a fixed shape allocated on every iteration of a step
//! loop: `np.zeros/ones/empty/full(shape)` and `torch.zeros/ones/empty/full(shape)` whose shape
//! does not change from one iteration to the next, and `np.stack`/`np.concatenate`/ `np.array` of
//! a list that the same iteration builds from scratch. This is advice (information level), not a
//! leak.
//!
//! ## Why is this bad?
//! Each iteration asks the allocator for the same block again and hands it back at the end: large
//! numpy arrays come straight from `mmap`/`malloc` and are page-faulted in on every first write,
//! and a list of per-iteration arrays followed by `np.stack` copies every value twice. In one of
//! our users' rollout loops this meant ~400 k temporary arrays for 200 k steps. It is not a leak
//! (the arrays are freed), but it costs time on every step, and glibc keeps freed 128 KiB-32 MiB
//! blocks, so RSS only ratchets up and looks like a leak on a memory chart. Reusing one buffer
//! removes both.
//!
//! ## Example
//! ```python
//! for env_idx in range(num_envs):
//!     actions = np.zeros(num_agents, dtype=np.int32)
//!     teacher.step_batch(obs[env_idx], actions)
//!     all_actions.append(actions)
//! actions_stacked = np.stack(all_actions, axis=0)
//! ```
//!
//! ## Use instead
//! ```python
//! actions_buffer = np.zeros((num_envs, num_agents), dtype=np.int32)  # once, e.g. in __init__
//! for env_idx in range(num_envs):
//!     teacher.step_batch(obs[env_idx], actions_buffer[env_idx])
//! ```
//!
//! ## Fix safety
//! No fix is offered: where to keep the buffer (an attribute, a variable before the loop) and
//! whether the values must be reset are the author's decisions.
//!
//! ## Stays silent on
//! Allocations whose shape depends on the iteration (the loop variable, a batch's `.shape`,
//! anything rebound in the loop, a call or a comprehension); tiny shapes written as literals or
//! module constants (under 4096 elements); tensors created on an accelerator (`device=...`: the
//! caching allocator reuses the block); code outside loops; epoch, generation or episode loops.

use ruff_python_ast::visitor::{walk_expr, Visitor};
use ruff_python_ast::{Expr, ExprCall};
use ruff_text_size::Ranged;

use crate::checker::Checker;
use crate::diagnostic::Diagnostic;
use crate::registry::Rule;
use crate::semantic::names::last_segment;
use crate::semantic::scan::keys_in;

pub(crate) fn call(checker: &mut Checker, call: &ExprCall) {
    let Some(frame) = checker.innermost_loop() else {
        return;
    };
    let Some(q) = checker.qualified_function(&call.func) else {
        return;
    };
    let (is_numpy, is_torch) = (q.starts_with("numpy."), q.starts_with("torch."));
    let func = last_segment(&q);
    let stacks = is_numpy
        && matches!(
            func,
            "stack" | "concatenate" | "vstack" | "hstack" | "array" | "asarray"
        );
    let allocates = (is_numpy || is_torch) && matches!(func, "zeros" | "ones" | "empty" | "full");
    // Only in a loop that runs once per training step (not per epoch, nor a loop over
    // layers); a call it could report first.
    if !(stacks || allocates) || !crate::semantic::located::runs_every_step(checker) {
        return;
    }
    let loop_line = checker.line(frame.offset);
    if stacks {
        // A list rebuilt and grown in this iteration, then copied into a new array.
        let Some(Expr::Name(list)) = call.arguments.args.first() else {
            return;
        };
        let key = list.id.as_str();
        if !(frame.facts.rebinds(key) && frame.facts.grows(key)) {
            return;
        }
        let message = format!(
            "`{}` copies a list that this iteration builds from scratch into a new array, on \
             every iteration of the loop at line {loop_line}: preallocate the stacked array once \
             and write each row into it (`buf[i] = ...`) (information)",
            checker.snippet(call.range())
        );
        checker.report(Diagnostic::new(Rule::LS104, message, call.range()));
        return;
    }
    if is_torch
        && call.arguments.keywords.iter().any(|k| {
            k.arg.as_ref().is_some_and(|a| a.as_str() == "device")
                && !matches!(&k.value, Expr::StringLiteral(s) if s.value.to_str() == "cpu")
        })
    {
        return;
    }
    let shape: Vec<&Expr> = match (is_numpy || func == "full", call.arguments.args.first()) {
        (true, Some(first)) => vec![first],
        (false, Some(_)) => call.arguments.args.iter().collect(),
        (_, None) => call
            .arguments
            .keywords
            .iter()
            .filter(|k| {
                k.arg
                    .as_ref()
                    .is_some_and(|a| matches!(a.as_str(), "shape" | "size"))
            })
            .map(|k| &k.value)
            .collect(),
    };
    if shape.is_empty() {
        return;
    }
    for dim in &shape {
        if has_call(dim) || keys_in(dim).iter().any(|k| frame.facts.rebinds(k)) {
            return;
        }
    }
    // Sizes written as literals or module constants: small buffers cost nothing to remake.
    if literal_elements(&shape, &checker.facts.constants).is_some_and(|n| n < 4096) {
        return;
    }
    let what = if is_numpy { "array" } else { "CPU tensor" };
    let reuse = if is_numpy {
        "`buf.fill(0)`"
    } else {
        "`buf.zero_()`"
    };
    let message = format!(
        "`{}` allocates a new {what} of the same shape on every iteration of the loop at line \
         {loop_line}: allocate one buffer before the loop and reuse it ({reuse}, \
         `buf[...] = ...`), or preallocate one row per iteration if each iteration's {what} is \
         kept (information)",
        checker.snippet(call.range())
    );
    checker.report(Diagnostic::new(Rule::LS104, message, call.range()));
}

fn has_call(expr: &Expr) -> bool {
    struct H(bool);
    impl<'a> Visitor<'a> for H {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if matches!(
                expr,
                Expr::Call(_) | Expr::ListComp(_) | Expr::Generator(_) | Expr::If(_)
            ) {
                self.0 = true;
            }
            walk_expr(self, expr);
        }
    }
    let mut h = H(false);
    h.visit_expr(expr);
    h.0
}

/// The element count when every dimension is an integer literal or a module constant.
fn literal_elements(
    shape: &[&Expr],
    constants: &rustc_hash::FxHashMap<String, u64>,
) -> Option<u64> {
    let mut n: u64 = 1;
    for dim in shape {
        let elements = match dim {
            Expr::Tuple(t) => literal_elements(&t.elts.iter().collect::<Vec<_>>(), constants)?,
            Expr::List(l) => literal_elements(&l.elts.iter().collect::<Vec<_>>(), constants)?,
            e => crate::semantic::facts::int_value(e, constants)?,
        };
        n = n.saturating_mul(elements);
    }
    Some(n)
}

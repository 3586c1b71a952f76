//! ## What it does
//! Flags an evaluation loop that runs a model with autograd recording and keeps its outputs:
//! appends them to a list that outlives the iteration, stores them in a dict, adds them to a
//! running total, or concatenates them onto a tensor (`preds = torch.cat([preds, out])`, also
//! as `out if preds is None else torch.cat(...)`), while nothing backpropagates through them (no `.backward()`, optimizer step or
//! `torch.autograd.grad` in the function, or only in another loop, as in a `fit()` with a
//! validation loop) and no `no_grad`/`inference_mode` is in effect. An evaluation loop is one at
//! module level or in a function named like evaluation (`eval`, `valid`, `test`, `predict`,
//! `infer`, `benchmark`, `embed`, `extract`, `score`) or calling `.eval()`, outside the methods
//! of a module class (a model's `generate` or `decode` may be trained through); code that
//! collects outputs for a later backward (an RL rollout filling `self.log_probs`, a helper
//! returning stacked outputs) is left alone. Reported once per loop, at the loop header.
//!
//! ## Why is this bad?
//! With grad on, every model call records a graph that saves the activations its backward pass
//! would need. A training step frees them with `.backward()`; an evaluation or inference loop
//! never does, so each kept output holds its whole graph with every saved activation: memory
//! grows with each batch, often by far more than the outputs themselves. `model.eval()` does not
//! help: it switches dropout and batch norm to inference behaviour but leaves autograd on. Only
//! `torch.no_grad()` or `torch.inference_mode()` (as a `with` block or a decorator) stops the
//! recording, and it makes the loop faster too.
//!
//! ## Example
//! ```python
//! def evaluate(model, loader):
//!     model.eval()
//!     predictions = []
//!     for x, _ in loader:
//!         predictions.append(model(x))
//!     return torch.cat(predictions)
//! ```
//!
//! ## Use instead
//! ```python
//! @torch.no_grad()
//! def evaluate(model, loader):
//!     model.eval()
//!     predictions = []
//!     for x, _ in loader:
//!         predictions.append(model(x))
//!     return torch.cat(predictions)
//! ```
//!
//! ## Fix safety
//! The fix adds `@torch.no_grad()` above the function (when the file imports `torch`). It is
//! unsafe: a caller that backpropagates through the returned outputs would silently get no
//! gradients.
//!
//! ## Stays silent on
//! Loops under `torch.no_grad()`/`torch.inference_mode()`/`set_grad_enabled(False)` (block or
//! decorator); functions that call `.backward()`, step an optimizer or call `autograd.grad`
//! (unless in another loop, on values this loop does not keep); outputs cut with `.item()`,
//! `.detach()`, `.tolist()`, `.argmax()`...; containers created or cleared in each iteration; a
//! module's `forward`; functions whose name does not say evaluation and that never call `.eval()`
//! (their outputs may be backpropagated elsewhere); Lightning's
//! `validation_step`/`test_step`/`predict_step`, which run under `no_grad` already.

use ruff_python_ast::{Expr, ExprCall, Operator, Stmt};
use ruff_text_size::{Ranged, TextRange};

use crate::checker::{Checker, Lifetime};
use crate::diagnostic::{Diagnostic, Edit, Fix};
use crate::registry::Rule;
use crate::rules::helpers::{concat_function, refers_to, until, unwrap_result};
use crate::semantic::names::{dotted, is_dotted};
use crate::semantic::value::Value;

const STORE_METHODS: &[&str] = &["append", "extend", "insert", "add", "appendleft"];

/// Function names that say "evaluation". Model methods that may be trained through
/// (`decode`, `generate`, `sample`) do not; nor does any method of a module class.
const EVAL_WORDS: &[&str] = &[
    "eval",
    "valid",
    "test",
    "predict",
    "infer",
    "benchmark",
    "embed",
    "extract",
    "score",
];

pub(crate) fn on_loop(_checker: &mut Checker, _stmt: &Stmt) {}

fn eligible(checker: &Checker) -> bool {
    checker.grad_enabled() && checker.in_loop()
}

/// `outputs.append(model(x))` into a container that outlives the iteration.
pub(crate) fn call(checker: &mut Checker, call: &ExprCall) {
    if !eligible(checker) {
        return;
    }
    let Expr::Attribute(attr) = &*call.func else {
        return;
    };
    let method = attr.attr.as_str();
    if !STORE_METHODS.contains(&method) {
        return;
    }
    let skip = usize::from(method == "insert");
    let Some(value) = call
        .arguments
        .args
        .iter()
        .skip(skip)
        .map(|a| checker.value(a))
        .find(Value::has_graph)
    else {
        return;
    };
    let Some(lifetime) = checker.lifetime(&attr.value) else {
        return;
    };
    if checker.reset_in_iteration(&lifetime.key) {
        return;
    }
    let kept = format!(
        "each output it keeps in `{}` (line {})",
        lifetime.key,
        checker.line(call.start())
    );
    report(checker, &value, &kept, &lifetime);
}

/// How a statement keeps an iteration's output.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kept {
    /// `total += out`, `total = total + out`.
    Total,
    /// `preds = torch.cat([preds, out])`.
    Concat,
    /// `preds[i] = out`.
    Entry,
}

/// The element a concatenation adds to `key`, when the value rebuilds `key` from itself:
/// `torch.cat([key, out])`, also behind a first-time test (`out if key is None else
/// torch.cat([key, out])`) or sliced.
fn concatenated<'a>(checker: &Checker, value: &'a Expr, key: &str) -> Option<&'a Expr> {
    let branches: Vec<&Expr> = match value {
        Expr::If(e) => vec![&e.body, &e.orelse],
        v => vec![v],
    };
    branches.into_iter().find_map(|b| {
        let Expr::Call(call) = unwrap_result(b).0 else {
            return None;
        };
        concat_function(checker, call)?;
        let elts = match call.arguments.args.first()? {
            Expr::List(l) => &l.elts,
            Expr::Tuple(t) => &t.elts,
            _ => return None,
        };
        if !elts.iter().any(|e| refers_to(e, key)) {
            return None;
        }
        elts.iter().find(|e| !refers_to(e, key))
    })
}

/// `total += criterion(model(x), y)`, `total = total + ...`, `preds = torch.cat([preds,
/// model(x)])`, `preds[i] = model(x)`.
pub(crate) fn stmt(checker: &mut Checker, stmt: &Stmt) {
    if !eligible(checker) {
        return;
    }
    let (container, value_expr, accumulates) = match stmt {
        Stmt::AugAssign(aug)
            if matches!(
                aug.op,
                Operator::Add | Operator::Sub | Operator::Mult | Operator::Div
            ) =>
        {
            (&*aug.target, &*aug.value, Kept::Total)
        }
        Stmt::Assign(assign) if assign.targets.len() == 1 => {
            let target = &assign.targets[0];
            match target {
                Expr::Subscript(sub) => {
                    if !checker.key_changes_per_iteration(&sub.slice) {
                        return;
                    }
                    (&*sub.value, &*assign.value, Kept::Entry)
                }
                t => {
                    let Some(key) = dotted(t) else { return };
                    match &*assign.value {
                        Expr::BinOp(bin) if is_dotted(&bin.left, &key) => {
                            (t, &*bin.right, Kept::Total)
                        }
                        Expr::BinOp(bin) if is_dotted(&bin.right, &key) => {
                            (t, &*bin.left, Kept::Total)
                        }
                        v => match concatenated(checker, v, &key) {
                            Some(added) => (t, added, Kept::Concat),
                            None => return,
                        },
                    }
                }
            }
        }
        _ => return,
    };
    let value = checker.value(value_expr);
    if !value.has_graph() {
        return;
    }
    let Some(lifetime) = checker.lifetime(container) else {
        return;
    };
    if accumulates == Kept::Entry && checker.reset_in_iteration(&lifetime.key) {
        return;
    }
    let (key, line) = (&lifetime.key, checker.line(stmt.start()));
    let kept = match accumulates {
        Kept::Total => format!(
            "the running total `{key}` (line {line}) links to the output of every iteration, and \
             each"
        ),
        Kept::Concat => format!(
            "`{key}`, concatenated with each output (line {line}), links to the output of every \
             iteration, and each"
        ),
        Kept::Entry => format!("each output it keeps in `{key}` (line {line})"),
    };
    report(checker, &value, &kept, &lifetime);
}

fn report(checker: &mut Checker, value: &Value, kept: &str, lifetime: &Lifetime) {
    let Some(origin) = value.origin() else {
        return;
    };
    if origin.backpropagated || grad_disabled_globally(checker) {
        return;
    }
    if !evaluates(checker) {
        return;
    }
    let until = &until(checker, lifetime);
    // A function that trains in another loop (`fit()` with a validation loop) still has an
    // evaluation loop, as long as what this loop keeps is never backpropagated.
    let trains = checker.function_trains();
    if trains && checker.consumed_by_backward(&lifetime.key) {
        return;
    }
    // The loop that calls the model: the innermost one around the graph's origin.
    let Some(frame) = checker
        .loops()
        .iter()
        .rev()
        .find(|l| l.stmt.range().contains(origin.offset))
    else {
        return;
    };
    if frame.facts.calls_backward || frame.facts.steps_optimizer {
        return;
    }
    let header = header_range(frame.stmt);
    let scope = match checker.function() {
        Some(_) if trains => "this loop".to_string(),
        Some(f) => format!("`{}()`", f.name.as_str()),
        None => "this module".to_string(),
    };
    let message = format!(
        "This loop runs `{}` ({}) with autograd recording: {scope} never calls \
         `.backward()`, an optimizer step or `autograd.grad` on what it keeps, and nothing turns \
         grad off \
         (`model.eval()` does not), so {kept} carries its whole graph with every saved activation, \
         one per iteration, {until}; run the loop under `torch.no_grad()` or \
         `torch.inference_mode()`",
        origin.what,
        crate::rules::helpers::where_made(checker, origin),
    );
    let mut diagnostic = Diagnostic::new(Rule::LS009, message, header);
    // Decorating a function that also trains would turn its training off.
    if !trains {
        if let Some(fix) = no_grad_decorator(checker) {
            diagnostic = diagnostic.with_fix(fix);
        }
    }
    checker.report(diagnostic);
}

/// Is this an evaluation loop rather than code that collects outputs for a later backward
/// (`def unroll(model, xs)`, an RL agent's `collect_rollout` filling `self.log_probs` for
/// `learn()`)? Module-level loops are; in a function, it must look like evaluation: named so, or
/// calling `.eval()`. A module's `forward` never is.
fn evaluates(checker: &Checker) -> bool {
    let Some(def) = checker.function() else {
        return true;
    };
    let name = def.name.as_str();
    if checker.in_module_class() {
        return false;
    }
    let lower = name.to_ascii_lowercase();
    EVAL_WORDS.iter().any(|w| lower.contains(w)) || checker.text(def.range()).contains(".eval()")
}

/// `torch.set_grad_enabled(False)` as a statement of its own turns grad off for what follows.
fn grad_disabled_globally(checker: &Checker) -> bool {
    checker.source.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with("torch.set_grad_enabled(False)")
            || l.starts_with("torch.autograd.set_grad_enabled(False)")
    })
}

/// `for x in loader` / `while cond`: the header, not the body.
fn header_range(stmt: &Stmt) -> TextRange {
    match stmt {
        Stmt::For(f) => TextRange::new(f.start(), f.iter.end()),
        Stmt::While(w) => TextRange::new(w.start(), w.test.end()),
        s => s.range(),
    }
}

/// `@torch.no_grad()` above the enclosing function, when the file imports `torch` by that name.
fn no_grad_decorator(checker: &Checker) -> Option<Fix> {
    let def = checker.function()?;
    let imports_torch = checker.source.lines().any(|l| {
        l.trim_start()
            .strip_prefix("import ")
            .is_some_and(|rest| rest.split(',').any(|m| m.trim() == "torch"))
    });
    if !imports_torch {
        return None;
    }
    let start = def.start();
    let line_start = checker.source[..usize::from(start)]
        .rfind('\n')
        .map_or(0, |i| i + 1);
    let indent = &checker.source[line_start..usize::from(start)];
    if !indent.chars().all(char::is_whitespace) {
        return None;
    }
    Some(Fix::unsafe_edit(
        format!("Add `@torch.no_grad()` to `{}()`", def.name.as_str()),
        vec![Edit::insertion(
            start,
            format!("@torch.no_grad()\n{indent}"),
        )],
    ))
}

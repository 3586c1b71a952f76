//! ## What it does
//! Flags a graph-carrying value (or a dict/tuple holding one) put into a container that outlives
//! the iteration: `.append/.extend/.insert/.add`, `c[k] = x` with a key that changes per
//! iteration, tuple-unpacking into subscripts, `c += [x]`, or a `push`/`store` call on a
//! long-lived buffer, in code that runs once per training iteration.
//!
//! ## Why is this bad?
//! Each stored tensor keeps its autograd graph alive: after `.backward()` that is the chain of
//! autograd nodes, before it (or in an evaluation loop with grad on) the whole graph with every
//! saved activation. One entry per step means memory that grows with every step. In one of our
//! users' runs, 3,072 loss tensors per generation exhausted 175 GB of RAM by generation 7.
//!
//! ## Example
//! ```python
//! def train(model, loader, optimizer, criterion):
//!     losses = []
//!     for x, y in loader:
//!         loss = criterion(model(x), y)
//!         optimizer.zero_grad()
//!         loss.backward()
//!         optimizer.step()
//!         losses.append(loss)
//!     return sum(l.item() for l in losses) / len(losses)
//! ```
//!
//! ## Use instead
//! ```python
//! def train(model, loader, optimizer, criterion):
//!     losses = []
//!     for x, y in loader:
//!         loss = criterion(model(x), y)
//!         optimizer.zero_grad()
//!         loss.backward()
//!         optimizer.step()
//!         losses.append(loss.item())
//!     return sum(losses) / len(losses)
//! ```
//!
//! ## Fix safety
//! The fix stores `x.detach()`: the same values without the graph (offered when the stored value
//! is a tensor, or a tuple or list written out whose graph-carrying elements are tensors: each of
//! those is detached; not for a dict). It is safe only when every other use of the container is
//! logging, printing, counting or arithmetic that ends in numbers
//! (`print(sum(x.item() for x in losses))`, `len(...)`, an f-string): nothing that might need the
//! graph sees the change. An attribute read through another object elsewhere in the file
//! (`log.losses` in `main()`) is followed there. A value a method receives as a parameter is a
//! tensor when every call of the method in the file passes one (or, where no call in the file
//! passes it, every call in the project's other files: `meter.update(loss)`). When the
//! container is
//! returned, passed to a function, fed to a loss or a module, or backpropagated, the same edit
//! is offered as an unsafe fix.
//!
//! Where every stored graph-carrying value is a 0-d tensor (a loss, a `.mean()`) and nothing
//! reads the container but to print, log or count it (`print(f"{sum(losses) / len(losses)}")`,
//! `len(losses)`, `writer.add_scalar("loss", l)`), the fix stores `x.item()` instead, also
//! safe: a kept 0-d tensor still costs some KiB of resident memory per step (its allocations
//! among the step's freed ones), a float 24 bytes, so `.detach()` would leave a smaller leak
//! where `.item()` leaves none. Floats differ from tensors in what is made of them (their sum
//! is a float64, not the tensors' float32; they have no tensor methods), so any other reader
//! keeps the fix at `.detach()`: a comparison or a branch on the values, a torch function
//! (`torch.stack(losses)`), a tensor method on an element (`x.item()`), a value returned or
//! handed on, a container that is a parameter, or the attribute of a class other files use.
//! `.item()` waits for the GPU once per step.
//!
//! ## Stays silent on
//! Gradient accumulation consumed by `.backward()` in the same step, or by a method of the class
//! (a REINFORCE agent's `log_probs`); a module's own method collecting its per-timestep outputs
//! in a local list; values stored under `torch.no_grad()`/`inference_mode()`; detached values;
//! containers created or cleared in the same iteration (a `reset()` called under
//! `if step % n == 0:` runs once every n iterations, as an outer loop's body does: what the
//! container keeps until then is reported); a call of a method of a class of the same file
//! (`collector.add(x)`: the method's own store is reported, once); loops that neither backpropagate nor step
//! an optimizer (a loss built from parts, outputs gathered for the caller; evaluation loops with
//! autograd on are LS009's); code that does not run once per training iteration (a loop over
//! layers, heads or time steps of one forward pass, whose graph dies with the step; set-up code;
//! code that runs once, as under `if step == 0:` or `if self.x is None:`, or only with a
//! debugging option on).

use ruff_python_ast::{Expr, ExprCall, Stmt};
use ruff_text_size::Ranged;

use crate::checker::Checker;
use crate::diagnostic::Diagnostic;
use crate::registry::Rule;
use crate::rules::helpers::{
    append_call, called_on_graphs, detach_fix, detached_text, item_fix, origin_phrase, retained,
    short, until,
};
use crate::semantic::mutation::stored_values;
use crate::semantic::names::dotted;
use crate::semantic::value::{Graph, Kind, Origin, Value};

/// `losses.append(x)` where the function backpropagates an entry of `losses`
/// (`losses[-1].backward()`): what goes in is such an entry, so it carries a graph, whatever the
/// analysis could tell of where it came from (a loss function passed in, a callback's result).
fn entry_of_backpropagated<'e>(
    checker: &Checker,
    receiver: &Expr,
    args: &[&'e Expr],
) -> Option<(&'e Expr, Value)> {
    let key = dotted(receiver)?;
    let facts = &checker.scope().body_facts;
    if !checker.grad_enabled() || !matches!(facts.backwarded_within.get(&key), Some(None)) {
        return None;
    }
    let arg = *args
        .iter()
        .find(|a| checker.value(a).graph == Graph::Unknown)?;
    let origin = Origin {
        is_loss: true,
        backpropagated: !facts.retained_within.contains(&key),
        ..Origin::new(short(checker, arg), arg.start())
    };
    Some((
        arg,
        Value {
            graph: Graph::Yes(std::rc::Rc::new(origin)),
            kind: Kind::Tensor,
            ..Default::default()
        },
    ))
}

pub(crate) fn call(checker: &mut Checker, call: &ExprCall) {
    let Some((method, args)) = stored_values(call) else {
        return;
    };
    let Expr::Attribute(attr) = &*call.func else {
        return;
    };
    let Some((stored, value)) = args
        .iter()
        .map(|a| (*a, checker.value(a)))
        .find(|(_, v)| v.has_graph())
        .or_else(|| entry_of_backpropagated(checker, &attr.value, &args))
    else {
        return;
    };
    // `push`/`store` on a user-defined buffer object: the receiver itself is the container.
    let receiver = &*attr.value;
    // ... unless its class is this file's and defines the method: what the method keeps, and
    // for how long, is seen in its body (reported there, once).
    if checker.class_of(receiver).is_some_and(|class| {
        checker.facts.class(&class).is_some_and(|c| {
            c.methods.contains(method)
                || c.in_file_bases.iter().any(|b| {
                    checker
                        .facts
                        .class(b)
                        .is_some_and(|b| b.methods.contains(method))
                })
        })
    }) {
        return;
    }
    // `self.skip_add.add(out)` is a module's arithmetic (`FloatFunctional`), not a store.
    if checker.value(receiver).kind == Kind::Module {
        return;
    }
    let Some(lifetime) = checker.keeps_graphs(receiver) else {
        return;
    };
    if builds_model_output(checker, &lifetime) {
        return;
    }
    let message = format!(
        "`{}.{}({})` stores a value that carries {}: `{}` holds one graph per iteration ({}) {}",
        short(checker, receiver),
        method,
        short(checker, stored),
        origin_phrase(checker, &value),
        lifetime.key,
        retained(checker, &value),
        until(checker, &lifetime),
    );
    let mut diagnostic = Diagnostic::new(Rule::LS002, message, call.range());
    if let Some(fix) = item_fix(checker, &lifetime.key, call.range(), stored) {
        diagnostic = diagnostic.with_fix(fix);
    } else if value.is_tensor() && !matches!(stored, Expr::Tuple(_) | Expr::Dict(_) | Expr::List(_))
    {
        diagnostic = diagnostic.with_fix(detach_fix(
            checker,
            &lifetime.key,
            call.range(),
            format!(
                "Store `{}` (or `.item()` for a number)",
                detached_text(checker, stored)
            ),
            append_call(checker, stored, "detach"),
        ));
    } else if let Some((shown, edits)) = matches!(stored, Expr::Tuple(_) | Expr::List(_))
        .then(|| called_on_graphs(checker, stored, "detach", false))
        .flatten()
    {
        diagnostic = diagnostic.with_fix(detach_fix(
            checker,
            &lifetime.key,
            call.range(),
            format!("Store `{shown}` (or `.item()`s for numbers)"),
            edits,
        ));
    }
    checker.report(diagnostic);
}

pub(crate) fn stmt(checker: &mut Checker, stmt: &Stmt) {
    match stmt {
        Stmt::Assign(assign) => {
            for target in &assign.targets {
                match (target, &*assign.value) {
                    (Expr::Tuple(t), Expr::Tuple(v)) if t.elts.len() == v.elts.len() => {
                        for (te, ve) in t.elts.iter().zip(v.elts.iter()) {
                            subscript_store(checker, te, ve);
                        }
                    }
                    (Expr::Tuple(t), value) => {
                        for te in &t.elts {
                            subscript_store(checker, te, value);
                        }
                    }
                    (target, value) => subscript_store(checker, target, value),
                }
            }
        }
        Stmt::AugAssign(aug) => {
            let Expr::List(list) = &*aug.value else {
                return;
            };
            let Some(elt) = list.elts.iter().find(|e| checker.value(e).has_graph()) else {
                return;
            };
            let value = checker.value(elt);
            let Some(lifetime) = checker.keeps_graphs(&aug.target) else {
                return;
            };
            let message = format!(
                "`{} += [...]` stores `{}`, which carries {}: `{}` holds one graph per iteration ({}) {}",
                short(checker, &aug.target),
                short(checker, elt),
                origin_phrase(checker, &value),
                lifetime.key,
                retained(checker, &value),
                until(checker, &lifetime),
            );
            let mut diagnostic = Diagnostic::new(Rule::LS002, message, stmt.range());
            if let Some(fix) = item_fix(checker, &lifetime.key, stmt.range(), elt) {
                diagnostic = diagnostic.with_fix(fix);
            } else if value.is_tensor() {
                diagnostic = diagnostic.with_fix(detach_fix(
                    checker,
                    &lifetime.key,
                    stmt.range(),
                    format!("Store `{}`", detached_text(checker, elt)),
                    append_call(checker, elt, "detach"),
                ));
            }
            checker.report(diagnostic);
        }
        _ => {}
    }
}

/// `c[k] = x` with a key that changes per iteration grows `c` by one graph per step.
fn subscript_store(checker: &mut Checker, target: &Expr, value_expr: &Expr) {
    let Expr::Subscript(sub) = target else { return };
    let value = checker.value(value_expr);
    if !value.has_graph() {
        return;
    }
    if !checker.key_changes_per_iteration(&sub.slice) {
        return;
    }
    // Writing into a preallocated tensor copies the values in (a graph edge, not a list).
    if checker.value(&sub.value).is_tensor_like() {
        return;
    }
    let Some(lifetime) = checker.keeps_graphs(&sub.value) else {
        return;
    };
    if builds_model_output(checker, &lifetime) {
        return;
    }
    let Some(container) = dotted(&sub.value) else {
        return;
    };
    let message = format!(
        "`{}[{}] = {}` stores a new entry per iteration that carries {}: `{}` holds one graph per iteration ({}) {}",
        container,
        short(checker, &sub.slice),
        short(checker, value_expr),
        origin_phrase(checker, &value),
        lifetime.key,
        retained(checker, &value),
        until(checker, &lifetime),
    );
    let mut diagnostic = Diagnostic::new(
        Rule::LS002,
        message,
        target.range().cover(value_expr.range()),
    );
    let site = target.range().cover(value_expr.range());
    if let Some(fix) = item_fix(checker, &lifetime.key, site, value_expr) {
        diagnostic = diagnostic.with_fix(fix);
    } else if value.is_tensor() {
        diagnostic = diagnostic.with_fix(detach_fix(
            checker,
            &lifetime.key,
            site,
            format!("Store `{}`", detached_text(checker, value_expr)),
            append_call(checker, value_expr, "detach"),
        ));
    }
    checker.report(diagnostic);
}

/// A module's own method collecting per-timestep outputs in a local list (`outputs.append(h)`
/// then `torch.stack(outputs)`): the graph is the model's output and must stay.
fn builds_model_output(checker: &Checker, lifetime: &crate::checker::Lifetime) -> bool {
    lifetime.holder == crate::checker::Holder::OuterLocal && checker.in_module_class()
}

//! ## What it does
//! Flags a running total that adds graph-carrying tensors across iterations: `total += loss`,
//! `total = total + loss`, `total.add_(loss)` (also through a helper of the file, or of another
//! file of the project, that does it to its parameter, `accumulate(total, loss)`),
//! `stats[k] += loss`, `self.total += loss`, where the total outlives the iteration (bound before the loop, an attribute or a global) and the statement runs once per
//! training iteration (in a loop that trains or goes through data, or in a function that runs
//! once per step). A total reset only when a logging window ends (`if step % 100 == 0: total =
//! 0`) keeps the window's graphs until then, as one reset every epoch keeps the epoch's.
//!
//! ## Why is this bad?
//! Adding a tensor that carries an autograd graph builds a new graph node that points at both
//! operands. The total then links to the graph of every iteration it ever added: memory grows
//! with each step until the total is dropped, and a later `.backward()` through it would traverse
//! all of them. This is the `total_loss += loss` leak from the PyTorch FAQ.
//!
//! ## Example
//! ```python
//! total_loss = 0
//! for x, y in loader:
//!     loss = criterion(model(x), y)
//!     loss.backward()
//!     optimizer.step()
//!     total_loss += loss
//! ```
//!
//! ## Use instead
//! ```python
//! total_loss = 0.0
//! for x, y in loader:
//!     loss = criterion(model(x), y)
//!     loss.backward()
//!     optimizer.step()
//!     total_loss += loss.item()
//! ```
//!
//! ## Fix safety
//! The fix adds `.detach()` to the added value (offered when it is a tensor). The total keeps its
//! type and its value; only the graph is dropped. It is safe only when every other use of the
//! total is logging, printing, counting or arithmetic that ends in numbers (`print(total / n)`,
//! `total.item()`, an f-string): nothing that might need the graph sees the change. When the
//! total is returned, passed to a function, fed to a loss or a module, or backpropagated, the
//! same edit is offered as an unsafe fix.
//!
//! ## Stays silent on
//! A total re-created inside the iteration and backpropagated (gradient accumulation); a total
//! made afresh by a call that steps the optimizer once, after `for _ in range(n)` rounds of
//! micro-batches that only backpropagate (one training step's micro-batches); a total
//! that a method of the class backpropagates; `loss.item()`; tuples and lists concatenated
//! (`outputs += (h,)`, a store); statistics named as such (`mean`, `ema`: LS011); code under
//! `torch.no_grad()`; code that does not run once per training iteration (a loop over layers,
//! heads or time steps of one forward pass, whose graph dies with the step; set-up code; code
//! that runs once, as under `if step == 0:` or `if self.x is None:`, or only with a debugging
//! option on); a module's own state that its output is computed from and another method of the
//! class resets (a spiking neuron's `self.v += dv` before `return self.spiking()`, cleared by
//! `reset()` between samples: the computation backpropagated through time, not a log); a local
//! summing the elements of a collection the caller passed (`for aux in aux_losses: total +=
//! aux`), whose graphs the caller's collection holds anyway.

use ruff_python_ast::{Expr, Operator, Stmt};
use ruff_text_size::Ranged;

use crate::checker::{Checker, Holder};
use crate::diagnostic::Diagnostic;
use crate::registry::Rule;
use crate::rules::helpers::{
    append_call, detach_fix, detached_text, origin_phrase, retained, short, until,
};
use crate::semantic::names::{dotted, is_dotted};

pub(crate) fn stmt(checker: &mut Checker, stmt: &Stmt) {
    if !checker.grad_enabled() {
        return;
    }

    // A helper of this file that adds one of its parameters into another in place, when the
    // statement calls it: `accumulate(total, loss)` with `def accumulate(buf, v): buf.add_(v)`.
    let mut through: Option<(String, String)> = None;
    let (target, added) = match stmt {
        Stmt::AugAssign(aug)
            if matches!(
                aug.op,
                Operator::Add | Operator::Sub | Operator::Mult | Operator::Div
            ) =>
        {
            (&*aug.target, &*aug.value)
        }
        Stmt::Assign(assign) if assign.targets.len() == 1 => {
            let target = &assign.targets[0];
            let Expr::BinOp(bin) = &*assign.value else {
                return;
            };
            let Some(key) = dotted(target) else { return };
            // `acc = acc + x` or `acc = x + acc`.
            if is_dotted(&bin.left, &key) {
                (target, &*bin.right)
            } else if is_dotted(&bin.right, &key) {
                (target, &*bin.left)
            } else {
                return;
            }
        }
        // `total.add_(loss)`, `total.sub_(x)`: an in-place `+=` on the tensor.
        Stmt::Expr(e) => {
            let Expr::Call(call) = &*e.value else { return };
            if let Some((i, j, line)) = in_place_helper(checker, call) {
                let (Some(t), Some(a)) = (call.arguments.args.get(i), call.arguments.args.get(j))
                else {
                    return;
                };
                if dotted(t).is_none() {
                    return;
                }
                through = Some((short(checker, &call.func), line));
                (t, a)
            } else {
                let Expr::Attribute(attr) = &*call.func else {
                    return;
                };
                let ([added], true) = (
                    &*call.arguments.args,
                    matches!(attr.attr.as_str(), "add_" | "sub_") && dotted(&attr.value).is_some(),
                ) else {
                    return;
                };
                // An in-place update of state on the object or a global is a running statistic's
                // (LS011 names it so).
                let state = crate::semantic::facts::self_attr(&attr.value).is_some()
                    || dotted(&attr.value).is_some_and(|k| checker.facts.globals.contains_key(&k));
                if state && checker.enabled(Rule::LS011) {
                    return;
                }
                (&*attr.value, added)
            }
        }
        _ => return,
    };
    let value = checker.value(added);
    // A tuple or list concatenated (`outputs += (h,)`) is a store, not a total.
    if !value.has_graph()
        || value.is_container()
        || matches!(added, Expr::List(_) | Expr::ListComp(_) | Expr::Tuple(_))
    {
        return;
    }
    if module_state(checker, target) {
        return;
    }
    let Some(lifetime) = checker.keeps_graphs(target) else {
        return;
    };
    if sums_a_parameter(checker, added, &lifetime.holder) {
        return;
    }
    let container_key = match target {
        Expr::Subscript(sub) => dotted(&sub.value),
        t => dotted(t),
    };
    let Some(container_key) = container_key else {
        return;
    };
    // Running statistics (`self.mean`, `M2`, `ema`) have their own rule, LS011, unless a helper
    // updates them (LS011 reads the update where it is written).
    if checker.enabled(Rule::LS011)
        && through.is_none()
        && crate::semantic::names::is_stat_name(
            container_key.rsplit('.').next().unwrap_or(&container_key),
        )
    {
        return;
    }

    let how = match &through {
        Some((helper, at)) => format!(" (in place, through `{helper}()` at {at})"),
        None => String::new(),
    };
    let message = format!(
        "`{}` adds `{}`{how}, which carries {}: `{}` holds one graph per iteration ({}) {}",
        short(checker, target),
        short(checker, added),
        origin_phrase(checker, &value),
        container_key,
        retained(checker, &value),
        until(checker, &lifetime),
    );
    let mut diagnostic = Diagnostic::new(Rule::LS001, message, stmt.range());
    // `.detach()` needs a tensor; it is safe when the total is only ever shown or counted.
    if value.is_tensor() {
        diagnostic = diagnostic.with_fix(detach_fix(
            checker,
            &container_key,
            stmt.range(),
            format!(
                "Add `{}` instead (or `.item()` for a number)",
                detached_text(checker, added)
            ),
            append_call(checker, added, "detach"),
        ));
    }
    checker.report(diagnostic);
}

/// Is the added value an element of a collection the caller passed (`for loss in losses:
/// total += loss`), summed into a local of the function? The caller's collection holds every
/// graph the total reaches, for longer than the call: the total keeps nothing more.
fn sums_a_parameter(checker: &Checker, added: &Expr, holder: &Holder) -> bool {
    let Expr::Name(name) = added else {
        return false;
    };
    if *holder != Holder::OuterLocal {
        return false;
    }
    let (params, name) = (&checker.scope().params, name.id.as_str());
    // The element as the loop gives it: not rebound in the loop's body.
    checker.loops().iter().any(|l| {
        let Stmt::For(f) = l.stmt else { return false };
        crate::semantic::scan::keys_in(&f.target).contains(name)
            && matches!(&*f.iter, Expr::Name(n) if params.contains(n.id.as_str()))
            && !crate::semantic::facts::rebound_in(&f.body, name)
    })
}

/// A function of this file or another of the project (called by name) that adds one
/// positional parameter into another in place (`buf.add_(value)`, `buf.sub_(value)`): the
/// positions (target, added) and where ("line 6", or "utils.py:6").
fn in_place_helper(
    checker: &Checker,
    call: &ruff_python_ast::ExprCall,
) -> Option<(usize, usize, String)> {
    let Expr::Name(n) = &*call.func else {
        return None;
    };
    if !checker.facts.functions.contains(n.id.as_str()) {
        let (i, j, at) = checker.semantic().external.adds.get(n.id.as_str())?;
        return Some((*i, *j, at.clone()));
    }
    let def = checker.semantic().suite().iter().find_map(|s| match s {
        Stmt::FunctionDef(f) if f.name.as_str() == n.id.as_str() => Some(f),
        _ => None,
    })?;
    let (i, j, at) = crate::semantic::scan::in_place_add(def)?;
    Some((i, j, format!("line {}", checker.line(at))))
}

/// `self.v += dv` in a module's method whose output is computed from `self.v` (directly, or
/// through a method of the class that reads it: `return self.spiking()`), when another method
/// of the class resets it: the module's own state over the steps of one forward pass (a
/// spiking neuron's membrane potential, reset between samples), part of the computation that
/// is backpropagated, not a total kept on the side.
fn module_state(checker: &Checker, target: &Expr) -> bool {
    let Some(attr) = crate::semantic::facts::self_attr(target) else {
        return false;
    };
    let (Some(def), Some(class)) = (checker.function(), checker.class()) else {
        return false;
    };
    if !checker.in_module_class() || !checker.class_rebinds_attr(attr, def.name.as_str()) {
        return false;
    }
    let key = format!("self.{attr}");
    let read = crate::semantic::scan::returned_keys(&def.body);
    if read.contains(&key) {
        return true;
    }
    // A method of the class, or of a base of this file, that the output calls and that reads
    // the state.
    let bases: Vec<&ruff_python_ast::StmtClassDef> = checker
        .class_facts()
        .into_iter()
        .flat_map(|c| c.in_file_bases.iter())
        .filter_map(|b| {
            checker.semantic().suite().iter().find_map(|s| match s {
                Stmt::ClassDef(c) if c.name.as_str() == b => Some(c),
                _ => None,
            })
        })
        .collect();
    read.iter()
        .filter_map(|k| k.strip_prefix("self."))
        .any(|m| {
            std::iter::once(class)
                .chain(bases.iter().copied())
                .any(|c| {
                    c.body.iter().any(|s| {
                        matches!(s, Stmt::FunctionDef(f) if f.name.as_str() == m
                    && crate::semantic::scan::mentions_key(&f.body, &key))
                    })
                })
        })
}

//! ## What it does
//! Flags `.clone()`, `.cpu()` and `.to(...)` (also `.cuda()`) of a graph-carrying tensor used as
//! a snapshot without `.detach()` and stored, once per training iteration, into a container that
//! outlives the iteration (`history.append(out.clone())`, `self.best[step] = logits.cpu()`).
//!
//! ## Why is this bad?
//! `.clone()` copies the values but records the copy in the autograd graph (`CloneBackward`);
//! `.cpu()` and `.to(...)` do the same (`ToCopyBackward`). The "snapshot" therefore still points
//! at the graph of the computation that produced it: after `.backward()` the chain of autograd
//! nodes, before it (or in an evaluation loop with grad on) every saved activation. Kept once per
//! step, that is memory that grows with every step. Only `.detach()` (or `.item()`, `.tolist()`,
//! `torch.no_grad()`) cuts the graph.
//!
//! ## Example
//! ```python
//! def train(model, loader, optimizer, criterion):
//!     snapshots = []
//!     for x, y in loader:
//!         out = model(x)
//!         loss = criterion(out, y)
//!         loss.backward()
//!         optimizer.step()
//!         snapshots.append(out.clone())  # still linked to the graph
//!     return snapshots
//! ```
//!
//! ## Use instead
//! ```python
//! def train(model, loader, optimizer, criterion):
//!     snapshots = []
//!     for x, y in loader:
//!         out = model(x)
//!         loss = criterion(out, y)
//!         loss.backward()
//!         optimizer.step()
//!         snapshots.append(out.detach().clone())
//!     return snapshots
//! ```
//!
//! ## Fix safety
//! The fix inserts `.detach()` before the first `.clone()`/`.cpu()`/`.to()` of the chain
//! (`out.clone()` becomes `out.detach().clone()`): the stored values, dtype and device are the
//! same, only the graph is gone. It is safe only when every other use of the container is
//! logging, printing, counting or arithmetic that ends in numbers
//! (`print(sum(x.item() for x in losses))`, `len(...)`, an f-string): nothing that might need the
//! graph sees the change. When the container is returned, passed to a function, fed to a loss or
//! a module, or backpropagated, the same edit is offered as an unsafe fix.
//!
//! ## Stays silent on
//! Receivers known to carry no graph (`x.detach().clone()`, tensors computed under
//! `torch.no_grad()`/`inference_mode()`, data from the loader, parameters); snapshots kept in
//! per-iteration containers or consumed by `.backward()` in the same step; copies written into a
//! preallocated tensor (`buf[i] = out.cpu()`); an attribute or dict entry replaced on each step
//! (`self.last = out.clone()`: it keeps one step's graph, not one per step); snapshots returned
//! to the caller; code that does not run once per training iteration (a loop over layers, heads
//! or time steps of one forward pass, whose graph dies with the step; set-up code; code that runs
//! once, as under `if step == 0:` or `if self.x is None:`, or only with a debugging option on).
//! Where the stored expression is not literally a `.clone()`/`.cpu()`/`.to()` call, LS002 reports
//! the store instead.

use ruff_python_ast::{Expr, ExprCall, Stmt};
use ruff_text_size::{Ranged, TextRange, TextSize};

use crate::checker::{Checker, Lifetime};
use crate::diagnostic::{Diagnostic, Edit};
use crate::registry::Rule;
use crate::rules::helpers::{detach_fix, origin_phrase, retained, short, until};
use crate::semantic::mutation::stored_values;
use crate::semantic::value::{Kind, Value};

/// Container methods that grow it (a buffer class's `push` may detach what it keeps).
const STORE_METHODS: &[&str] = &["append", "insert", "add", "appendleft"];

/// A chain like `out.clone()`, `out.cpu().float()`, `logits[0].to("cpu")`.
struct Snapshot<'e> {
    /// The whole chain (what is stored).
    call: &'e ExprCall,
    /// The expression the chain starts from (`out`).
    base: &'e Expr,
    /// The first copying method of the chain (`clone`).
    method: &'e str,
    /// Where the first method of the chain is named: `.detach()` goes right before it.
    insert_at: TextSize,
}

fn snapshot_chain(expr: &Expr) -> Option<Snapshot<'_>> {
    let Expr::Call(outer) = expr else {
        return None;
    };
    let mut cur = expr;
    let mut first: Option<&str> = None;
    let mut base: Option<&Expr> = None;
    let mut insert_at = TextSize::default();
    while let Expr::Call(call) = cur {
        let Expr::Attribute(attr) = &*call.func else {
            break;
        };
        let m = attr.attr.as_str();
        match m {
            "clone" | "cpu" | "to" | "cuda" => first = Some(m),
            "float" | "double" | "half" | "bfloat16" | "contiguous" => {}
            _ => break,
        }
        base = Some(&*attr.value);
        insert_at = attr.attr.start();
        cur = &attr.value;
    }
    Some(Snapshot {
        call: outer,
        base: base?,
        method: first?,
        insert_at,
    })
}

/// Snapshot chains in a stored expression: the expression itself, or the elements of a
/// dict/tuple/list literal (`{"out": out.clone()}`).
fn snapshots_in(expr: &Expr) -> Vec<Snapshot<'_>> {
    match expr {
        Expr::Dict(d) => d
            .items
            .iter()
            .filter_map(|i| snapshot_chain(&i.value))
            .collect(),
        Expr::Tuple(t) => t.elts.iter().filter_map(snapshot_chain).collect(),
        Expr::List(l) => l.elts.iter().filter_map(snapshot_chain).collect(),
        e => snapshot_chain(e).into_iter().collect(),
    }
}

/// The snapshot carries a graph: its base does, and it is not made under `no_grad`.
fn graph_of(checker: &Checker, snap: &Snapshot) -> Option<Value> {
    let base = checker.value(snap.base);
    if !base.has_graph() {
        return None;
    }
    let whole = checker.value(&Expr::Call(snap.call.clone()));
    whole.has_graph().then_some(base)
}

/// What the kept graph holds. A step method that does not train itself (a framework's
/// `training_step` returns the loss for it to backpropagate) gets the neutral wording.
fn retained_here(checker: &Checker, value: &Value) -> &'static str {
    let step_like = checker
        .function()
        .is_some_and(|f| f.name.as_str().contains("train") || f.name.as_str().ends_with("step"));
    if step_like
        && !checker.function_trains()
        && !checker.in_loop()
        && !value.origin().is_some_and(|o| o.backpropagated)
    {
        "every saved activation until a `.backward()` through it frees them, its chain of \
         autograd nodes after"
    } else {
        retained(checker, value)
    }
}

/// `kept` is (who keeps it, until when). `fix_until`: where the fix's edit may extend to (the
/// end of the storing call), so that LS002's `.detach()` at the end of the stored value, which
/// the same store raises, is not applied on top of it.
fn report(
    checker: &mut Checker,
    snap: &Snapshot,
    value: &Value,
    kept: &(String, String),
    key: &str,
    site: TextRange,
    fix_until: Option<TextSize>,
) {
    let message = format!(
        "`{}` is not a detached snapshot: `.{}()` copies the values but keeps {}; {} ({}) {}",
        short(checker, &Expr::Call(snap.call.clone())),
        snap.method,
        origin_phrase(checker, value),
        kept.0,
        retained_here(checker, value),
        kept.1,
    );
    let edit = match fix_until {
        Some(end) => {
            let range = TextRange::new(snap.insert_at, end);
            Edit::replacement(range, format!("detach().{}", checker.text(range)))
        }
        None => Edit::insertion(snap.insert_at, "detach()."),
    };
    // The chain already calls a tensor method (`.clone()`, `.cpu()`): `.detach()` fits there.
    let fix = detach_fix(
        checker,
        key,
        site,
        format!("Insert `.detach()` before `.{}()`", snap.method),
        vec![edit],
    );
    checker.report(Diagnostic::new(Rule::LS003, message, snap.call.range()).with_fix(fix));
}

fn container_kept(checker: &Checker, lifetime: &Lifetime) -> (String, String) {
    (
        format!("`{}` holds one graph per iteration", lifetime.key),
        until(checker, lifetime),
    )
}

pub(crate) fn call(checker: &mut Checker, call: &ExprCall) {
    let Some((method, args)) = stored_values(call) else {
        return;
    };
    // A buffer class's `push` may detach what it keeps.
    if !STORE_METHODS.contains(&method) {
        return;
    }
    let Expr::Attribute(attr) = &*call.func else {
        return;
    };
    let found: Vec<(Snapshot, Value)> = args
        .iter()
        .flat_map(|a| snapshots_in(a))
        .filter_map(|s| graph_of(checker, &s).map(|v| (s, v)))
        .collect();
    if found.is_empty() {
        return;
    }
    let Some(lifetime) = checker.keeps_graphs(&attr.value) else {
        return;
    };
    let kept = container_kept(checker, &lifetime);
    let fix_until = (found.len() == 1).then(|| call.end());
    for (snap, value) in &found {
        report(
            checker,
            snap,
            value,
            &kept,
            &lifetime.key,
            call.range(),
            fix_until,
        );
    }
}

pub(crate) fn stmt(checker: &mut Checker, stmt: &Stmt) {
    match stmt {
        Stmt::Assign(assign) => {
            for target in &assign.targets {
                assigned(checker, target, &assign.value);
            }
        }
        Stmt::AnnAssign(assign) => {
            if let Some(value) = &assign.value {
                assigned(checker, &assign.target, value);
            }
        }
        _ => {}
    }
}

fn assigned(checker: &mut Checker, target: &Expr, value: &Expr) {
    let found: Vec<(Snapshot, Value)> = snapshots_in(value)
        .into_iter()
        .filter_map(|s| graph_of(checker, &s).map(|v| (s, v)))
        .collect();
    if found.is_empty() {
        return;
    }
    let lifetime = match target {
        Expr::Subscript(sub) => {
            // `buf[i] = out.clone()` writes into a tensor: a different story (CopySlices). A
            // key from a fixed set replaces one entry.
            if matches!(
                checker.value(&sub.value).kind,
                Kind::Tensor | Kind::Output | Kind::Array
            ) || !checker.key_changes_per_iteration(&sub.slice)
            {
                return;
            }
            let Some(lifetime) = checker.keeps_graphs(&sub.value) else {
                return;
            };
            lifetime
        }
        // `self.last = out.clone()` replaces one graph per step: memory does not grow.
        _ => return,
    };
    let kept = container_kept(checker, &lifetime);
    // `c[k] = out.clone()`: LS002 appends `.detach()` right after the value; reach one character
    // past it so that the two fixes overlap and only this one is applied.
    let fix_until = match (target, found.as_slice()) {
        (Expr::Subscript(_), [(snap, _)]) if snap.call.range() == value.range() => checker
            .source
            .get(usize::from(value.end())..)
            .and_then(|rest| rest.chars().next())
            .and_then(|c| TextSize::try_from(c.len_utf8()).ok())
            .map(|n| value.end() + n),
        _ => None,
    };
    let site = target.range().cover(value.range());
    for (snap, v) in &found {
        report(checker, snap, v, &kept, &lifetime.key, site, fix_until);
    }
}

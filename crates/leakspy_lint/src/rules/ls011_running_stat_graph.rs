//! ## What it does
//! Flags running statistics (means, variances, Welford's `M2`, exponential moving averages,
//! baselines) that are updated from values carrying an autograd graph, so the statistic itself
//! becomes part of the graph:
//! - `self.mean = self.mean * m + x.mean(0) * (1 - m)` and other updates computed from the
//!   statistic's previous value, also as one branch of a conditional that starts it
//!   (`ema = loss if ema is None else 0.98 * ema + 0.02 * loss`);
//! - `self.M2 += delta * delta2`, `self.running_var += ...` on statistics;
//! - in-place updates such as `running_mean.mul_(m).add_(x.mean(0), alpha=1 - m)`,
//!   `ema.lerp_(x, w)` or `ema.copy_(ema * d + x * (1 - d))` (a `copy_` of a value made from
//!   the statistic itself: one that replaces it links a single step), and writes into the
//!   statistic's storage (`self.var[:] = ...`);
//! - averages of the weights kept on the object (`self.shadow[name]`, or each entry of
//!   `self.averaged` in a loop over `zip(self.averaged, model.parameters())`) updated in place,
//!   or written back into their entry (`self.shadow[n] = d * self.shadow[n] + (1 - d) * p`),
//!   and the parameters of a copy of the model (`for ema_p, p in zip(ema_model.parameters(),
//!   model.parameters()): ema_p.mul_(d).add_(p, alpha=1 - d)`), from a module's parameters
//!   with autograd on: a parameter requires grad, so the update is
//!   recorded. The parameters are seen as `model.parameters()`, `model.named_parameters()`, a
//!   list of them kept on the object, or a parameter that every caller (in any file of the
//!   project) passes `model.parameters()` to;
//! - statistics returned by a helper with the output and kept by tuple assignment
//!   (`y, self.mean, self.var = batch_norm(h, self.mean, self.var)`).
//!
//! The graph is seen where the update computes it (`h = self.proj(x)`, `values = critic(s)`) and
//! also when the update is computed from a parameter of a function or method that a call in the
//! same file passes a graph-carrying value (`normalizer.update(policy(state))`, or a submodule's
//! `forward` called as `self.norm(self.encoder(x))`).
//!
//! ## Why is this bad?
//! Each update builds a node that points at the batch it came from and at the statistic's
//! previous value, which points at the batch before, and so on: the statistic links to the graph
//! of every batch it has ever seen. Memory grows with every step (with the saved activations of
//! each batch when nothing backpropagates through them), and a loss that uses the statistic
//! backpropagates into all earlier batches. Statistics describe the data; they should not be
//! differentiated through. One of our users' economics-simulation training runs ran out of memory
//! after minutes because its feature normalizer's mean and `M2` were updated from graph-carrying
//! features.
//!
//! ## Example
//! ```python
//! class Normalizer(nn.Module):
//!     def __init__(self, dim):
//!         super().__init__()
//!         self.proj = nn.Linear(dim, dim)
//!         self.mean = torch.zeros(dim)
//!
//!     def forward(self, features):
//!         h = self.proj(features)
//!         self.mean = self.mean * 0.99 + h.mean(0) * 0.01
//!         return h - self.mean
//! ```
//!
//! ## Use instead
//! ```python
//! class Normalizer(nn.Module):
//!     def __init__(self, dim):
//!         super().__init__()
//!         self.proj = nn.Linear(dim, dim)
//!         self.mean = torch.zeros(dim)
//!
//!     def forward(self, features):
//!         h = self.proj(features)
//!         with torch.no_grad():
//!             self.mean = self.mean * 0.99 + h.mean(0) * 0.01
//!         return h - self.mean
//! ```
//!
//! ## Fix safety
//! The fix adds `.detach()` to the graph-carrying inputs of the update. It changes no value,
//! only gradients: a model that backpropagates through its statistics (rare, and then usually
//! only through the current batch's statistics) loses those gradients. So the fix is safe only
//! where no backward pass can reach the statistic: it is on `self` of a class that no other
//! file makes or subclasses, every read of it (and of what is computed from it: locals, other
//! statistics, what the class's methods return) ends in `.detach()`, `.item()`, a comparison,
//! code under `torch.no_grad()` or a result thrown away, and the class's objects are only
//! called or have their methods called (`target = norm(feats).detach()`), never handed on; or
//! it is a local, a global or `self.<attr>` whose every other use is logging, printing or
//! arithmetic that ends in numbers (`running.add_(loss)` read as `running.item()`, as LS001's
//! fix for `running += loss` is judged). Otherwise it is unsafe. No fix is offered when the graph comes in
//! through a parameter (`normalizer.update(features)`): detach the batch statistics where they
//! are computed (`mean_b = mean_b.detach()`), or pass `features.detach()` at the call. Nor is one
//! offered for statistics a helper returns: detaching the helper's inputs would cut the gradient
//! of its output too; detach the statistics it returns.
//!
//! ## Stays silent on
//! Updates under `torch.no_grad()`/`inference_mode()`, from detached values (`x.detach()`,
//! `.item()`), from inputs detached under an option before the update (`if not
//! self.differentiable: inputs = inputs.detach()`: the graph is kept where the author asked), or from inputs the analysis cannot see carrying a graph; a conditional whose
//! branches each take one value whole (`best = loss if loss < best else best` keeps one graph,
//! never a chain); an attribute set afresh earlier in the same call on every path
//! (`self.loss = F.cross_entropy(...)` before `self.loss = (1 - w) * self.loss + w * reg`: a sum
//! of this call's values); counters such as `self.count += x.shape[0]`. A plain `self.total += loss` is reported by LS001 instead when
//! that rule is enabled; a statistic named as one (`mean`, `var`, `M2`, `ema`...) is reported
//! here.

use std::cell::RefCell;
use std::hash::{Hash, Hasher};

use ruff_python_ast::{Expr, ExprCall, Operator, Stmt};
use ruff_text_size::{Ranged, TextRange, TextSize};
use rustc_hash::{FxHashMap, FxHashSet, FxHasher};

use crate::checker::{Checker, Holder};
use crate::diagnostic::{Diagnostic, Edit, Fix};
use crate::registry::Rule;
use crate::rules::helpers::{append_call, detached_text, origin_phrase, short, until};
use crate::semantic::dead_gradient::gradient_unused;
use crate::semantic::facts::self_attr;
use crate::semantic::names::{dotted, is_dotted, is_stat_name, last_segment};
use crate::semantic::scan::{keys_in, visit_block};
use crate::semantic::value::{Kind, Origin, Value};

const IN_PLACE: &[&str] = &[
    "add_", "sub_", "mul_", "div_", "lerp_", "addcmul_", "addcdiv_",
];

pub(crate) fn stmt(checker: &mut Checker, stmt: &Stmt) {
    if !checker.grad_enabled() {
        return;
    }
    let Some((target, key, leaves, form)) = update(checker, stmt) else {
        return;
    };
    let mut inputs: Vec<(&Expr, Value)> = leaves
        .iter()
        .map(|l| (*l, checker.value(l)))
        .filter(|(_, v)| v.has_graph())
        .collect();
    let mut via = None;
    // Only for what already looks like a statistic: the lookup scans the function body.
    let maybe_stat = is_stat_name(last_segment(&key))
        || matches!(form, Form::Weighted | Form::InPlace)
            && (self_attr(target).is_some()
                || state_element(checker, target, stmt).is_some()
                || form == Form::InPlace && parameter_owner(checker, target, stmt).is_some()
                || checker.facts.globals.contains_key(&key));
    if inputs.is_empty() && maybe_stat {
        // The statistic is computed from a parameter: graph-carrying when a call in this file
        // passes a graph there (`normalizer.update(features)`).
        if let Some((leaf, value, note)) = from_graph_param(checker, &leaves) {
            inputs.push((leaf, value));
            via = Some(Via::Argument(note));
        } else if let Some((leaf, value)) = module_parameter(checker, &leaves, stmt) {
            // A module's parameter requires grad: with autograd on, an update from it is
            // recorded, and the statistic (an EMA of the weights) chains every step's update.
            inputs.push((leaf, value));
            via = Some(Via::Parameter);
        }
    }
    report(checker, target, &key, &inputs, via.as_ref(), stmt, form);
}

/// How an operand without a graph of its own makes the update a graph's.
enum Via {
    /// A parameter of the current function that a call of this file passes a graph to: the
    /// note says which call.
    Argument(String),
    /// A module's parameter, which requires grad.
    Parameter,
}

/// What a `for` loop of the current function around `at` binds `name` to: the iterable, and
/// whether `name` is the second of each pair it yields (`for k, v in x.items()`). Through
/// `zip(a, b)`, the argument at `name`'s position.
fn loop_source<'c>(checker: &'c Checker, name: &str, at: TextSize) -> Option<(&'c Expr, bool)> {
    let def = checker.function()?;
    let mut found = None;
    visit_block(&def.body, &mut |s| {
        let Stmt::For(f) = s else { return };
        if !f.body.iter().any(|b| b.range().contains(at)) {
            return;
        }
        match &*f.target {
            Expr::Name(n) if n.id.as_str() == name => found = Some((&*f.iter, false)),
            Expr::Tuple(t) => {
                let Some(i) = t
                    .elts
                    .iter()
                    .position(|e| matches!(e, Expr::Name(n) if n.id.as_str() == name))
                else {
                    return;
                };
                match &*f.iter {
                    Expr::Call(c) if is_dotted(&c.func, "zip") => {
                        if let Some(arg) = c.arguments.args.get(i) {
                            found = Some((arg, false));
                        }
                    }
                    iter if i == 1 && t.elts.len() == 2 => found = Some((iter, true)),
                    _ => {}
                }
            }
            _ => {}
        }
    });
    found
}

/// Does `iter` yield a module's parameters: the values of `x.named_parameters()` (when
/// `second`), or what evaluates to them (`x.parameters()`, a parameter every caller passes them
/// to)?
fn yields_parameters(checker: &Checker, iter: &Expr, second: bool) -> bool {
    if !second {
        return checker.value(iter).kind == Kind::Parameters;
    }
    matches!(iter, Expr::Call(c)
        if matches!(&*c.func, Expr::Attribute(a) if a.attr.as_str() == "named_parameters"))
}

/// The attribute of a container on the object that `target` is an element of:
/// `self.shadow[name]`, or a loop's element of `self.avg` (`for a, p in zip(self.avg, ...)`,
/// `for k, v in self.shadow.items()`, `self.shadow.values()`).
fn state_element(checker: &Checker, target: &Expr, stmt: &Stmt) -> Option<String> {
    match target {
        Expr::Subscript(sub) => self_attr(&sub.value).map(str::to_string),
        Expr::Name(n) => {
            let (iter, second) = loop_source(checker, n.id.as_str(), stmt.start())?;
            if let Some(attr) = self_attr(iter) {
                return (!second).then(|| attr.to_string());
            }
            let Expr::Call(c) = iter else { return None };
            let Expr::Attribute(a) = &*c.func else {
                return None;
            };
            let wanted = if second { "items" } else { "values" };
            (a.attr.as_str() == wanted && c.arguments.is_empty())
                .then(|| self_attr(&a.value).map(str::to_string))
                .flatten()
        }
        _ => None,
    }
}

/// The module whose parameter `target` is, when a loop binds it from that module's
/// `parameters()` or `named_parameters()` (`for ema_p, p in zip(ema.parameters(), ...)`): a
/// copy of a model kept for its average. Updated in place from another module's parameters
/// with autograd on, it joins their graph, and the module keeps it for as long as it lives.
fn parameter_owner<'c>(checker: &'c Checker, target: &Expr, stmt: &Stmt) -> Option<&'c Expr> {
    let Expr::Name(n) = target else { return None };
    let (iter, second) = loop_source(checker, n.id.as_str(), stmt.start())?;
    if !yields_parameters(checker, iter, second) {
        return None;
    }
    let Expr::Call(c) = iter else { return None };
    let Expr::Attribute(a) = &*c.func else {
        return None;
    };
    Some(&a.value)
}

/// An operand that is a parameter of a module, bound by a loop over its `parameters()` (or
/// `named_parameters()`, also through `zip`).
fn module_parameter<'e>(
    checker: &Checker,
    leaves: &[&'e Expr],
    stmt: &Stmt,
) -> Option<(&'e Expr, Value)> {
    leaves.iter().find_map(|leaf| {
        let Expr::Name(n) = leaf else { return None };
        let (iter, second) = loop_source(checker, n.id.as_str(), stmt.start())?;
        if !yields_parameters(checker, iter, second) {
            return None;
        }
        let value = Value::graph(Origin::new(
            checker.text(iter.range()).to_string(),
            iter.start(),
        ));
        Some((*leaf, value))
    })
}

/// A statistic update: its target, key, the operands other than the statistic itself, and its
/// form.
fn update<'s>(
    checker: &Checker,
    stmt: &'s Stmt,
) -> Option<(&'s Expr, String, Vec<&'s Expr>, Form)> {
    match stmt {
        Stmt::Assign(assign) if assign.targets.len() == 1 && assign.targets[0].is_tuple_expr() => {
            // `y, self.mean, self.var = batch_norm(h, self.mean, self.var)`: a helper returns
            // the statistic updated from its previous value and the other arguments.
            let Expr::Tuple(targets) = &assign.targets[0] else {
                return None;
            };
            let Expr::Call(call) = &*assign.value else {
                return None;
            };
            let (target, key) = targets.elts.iter().find_map(|t| {
                let key = dotted(t)?;
                (is_stat_name(last_segment(&key))
                    && call.arguments.args.iter().any(|a| is_dotted(a, &key)))
                .then_some((t, key))
            })?;
            let mut leaves = Vec::new();
            for a in call.arguments.args.iter() {
                if dotted(a).is_none_or(|k| !is_stat_name(last_segment(&k))) {
                    arith_leaves(a, &mut leaves);
                }
            }
            Some((target, key, leaves, Form::Returned))
        }
        Stmt::Assign(assign) if assign.targets.len() == 1 => {
            // `stat[:] = ...` writes the new value into the statistic's own storage.
            let target = match &assign.targets[0] {
                Expr::Subscript(sub) if is_whole_slice(&sub.slice) => &*sub.value,
                t => t,
            };
            let key = state_key(checker, target)?;
            let is_key = |e: &Expr| is_dotted(e, &key) || entry_text(checker, e) == Some(&*key);
            let mut leaves = Vec::new();
            arith_leaves(&assign.value, &mut leaves);
            if !leaves.iter().any(|l| is_key(l)) {
                return None;
            }
            // A conditional value is one branch or the other: a chain needs a branch made from
            // the previous value and something else. `loss if loss < self.best else self.best`
            // keeps one graph at a time, never a chain.
            if assign.value.is_if_expr() && !combines(&assign.value, &is_key) {
                return None;
            }
            // `acc = acc + x` is LS001's when that rule reports it.
            if let Expr::BinOp(bin) = &*assign.value {
                let direct = if is_dotted(&bin.left, &key) {
                    Some(&*bin.right)
                } else if is_dotted(&bin.right, &key) {
                    Some(&*bin.left)
                } else {
                    None
                };
                if direct.is_some_and(|added| ls001_reports(checker, target, added, &key)) {
                    return None;
                }
            }
            let form = if scaled(&assign.value, &is_key) {
                Form::Weighted
            } else {
                Form::Other
            };
            leaves.retain(|l| !is_key(l));
            Some((target, key, leaves, form))
        }
        Stmt::AugAssign(aug) => {
            let key = dotted(&aug.target)?;
            if !is_stat_name(last_segment(&key)) {
                return None;
            }
            if matches!(
                aug.op,
                Operator::Add | Operator::Sub | Operator::Mult | Operator::Div
            ) && ls001_reports(checker, &aug.target, &aug.value, &key)
            {
                return None;
            }
            let mut leaves = Vec::new();
            arith_leaves(&aug.value, &mut leaves);
            Some((&*aug.target, key, leaves, Form::Other))
        }
        Stmt::Expr(e) => {
            // `stat.mul_(m).add_(x, alpha=1 - m)`: walk the chain down to its root.
            let mut leaves = Vec::new();
            let mut cur = &*e.value;
            let mut in_place = false;
            let mut copies = false;
            while let Expr::Call(call) = cur {
                let Expr::Attribute(attr) = &*call.func else {
                    return None;
                };
                copies |= attr.attr.as_str() == "copy_";
                if !IN_PLACE.contains(&attr.attr.as_str()) && attr.attr.as_str() != "copy_" {
                    return None;
                }
                in_place = true;
                for a in call
                    .arguments
                    .args
                    .iter()
                    .chain(call.arguments.keywords.iter().map(|k| &k.value))
                {
                    arith_leaves(a, &mut leaves);
                }
                cur = &attr.value;
            }
            if !in_place {
                return None;
            }
            let key = match cur {
                // `self.shadow[name].mul_(d).add_(p)`: an entry of a container on the object.
                Expr::Subscript(sub) if self_attr(&sub.value).is_some() => {
                    checker.text(cur.range()).to_string()
                }
                _ => dotted(cur)?,
            };
            if copies {
                // `ema.copy_(ema * d + p * (1 - d))` is an update made from the statistic's
                // previous value; `stat.copy_(x)` replaces it, and links one step's graph only.
                let is_key = |e: &Expr| is_dotted(e, &key) || entry_text(checker, e) == Some(&*key);
                if !leaves.iter().any(|l| is_key(l)) {
                    return None;
                }
                leaves.retain(|l| !is_key(l));
            }
            Some((cur, key, leaves, Form::InPlace))
        }
        _ => None,
    }
}

/// Is some branch of `expr` computed from `key` and something else (`0.98 * ema + 0.02 * x`)?
fn combines(expr: &Expr, is_key: &dyn Fn(&Expr) -> bool) -> bool {
    match expr {
        Expr::If(i) => combines(&i.body, is_key) || combines(&i.orelse, is_key),
        e => {
            let mut leaves = Vec::new();
            arith_leaves(e, &mut leaves);
            leaves.len() > 1 && leaves.iter().any(|l| is_key(l))
        }
    }
}

/// The key of a statistic's target: a name or attribute chain, or an entry of a container on
/// the object (`self.shadow[name]`, by its text).
fn state_key(checker: &Checker, target: &Expr) -> Option<String> {
    dotted(target).or_else(|| entry_text(checker, target).map(str::to_string))
}

/// The text of an entry of a container on the object (`self.shadow[name]`).
fn entry_text<'c>(checker: &'c Checker, e: &Expr) -> Option<&'c str> {
    match e {
        Expr::Subscript(sub) if self_attr(&sub.value).is_some() => Some(checker.text(e.range())),
        _ => None,
    }
}

/// `[:]` or `[...]`: the whole of the indexed tensor.
fn is_whole_slice(slice: &Expr) -> bool {
    match slice {
        Expr::Slice(s) => s.lower.is_none() && s.upper.is_none() && s.step.is_none(),
        Expr::EllipsisLiteral(_) => true,
        _ => false,
    }
}

/// How the statistic is updated, which decides whether a name that does not look like a
/// statistic is still one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// `s = s * m + x * (1 - m)`: a decayed average.
    Weighted,
    /// `s.mul_(m).add_(x)`: an in-place update.
    InPlace,
    /// `y, s = f(x, s)`: returned by a helper with other values, whose inputs the fix must
    /// not detach.
    Returned,
    Other,
}

fn report(
    checker: &mut Checker,
    target: &Expr,
    key: &str,
    inputs: &[(&Expr, Value)],
    via: Option<&Via>,
    stmt: &Stmt,
    form: Form,
) {
    let Some((first, value)) = inputs.first() else {
        return;
    };
    // A statistic updated once per training iteration that outlives the update: on the
    // object, global, or carried around the training loop.
    if checker.iteration().is_none() {
        return;
    }
    // Set afresh earlier in the same call on every path (`self.loss = F.cross_entropy(...)`
    // before `self.loss = (1 - w) * self.loss + w * reg`): a value of this call, not a
    // statistic carried across calls.
    if self_attr(target).is_some()
        && checker
            .function()
            .is_some_and(|def| crate::semantic::scan::rebound_before(&def.body, key, stmt.start()))
    {
        return;
    }
    // An input detached under an option before the update (`if not self.differentiable:
    // inputs = inputs.detach()`): the graph is kept only where the author asked for it.
    if let Some(def) = checker.function() {
        let chosen = inputs
            .iter()
            .filter_map(|(e, _)| dotted(e))
            .any(|input| crate::semantic::scan::detached_before(&def.body, &input, stmt.start()));
        if chosen {
            return;
        }
    }
    let element = state_element(checker, target, stmt);
    let owner = if element.is_none() && form == Form::InPlace {
        parameter_owner(checker, target, stmt).and_then(dotted)
    } else {
        None
    };
    let (holder, until_text) = match self_attr(target).map(str::to_string).or(element.clone()) {
        Some(attr) => (Holder::Attribute, attr_until(checker, &attr, key, stmt)),
        None if owner.is_some() => {
            let owner = owner.as_deref().unwrap_or_default();
            let until = match owner.strip_prefix("self.").filter(|a| !a.contains('.')) {
                Some(attr) => attr_until(checker, attr, key, stmt),
                None => format!("for as long as `{owner}` lives"),
            };
            (Holder::Attribute, until)
        }
        None => match checker.lifetime(target) {
            Some(l) => (l.holder, until(checker, &l)),
            None => match loop_carried(checker, target, key) {
                Some(u) => (Holder::OuterLocal, u),
                None => return,
            },
        },
    };
    // A statistic by name, or state on the object (or a global) updated like one. A local
    // `x = x + block(x)` (a residual connection) is neither.
    let state = matches!(holder, Holder::Attribute | Holder::Global);
    let is_stat =
        is_stat_name(last_segment(key)) || state && matches!(form, Form::Weighted | Form::InPlace);
    if !is_stat {
        return;
    }
    // A loop's element of a container on the object is named with its container.
    let named = match (&element, &owner, target) {
        (Some(attr), _, Expr::Name(_)) => format!("`{key}` (an entry of `self.{attr}`)"),
        (None, Some(owner), _) => format!("`{key}` (a parameter of `{owner}`)"),
        _ => format!("`{key}`"),
    };
    let carries = match via {
        Some(Via::Parameter) => format!(
            "is a module's parameter (from `{}`) and requires grad",
            value.origin().map_or("", |o| o.what.as_str())
        ),
        Some(Via::Argument(note)) => format!("carries {}{note}", origin_phrase(checker, value)),
        None => format!("carries {}", origin_phrase(checker, value)),
    };
    let message = format!(
        "{named} is a running statistic updated from `{}`, which {carries}: each update links \
         `{key}` to this step's graph and, through its previous value, to every earlier one, so \
         it keeps the graph of every step it has seen alive {}; update statistics from detached \
         values or under `torch.no_grad()`",
        short(checker, first),
        until_text,
    );
    let mut diagnostic = Diagnostic::new(Rule::LS011, message, stmt.range());
    // Through a parameter, which operands are tensors (and which are sizes computed from the
    // same input) is not known: no edit then.
    if !matches!(via, Some(Via::Argument(_))) && form != Form::Returned {
        let mut edits: Vec<Edit> = Vec::new();
        for (e, _) in inputs {
            edits.extend(append_call(checker, e, "detach"));
        }
        edits.sort_by_key(|e| e.range.start());
        let title = if inputs.len() == 1 {
            format!("Update from `{}`", detached_text(checker, first))
        } else {
            "Update from detached inputs".to_string()
        };
        // Safe when nothing can backpropagate through the statistic: the values computed are
        // the same, and so are the gradients, since none ever flowed through it.
        // The statistic named by itself (a local, a global, `self.<attr>`; not an entry of a
        // container) whose every other use is logging or arithmetic on numbers is such a one
        // too: `running.add_(loss)` printed as `running.item()`, as LS001 reads `running +=`.
        // A module's parameter is read by its module's forward, whose uses are not these.
        let named = matches!(target, Expr::Name(_)) && element.is_none() && owner.is_none()
            || self_attr(target).is_some();
        let unused = match (
            self_attr(target).map(str::to_string).or(element),
            checker.class(),
        ) {
            (Some(attr), Some(class)) => gradient_unused(checker, class, &attr),
            _ => false,
        } || named && checker.only_numeric_uses(key, stmt.range());
        diagnostic = diagnostic.with_fix(if unused {
            Fix::safe(
                format!("{title} (nothing differentiates through `{key}`)"),
                edits,
            )
        } else {
            Fix::unsafe_edit(title, edits)
        });
    }
    checker.report(diagnostic);
}

/// Operands of an arithmetic expression (`a * m + b * (1 - m)` gives `a`, `m`, `b`, `1`, `m`).
fn arith_leaves<'e>(expr: &'e Expr, out: &mut Vec<&'e Expr>) {
    match expr {
        Expr::BinOp(b) => {
            arith_leaves(&b.left, out);
            arith_leaves(&b.right, out);
        }
        Expr::UnaryOp(u) => arith_leaves(&u.operand, out),
        // `loss if ema is None else 0.98 * ema + 0.02 * loss`: the value is one of the
        // branches (the test only decides which).
        Expr::If(i) => {
            arith_leaves(&i.body, out);
            arith_leaves(&i.orelse, out);
        }
        e => out.push(e),
    }
}

/// "until `self.mean` is reset in `reset()` (line 40)", ignoring the update itself.
fn attr_until(checker: &Checker, attr: &str, key: &str, stmt: &Stmt) -> String {
    let reset = checker.attr_facts(attr).and_then(|p| {
        p.resets()
            .find(|c| !stmt.range().contains(c.offset))
            .map(|c| (c.function.clone(), c.offset))
    });
    match reset {
        Some((function, offset)) => format!(
            "until `{key}` is reset in `{function}()` (line {})",
            checker.line(offset)
        ),
        None => "for the life of the object (nothing resets it)".to_string(),
    }
}

/// `s = 0.9 * s + 0.1 * x` in a loop: the new value is made from the old one, so it is carried
/// across iterations unless another assignment in the loop starts it afresh. (The core's
/// `lifetime` sees the statement as a rebinding because `s` is not a top-level operand.)
fn loop_carried(checker: &Checker, target: &Expr, key: &str) -> Option<String> {
    let Expr::Name(_) = target else { return None };
    let Some(crate::semantic::model::Iteration::Loop { depth, .. }) = checker.iteration() else {
        return None;
    };
    if !checker.carried_by_loop(depth, key) {
        return None;
    }
    Some(match checker.function() {
        Some(f) => format!("until `{}()` returns", f.name.as_str()),
        None => "for the life of the process (a module global)".to_string(),
    })
}

/// Is `key` multiplied or divided by something in the update (`s * m`, `m * s`, `s / 2`)?
fn scaled(expr: &Expr, is_key: &dyn Fn(&Expr) -> bool) -> bool {
    match expr {
        Expr::BinOp(b) => {
            (matches!(b.op, Operator::Mult | Operator::Div)
                && (is_key(&b.left) || is_key(&b.right)))
                || scaled(&b.left, is_key)
                || scaled(&b.right, is_key)
        }
        Expr::UnaryOp(u) => scaled(&u.operand, is_key),
        Expr::If(i) => scaled(&i.body, is_key) || scaled(&i.orelse, is_key),
        _ => false,
    }
}

/// Would LS001 (accumulate-graph-tensor) report `target += added` here? Then it is left to it.
fn ls001_reports(checker: &Checker, target: &Expr, added: &Expr, key: &str) -> bool {
    // A statistic (`self.mean`, `running_var`) is this rule's, whatever the form.
    !is_stat_name(last_segment(key))
        && checker.enabled(Rule::LS001)
        && checker.per_step()
        && checker.value(added).has_graph()
        && checker.lifetime(target).is_some()
        && !checker.consumed_by_backward(key)
}

// ----- parameters that receive a graph at a call site of this file ---------------------------

/// Calls of this file's functions and methods that pass a graph-carrying positional argument,
/// recorded as the reporting walk meets them (rules do not run in the silent walks), so only a
/// call above the update is seen here; calls the summaries resolve to one callee reach its
/// parameters through the model's taints wherever they are. Keyed by the callee's name and the
/// argument's position.
#[derive(Default)]
struct GraphArgs {
    file: (usize, usize),
    by_callee: FxHashMap<(String, usize), GraphArg>,
}

#[derive(Clone)]
struct GraphArg {
    /// The call, and a hash of its text: an entry left over from another file never matches.
    call: TextRange,
    text_hash: u64,
    origin_what: String,
    origin_offset: TextSize,
}

thread_local! {
    static GRAPH_ARGS: RefCell<GraphArgs> = RefCell::new(GraphArgs::default());
}

fn file_key(checker: &Checker) -> (usize, usize) {
    (checker.source.as_ptr() as usize, checker.source.len())
}

fn text_hash(text: &str) -> u64 {
    let mut h = FxHasher::default();
    text.hash(&mut h);
    h.finish()
}

/// Records `normalizer.update(features)` / `update_stats(model(x))` when an argument carries a
/// graph and the callee is a function or method defined in this file.
pub(crate) fn call(checker: &mut Checker, call: &ExprCall) {
    if !checker.grad_enabled() {
        return;
    }
    let name = match &*call.func {
        Expr::Attribute(a) => {
            // The method-name test first: it rules out most calls without evaluating anything.
            if !checker.is_method_name(a.attr.as_str()) {
                return;
            }
            let recv = checker.value(&a.value);
            if recv.has_graph() || !matches!(recv.kind, Kind::Unknown | Kind::Module) {
                return;
            }
            a.attr.as_str()
        }
        Expr::Name(n) if checker.facts.functions.contains(n.id.as_str()) => n.id.as_str(),
        _ => return,
    };
    let key = file_key(checker);
    for (i, arg) in call.arguments.args.iter().enumerate() {
        let v = checker.value(arg);
        let Some(origin) = v.origin() else { continue };
        let entry = GraphArg {
            call: call.range(),
            text_hash: text_hash(checker.text(call.range())),
            origin_what: origin.what.clone(),
            origin_offset: origin.offset,
        };
        GRAPH_ARGS.with(|g| {
            let mut g = g.borrow_mut();
            if g.file != key {
                g.file = key;
                g.by_callee.clear();
            }
            g.by_callee.entry((name.to_string(), i)).or_insert(entry);
        });
    }
}

/// An operand of the update that is computed (through local assignments) from a parameter of
/// the current function which some call in this file passes a graph to.
fn from_graph_param<'e>(
    checker: &Checker,
    leaves: &[&'e Expr],
) -> Option<(&'e Expr, Value, String)> {
    let def = checker.function()?;
    if matches!(def.name.as_str(), "forward" | "__call__") {
        return None;
    }
    let positional: Vec<&str> = def
        .parameters
        .posonlyargs
        .iter()
        .chain(def.parameters.args.iter())
        .map(|p| p.parameter.name.as_str())
        .collect();
    let is_method = checker.class().is_some()
        && !def.decorator_list.iter().any(|d| {
            dotted(&d.expression).is_some_and(|n| n == "staticmethod" || n == "classmethod")
        });
    let skip = usize::from(is_method);
    // name -> names its value is computed from, over the whole body.
    let mut deps: FxHashMap<String, FxHashSet<String>> = FxHashMap::default();
    visit_block(&def.body, &mut |s| match s {
        Stmt::Assign(a) => {
            let used = keys_in(&a.value);
            for t in &a.targets {
                for k in keys_in(t) {
                    deps.entry(k).or_default().extend(used.iter().cloned());
                }
            }
        }
        Stmt::AugAssign(a) => {
            if let Some(t) = dotted(&a.target) {
                deps.entry(t).or_default().extend(keys_in(&a.value));
            }
        }
        _ => {}
    });
    let key = file_key(checker);
    for leaf in leaves {
        // Breadth-first through local assignments, a few levels deep.
        let mut seen: FxHashSet<String> = keys_in(leaf);
        let mut frontier: Vec<String> = seen.iter().cloned().collect();
        for _ in 0..4 {
            let mut next = Vec::new();
            for k in &frontier {
                if let Some(d) = deps.get(k) {
                    for n in d {
                        if seen.insert(n.clone()) {
                            next.push(n.clone());
                        }
                    }
                }
            }
            frontier = next;
        }
        for (i, p) in positional.iter().enumerate().skip(skip) {
            if !seen.contains(*p) {
                continue;
            }
            let found = GRAPH_ARGS.with(|g| {
                let g = g.borrow();
                (g.file == key)
                    .then(|| {
                        g.by_callee
                            .get(&(def.name.as_str().to_string(), i - skip))
                            .cloned()
                    })
                    .flatten()
            });
            let Some(arg) = found else { continue };
            let text = checker
                .source
                .get(usize::from(arg.call.start())..usize::from(arg.call.end()));
            if text.map(text_hash) != Some(arg.text_hash) {
                continue;
            }
            let value = Value::graph(Origin::new(arg.origin_what.clone(), arg.origin_offset));
            let note = format!(
                " (through `{p}`, which the call at line {} passes in)",
                checker.line(arg.call.start())
            );
            return Some((leaf, value, note));
        }
    }
    None
}

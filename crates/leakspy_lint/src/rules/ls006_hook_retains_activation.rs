//! ## What it does
//! Flags a forward, backward or tensor hook that adds what it receives (`output`, `input`,
//! `grad_output`, a tensor hook's `grad`, or values computed from them) to a collection that
//! outlives the call (a list of the enclosing object, a closure cell, a module global) without
//! `.detach()`: `self.features.append(output)`, `feature_log.append(output.mean(0))`. One entry
//! per forward call means memory that grows with every step. Hooks are the functions passed to
//! `register_*hook` (by name, or made by a registered factory) and functions named `*_hook`.
//!
//! ## Why is this bad?
//! A forward hook runs inside the model's forward pass: `output` is the live activation, part of
//! the autograd graph. Kept past the call, it keeps that graph alive: every activation saved for
//! the backward pass until a `.backward()` through it runs, the chain of autograd nodes after.
//! Appended to a list it holds one graph per forward call, and memory grows with every step.
//! Gradients received by backward and tensor hooks carry no graph, but appending them keeps an
//! activation-sized tensor per call.
//!
//! ## Example
//! ```python
//! feature_log = []
//!
//! def log_features(module, inputs, output):
//!     feature_log.append(output.mean(dim=(2, 3)))
//!
//! model.layer4.register_forward_hook(log_features)
//! ```
//!
//! ## Use instead
//! ```python
//! feature_log = []
//!
//! def log_features(module, inputs, output):
//!     feature_log.append(output.mean(dim=(2, 3)).detach().cpu())
//!
//! model.layer4.register_forward_hook(log_features)
//! ```
//!
//! ## Fix safety
//! The fix stores `value.detach()`. It is unsafe: a hook that collects activations for a loss
//! (feature matching, distillation) needs them attached to the graph, and detaching them would
//! silently stop those gradients. Appended gradients get no fix: they carry no graph, and what
//! bounds their memory (clearing the list after use) depends on the program.
//!
//! ## Stays silent on
//! Replacement, which keeps one call's values, not one per step (`activations[name] = output`,
//! `self.gradients = grad_output[0]`, `module.saved = input[0]`); values cut by `.item()`,
//! `.tolist()`, `.numpy()`, `float(...)`; values computed under `torch.no_grad()` in the hook;
//! shapes and statistics turned into numbers; locals of the hook; collections that live no longer
//! than the call that runs the model (`feats` filled by a helper that runs the model once and
//! returns them); hooks defined and registered in a function whose every call of the hooked
//! model runs under `torch.no_grad()` (what they receive carries no graph); a list a hook closes
//! over while the hook is registered only for its owner's call: on a tensor or module that
//! function makes (`x.register_hook(keep)` on its own `x`), or with the handle removed there
//! (`handle.remove()`) or handed to its caller to remove (`return handles`).

use ruff_python_ast::{Expr, ExprCall, Stmt, StmtFunctionDef};
use ruff_text_size::Ranged;
use rustc_hash::FxHashMap;

use crate::checker::{Checker, Lifetime};
use crate::diagnostic::{Diagnostic, Fix};
use crate::registry::Rule;
use crate::rules::helpers::{append_call, detached_text, short, until};
use crate::semantic::lifetime::Holder;
use crate::semantic::names::dotted;
use crate::semantic::value::{Graph, Kind};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Received {
    /// An input or output of a forward hook: a live activation with its graph.
    Activation,
    /// A gradient given to a backward or tensor hook.
    Grad,
}

const GROW_METHODS: &[&str] = &["append", "extend", "insert", "add", "appendleft"];

pub(crate) fn call(checker: &mut Checker, call: &ExprCall) {
    let Expr::Attribute(attr) = &*call.func else {
        return;
    };
    if !GROW_METHODS.contains(&attr.attr.as_str()) {
        return;
    }
    let Some(params) = hook_params(checker) else {
        return;
    };
    let args = call
        .arguments
        .args
        .iter()
        .skip(usize::from(attr.attr.as_str() == "insert"));
    let Some((stored, received, param)) = args
        .filter_map(|a| received(checker, &params, a).map(|(r, p)| (a, r, p)))
        .max_by_key(|(_, r, _)| *r == Received::Activation)
    else {
        return;
    };
    let Some(root) = container_root(&attr.value) else {
        return;
    };
    let Some(lifetime) = kept(checker, root) else {
        return;
    };
    let what = describe(checker, stored, &param);
    let until = until(checker, &lifetime);
    let message = match received {
        Received::Activation => format!(
            "hook `{}()` stores {what} without `.detach()`: \
             `{}` keeps one forward pass's graph per call (every saved activation until a \
             `.backward()` through it frees them, its autograd nodes after) {until}",
            hook_name(checker),
            lifetime.key,
        ),
        Received::Grad => format!(
            "hook `{}()` appends {what}: `{}` keeps one \
             activation-sized gradient per backward call {until}",
            hook_name(checker),
            lifetime.key,
        ),
    };
    let mut diagnostic = Diagnostic::new(Rule::LS006, message, call.range());
    if received == Received::Activation {
        diagnostic = with_fix(checker, diagnostic, stored);
    }
    checker.report(diagnostic);
}

pub(crate) fn stmt(checker: &mut Checker, stmt: &Stmt) {
    let Stmt::Assign(assign) = stmt else {
        return;
    };
    let Some(params) = hook_params(checker) else {
        return;
    };
    for target in &assign.targets {
        match (target, &*assign.value) {
            (Expr::Tuple(t), Expr::Tuple(v)) if t.elts.len() == v.elts.len() => {
                for (te, ve) in t.elts.iter().zip(v.elts.iter()) {
                    assigned(checker, &params, te, ve);
                }
            }
            (target, value) => assigned(checker, &params, target, value),
        }
    }
}

fn assigned(
    checker: &mut Checker,
    params: &FxHashMap<String, (Received, String)>,
    target: &Expr,
    value: &Expr,
) {
    let Some((received, param)) = received(checker, params, value) else {
        return;
    };
    // Replacing a stored gradient keeps one tensor, which carries no graph.
    if received == Received::Grad {
        return;
    }
    // Replacing one slot per call keeps one forward's graph, not one per step: only a store
    // under a key that is new each time grows the container.
    let lifetime: Option<Lifetime> = match target {
        Expr::Subscript(sub) if checker.key_changes_per_iteration(&sub.slice) => {
            container_root(&sub.value).and_then(|r| kept(checker, r))
        }
        _ => None,
    };
    let Some(lifetime) = lifetime else {
        return;
    };
    let message = format!(
        "hook `{}()` stores {} in `{}` under a new key on every call, without `.detach()`: \
         `{}` keeps one forward pass's graph per call (every saved activation until a \
         `.backward()` through it frees them, its autograd nodes after) {}",
        hook_name(checker),
        describe(checker, value, &param),
        short(checker, target),
        lifetime.key,
        until(checker, &lifetime),
    );
    let diagnostic = Diagnostic::new(Rule::LS006, message, target.range().cover(value.range()));
    let diagnostic = with_fix(checker, diagnostic, value);
    checker.report(diagnostic);
}

/// Who keeps the container the hook grows, past one call: not a closure's cell while the hook
/// is registered only for the owner's call (on what the owner makes) or until a handle the
/// owner removes or hands out is removed.
fn kept(checker: &Checker, root: &Expr) -> Option<Lifetime> {
    let lifetime = checker.lifetime(root)?;
    if lifetime.holder == Holder::Closure && checker.hook_cell_scoped(&lifetime.key) {
        return None;
    }
    Some(lifetime)
}

fn with_fix(checker: &Checker, diagnostic: Diagnostic, stored: &Expr) -> Diagnostic {
    if matches!(
        stored,
        Expr::Tuple(_) | Expr::List(_) | Expr::Dict(_) | Expr::Set(_) | Expr::Starred(_)
    ) {
        return diagnostic;
    }
    diagnostic.with_fix(Fix::unsafe_edit(
        format!("Store `{}`", detached_text(checker, stored)),
        append_call(checker, stored, "detach"),
    ))
}

/// "its `output` argument" or "`pooled` (computed from its `out` argument)".
fn describe(checker: &Checker, stored: &Expr, param: &str) -> String {
    let text = short(checker, stored);
    if text == param {
        format!("its `{param}` argument")
    } else {
        format!("`{text}` (computed from its `{param}` argument)")
    }
}

fn hook_name<'a>(checker: &Checker<'a>) -> &'a str {
    checker.function().map_or("hook", |f| f.name.as_str())
}

/// `acts[name]`, `acts.setdefault(name, [])`, `self.store.get(k)`: the long-lived container.
fn container_root(expr: &Expr) -> Option<&Expr> {
    match expr {
        Expr::Subscript(sub) => container_root(&sub.value),
        Expr::Call(call) => match &*call.func {
            Expr::Attribute(a) if matches!(a.attr.as_str(), "setdefault" | "get") => {
                container_root(&a.value)
            }
            _ => None,
        },
        e if dotted(e).is_some() => Some(e),
        _ => None,
    }
}

/// Is `expr` what the hook received (or computed from it), not cut from the graph? Returns what
/// it is and the parameter it comes from.
fn received(
    checker: &Checker,
    params: &FxHashMap<String, (Received, String)>,
    expr: &Expr,
) -> Option<(Received, String)> {
    if is_cut(checker, expr) {
        return None;
    }
    let mut keys = Vec::new();
    flows_from(checker, expr, &mut keys);
    let mut found: Option<(Received, String)> = None;
    for k in &keys {
        if let Some((r, p)) = params.get(k) {
            if found.as_ref().is_none_or(|(f, _)| *f == Received::Grad) {
                found = Some((*r, p.clone()));
            }
        }
    }
    found
}

/// The names whose tensors flow into `expr` through tensor operations: indexing, attributes,
/// arithmetic, tensor methods, torch functions and literals holding them. What an unknown
/// function makes of a received tensor (a statistic, a shape, metadata) is not the tensor.
fn flows_from(checker: &Checker, expr: &Expr, out: &mut Vec<String>) {
    match expr {
        Expr::Name(_) => out.extend(dotted(expr)),
        Expr::Attribute(a) => {
            out.extend(dotted(expr));
            flows_from(checker, &a.value, out);
        }
        Expr::Subscript(s) => flows_from(checker, &s.value, out),
        Expr::Starred(s) => flows_from(checker, &s.value, out),
        Expr::BinOp(b) => {
            flows_from(checker, &b.left, out);
            flows_from(checker, &b.right, out);
        }
        Expr::UnaryOp(u) => flows_from(checker, &u.operand, out),
        Expr::If(i) => {
            flows_from(checker, &i.body, out);
            flows_from(checker, &i.orelse, out);
        }
        Expr::Tuple(t) => t.elts.iter().for_each(|e| flows_from(checker, e, out)),
        Expr::List(l) => l.elts.iter().for_each(|e| flows_from(checker, e, out)),
        Expr::Dict(d) => d
            .items
            .iter()
            .for_each(|i| flows_from(checker, &i.value, out)),
        Expr::Call(call) => {
            if checker
                .qualified_function(&call.func)
                .is_some_and(|q| q.starts_with("torch."))
            {
                for a in &*call.arguments.args {
                    flows_from(checker, a, out);
                }
            } else if let Expr::Attribute(a) = &*call.func {
                // A number, a shape or a value cut from the graph (`output.numel()`,
                // `output.element_size()`, `output.detach()`) is not the received tensor.
                if !crate::semantic::names::tensor_method_cuts(a.attr.as_str()) {
                    flows_from(checker, &a.value, out);
                }
            }
        }
        _ => {}
    }
}

fn is_cut(checker: &Checker, expr: &Expr) -> bool {
    let v = checker.value(expr);
    if v.graph == Graph::No || matches!(v.kind, Kind::Plain | Kind::Array) {
        return true;
    }
    // Computed under `no_grad` inside the hook (a view of the output still holds it).
    !checker.grad_enabled()
        && !matches!(
            expr,
            Expr::Name(_) | Expr::Attribute(_) | Expr::Subscript(_) | Expr::Tuple(_)
        )
}

/// The hook's received parameters and the locals computed from them, or `None` outside a hook.
fn hook_params(checker: &Checker) -> Option<FxHashMap<String, (Received, String)>> {
    if !checker.is_hook_function() {
        return None;
    }
    let def = checker.function()?;
    // A factory (`def save(name): def hook(...): ...; return hook`) is not itself a hook.
    if def.body.iter().any(|s| matches!(s, Stmt::FunctionDef(_))) {
        return None;
    }
    // Registered and triggered in one function that runs the model only under `no_grad`.
    if checker.hook_runs_without_grad(def) {
        return None;
    }
    let registered = checker.hook_functions.contains(def.name.as_str());
    let mut params: FxHashMap<String, (Received, String)> = FxHashMap::default();
    let names: Vec<&str> = def
        .parameters
        .posonlyargs
        .iter()
        .chain(def.parameters.args.iter())
        .map(|p| p.parameter.name.as_str())
        .filter(|n| *n != "self")
        .collect();
    match names.as_slice() {
        [] => return None,
        [only] => {
            // A tensor hook: `def hook(grad)`.
            if registered || looks_like_grad(only) {
                params.insert((*only).to_string(), (Received::Grad, (*only).to_string()));
            }
        }
        [_module, rest @ ..] => {
            for p in rest {
                if looks_like_grad(p) {
                    params.insert((*p).to_string(), (Received::Grad, (*p).to_string()));
                } else if registered || looks_like_activation(p) {
                    params.insert((*p).to_string(), (Received::Activation, (*p).to_string()));
                }
            }
        }
    }
    if params.is_empty() {
        return None;
    }
    propagate(checker, def, &mut params);
    Some(params)
}

/// Locals assigned from received values (`out = output[0]`, `for o in output`) are received too,
/// unless computed under `no_grad` in the hook.
fn propagate(
    checker: &Checker,
    def: &StmtFunctionDef,
    params: &mut FxHashMap<String, (Received, String)>,
) {
    for _ in 0..2 {
        let mut added: Vec<(String, (Received, String))> = Vec::new();
        walk(checker, &def.body, false, params, &mut added);
        if added.is_empty() {
            break;
        }
        params.extend(added);
    }
}

fn walk(
    checker: &Checker,
    body: &[Stmt],
    no_grad: bool,
    params: &FxHashMap<String, (Received, String)>,
    added: &mut Vec<(String, (Received, String))>,
) {
    for stmt in body {
        let (targets, value): (Vec<&Expr>, Option<&Expr>) = match stmt {
            Stmt::Assign(a) => (a.targets.iter().collect(), Some(&*a.value)),
            Stmt::AnnAssign(a) => (vec![&*a.target], a.value.as_deref()),
            Stmt::For(f) => (vec![&*f.target], Some(&*f.iter)),
            _ => (vec![], None),
        };
        if let Some(value) = value {
            let computed = !matches!(
                value,
                Expr::Name(_) | Expr::Attribute(_) | Expr::Subscript(_) | Expr::Tuple(_)
            );
            if !(no_grad && computed) {
                if let Some(r) = received(checker, params, value) {
                    for t in targets {
                        for name in target_names(t) {
                            if !params.contains_key(&name) {
                                added.push((name, r.clone()));
                            }
                        }
                    }
                }
            }
        }
        match stmt {
            Stmt::For(s) => {
                walk(checker, &s.body, no_grad, params, added);
                walk(checker, &s.orelse, no_grad, params, added);
            }
            Stmt::While(s) => {
                walk(checker, &s.body, no_grad, params, added);
                walk(checker, &s.orelse, no_grad, params, added);
            }
            Stmt::If(s) => {
                walk(checker, &s.body, no_grad, params, added);
                for c in &s.elif_else_clauses {
                    walk(checker, &c.body, no_grad, params, added);
                }
            }
            Stmt::With(w) => {
                let disables = w
                    .items
                    .iter()
                    .any(|i| checker.is_grad_disabling(&i.context_expr));
                walk(checker, &w.body, no_grad || disables, params, added);
            }
            Stmt::Try(t) => {
                walk(checker, &t.body, no_grad, params, added);
                for h in &t.handlers {
                    let ruff_python_ast::ExceptHandler::ExceptHandler(h) = h;
                    walk(checker, &h.body, no_grad, params, added);
                }
                walk(checker, &t.orelse, no_grad, params, added);
                walk(checker, &t.finalbody, no_grad, params, added);
            }
            _ => {}
        }
    }
}

fn target_names(target: &Expr) -> Vec<String> {
    match target {
        Expr::Name(n) => vec![n.id.as_str().to_string()],
        Expr::Tuple(t) => t.elts.iter().flat_map(target_names).collect(),
        Expr::List(l) => l.elts.iter().flat_map(target_names).collect(),
        Expr::Starred(s) => target_names(&s.value),
        _ => vec![],
    }
}

fn looks_like_grad(name: &str) -> bool {
    name.contains("grad") || matches!(name, "g" | "gi" | "go")
}

fn looks_like_activation(name: &str) -> bool {
    matches!(
        name,
        "input"
            | "inputs"
            | "inp"
            | "inps"
            | "in_"
            | "args"
            | "i"
            | "x"
            | "output"
            | "outputs"
            | "out"
            | "outs"
            | "o"
            | "y"
            | "result"
            | "res"
            | "act"
            | "activation"
            | "activations"
            | "feat"
            | "feats"
            | "features"
    )
}

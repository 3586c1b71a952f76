//! ## What it does
//! Flags copies of models or agents kept in a growing collection: `copy.deepcopy(model)`,
//! `copy.deepcopy(model.state_dict())`, `agent.clone()` (a method of a class of this file that
//! holds modules), or what a function of this file returns when it returns such a copy on every
//! path (`fast = adapt(model, task)` with `fast = copy.deepcopy(model)` in `adapt`), or a copy
//! passed through a function of this file that hands back the model it was given (`learner =
//! fine_tune(learner, task)` after `learner = copy.deepcopy(model)`), appended to
//! an attribute or a long-lived list on every generation, episode or epoch, when nothing ever
//! clears or bounds that collection.
//!
//! ## Why is this bad?
//! A deep copy of a model duplicates every parameter and buffer: an agent with four 45 M
//! parameter networks is about 720 MB. Keeping one per generation (a hall of fame, a snapshot
//! list, an archive of elites) grows memory by a whole model each time and never gives it back.
//! One of our users' evolutionary runs lost several GB per generation this way before dying at
//! 175 GB.
//!
//! ## Example
//! ```python
//! def train(model, loader, optimizer, criterion, epochs):
//!     checkpoints = []
//!     for epoch in range(epochs):
//!         for x, y in loader:
//!             loss = criterion(model(x), y)
//!             optimizer.zero_grad()
//!             loss.backward()
//!             optimizer.step()
//!         checkpoints.append(copy.deepcopy(model))
//!     return checkpoints
//! ```
//!
//! ## Use instead
//! ```python
//! def train(model, loader, optimizer, criterion, epochs):
//!     for epoch in range(epochs):
//!         for x, y in loader:
//!             loss = criterion(model(x), y)
//!             optimizer.zero_grad()
//!             loss.backward()
//!             optimizer.step()
//!         torch.save(model.state_dict(), f"epoch_{epoch}.pt")  # history on disk
//! ```
//! or bound the archive: `self.hall_of_fame = deque(maxlen=5)`.
//!
//! ## Fix safety
//! No fix is offered: whether to keep one copy, a bounded archive, or checkpoints on disk is the
//! author's decision.
//!
//! ## Stays silent on
//! Replacement of a single best copy (`self.best = copy.deepcopy(model)`); collections that are
//! cleared, truncated or rebound somewhere (a population replaced each generation); bounded
//! `deque(maxlen=...)`; lists built in a loop over the population (`for i in range(pop_size)`),
//! which are bounded by its size; copies of tensors or plain objects (`mask.clone()`: a
//! `clone()` counts as a model's only on an instance of a class of this file that holds modules,
//! or on what is named like one, `population[i]`); copies made at set-up (one per adapter or
//! layer), not once per epoch or generation.

use ruff_python_ast::{Expr, ExprCall, Stmt};
use ruff_text_size::{Ranged, TextRange};

use crate::checker::{Checker, Holder};
use crate::diagnostic::Diagnostic;
use crate::registry::Rule;
use crate::semantic::facts::self_attr;
use crate::semantic::lifetime::reset_from_outside;
use crate::semantic::names::dotted;
use crate::semantic::scan::visit_block;
use crate::semantic::value::Kind;

pub(crate) fn call(checker: &mut Checker, call: &ExprCall) {
    let Expr::Attribute(attr) = &*call.func else {
        return;
    };
    let method = attr.attr.as_str();
    if !matches!(method, "append" | "extend" | "insert" | "appendleft") {
        return;
    }
    let value = if method == "insert" {
        call.arguments.args.get(1)
    } else {
        call.arguments.args.first()
    };
    let Some(value) = value else { return };
    let value = match value {
        Expr::List(l) if l.elts.len() == 1 => &l.elts[0],
        v => v,
    };
    check(checker, &attr.value, value, call.range());
}

pub(crate) fn stmt(checker: &mut Checker, stmt: &Stmt) {
    match stmt {
        Stmt::Assign(a) if a.targets.len() == 1 => {
            // Only a key that is new each time adds a copy; a fixed key replaces one.
            if let Expr::Subscript(sub) = &a.targets[0] {
                if checker.key_changes_per_iteration(&sub.slice) {
                    check(checker, &sub.value, &a.value, stmt.range());
                }
            }
        }
        Stmt::AugAssign(a) => {
            if let Expr::List(l) = &*a.value {
                if let [only] = l.elts.as_slice() {
                    check(checker, &a.target, only, stmt.range());
                }
            }
        }
        _ => {}
    }
}

/// Is copying worth checking in this file at all (it imports `copy` or defines a `clone`)?
fn copies_anything(checker: &Checker) -> bool {
    checker.facts.imports.has_alias_for("copy")
        || checker
            .facts
            .classes
            .values()
            .any(|c| CLONE_METHODS.iter().any(|m| c.methods.contains(*m)))
}

const CLONE_METHODS: &[&str] = &[
    "clone",
    "copy",
    "duplicate",
    "deepcopy",
    "clone_agent",
    "spawn_copy",
];

fn is_clone_method(name: &str) -> bool {
    CLONE_METHODS.contains(&name)
}

fn check(checker: &mut Checker, container: &Expr, value: &Expr, range: TextRange) {
    if !copies_anything(checker) {
        return;
    }
    let Some(what) = module_copy(checker, value) else {
        return;
    };
    let Some(key) = dotted(container) else { return };
    let per = if let Some(attr) = self_attr(container) {
        // An attribute: unbounded unless some method clears, trims or rebinds it.
        let Some(function) = checker.function() else {
            return;
        };
        let fname = function.name.as_str();
        if fname == "__init__" || fname.starts_with("_init") || fname == "setup" {
            return;
        }
        if let Some(place) = checker.attr_facts(attr) {
            if place.is_bounded() || place.resets().next().is_some() {
                return;
            }
        }
        if reset_from_outside(checker.source, attr) || checker.iteration().is_none() {
            return;
        }
        match checker.innermost_loop() {
            Some(l) if l.role.is_training() => {
                format!("iteration of the loop at line {}", checker.line(l.offset))
            }
            Some(_) => return,
            None => format!("call of `{fname}()`"),
        }
    } else {
        let Some(frame) = checker.innermost_loop() else {
            return;
        };
        if !frame.role.is_training() {
            return;
        }
        let offset = frame.offset;
        let Some(lifetime) = checker.lifetime(container) else {
            return;
        };
        if checker.reset_in_iteration(&lifetime.key)
            || !matches!(
                lifetime.holder,
                Holder::OuterLocal | Holder::Global | Holder::Attribute | Holder::Closure
            )
        {
            return;
        }
        format!("iteration of the loop at line {}", checker.line(offset))
    };
    let message = format!(
        "`{key}` keeps {what} on every {per}, and nothing clears or bounds it: each copy \
         duplicates every parameter and buffer, so memory grows by a whole model each time; keep \
         one best copy, a `deque(maxlen=...)`, or checkpoints on disk"
    );
    checker.report(Diagnostic::new(Rule::LS015, message, range));
}

/// "a deep copy of `model`" when the expression copies a model or an agent holding modules.
fn module_copy(checker: &Checker, expr: &Expr) -> Option<String> {
    match expr {
        Expr::Call(call) => {
            if checker.qualified_function(&call.func).as_deref() == Some("copy.deepcopy") {
                let arg = call.arguments.args.first()?;
                if holds_module(checker, arg) {
                    return Some(format!("a deep copy of `{}`", checker.snippet(arg.range())));
                }
                return None;
            }
            if let Expr::Name(n) = &*call.func {
                return helper_copy(checker, n.id.as_str(), call);
            }
            let Expr::Attribute(attr) = &*call.func else {
                return None;
            };
            let method = attr.attr.as_str();
            if !is_clone_method(method) {
                return None;
            }
            let recv = checker.value(&attr.value);
            if matches!(
                recv.kind,
                Kind::Tensor | Kind::Array | Kind::List | Kind::Dict
            ) {
                return None;
            }
            let holds = |c: &crate::semantic::facts::ClassFacts| {
                c.methods.contains(method)
                    && (c.is_module || c.attrs.values().any(|p| p.init == Kind::Module))
            };
            // `clone` is a tensor's method too: the receiver must be an instance of such a
            // class, or be named as a deep copy's argument is (`population[i]`), not only any
            // value of a file that has such a class (`mask.clone()` beside a model's `clone`).
            let owner_holds_modules = match checker.class_of(&attr.value) {
                Some(class) => checker.facts.class(&class).is_some_and(holds),
                None => {
                    checker.facts.classes.values().any(holds) && holds_module(checker, &attr.value)
                }
            };
            owner_holds_modules
                .then(|| format!("a copy of `{}`", checker.snippet(attr.value.range())))
        }
        Expr::Name(n) => {
            // `snapshot = copy.deepcopy(model)` earlier in the same loop body or function.
            let body: &[Stmt] = match checker.innermost_loop().map(|l| l.stmt) {
                Some(Stmt::For(f)) => &f.body,
                Some(Stmt::While(w)) => &w.body,
                _ => &checker.function()?.body,
            };
            let mut found: Option<&Expr> = None;
            visit_block(body, &mut |s| {
                // (A binding that holds the use, `learner = adapt(learner)`, comes after it.)
                if s.end() > expr.start() {
                    return;
                }
                if let Stmt::Assign(a) = s {
                    if a.targets.len() == 1
                        && matches!(&a.targets[0], Expr::Name(t) if t.id == n.id)
                    {
                        // The last binding before the use wins.
                        found = Some(&a.value);
                    }
                }
            });
            let value = found?;
            match value {
                Expr::Name(_) => None,
                // `learner = adapt(learner, task)` where `adapt` returns the model it was given
                // (updated in place): still the copy the argument names.
                Expr::Call(c) => module_copy(checker, value)
                    .or_else(|| module_copy(checker, passed_through(checker, c)?)),
                v => module_copy(checker, v),
            }
        }
        _ => None,
    }
}

/// The function of this file that `call` calls by name, and its positional parameters.
fn local_function<'a>(
    checker: &'a Checker,
    name: &str,
) -> Option<(&'a ruff_python_ast::StmtFunctionDef, Vec<&'a str>)> {
    let def = checker
        .semantic()
        .suite()
        .iter()
        .filter_map(|s| match s {
            Stmt::FunctionDef(f) if f.name.as_str() == name => Some(f),
            _ => None,
        })
        .last()?;
    Some((def, crate::summaries::extract::positional_params(def)))
}

/// What the caller gives parameter `p` of `params`: its positional argument, or its keyword.
fn argument_for<'a>(call: &'a ExprCall, params: &[&str], p: &str) -> Option<&'a Expr> {
    let i = params.iter().position(|q| *q == p)?;
    call.arguments.args.get(i).or_else(|| {
        call.arguments
            .keywords
            .iter()
            .find(|k| k.arg.as_ref().is_some_and(|a| a.as_str() == p))
            .map(|k| &k.value)
    })
}

/// The argument `call` hands back, when it calls a function of this file that returns one of
/// its parameters, never rebound, on every path (`def adapt(model, x): ...; return model`).
fn passed_through<'a>(checker: &'a Checker, call: &'a ExprCall) -> Option<&'a Expr> {
    let Expr::Name(f) = &*call.func else {
        return None;
    };
    let (def, params) = local_function(checker, f.id.as_str())?;
    let mut returned: Option<&str> = None;
    let mut through = true;
    visit_block(&def.body, &mut |s| {
        if let Stmt::Return(r) = s {
            match r.value.as_deref() {
                Some(Expr::Name(v)) if returned.is_none_or(|p| p == v.id.as_str()) => {
                    returned = Some(v.id.as_str());
                }
                _ => through = false,
            }
        }
    });
    let p = returned.filter(|p| {
        through && params.contains(p) && !crate::semantic::facts::rebound_in(&def.body, p)
    })?;
    argument_for(call, &params, p)
}

/// "a deep copy of `model` (made by `adapt()`)" when `call` calls a function of this file that
/// returns a fresh deep copy of a module on every path: of what the caller passes it
/// (`fast = copy.deepcopy(model)` of its parameter `model`), or of a model it names.
fn helper_copy(checker: &Checker, name: &str, call: &ExprCall) -> Option<String> {
    let (def, params) = local_function(checker, name)?;
    let passed = |p: &str| argument_for(call, &params, p);
    // `copy.deepcopy(x)` of a module: the copied module, as the caller sees it.
    let copied = |e: &Expr| -> Option<String> {
        let Expr::Call(c) = e else { return None };
        if checker.qualified_function(&c.func).as_deref() != Some("copy.deepcopy") {
            return None;
        }
        let arg = c.arguments.args.first()?;
        match arg {
            Expr::Name(a) if params.contains(&a.id.as_str()) => {
                let given = passed(a.id.as_str())?;
                holds_module(checker, given).then(|| checker.snippet(given.range()).to_string())
            }
            _ => holds_module(checker, arg).then(|| checker.snippet(arg.range()).to_string()),
        }
    };
    let mut bound: Vec<(&str, Option<String>)> = Vec::new();
    let mut returns: Vec<Option<String>> = Vec::new();
    visit_block(&def.body, &mut |s| match s {
        Stmt::Assign(a) if a.targets.len() == 1 => {
            if let Expr::Name(t) = &a.targets[0] {
                bound.push((t.id.as_str(), copied(&a.value)));
            }
        }
        Stmt::Return(r) => {
            let what = match r.value.as_deref() {
                Some(Expr::Name(v)) => bound
                    .iter()
                    .rev()
                    .find(|(n, _)| *n == v.id.as_str())
                    .and_then(|(_, c)| c.clone()),
                Some(e) => copied(e),
                None => None,
            };
            returns.push(what);
        }
        _ => {}
    });
    let first = returns.first()?.clone()?;
    returns
        .iter()
        .all(Option::is_some)
        .then(|| format!("a deep copy of `{first}` (made by `{name}()`)"))
}

/// Does copying `expr` copy module weights: a module, an agent holding modules, a state dict?
fn holds_module(checker: &Checker, expr: &Expr) -> bool {
    if checker.value(expr).kind == Kind::Module {
        return true;
    }
    if let Expr::Call(c) = expr {
        if let Expr::Attribute(a) = &*c.func {
            if a.attr.as_str() == "state_dict" {
                return true;
            }
        }
    }
    if matches!(expr, Expr::Name(n) if n.id.as_str() == "self") {
        return checker
            .class_facts()
            .is_some_and(|c| c.is_module || c.attrs.values().any(|p| p.init == Kind::Module));
    }
    let Some(last) = last_name(expr) else {
        return false;
    };
    let last = last.to_ascii_lowercase();
    [
        "model",
        "net",
        "agent",
        "actor",
        "critic",
        "policy",
        "module",
        "learner",
        "encoder",
        "decoder",
        "individual",
        "elite",
        "population",
        "generator",
        "discriminator",
        "teacher",
        "student",
        "best",
    ]
    .iter()
    .any(|w| last.contains(w))
}

/// The last name in `self.population[i].actor` (`actor`), `agents[i]` (`agents`).
fn last_name(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Name(n) => Some(n.id.as_str()),
        Expr::Attribute(a) => Some(a.attr.as_str()),
        Expr::Subscript(s) => last_name(&s.value),
        _ => None,
    }
}

//! ## What it does
//! Flags caches that hold strong references to tensors or modules forever:
//! - `@functools.cache`, `@functools.lru_cache(maxsize=None)` (or `@cache`/`@lru_cache(None)`)
//!   on a function that takes a tensor or a module (a parameter annotated
//!   `torch.Tensor`/`nn.Module`, a parameter used as one in the body, or a call in this file
//!   passing one), or on a method of an `nn.Module` class (where `self` is the module);
//! - a dict or set that lives on an object, in a module global, or in a local that a training
//!   loop fills on every step, keyed by tensors or modules (`self.cache[x] = ...`,
//!   `seen.add(model)`, `counts[label] += 1` with `label` a 0-d tensor), from which nothing ever
//!   removes an entry.
//!
//! Both only when the code runs once per training iteration.
//!
//! ## Why is this bad?
//! Tensors and modules hash by identity. A cache keyed by them hits only when the very same
//! object comes back, so in a training loop nearly every call adds an entry, and each entry keeps
//! its key (and the cached result, with any autograd graph it carries) alive for as long as the
//! cache lives: for `functools.cache` and a module-level dict, the life of the process. On a
//! method, the cache also keeps `self` alive, so a module that was meant to be freed (an old copy
//! of a model, a finished trial) never is.
//!
//! ## Example
//! ```python
//! class Encoder(nn.Module):
//!     def __init__(self):
//!         super().__init__()
//!         self.backbone = nn.Linear(16, 16)
//!
//!     @functools.cache
//!     def features(self, x):
//!         return self.backbone(x)
//!
//!     def forward(self, x):
//!         return self.features(x)
//! ```
//!
//! ## Use instead
//! ```python
//! class Encoder(nn.Module):
//!     def __init__(self):
//!         super().__init__()
//!         self.backbone = nn.Linear(16, 16)
//!
//!     def features(self, x):
//!         return self.backbone(x)
//!
//!     def forward(self, x):
//!         return self.features(x)
//! ```
//!
//! ## Fix safety
//! No fix is offered: whether to bound the cache (`lru_cache(maxsize=N)`), key it by something
//! stable, make it weak, or drop it depends on why it is there.
//!
//! ## Stays silent on
//! `lru_cache(maxsize=N)` and a bare `@lru_cache` (128 entries); caches on functions of plain
//! values; `weakref.WeakKeyDictionary`/`WeakValueDictionary`/`WeakSet`; dicts that are popped,
//! cleared, trimmed or rebound somewhere; dicts keyed by names, ids or numbers; dicts keyed by
//! the `module` of a forward/backward hook (one entry per layer).

use std::cell::RefCell;

use ruff_python_ast::visitor::{walk_expr, Visitor};
use ruff_python_ast::{Decorator, Expr, ExprCall, Stmt, StmtFunctionDef};
use ruff_text_size::{Ranged, TextRange};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::checker::Checker;
use crate::diagnostic::Diagnostic;
use crate::registry::Rule;
use crate::rules::helpers::short;
use crate::semantic::facts::self_attr;
use crate::semantic::iteration::Grain;
use crate::semantic::mutation::Mutation;
use crate::semantic::names::dotted;
use crate::semantic::value::Kind;

/// Cached functions of the file being checked whose parameters the analysis could not type,
/// learned when their definition is walked and checked at call sites.
#[derive(Default)]
struct CachedFunctions {
    file: (usize, usize),
    by_name: FxHashMap<String, Cached>,
}

#[derive(Clone)]
struct Cached {
    /// Range of the function's name, checked against the source so stale entries never match.
    name_range: TextRange,
    decorator_range: TextRange,
    decorator: String,
    /// The decorator's source text, checked like `name_range`.
    decorator_text: String,
}

thread_local! {
    static CACHED: RefCell<CachedFunctions> = RefCell::new(CachedFunctions::default());
}

fn file_key(checker: &Checker) -> (usize, usize) {
    (checker.source.as_ptr() as usize, checker.source.len())
}

pub(crate) fn function(checker: &mut Checker, def: &StmtFunctionDef) {
    for d in &def.decorator_list {
        // A cache grows with training when the function runs once per iteration; a cache
        // filled at set-up, or by code elsewhere, is not known to.
        let Some(decorator) = unbounded_cache(checker, d) else {
            continue;
        };
        let fname = def.name.as_str();
        let held = if checker.in_module_class() && takes_self(checker, def) {
            Some(
                "every `self` it is called with (the `nn.Module`, with all its parameters and \
                 buffers)"
                    .to_string(),
            )
        } else {
            typed_params(checker, def)
                .into_iter()
                .next()
                .map(|(p, kind)| format!("every `{p}` it is called with ({kind})"))
        };
        match held {
            Some(held) if checker.in_per_step_function() => {
                let message = format!(
                    "`{decorator}` on `{fname}()` is an unbounded cache with strong references: it \
                     keeps {held} alive for the life of the process, together with every result; \
                     tensors and modules hash by identity, so new ones are cache misses that add \
                     entries; drop the cache, key it by a stable value, or bound it with \
                     `lru_cache(maxsize=...)`"
                );
                checker.report(Diagnostic::new(Rule::LS013, message, d.range()));
            }
            Some(_) => {}
            // Methods are called through an object, not by their bare name.
            None if checker.class().is_some() => {}
            None => {
                let key = file_key(checker);
                CACHED.with(|c| {
                    let mut c = c.borrow_mut();
                    if c.file != key {
                        c.file = key;
                        c.by_name.clear();
                    }
                    c.by_name.insert(
                        fname.to_string(),
                        Cached {
                            name_range: def.name.range(),
                            decorator_range: d.range(),
                            decorator: decorator.clone(),
                            decorator_text: checker.text(d.range()).to_string(),
                        },
                    );
                });
            }
        }
    }
}

/// `f(x)` where `f` is a cached function of this file and `x` a tensor or module.
pub(crate) fn call(checker: &mut Checker, call: &ExprCall) {
    if check_call_of_cached(checker, call) {
        return;
    }
    // `seen.add(x)`, `cache.setdefault(x, v)` into a long-lived set/dict.
    let Expr::Attribute(attr) = &*call.func else {
        return;
    };
    if !matches!(attr.attr.as_str(), "add" | "setdefault") {
        return;
    }
    let Some(key) = call.arguments.args.first() else {
        return;
    };
    store(checker, &attr.value, key, call.range());
}

pub(crate) fn stmt(checker: &mut Checker, stmt: &Stmt) {
    match stmt {
        Stmt::Assign(assign) => {
            for target in &assign.targets {
                if let Expr::Subscript(sub) = target {
                    store(checker, &sub.value, &sub.slice, stmt.range());
                }
            }
        }
        // `counts[key] += 1` adds the key when it is new.
        Stmt::AugAssign(aug) => {
            if let Expr::Subscript(sub) = &*aug.target {
                store(checker, &sub.value, &sub.slice, stmt.range());
            }
        }
        _ => {}
    }
}

fn check_call_of_cached(checker: &mut Checker, call: &ExprCall) -> bool {
    let Expr::Name(name) = &*call.func else {
        return false;
    };
    if !checker.per_step() {
        return false;
    }
    let key = file_key(checker);
    let Some(cached) = CACHED.with(|c| {
        let c = c.borrow();
        (c.file == key)
            .then(|| c.by_name.get(name.id.as_str()).cloned())
            .flatten()
    }) else {
        return false;
    };
    let text_at = |r: TextRange| {
        checker
            .source
            .get(usize::from(r.start())..usize::from(r.end()))
    };
    if text_at(cached.name_range) != Some(name.id.as_str())
        || text_at(cached.decorator_range) != Some(cached.decorator_text.as_str())
    {
        return false;
    }
    let Some((arg, kind)) = call
        .arguments
        .args
        .iter()
        .chain(call.arguments.keywords.iter().map(|k| &k.value))
        .find_map(|a| value_kind(checker, a).map(|k| (a, k)))
    else {
        return true;
    };
    let message = format!(
        "`{}` on `{}()` is an unbounded cache with strong references: the call at line {} passes \
         `{}` ({kind}), and the cache keeps every such argument alive for the life of the \
         process, together with every result; tensors and modules hash by identity, so new ones \
         are cache misses that add entries; drop the cache, key it by a stable value, or bound it \
         with `lru_cache(maxsize=...)`",
        cached.decorator,
        name.id.as_str(),
        checker.line(call.start()),
        short(checker, arg),
    );
    checker.report(Diagnostic::new(
        Rule::LS013,
        message,
        cached.decorator_range,
    ));
    true
}

/// `@functools.cache`, `@lru_cache(maxsize=None)`, `@lru_cache(None)`: the decorator's text.
fn unbounded_cache(checker: &Checker, d: &Decorator) -> Option<String> {
    let expr = &d.expression;
    let text = format!("@{}", checker.text(expr.range()));
    match expr {
        Expr::Call(call) => {
            let q = checker.facts.imports.qualify(&call.func)?;
            if q != "functools.lru_cache" {
                return None;
            }
            let positional_none = call
                .arguments
                .args
                .first()
                .is_some_and(Expr::is_none_literal_expr);
            let keyword_none = call.arguments.keywords.iter().any(|k| {
                k.arg.as_ref().is_some_and(|a| a.as_str() == "maxsize")
                    && k.value.is_none_literal_expr()
            });
            (positional_none || keyword_none).then_some(text)
        }
        e => {
            let q = checker.facts.imports.qualify(e)?;
            (q == "functools.cache").then_some(text)
        }
    }
}

fn takes_self(checker: &Checker, def: &StmtFunctionDef) -> bool {
    let is_static = def.decorator_list.iter().any(|d| {
        dotted(&d.expression).is_some_and(|n| matches!(n.as_str(), "staticmethod" | "classmethod"))
    });
    !is_static && def.parameters.iter().next().is_some() && checker.class().is_some()
}

/// A tensor or a module, as the analysis sees the value.
fn value_kind(checker: &Checker, expr: &Expr) -> Option<&'static str> {
    let v = checker.value(expr);
    if v.kind == Kind::Module {
        Some("an `nn.Module`")
    } else if v.is_tensor_like() || v.has_graph() {
        Some("a tensor")
    } else {
        None
    }
}

/// Parameters of `def` that hold tensors or modules: annotated so, named like a module by
/// convention, passed to a module call in the body, or used with tensor-only methods.
fn typed_params(checker: &Checker, def: &StmtFunctionDef) -> Vec<(String, &'static str)> {
    let mut out: Vec<(String, &'static str)> = Vec::new();
    let mut untyped: FxHashSet<String> = FxHashSet::default();
    for (i, p) in def.parameters.iter().enumerate() {
        let name = p.name().as_str().to_string();
        if i == 0 && checker.class().is_some() && takes_self(checker, def) {
            continue;
        }
        if let Some(kind) = p.annotation().and_then(|a| annotation_kind(checker, a)) {
            out.push((name, kind));
            continue;
        }
        if checker
            .scope()
            .env
            .get(&name)
            .is_some_and(|v| v.kind == Kind::Module)
        {
            out.push((name, "an `nn.Module`"));
            continue;
        }
        untyped.insert(name);
    }
    if !untyped.is_empty() {
        for (name, kind) in used_as_tensor(checker, &def.body, &untyped) {
            out.push((name, kind));
        }
    }
    out
}

fn annotation_kind(checker: &Checker, annotation: &Expr) -> Option<&'static str> {
    let annotation = match annotation {
        // `Optional[Tensor]`, `"torch.Tensor"` are not worth the trouble; `torch.Tensor` is.
        Expr::Subscript(_) | Expr::StringLiteral(_) => return None,
        a => a,
    };
    let q = checker.facts.imports.qualify(annotation)?;
    match q.as_str() {
        "torch.Tensor" | "torch.FloatTensor" | "torch.LongTensor" | "torch.nn.Parameter" => {
            Some("a tensor")
        }
        "torch.nn.Module" => Some("an `nn.Module`"),
        q if checker.facts.is_module_class(q) => Some("an `nn.Module`"),
        _ => None,
    }
}

/// Parameters passed as an argument to a module call (`self.backbone(x)`) or used with a
/// tensor method (`x.detach()`, `x.cuda()`, `x.unsqueeze(0)`) in the body: an argument of a cache
/// or a dict key is hashable, which rules out numpy arrays.
fn used_as_tensor(
    checker: &Checker,
    body: &[Stmt],
    names: &FxHashSet<String>,
) -> Vec<(String, &'static str)> {
    struct V<'c, 'a, 'n> {
        checker: &'c Checker<'a>,
        names: &'n FxHashSet<String>,
        found: Vec<(String, &'static str)>,
    }
    impl<'e> Visitor<'e> for V<'_, '_, '_> {
        fn visit_expr(&mut self, expr: &'e Expr) {
            if let Expr::Call(call) = expr {
                if let Expr::Attribute(a) = &*call.func {
                    if let Expr::Name(n) = &*a.value {
                        if self.names.contains(n.id.as_str())
                            && matches!(
                                a.attr.as_str(),
                                "detach"
                                    | "cuda"
                                    | "numel"
                                    | "dim"
                                    | "backward"
                                    | "requires_grad_"
                                    | "unsqueeze"
                                    | "squeeze"
                                    | "view"
                                    | "softmax"
                                    | "size"
                            )
                        {
                            self.found.push((n.id.as_str().to_string(), "a tensor"));
                        }
                    }
                }
                if self.checker.value(&call.func).kind == Kind::Module {
                    for a in &*call.arguments.args {
                        if let Expr::Name(n) = a {
                            if self.names.contains(n.id.as_str()) {
                                self.found.push((n.id.as_str().to_string(), "a tensor"));
                            }
                        }
                    }
                }
            }
            walk_expr(self, expr);
        }
    }
    let mut v = V {
        checker,
        names,
        found: Vec::new(),
    };
    for stmt in body {
        ruff_python_ast::visitor::walk_stmt(&mut v, stmt);
    }
    v.found
}

/// `container[key] = ...` / `container.add(key)`: report when `key` is a tensor or module and the
/// container is a long-lived dict/set that nothing ever evicts from.
fn store(checker: &mut Checker, container: &Expr, key: &Expr, range: TextRange) {
    if !checker.per_step() {
        return;
    }
    let Some((name, lives, is_set)) = unevicted_container(checker, container) else {
        return;
    };
    let kind = match value_kind(checker, key) {
        // A hook's `module` is one of the model's layers: a fixed set, not a growing one.
        Some(k) if k.contains("Module") && checker.is_hook_function() => return,
        Some(k) => k,
        None => {
            let Expr::Name(n) = key else { return };
            if !checker.scope().params.contains(n.id.as_str()) {
                return;
            }
            let Some(def) = checker.function() else {
                return;
            };
            let Some((_, k)) = typed_params(checker, def)
                .into_iter()
                .find(|(p, _)| p == n.id.as_str())
            else {
                return;
            };
            k
        }
    };
    let message = if is_set {
        format!(
            "`{name}` collects `{}` ({kind}) and nothing ever removes an element: tensors and \
             modules hash by identity, so each new one is added, and `{name}` keeps every element \
             alive {lives}; store a stable value, discard elements, or use `weakref.WeakSet`",
            short(checker, key),
        )
    } else {
        format!(
            "`{name}` is keyed by `{}` ({kind}) and nothing ever removes an entry: tensors and \
             modules hash by identity, so each new one adds an entry, and `{name}` keeps every key \
             and value alive {lives}; key it by a stable value, evict entries, or use \
             `weakref.WeakKeyDictionary`",
            short(checker, key),
        )
    };
    checker.report(Diagnostic::new(Rule::LS013, message, range));
}

/// A dict/set on the object, in a module global or in a local that a training loop fills, with
/// no clear/pop/trim/rebind anywhere, and how long it lives.
fn unevicted_container(checker: &Checker, container: &Expr) -> Option<(String, String, bool)> {
    let in_init = checker
        .function()
        .is_some_and(|f| f.name.as_str() == "__init__");
    if let Some(attr) = self_attr(container) {
        if in_init {
            return None;
        }
        let place = checker.attr_facts(attr)?;
        if !matches!(place.init, Kind::Dict | Kind::Set) || place.resets().next().is_some() {
            return None;
        }
        return Some((
            format!("self.{attr}"),
            "for the life of the object".to_string(),
            place.init == Kind::Set,
        ));
    }
    let Expr::Name(n) = container else {
        return None;
    };
    let name = n.id.as_str();
    let scope = checker.scope();
    if checker.function().is_some()
        && (scope.bound_depth.contains_key(name) || scope.params.contains(name))
        && !scope.declared_global.contains(name)
    {
        // A local dict or set made before the training loop, which keeps it for every step.
        let kind = checker.value(container).kind;
        if !matches!(kind, Kind::Dict | Kind::Set) || scope.params.contains(name) {
            return None;
        }
        let lifetime = checker.lifetime(container)?;
        let it = checker.iteration()?;
        if lifetime.holder != crate::checker::Holder::OuterLocal
            || !matches!(
                lifetime.until,
                crate::semantic::lifetime::Until::Return { .. }
            )
            || it.grain() != Grain::Step
            || checker.iteration_facts(it).resets(name)
        {
            return None;
        }
        return Some((
            name.to_string(),
            crate::rules::helpers::until(checker, &lifetime),
            kind == Kind::Set,
        ));
    }
    let place = checker.facts.globals.get(name)?;
    if !matches!(place.init, Kind::Dict | Kind::Set)
        || place.changes.iter().any(|c| c.mutation != Mutation::Grow)
    {
        return None;
    }
    if checker.function().is_none() && !checker.in_loop() {
        return None;
    }
    if scope.body_facts.resets(name) {
        return None;
    }
    Some((
        name.to_string(),
        "for the life of the process (a module global)".to_string(),
        place.init == Kind::Set,
    ))
}

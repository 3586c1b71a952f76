//! A file's summary, read off the semantic model once the check's walk is done, and the calls
//! that leave the file, recorded as the reporting walk meets them (it knows there what each
//! argument holds and how often the statement runs).

use ruff_python_ast::{Expr, ExprCall, Stmt};
use ruff_text_size::{Ranged, TextSize};

use super::{
    ArgFact, AttrSummary, CallFact, Callee, ClassSummary, FileSummary, FunctionSummary, MethodSig,
    OriginSummary, ValueSummary,
};
use crate::semantic::model::{ScopeKind, SemanticModel};
use crate::semantic::mutation::Mutation;
use crate::semantic::summary::summary_key;

/// Top-level packages whose API the analysis models itself (`semantic/names.rs`), or that
/// hold no code of the project (the standard library): calls into them never leave for
/// another file of the project.
pub(crate) fn is_modelled_or_standard(top: &str) -> bool {
    matches!(
        top,
        "torch"
            | "numpy"
            | "matplotlib"
            | "os"
            | "sys"
            | "re"
            | "math"
            | "time"
            | "json"
            | "random"
            | "collections"
            | "itertools"
            | "functools"
            | "typing"
            | "pathlib"
            | "logging"
            | "argparse"
            | "copy"
            | "warnings"
            | "abc"
            | "dataclasses"
            | "enum"
            | "contextlib"
            | "inspect"
            | "subprocess"
            | "shutil"
            | "glob"
            | "pickle"
            | "io"
            | "datetime"
            | "threading"
            | "multiprocessing"
            | "queue"
            | "string"
            | "textwrap"
            | "traceback"
            | "types"
            | "weakref"
            | "operator"
            | "heapq"
            | "bisect"
            | "hashlib"
            | "uuid"
            | "tempfile"
            | "csv"
            | "gzip"
            | "zipfile"
            | "tarfile"
            | "struct"
            | "socket"
            | "signal"
            | "platform"
            | "gc"
            | "atexit"
            | "unittest"
            | "builtins"
            | "statistics"
            | "fractions"
            | "decimal"
            | "numbers"
            | "importlib"
            | "pprint"
            | "secrets"
            | "shlex"
            | "sqlite3"
            | "urllib"
            | "http"
            | "email"
            | "concurrent"
            | "asyncio"
            | "ctypes"
            | "dis"
            | "ast"
            | "tokenize"
            | "codecs"
            | "unicodedata"
            | "locale"
            | "getpass"
            | "errno"
            | "stat"
            | "fnmatch"
            | "linecache"
            | "array"
            | "cmath"
            | "zlib"
            | "base64"
            | "binascii"
            | "select"
            | "selectors"
            | "mmap"
            | "resource"
            | "sysconfig"
            | "site"
            | "typing_extensions"
    )
}

/// A dotted name (as the file's imports give it) that may be a function or class of another
/// file of the project: relative (`.metrics.Metric`), or absolute in a package that is neither
/// modelled nor standard.
pub(crate) fn may_be_in_project(qualified: &str) -> bool {
    if qualified.starts_with('.') {
        return true;
    }
    match qualified.split_once('.') {
        Some((top, _)) => !is_modelled_or_standard(top),
        // A bare name is a builtin or a name the file defines or leaves undefined.
        None => false,
    }
}

impl SemanticModel<'_> {
    /// When making the file's summary: records a call of the reporting walk that leaves the
    /// file (a function or class of another module, a method of an object of such a class, a
    /// method of `self` that a base elsewhere or a subclass defines), with what its arguments
    /// carry and how often it runs here.
    pub(crate) fn record_call(&self, call: &ExprCall) {
        let Some(out) = &self.calls_out else { return };
        let Some(callee) = self.leaving_callee(call) else {
            return;
        };
        let grad = self.grad_enabled();
        let args = call
            .arguments
            .args
            .iter()
            .map(|a| self.arg_fact(a))
            .collect();
        let caller = match self.scope().kind {
            ScopeKind::Function { def, class } => summary_key(def, class),
            ScopeKind::Module => String::new(),
        };
        let fact = CallFact {
            caller,
            callee,
            args,
            // Every so many iterations (`if step % n == 0:`) is as often as an outer loop's.
            grain: self.iteration().map(|it| {
                if self.periodically(it) {
                    crate::semantic::iteration::Grain::Epoch
                } else {
                    it.grain()
                }
            }),
            grad,
            line: self.line(call.start()) as u32,
            renews: self.training().renews(call.start()),
        };
        out.borrow_mut().push(fact);
    }

    /// Layers in order (`nn.Sequential(nn.Conv2d(...), DBN(8), ...)`, or a list of them,
    /// `layers += [nn.Conv2d(...), DBN(v), nn.ReLU()]`, that a `Sequential(*layers)` runs) with
    /// `DBN` from another module: its `forward` gets the previous layer's output, which carries
    /// a graph when the model runs with autograd on, as the file's own layers do
    /// (`layers_fed_by_modules`). `value` is a statement's value; nested displays are searched too.
    pub(crate) fn record_layer_lists(&self, value: &Expr) {
        struct Orders<'e> {
            found: Vec<&'e [Expr]>,
        }
        impl<'e> ruff_python_ast::visitor::Visitor<'e> for Orders<'e> {
            fn visit_expr(&mut self, expr: &'e Expr) {
                match expr {
                    Expr::List(l) => self.found.push(&l.elts),
                    Expr::Tuple(t) => self.found.push(&t.elts),
                    Expr::Call(c) => self.found.push(&c.arguments.args),
                    _ => {}
                }
                ruff_python_ast::visitor::walk_expr(self, expr);
            }
        }
        let Some(out) = &self.calls_out else { return };
        if !self.facts.uses_torch {
            return;
        }
        let mut orders = Orders { found: Vec::new() };
        ruff_python_ast::visitor::Visitor::visit_expr(&mut orders, value);
        let grad = self.grad_enabled();
        for elts in orders.found {
            for (layer, origin) in self.layers_fed_by_modules(elts) {
                let Some(class) = crate::semantic::facts::foreign_class(layer, &self.facts.imports)
                else {
                    continue;
                };
                let caller = match self.scope().kind {
                    ScopeKind::Function { def, class } => summary_key(def, class),
                    ScopeKind::Module => String::new(),
                };
                let origin = OriginSummary::of(&origin, &|at| self.line(at) as u32);
                out.borrow_mut().push(CallFact {
                    caller,
                    callee: Callee::Method {
                        class,
                        method: "forward".to_string(),
                    },
                    args: vec![ArgFact::Graph(origin)],
                    grain: None,
                    grad,
                    line: self.line(layer.start()) as u32,
                    renews: false,
                });
            }
        }
    }

    /// Where a call goes when it leaves the file.
    fn leaving_callee(&self, call: &ExprCall) -> Option<Callee> {
        if let Expr::Attribute(a) = &*call.func {
            let method = a.attr.as_str();
            if matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "self") {
                let class = self.class()?;
                let own = self.facts.class(class.name.as_str())?;
                // `self.norm(h)` with `self.norm = DBN(8)` from another module: that class's
                // `forward` runs, with `h` as its input.
                if !own.methods.contains(method) {
                    if let Some(q) = own.attrs.get(method).and_then(|p| p.foreign_class.clone()) {
                        return Some(Callee::Method {
                            class: q,
                            method: "forward".to_string(),
                        });
                    }
                }
                // Defined by the class or a base of this file, and not abstract there: the
                // file's own summaries answer. Otherwise what runs is a base's elsewhere, or
                // a subclass's override: the index finds it.
                let in_file = std::iter::once(own.name.as_str())
                    .chain(own.in_file_bases.iter().map(String::as_str))
                    .find(|c| class_body_defines(self, c, method));
                let concrete = in_file.is_some_and(|c| {
                    self.facts
                        .class(c)
                        .is_some_and(|f| !f.abstract_methods.contains(method))
                });
                let bases_elsewhere = own
                    .bases
                    .iter()
                    .chain(
                        own.in_file_bases
                            .iter()
                            .filter_map(|b| self.facts.class(b))
                            .flat_map(|b| b.bases.iter()),
                    )
                    .any(|b| may_be_in_project(b) && self.facts.class(b).is_none());
                if concrete || in_file.is_none() && !bases_elsewhere {
                    return None;
                }
                return Some(Callee::SelfMethod {
                    class: class.name.to_string(),
                    method: method.to_string(),
                });
            }
            // A method of an object of a class of another module: a local bound to one, or an
            // attribute of `self` made or annotated as one in `__init__`.
            let class = match &*a.value {
                Expr::Name(n) => self
                    .scopes
                    .iter()
                    .rev()
                    .find_map(|s| s.foreign_instances.get(n.id.as_str()).cloned()),
                Expr::Attribute(inner)
                    if matches!(&*inner.value, Expr::Name(n) if n.id.as_str() == "self") =>
                {
                    let own = self.class()?;
                    let place = self
                        .facts
                        .class(own.name.as_str())
                        .and_then(|c| c.attrs.get(inner.attr.as_str()));
                    let foreign = place.and_then(|p| p.foreign_class.clone());
                    // Bound from a parameter of `__init__`, its class unknown here: the
                    // index tells it from what callers pass.
                    if foreign.is_none()
                        && place.is_some_and(|p| p.from_param.is_some() && p.class.is_none())
                    {
                        return Some(Callee::AttrMethod {
                            class: own.name.to_string(),
                            attr: inner.attr.to_string(),
                            method: method.to_string(),
                        });
                    }
                    foreign
                }
                _ => None,
            }
            .or_else(|| {
                self.class_of(&a.value)
                    .filter(|c| self.facts.class(c).is_some_and(|f| f.external))
            });
            if let Some(class) = class {
                return Some(Callee::Method {
                    class,
                    method: method.to_string(),
                });
            }
        }
        // A name an import binds (`plot_step`, `utils.plot_step`), never a local's method.
        let mut head = &*call.func;
        while let Expr::Attribute(a) = head {
            head = &a.value;
        }
        if !matches!(head, Expr::Name(n) if self.facts.imports.binds(n.id.as_str())) {
            return None;
        }
        let q = self.qualified_function(&call.func)?;
        if !may_be_in_project(&q) || self.facts.class(&q).is_some_and(|c| !c.external) {
            return None;
        }
        Some(Callee::Name(q.to_string()))
    }

    fn arg_fact(&self, arg: &Expr) -> ArgFact {
        if matches!(arg, Expr::Starred(_)) {
            return ArgFact::Other;
        }
        let v = self.value(arg);
        if let Some(o) = v.origin() {
            if o.param.is_none() {
                let o = self.as_passed(o, arg, 0);
                return ArgFact::Graph(OriginSummary {
                    tensor: v.is_tensor(),
                    ..OriginSummary::of(&o, &|at| self.line(at) as u32)
                });
            }
        }
        // A parameter of the caller passed on as it came: whatever callers elsewhere give it
        // reaches the callee.
        if let (Expr::Name(n), ScopeKind::Function { def, .. }) = (arg, &self.scope().kind) {
            let name = n.id.as_str();
            let rebound = self.scope().body_facts.rebinds(name);
            if !rebound {
                if let Some(i) = positional_params(def).iter().position(|p| *p == name) {
                    return ArgFact::Param(i);
                }
            }
        }
        if v.kind == crate::semantic::value::Kind::Parameters {
            return ArgFact::Parameters;
        }
        // An object of a known class: a local bound to one (of this file or another), or one
        // made in the argument itself.
        let class = match arg {
            Expr::Name(n) => self
                .scopes
                .iter()
                .rev()
                .find_map(|s| s.foreign_instances.get(n.id.as_str()).cloned())
                .or_else(|| self.class_of(arg)),
            Expr::Call(_) => crate::semantic::facts::foreign_class(arg, &self.facts.imports)
                .or_else(|| self.class_of(arg)),
            _ => None,
        };
        match class {
            Some(c) => ArgFact::Instance(c),
            None => ArgFact::Other,
        }
    }

    /// The file's summary, once the walk is done.
    pub(crate) fn file_summary(&self) -> FileSummary {
        let line = |at: TextSize| self.line(at) as u32;
        // How often functions run by the file's own account: what callers elsewhere make of
        // them is the index's to tell, not the file's to repeat (it would be told back).
        let own_training;
        let training = if self.external.cadence.is_empty() && self.external.trains.is_empty() {
            self.training()
        } else {
            own_training = crate::semantic::iteration::Training::collect(
                self.source,
                self.suite(),
                self.facts,
                &self.hook_functions,
                &super::NO_FACTS,
            );
            &own_training
        };
        let mut functions = Vec::new();
        let mut function = |key: String, def: &ruff_python_ast::StmtFunctionDef| {
            let returns = self
                .summaries
                .get(&key)
                .map(|v| ValueSummary::of(v, &line))
                .filter(ValueSummary::is_informative);
            // Every function is listed (the index resolves names to them), informative or not.
            functions.push(FunctionSummary {
                key,
                line: line(def.start()),
                returns,
                cadence: training.cadence(def).grain(),
                trains: training.trains(def),
                adds: crate::semantic::scan::in_place_add(def).map(|(i, j, at)| (i, j, line(at))),
            });
        };
        let mut classes = Vec::new();
        for stmt in self.suite() {
            match stmt {
                Stmt::FunctionDef(def) => function(def.name.to_string(), def),
                Stmt::ClassDef(class) => {
                    for s in &class.body {
                        if let Stmt::FunctionDef(def) = s {
                            function(summary_key(def, Some(class)), def);
                        }
                    }
                    if let Some(facts) = self.facts.class(class.name.as_str()) {
                        let mut summary = class_summary(facts, line(class.start()));
                        summary.makes_parameters =
                            crate::semantic::facts::may_make_parameters(class, self.facts);
                        classes.push(summary);
                    }
                }
                _ => {}
            }
        }
        let mut resets_attrs: Vec<String> = Vec::new();
        for block in self.scanned_blocks() {
            for (key, changes) in &block.changes {
                let Some((head, attr)) = key.rsplit_once('.') else {
                    continue;
                };
                if matches!(head, "self" | "cls") || attr.is_empty() {
                    continue;
                }
                if changes.iter().any(|m| *m != Mutation::Grow) {
                    resets_attrs.push(attr.to_string());
                }
            }
        }
        resets_attrs.sort_unstable();
        resets_attrs.dedup();
        let mut aliases: Vec<(String, String)> =
            crate::semantic::names::Imports::collect(self.suite())
                .aliases()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        aliases.sort_unstable();
        let mut constants: Vec<String> = self.facts.plain_globals.iter().cloned().collect();
        constants.sort_unstable();
        let mut grad_off: Vec<String> = self.facts.grad_off.iter().cloned().collect();
        grad_off.sort_unstable();
        FileSummary {
            constants,
            grad_off,
            aliases,
            functions,
            classes,
            calls: self
                .calls_out
                .as_ref()
                .map(|c| c.borrow().clone())
                .unwrap_or_default(),
            resets_attrs,
        }
    }
}

/// Does the body of the class of this file named `class` define `method` itself?
fn class_body_defines(model: &SemanticModel, class: &str, method: &str) -> bool {
    model.suite().iter().any(|s| match s {
        Stmt::ClassDef(c) if c.name.as_str() == class => c
            .body
            .iter()
            .any(|m| matches!(m, Stmt::FunctionDef(f) if f.name.as_str() == method)),
        _ => false,
    })
}

fn class_summary(facts: &crate::semantic::facts::ClassFacts, line: u32) -> ClassSummary {
    let mut methods: Vec<MethodSig> = facts
        .methods
        .iter()
        .map(|m| {
            let (min, max) = facts.arity.get(m).copied().unwrap_or((0, usize::MAX));
            MethodSig {
                name: m.clone(),
                min,
                max,
                is_abstract: facts.abstract_methods.contains(m),
            }
        })
        .collect();
    methods.sort_by(|a, b| a.name.cmp(&b.name));
    let mut attrs: Vec<AttrSummary> = facts
        .attrs
        .iter()
        .map(|(name, p)| AttrSummary {
            name: name.clone(),
            init: p.init,
            class: None,
            elem_class: None,
            from_param: p.from_param,
        })
        .collect();
    attrs.sort_by(|a, b| a.name.cmp(&b.name));
    ClassSummary {
        name: facts.name.clone(),
        line,
        bases: facts.bases.clone(),
        is_module: facts.is_module,
        makes_parameters: facts.makes_parameters,
        framework_owned: facts.framework_owned,
        methods,
        attrs,
    }
}

/// Positional parameters after `self`/`cls`.
pub(crate) fn positional_params(def: &ruff_python_ast::StmtFunctionDef) -> Vec<&str> {
    def.parameters
        .posonlyargs
        .iter()
        .chain(def.parameters.args.iter())
        .map(|p| p.parameter.name.as_str())
        .filter(|n| !matches!(*n, "self" | "cls"))
        .collect()
}

//! The project index: every file's summary, under its module name, and the questions only the
//! whole project answers. Which module, class or function a dotted name in a file stands for
//! (absolute, relative, a re-export through a package's `__init__`, or a script's sibling
//! module); each class's bases across files and what they give it; which functions callers in
//! other files pass graphs to or run once per step (a fixed point over every call that leaves
//! a file); and, per file, the [`ExternalFacts`] the semantic model takes in.

use std::collections::BTreeMap;
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::semantic::iteration::Grain;
use crate::semantic::value::Kind;
use crate::summaries::{
    ArgFact, Callee, ClassSummary, ExternalClass, ExternalFacts, FileSummary, FunctionSummary,
    MethodSig, OriginSummary, Passed, ValueSummary,
};

/// One file of the project, as the index sees it.
#[derive(Debug, Clone)]
pub struct IndexedFile {
    /// The path shown in messages (`utils/metrics.py`), relative to the root.
    pub path: String,
    /// The dotted name it is imported by; `None` for what nothing imports (a notebook).
    pub module: Option<String>,
    /// A package's `__init__`: relative imports start from the module itself.
    pub is_package: bool,
    pub summary: Arc<FileSummary>,
}

/// A class: (file, class name).
type ClassId = (usize, String);
/// A function or method: (file, `f` or `Class.method`).
type FuncId = (usize, String);

enum Symbol {
    Module,
    /// A module-level name bound once to a number or a string.
    Constant,
    Class(ClassId),
    Function(FuncId),
    Method(ClassId, String),
}

/// How deep re-exports and base chains are followed.
const MAX_DEPTH: usize = 8;
/// Passes of the fixed point over calls (taints and cadence); each pass follows every call.
const MAX_PASSES: usize = 8;

pub struct ProjectIndex<'f> {
    files: &'f [IndexedFile],
    modules: FxHashMap<&'f str, usize>,
    classes: FxHashMap<(usize, &'f str), &'f ClassSummary>,
    functions: FxHashMap<(usize, &'f str), &'f FunctionSummary>,
    /// Direct project bases of each class.
    bases: FxHashMap<ClassId, Vec<ClassId>>,
    /// Direct project subclasses of each class.
    subclasses: FxHashMap<ClassId, Vec<ClassId>>,
    /// Graphs that calls pass to each function's positional parameters (after `self`).
    taints: FxHashMap<FuncId, Vec<Option<OriginSummary>>>,
    /// How often each function runs: by its own file's account, or by a caller elsewhere
    /// (that caller, and the file it is in).
    cadence: FxHashMap<FuncId, (Grain, String, usize)>,
    /// Classes whose objects each file makes (`Metric(...)`), by class.
    made_in: FxHashMap<ClassId, FxHashSet<usize>>,
    /// The calls that make an object of each class (file, index of the call), for what they
    /// pass to `__init__`.
    constructions: FxHashMap<ClassId, Vec<(usize, usize)>>,
    /// The files that reset an attribute of each name on objects other than `self`.
    resets: FxHashMap<&'f str, Vec<usize>>,
    /// Functions that train, themselves or through what they call in any file.
    trains: FxHashSet<FuncId>,
    /// Functions that calls in other files run: `true` when one of them runs with autograd on.
    grad_calls: FxHashMap<FuncId, bool>,
    /// Per positional parameter (after `self`) of each function that calls in other files run:
    /// `Some(true)` while every one of them passes an `nn.Module` of the project there.
    passed_args: FxHashMap<FuncId, Vec<Option<Option<Passed>>>>,
    /// Each call that leaves a file, resolved: (file, index of the call, where it goes).
    resolved: Vec<(usize, usize, Vec<FuncId>)>,
}

impl<'f> ProjectIndex<'f> {
    pub fn build(files: &'f [IndexedFile]) -> Self {
        let mut index = ProjectIndex {
            files,
            modules: FxHashMap::default(),
            classes: FxHashMap::default(),
            functions: FxHashMap::default(),
            bases: FxHashMap::default(),
            subclasses: FxHashMap::default(),
            taints: FxHashMap::default(),
            cadence: FxHashMap::default(),
            made_in: FxHashMap::default(),
            constructions: FxHashMap::default(),
            resets: FxHashMap::default(),
            trains: FxHashSet::default(),
            grad_calls: FxHashMap::default(),
            passed_args: FxHashMap::default(),
            resolved: Vec::new(),
        };
        for (i, f) in files.iter().enumerate() {
            if let Some(m) = &f.module {
                // The sources of a library the analysis models itself (checking torch's own
                // tree) are read from that model: calls into them tell nothing more.
                if super::is_library_source(Some(m)) {
                    continue;
                }
                // Two files of one name (`a.py` and `a/__init__.py`): the first in path order.
                index.modules.entry(m.as_str()).or_insert(i);
            }
            for c in &f.summary.classes {
                index.classes.insert((i, c.name.as_str()), c);
            }
            for func in &f.summary.functions {
                index.functions.insert((i, func.key.as_str()), func);
            }
            for a in &f.summary.resets_attrs {
                index.resets.entry(a.as_str()).or_default().push(i);
            }
        }
        for (i, f) in files.iter().enumerate() {
            for c in &f.summary.classes {
                let id: ClassId = (i, c.name.clone());
                for b in &c.bases {
                    if let Some(Symbol::Class(base)) = index.resolve(i, b) {
                        if base != id {
                            index
                                .subclasses
                                .entry(base.clone())
                                .or_default()
                                .push(id.clone());
                            index.bases.entry(id.clone()).or_default().push(base);
                        }
                    }
                }
            }
        }
        for (i, f) in files.iter().enumerate() {
            for (k, fact) in f.summary.calls.iter().enumerate() {
                if let Callee::Name(q) = &fact.callee {
                    if let Some(Symbol::Class(c)) = index.resolve(i, q) {
                        index.constructions.entry(c).or_default().push((i, k));
                    }
                }
            }
        }
        index.solve_calls();
        index
    }

    // ----- names ---------------------------------------------------------------------------

    /// What the dotted name `q`, as file `file`'s imports give it, stands for.
    fn resolve(&self, file: usize, q: &str) -> Option<Symbol> {
        self.resolve_at(file, q, 0)
    }

    fn resolve_at(&self, file: usize, q: &str, depth: usize) -> Option<Symbol> {
        if depth > MAX_DEPTH {
            return None;
        }
        // A name of the file itself (a base class defined above).
        if !q.contains('.') {
            return self.member(file, q, depth);
        }
        for candidate in self.candidates(file, q) {
            if let Some(s) = self.lookup(&candidate, depth) {
                return Some(s);
            }
        }
        None
    }

    /// Absolute names `q` may stand for: a relative import resolved against the file's
    /// package; an absolute one as written, then from each package around the file (a script
    /// run from its folder imports its siblings: `from utils.metrics import Metric` next to
    /// `utils/`).
    fn candidates(&self, file: usize, q: &str) -> Vec<String> {
        let f = &self.files[file];
        let package: Vec<&str> = match &f.module {
            Some(m) => {
                let mut parts: Vec<&str> = m.split('.').collect();
                if !f.is_package {
                    parts.pop();
                }
                parts
            }
            None => Vec::new(),
        };
        if let Some(rest) = q.strip_prefix('.') {
            if f.module.is_none() {
                return Vec::new();
            }
            let mut level = 1;
            let mut rest = rest;
            while let Some(r) = rest.strip_prefix('.') {
                level += 1;
                rest = r;
            }
            if level - 1 > package.len() {
                return Vec::new();
            }
            let mut base: Vec<&str> = package[..package.len() - (level - 1)].to_vec();
            if !rest.is_empty() {
                base.push(rest);
            }
            return vec![base.join(".")];
        }
        let mut out = vec![q.to_string()];
        for n in (1..=package.len()).rev() {
            out.push(format!("{}.{q}", package[..n].join(".")));
        }
        out
    }

    /// An absolute dotted name: the longest module prefix, then a member of it.
    fn lookup(&self, name: &str, depth: usize) -> Option<Symbol> {
        let parts: Vec<&str> = name.split('.').collect();
        for i in (1..=parts.len()).rev() {
            let prefix = parts[..i].join(".");
            let Some(&file) = self.modules.get(prefix.as_str()) else {
                continue;
            };
            return match &parts[i..] {
                [] => Some(Symbol::Module),
                [member] => self.member(file, member, depth),
                [class, method] => match self.member(file, class, depth)? {
                    Symbol::Class(c) => Some(Symbol::Method(c, (*method).to_string())),
                    _ => None,
                },
                _ => None,
            };
        }
        None
    }

    /// A top-level name of a file: its class or function, or what its import of that name
    /// stands for (a re-export).
    fn member(&self, file: usize, name: &str, depth: usize) -> Option<Symbol> {
        if self.classes.contains_key(&(file, name)) {
            return Some(Symbol::Class((file, name.to_string())));
        }
        if self.functions.contains_key(&(file, name)) {
            return Some(Symbol::Function((file, name.to_string())));
        }
        let summary = &self.files[file].summary;
        if summary
            .constants
            .binary_search_by(|c| c.as_str().cmp(name))
            .is_ok()
        {
            return Some(Symbol::Constant);
        }
        let aliases = &self.files[file].summary.aliases;
        let i = aliases
            .binary_search_by(|(k, _)| k.as_str().cmp(name))
            .ok()?;
        self.resolve_at(file, &aliases[i].1, depth + 1)
    }

    // ----- classes -------------------------------------------------------------------------

    /// The class and its project bases, nearest first, each once.
    fn mro(&self, class: &ClassId) -> Vec<ClassId> {
        let mut out = vec![class.clone()];
        let mut i = 0;
        while i < out.len() && out.len() < 64 {
            if let Some(bases) = self.bases.get(&out[i]) {
                for b in bases {
                    if !out.contains(b) {
                        out.push(b.clone());
                    }
                }
            }
            i += 1;
        }
        out
    }

    fn class(&self, id: &ClassId) -> Option<&'f ClassSummary> {
        self.classes.get(&(id.0, id.1.as_str())).copied()
    }

    /// The class along the MRO that defines `method`, and its signature.
    fn definer(&self, class: &ClassId, method: &str) -> Option<(ClassId, &'f MethodSig)> {
        self.mro(class).into_iter().find_map(|c| {
            let sig = self.class(&c)?.methods.iter().find(|m| m.name == method)?;
            Some((c, sig))
        })
    }

    /// Concrete definitions of `method` in the project's subclasses of `class` (transitively).
    fn overrides(&self, class: &ClassId, method: &str) -> Vec<FuncId> {
        let mut out = Vec::new();
        let mut stack = vec![class.clone()];
        let mut seen: FxHashSet<ClassId> = FxHashSet::default();
        while let Some(c) = stack.pop() {
            for sub in self.subclasses.get(&c).into_iter().flatten() {
                if !seen.insert(sub.clone()) {
                    continue;
                }
                if let Some(sig) = self
                    .class(sub)
                    .and_then(|s| s.methods.iter().find(|m| m.name == method))
                {
                    if !sig.is_abstract {
                        out.push((sub.0, format!("{}.{method}", sub.1)));
                    }
                }
                stack.push(sub.clone());
            }
        }
        out.sort();
        out
    }

    /// What a class of another file looks like to a file that uses it.
    fn external_class(&self, id: &ClassId) -> ExternalClass {
        let mut out = ExternalClass::default();
        let mut methods: BTreeMap<String, MethodSig> = BTreeMap::new();
        let mut attrs = BTreeMap::new();
        for c in self.mro(id) {
            let Some(s) = self.class(&c) else { continue };
            out.is_module |= s.is_module;
            out.makes_parameters |= s.makes_parameters;
            out.framework_owned |= s.framework_owned;
            for m in &s.methods {
                methods.entry(m.name.clone()).or_insert_with(|| m.clone());
            }
            for a in &s.attrs {
                attrs.entry(a.name.clone()).or_insert_with(|| a.clone());
            }
        }
        out.methods = methods.into_values().collect();
        out.attrs = attrs.into_values().collect();
        out
    }

    /// Functions and methods a call goes to.
    fn targets(&self, file: usize, callee: &Callee) -> Vec<FuncId> {
        let dispatch = |class: &ClassId, method: &str| -> Vec<FuncId> {
            match self.definer(class, method) {
                Some((c, sig)) if !sig.is_abstract => vec![(c.0, format!("{}.{method}", c.1))],
                // An abstract method (or one no class of the project defines) runs a
                // subclass's override.
                _ => self.overrides(class, method),
            }
        };
        match callee {
            Callee::Name(q) => match self.resolve(file, q) {
                Some(Symbol::Function(f)) => vec![f],
                Some(Symbol::Class(c)) => dispatch(&c, "__init__"),
                Some(Symbol::Method(c, m)) => dispatch(&c, &m),
                _ => Vec::new(),
            },
            Callee::Method { class, method } => match self.resolve(file, class) {
                Some(Symbol::Class(c)) => dispatch(&c, method),
                _ => Vec::new(),
            },
            Callee::SelfMethod { class, method } => dispatch(&(file, class.clone()), method),
            Callee::AttrMethod {
                class,
                attr,
                method,
            } => {
                // The objects every construction of the class passes for the parameter
                // `__init__` bound the attribute from.
                let id: ClassId = (file, class.clone());
                let Some(param) = self
                    .class(&id)
                    .and_then(|c| c.attrs.iter().find(|a| a.name == *attr))
                    .and_then(|a| a.from_param)
                else {
                    return Vec::new();
                };
                let mut out: Vec<FuncId> = Vec::new();
                for &(i, k) in self.constructions.get(&id).into_iter().flatten() {
                    let fact = &self.files[i].summary.calls[k];
                    if let Some(ArgFact::Instance(passed)) = fact.args.get(param) {
                        if let Some(Symbol::Class(c)) = self.resolve(i, passed) {
                            out.extend(dispatch(&c, method));
                        }
                    }
                }
                out.sort();
                out.dedup();
                out
            }
        }
    }

    /// Taints and cadence: a fixed point over every call that leaves a file. A graph passed
    /// to a parameter reaches the callee's, and through it what the callee passes that
    /// parameter on to; a call that runs per step (a training loop around it, or a caller that
    /// runs per step) makes its callee run per step.
    fn solve_calls(&mut self) {
        // Resolved once: (file, fact index, targets); and the calls that make an object.
        let mut resolved: Vec<(usize, usize, Vec<FuncId>)> = Vec::new();
        let mut constructs: FxHashSet<(usize, usize)> = FxHashSet::default();
        for (i, f) in self.files.iter().enumerate() {
            for (k, fact) in f.summary.calls.iter().enumerate() {
                let targets = self.targets(i, &fact.callee);
                if let Callee::Name(q) = &fact.callee {
                    if let Some(Symbol::Class(c)) = self.resolve(i, q) {
                        self.made_in.entry(c).or_default().insert(i);
                        constructs.insert((i, k));
                    }
                }
                if !targets.is_empty() {
                    resolved.push((i, k, targets));
                }
            }
        }
        // A function's own cadence (from its file) seeds the calls it makes; so does its
        // training.
        for (&(file, key), func) in &self.functions {
            if let Some(g) = func.cadence {
                let why = format!("`{key}()` in {}", self.files[file].path);
                self.cadence.insert((file, key.to_string()), (g, why, file));
            }
            if func.trains {
                self.trains.insert((file, key.to_string()));
            }
        }
        for _ in 0..MAX_PASSES {
            let mut changed = false;
            for (i, k, targets) in &resolved {
                let file = &self.files[*i];
                let fact = &file.summary.calls[*k];
                let caller: FuncId = (*i, fact.caller.clone());
                if !self.trains.contains(&caller) && targets.iter().any(|t| self.trains.contains(t))
                {
                    self.trains.insert(caller.clone());
                    changed = true;
                }
                // How often the call runs: where it is, or as often as its caller runs.
                let grain = fact
                    .grain
                    .map(|g| {
                        let who = if fact.caller.is_empty() {
                            "module-level code".to_string()
                        } else {
                            format!("`{}()`", fact.caller)
                        };
                        (g, format!("{who} in {}:{}", file.path, fact.line), *i)
                    })
                    .or_else(|| {
                        self.cadence
                            .get(&caller)
                            .map(|(g, why, _)| (*g, why.clone(), *i))
                    });
                let passed: Vec<Option<OriginSummary>> = if fact.grad {
                    fact.args
                        .iter()
                        .map(|a| match a {
                            ArgFact::Graph(o) => Some(o.clone().placed(&file.path)),
                            ArgFact::Param(j) => self
                                .taints
                                .get(&caller)
                                .and_then(|t| t.get(*j).cloned().flatten()),
                            ArgFact::Instance(_) | ArgFact::Parameters | ArgFact::Other => None,
                        })
                        .collect()
                } else {
                    Vec::new()
                };
                // A constructor run per step makes a new object per step: what it keeps in
                // `self` lives with that object, not across steps.
                let per_object = constructs.contains(&(*i, *k));
                for t in targets {
                    if let (Some((g, why, from)), false) = (&grain, per_object) {
                        let own = self
                            .functions
                            .get(&(t.0, t.1.as_str()))
                            .and_then(|f| f.cadence);
                        let known = self.cadence.get(t).map(|c| c.0);
                        if own.is_none() && known.is_none_or(|k| k < *g) {
                            self.cadence.insert(t.clone(), (*g, why.clone(), *from));
                            changed = true;
                        }
                    }
                    if passed.iter().any(Option::is_some) {
                        let slots = self.taints.entry(t.clone()).or_default();
                        if slots.len() < passed.len() {
                            slots.resize(passed.len(), None);
                        }
                        for (slot, p) in slots.iter_mut().zip(&passed) {
                            if slot.is_none() && p.is_some() {
                                *slot = p.clone();
                                changed = true;
                            }
                        }
                    }
                }
            }
            if !changed {
                break;
            }
        }
        for (i, k, targets) in &resolved {
            let fact = &self.files[*i].summary.calls[*k];
            let passed: Vec<Option<Passed>> = fact
                .args
                .iter()
                .map(|a| match a {
                    ArgFact::Instance(c) => match self.resolve(*i, c) {
                        Some(Symbol::Class(id)) => self
                            .mro(&id)
                            .iter()
                            .any(|b| self.class(b).is_some_and(|s| s.is_module))
                            .then_some(Passed::Module),
                        _ => None,
                    },
                    ArgFact::Parameters => Some(Passed::Parameters),
                    ArgFact::Graph(o) if o.tensor => Some(Passed::Tensor),
                    _ => None,
                })
                .collect();
            for t in targets.iter().filter(|t| t.0 != *i) {
                *self.grad_calls.entry(t.clone()).or_default() |= fact.grad;
                let slots = self.passed_args.entry(t.clone()).or_default();
                if slots.len() < passed.len() {
                    slots.resize(passed.len(), None);
                }
                for (slot, p) in slots.iter_mut().zip(&passed) {
                    Passed::see(slot, *p);
                }
            }
        }
        self.resolved = resolved;
    }

    // ----- what one file is told -----------------------------------------------------------

    fn returns_of(&self, f: &FuncId) -> Option<ValueSummary> {
        let func = self.functions.get(&(f.0, f.1.as_str()))?;
        let v = func.returns.clone()?;
        Some(v.placed(&self.files[f.0].path))
    }

    /// What the overrides of an abstract method return, joined.
    fn joined_returns(&self, targets: &[FuncId]) -> Option<ValueSummary> {
        targets
            .iter()
            .filter_map(|t| self.returns_of(t))
            .reduce(ValueSummary::join)
    }

    /// The facts file `file` takes in.
    pub fn facts_for(&self, file: usize) -> ExternalFacts {
        let mut out = ExternalFacts::default();
        let f = &self.files[file];
        // Calls of this file that run a function that trains elsewhere.
        let from = self.resolved.partition_point(|r| r.0 < file);
        for (_, k, targets) in self.resolved[from..].iter().take_while(|r| r.0 == file) {
            if targets
                .iter()
                .any(|t| t.0 != file && self.trains.contains(t))
            {
                let key = match &f.summary.calls[*k].callee {
                    Callee::Name(q) => q.clone(),
                    Callee::Method { class, method } | Callee::SelfMethod { class, method } => {
                        format!("{class}.{method}")
                    }
                    Callee::AttrMethod {
                        class,
                        attr,
                        method,
                    } => format!("{class}.{attr}.{method}"),
                };
                out.trains.insert(key);
            }
        }
        for fact in &f.summary.calls {
            match &fact.callee {
                Callee::Name(q) => match self.resolve(file, q) {
                    Some(Symbol::Class(c)) if c.0 != file => {
                        out.classes.insert(q.clone(), self.external_class(&c));
                    }
                    Some(Symbol::Function(t)) if t.0 != file => {
                        if let Some(v) = self.returns_of(&t) {
                            out.returns.insert(q.clone(), v);
                        }
                    }
                    _ => {}
                },
                Callee::Method { class, method } => {
                    if let Some(Symbol::Class(c)) = self.resolve(file, class) {
                        if c.0 == file {
                            continue;
                        }
                        out.classes
                            .entry(class.clone())
                            .or_insert_with(|| self.external_class(&c));
                        let targets = self.targets(file, &fact.callee);
                        if let Some(v) = self.joined_returns(&targets) {
                            out.returns.insert(format!("{class}.{method}"), v);
                        }
                    }
                }
                // What runs is told by cadence and training above; its returns are not
                // looked up by this key.
                Callee::AttrMethod { .. } => {}
                Callee::SelfMethod { class, method } => {
                    let id: ClassId = (file, class.clone());
                    let targets = self.targets(file, &fact.callee);
                    let abstract_here = self
                        .class(&id)
                        .and_then(|c| c.methods.iter().find(|m| m.name == *method))
                        .is_some_and(|m| m.is_abstract);
                    let Some(v) = self.joined_returns(&targets) else {
                        continue;
                    };
                    let key = format!("{class}.{method}");
                    if abstract_here {
                        out.overrides.insert(key, v);
                    } else if targets.iter().all(|t| t.0 != file) {
                        out.returns.insert(key, v);
                    }
                }
            }
        }
        // What this file's classes inherit from bases elsewhere.
        for c in &f.summary.classes {
            let id: ClassId = (file, c.name.clone());
            let elsewhere: Vec<ClassId> =
                self.mro(&id).into_iter().filter(|b| b.0 != file).collect();
            if elsewhere.is_empty() {
                continue;
            }
            let mut inherited = ExternalClass::default();
            let mut methods: BTreeMap<String, MethodSig> = BTreeMap::new();
            let mut attrs = BTreeMap::new();
            for b in &elsewhere {
                let Some(s) = self.class(b) else { continue };
                inherited.is_module |= s.is_module;
                inherited.makes_parameters |= s.makes_parameters;
                inherited.framework_owned |= s.framework_owned;
                for m in &s.methods {
                    methods.entry(m.name.clone()).or_insert_with(|| m.clone());
                }
                for a in &s.attrs {
                    attrs.entry(a.name.clone()).or_insert_with(|| a.clone());
                }
            }
            inherited.methods = methods.into_values().collect();
            inherited.attrs = attrs.into_values().collect();
            out.inherited.insert(c.name.clone(), inherited);
        }
        // Callers elsewhere: graphs passed in, and how often they run this file's functions.
        for (t, taints) in &self.taints {
            if t.0 == file && taints.iter().any(Option::is_some) {
                out.taints.insert(t.1.clone(), taints.clone());
            }
        }
        // Names the file imports that stand for another file's plain constants, or for its
        // functions that turn autograd off.
        for (local, q) in &f.summary.aliases {
            match self.resolve(file, q) {
                Some(Symbol::Constant) => {
                    out.constants.insert(local.clone());
                }
                Some(Symbol::Function(t) | Symbol::Class(t))
                    if t.0 != file
                        && self.files[t.0]
                            .summary
                            .grad_off
                            .binary_search_by(|g| g.as_str().cmp(&t.1))
                            .is_ok() =>
                {
                    out.grad_off.insert(local.clone());
                }
                _ => {}
            }
            if let Some(Symbol::Function(t)) = self.resolve(file, q) {
                let adds = self
                    .functions
                    .get(&(t.0, t.1.as_str()))
                    .and_then(|f| f.adds);
                if let (Some((i, j, line)), true) = (adds, t.0 != file) {
                    let at = format!("{}:{line}", self.files[t.0].path);
                    out.adds.insert(local.clone(), (i, j, at));
                }
            }
        }
        for (t, grad) in &self.grad_calls {
            if t.0 == file {
                out.grad_calls.insert(t.1.clone(), *grad);
            }
        }
        for (t, slots) in &self.passed_args {
            let agreed: Vec<Option<Passed>> = slots.iter().map(|s| s.flatten()).collect();
            if t.0 == file && agreed.iter().any(Option::is_some) {
                out.passed_params.insert(t.1.clone(), agreed);
            }
        }
        // A cadence the file gives itself (its own account, or its own calls) is its business.
        for (t, (g, why, from)) in &self.cadence {
            if t.0 == file && *from != file {
                out.cadence.insert(t.1.clone(), (*g, why.clone()));
            }
        }
        // Objects of this file's classes that other files make and drive: their owner is in
        // the project. A class whose methods a caller elsewhere runs per step, and that keeps
        // something that can grow; an object made elsewhere and used in ways the index cannot
        // follow keeps its owner out of sight.
        for c in &f.summary.classes {
            let id: ClassId = (file, c.name.clone());
            let made_here_only = self
                .made_in
                .get(&id)
                .is_none_or(|files| files.iter().all(|&m| m == file));
            let subclassed_here_only = self
                .subclasses
                .get(&id)
                .is_none_or(|subs| subs.iter().all(|s| s.0 == file));
            if !(made_here_only && subclassed_here_only) {
                out.used_elsewhere.insert(c.name.clone());
            }
            let grows = c.attrs.iter().any(|a| {
                matches!(
                    a.init,
                    Kind::List | Kind::Dict | Kind::Set | Kind::Deque { .. } | Kind::Tensor
                )
            });
            let driven = c.methods.iter().any(|m| {
                self.cadence
                    .get(&(file, format!("{}.{}", c.name, m.name)))
                    .is_some_and(|(_, _, from)| *from != file)
            });
            if grows
                && driven
                && self
                    .made_in
                    .get(&id)
                    .is_some_and(|files| files.iter().any(|&m| m != file))
            {
                out.made_elsewhere.insert(c.name.clone());
            }
            // Every object another file makes lives one iteration there: made in a training
            // loop, by a function that runs once per iteration, or renewed by the loop that
            // grows it. An object a test makes lives for that test.
            let elsewhere: Vec<&(usize, usize)> = self
                .constructions
                .get(&id)
                .into_iter()
                .flatten()
                .filter(|&&(m, k)| {
                    let caller = &self.files[m].summary.calls[k].caller;
                    m != file
                        && !caller
                            .rsplit('.')
                            .next()
                            .is_some_and(|f| f.starts_with("test"))
                })
                .collect();
            let fresh = |&&(m, k): &&(usize, usize)| {
                let fact = &self.files[m].summary.calls[k];
                fact.grain.is_some()
                    || fact.renews
                    || self.cadence.contains_key(&(m, fact.caller.clone()))
            };
            if !elsewhere.is_empty() && elsewhere.iter().all(fresh) {
                out.fresh_elsewhere.insert(c.name.clone());
            }
        }
        // Attributes of this file's classes that other files reset.
        for a in f.summary.classes.iter().flat_map(|c| c.attrs.iter()) {
            if self
                .resets
                .get(a.name.as_str())
                .is_some_and(|files| files.iter().any(|&i| i != file))
            {
                out.reset_elsewhere.insert(a.name.clone());
            }
        }
        out
    }
}

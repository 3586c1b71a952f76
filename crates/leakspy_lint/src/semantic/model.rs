//! The semantic model of one file as the walk goes through it: the scopes open at the current
//! statement (what each name holds, the loops around it and what they are, whether autograd is
//! recording), what this file's functions return, and the file-wide facts. Rules ask it
//! questions; the walk (`checker.rs`) tells it what each statement binds.
//!
//! Its answers live in one file each: values (`eval.rs`), function summaries (`summary.rs`),
//! lifetimes (`lifetime.rs`) and training iterations (`iteration.rs`).

use std::cell::{Cell, OnceCell, RefCell};
use std::rc::Rc;

use ruff_python_ast::{Expr, ExprCall, Stmt, StmtClassDef, StmtFunctionDef};
use ruff_text_size::{Ranged, TextRange, TextSize};
use rustc_hash::{FxHashMap, FxHashSet};

use super::facts::{self_attr, ClassFacts, ModuleFacts, PlaceFacts};
use super::iteration::{Cadence, Grain, LoopRole, Training};
use super::names::dotted;
use super::scan::BlockFacts;
use super::value::{Graph, Kind, Origin, Parts, Value};
use crate::lines::Lines;

/// A history grown by loops that run at most this many times in all, as written in the source
/// (`for _ in range(N_ROUNDS + 1)`), keeps what the author chose to keep: bounded.
pub const FEW_ROUNDS: u64 = 1000;

#[derive(Debug)]
pub enum ScopeKind<'a> {
    Module,
    Function {
        def: &'a StmtFunctionDef,
        class: Option<&'a StmtClassDef>,
    },
}

pub struct LoopFrame<'a> {
    pub stmt: &'a Stmt,
    pub facts: Rc<BlockFacts<'a>>,
    /// Offset of the loop header, for messages.
    pub offset: TextSize,
    /// Is each iteration a training (or evaluation) iteration, and how often does it run?
    pub role: LoopRole,
    /// Does each iteration backpropagate or step an optimizer (directly or through a function
    /// of this file)?
    pub trains: bool,
}

/// An `if` the walk is inside: its test, the block it guards, and the loop depth it is at.
pub struct Guard<'a> {
    pub test: &'a Expr,
    pub body: &'a [Stmt],
    pub depth: usize,
}

pub struct Scope<'a> {
    pub kind: ScopeKind<'a>,
    /// The `if` tests around the current statement, outermost first.
    pub guards: Vec<Guard<'a>>,
    pub env: FxHashMap<String, Value>,
    pub loops: Vec<LoopFrame<'a>>,
    /// Depth of `no_grad`/`inference_mode` contexts (and grad-disabling decorators).
    pub no_grad: u32,
    /// Loop depth at which each local was last bound.
    pub bound_depth: FxHashMap<String, usize>,
    pub params: FxHashSet<String>,
    pub declared_global: FxHashSet<String>,
    pub body_facts: Rc<BlockFacts<'a>>,
    /// Join of the values returned so far; `None` before the first `return`.
    pub returned: Option<Value>,
    /// Locals known to hold an instance of a class of this file.
    pub instances: FxHashMap<String, String>,
    /// Locals known to hold a list of such instances (`agents = [Agent() for _ in ...]`).
    pub elem_instances: FxHashMap<String, String>,
    /// Locals bound to what a class of another module makes (`meter = Metric(...)`), by the
    /// name the file's imports give the class: calls on them leave the file
    /// (`summaries::extract`).
    pub foreign_instances: FxHashMap<String, String>,
}

impl<'a> Scope<'a> {
    pub(crate) fn new(kind: ScopeKind<'a>, body_facts: Rc<BlockFacts<'a>>) -> Self {
        Self {
            kind,
            guards: Vec::new(),
            env: FxHashMap::default(),
            loops: Vec::new(),
            no_grad: 0,
            bound_depth: FxHashMap::default(),
            params: FxHashSet::default(),
            declared_global: FxHashSet::default(),
            body_facts,
            returned: None,
            instances: FxHashMap::default(),
            elem_instances: FxHashMap::default(),
            foreign_instances: FxHashMap::default(),
        }
    }
}

/// Where the current statement repeats across a training run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Iteration {
    /// Inside the training loop at this depth of the current function's loop stack (0 is the
    /// outermost loop), the innermost one that is a training loop.
    Loop { depth: usize, grain: Grain },
    /// Outside any training loop of its own, in a function that runs once per iteration.
    Call { grain: Grain },
}

impl Iteration {
    pub fn grain(self) -> Grain {
        match self {
            Iteration::Loop { grain, .. } | Iteration::Call { grain } => grain,
        }
    }
}

/// (statement start, scopes, loops, guards) and the answer of `iteration()` there.
type IterationMemo = (
    (ruff_text_size::TextSize, usize, usize, usize),
    Option<Iteration>,
);

pub struct SemanticModel<'a> {
    pub source: &'a str,
    pub facts: &'a ModuleFacts,
    lines: &'a Lines<'a>,
    /// Which loops and functions run once per training iteration; built on first question.
    training: OnceCell<Training>,
    suite: &'a [Stmt],
    /// The walk that reports (after the silent walks that learn summaries).
    pub(crate) reporting: bool,
    /// A Python file, or a notebook's cells run by a kernel.
    pub source_kind: crate::SourceKind<'a>,
    pub(crate) scopes: Vec<Scope<'a>>,
    pub(crate) classes: Vec<&'a StmtClassDef>,
    /// Return values of this file's functions (`f`, `Class.method`).
    pub(crate) summaries: FxHashMap<String, Value>,
    pub(crate) method_owners: FxHashMap<String, Vec<String>>,
    /// Names of functions registered as forward/backward/tensor hooks anywhere in the file.
    pub hook_functions: FxHashSet<String>,
    /// Graph-carrying arguments seen at call sites of this file's functions, per parameter
    /// position (after `self`): the callee's parameter then carries a graph.
    pub(crate) param_taint: RefCell<FxHashMap<String, Vec<Option<Rc<Origin>>>>>,
    /// What call sites of this file pass to each function's parameters: numbers only, or not.
    pub(crate) param_numbers: RefCell<FxHashMap<String, ArgNumbers>>,
    /// Positional argument count of the call being evaluated, for arity matching.
    pub(crate) current_call_args: Cell<usize>,
    /// Where the walk is: the start of the statement being walked (for memos).
    pub(crate) position: Cell<ruff_text_size::TextSize>,
    iteration_memo: Cell<Option<IterationMemo>>,
    block_cache: RefCell<FxHashMap<(usize, usize), Rc<BlockFacts<'a>>>>,
    /// Names that appear called (`name(`) anywhere in the file; `None` when unknown.
    pub(crate) called_names: Option<FxHashSet<&'a str>>,
    /// The last `qualified_function` answer, by callee address; cleared at each statement.
    pub(crate) qualified_memo: RefCell<Option<(usize, Option<Rc<str>>)>>,
    /// While the walk is inside an `if`: each binding's key and the value it replaced, so the
    /// branches can be joined (`loss = f(x)` in one branch, `loss = None` in the other).
    journal: Vec<(usize, String, Option<Value>)>,
    journaling: u32,
    /// What the project index says of other files (`ExternalFacts::NONE` for a file alone).
    pub external: &'a crate::summaries::ExternalFacts,
    /// Abstract methods of this file's classes: what their overrides elsewhere return.
    pub(crate) overrides: FxHashMap<String, Value>,
    /// The last names of the functions of other files whose summaries the index gave
    /// (`plot_step` of `utils.viz.plot_step`): a function calling one teaches a silent walk.
    pub(crate) external_callees: FxHashSet<String>,
    /// Set when the check makes the file's summary: the calls that leave the file, as the
    /// reporting walk meets them.
    pub(crate) calls_out: Option<RefCell<Vec<crate::summaries::CallFact>>>,
}

impl<'a> SemanticModel<'a> {
    pub fn new(
        source: &'a str,
        facts: &'a ModuleFacts,
        lines: &'a Lines<'a>,
        suite: &'a [Stmt],
    ) -> Self {
        let mut method_owners: FxHashMap<String, Vec<String>> = FxHashMap::default();
        for (cname, class) in &facts.classes {
            for m in &class.methods {
                method_owners
                    .entry(m.clone())
                    .or_default()
                    .push(cname.clone());
            }
        }
        Self {
            source,
            facts,
            lines,
            training: OnceCell::new(),
            suite,
            reporting: false,
            source_kind: crate::SourceKind::Python,
            scopes: Vec::new(),
            classes: Vec::new(),
            summaries: FxHashMap::default(),
            method_owners,
            hook_functions: super::iteration::collect_hook_functions(source, suite),
            param_taint: Default::default(),
            param_numbers: Default::default(),
            current_call_args: Default::default(),
            position: Default::default(),
            iteration_memo: Cell::new(None),
            block_cache: Default::default(),
            called_names: None,
            qualified_memo: Default::default(),
            journal: Vec::new(),
            journaling: 0,
            external: &crate::summaries::NO_FACTS,
            overrides: FxHashMap::default(),
            external_callees: FxHashSet::default(),
            calls_out: None,
        }
    }

    /// Takes in what the project says of other files: what their functions return (as
    /// summaries of this file's calls would), which parameters of this file's functions callers
    /// elsewhere pass graphs to, what overrides of this file's abstract methods return. Before
    /// the first walk.
    pub(crate) fn adopt(&mut self, external: &'a crate::summaries::ExternalFacts) {
        self.external = external;
        for (key, v) in &external.returns {
            self.summaries.insert(key.clone(), v.to_value());
            let last = key.rsplit('.').next().unwrap_or(key);
            self.external_callees.insert(last.to_string());
        }
        for (key, v) in &external.overrides {
            self.overrides.insert(key.clone(), v.to_value());
        }
        let mut taints = self.param_taint.borrow_mut();
        for (key, params) in &external.taints {
            taints.insert(
                key.clone(),
                params
                    .iter()
                    .enumerate()
                    .map(|(i, p)| {
                        p.as_ref().map(|o| {
                            Rc::new(Origin {
                                through: Some(i),
                                or_params: 0,
                                ..o.to_origin()
                            })
                        })
                    })
                    .collect(),
            );
        }
    }

    /// The scans of every block walked so far.
    pub(crate) fn scanned_blocks(&self) -> Vec<Rc<BlockFacts<'a>>> {
        self.block_cache.borrow().values().cloned().collect()
    }

    /// Starts recording the bindings of a branch; returns where they start.
    pub(crate) fn branch_start(&mut self) -> usize {
        self.journaling += 1;
        self.journal.len()
    }

    /// Ends a branch: its bindings (key, new value) are undone, so the next branch starts from
    /// the state before the `if`.
    pub(crate) fn branch_end(&mut self, mark: usize) -> Vec<(String, Value)> {
        let entries: Vec<(usize, String, Option<Value>)> = self.journal.drain(mark..).collect();
        let mut out: Vec<(String, Value)> = Vec::new();
        let here = self.scopes.len();
        // Undo in reverse, remembering each key's last value in the branch. Bindings of a
        // function defined in the branch went with its scope.
        for (_, key, old) in entries.into_iter().rev().filter(|(s, _, _)| *s == here) {
            let env = &mut self.scope_mut().env;
            let new = match old {
                Some(v) => env.insert(key.clone(), v),
                None => env.remove(&key),
            };
            if !out.iter().any(|(k, _)| *k == key) {
                out.push((key, new.unwrap_or_default()));
            }
        }
        self.journaling -= 1;
        out
    }

    /// After all branches of an `if`: each key bound in some branch holds the join of what the
    /// branches leave (the value before the `if` for a branch that does not bind it, and for
    /// the path that takes no branch when there is no `else`).
    pub(crate) fn join_branches(&mut self, branches: Vec<Vec<(String, Value)>>, exhaustive: bool) {
        let mut keys: Vec<String> = Vec::new();
        for b in &branches {
            for (k, _) in b {
                if !keys.contains(k) {
                    keys.push(k.clone());
                }
            }
        }
        for key in keys {
            let before = self.scope().env.get(&key).cloned();
            let mut joined: Option<Value> = None;
            let mut add = |v: Value| {
                joined = Some(match joined.take() {
                    Some(j) => j.join(v),
                    None => v,
                })
            };
            for b in &branches {
                match b.iter().find(|(k, _)| *k == key) {
                    Some((_, v)) => add(v.clone()),
                    None => add(before.clone().unwrap_or_default()),
                }
            }
            if !exhaustive {
                add(before.clone().unwrap_or_default());
            }
            if let Some(v) = joined {
                self.record(&key);
                self.scope_mut().env.insert(key, v);
            }
        }
    }

    /// Journals the current value of `key` before a binding changes it.
    fn record(&mut self, key: &str) {
        if self.journaling > 0 {
            let old = self.scope().env.get(key).cloned();
            self.journal.push((self.scopes.len(), key.to_string(), old));
        }
    }

    /// The loop and function answers of `iteration.rs`, made on first use: most functions of a
    /// large tree never lead a rule as far as asking.
    pub fn training(&self) -> &Training {
        self.training.get_or_init(|| {
            Training::collect(
                self.source,
                self.suite,
                self.facts,
                &self.hook_functions,
                self.external,
            )
        })
    }

    /// The file's top-level statements.
    pub fn suite(&self) -> &'a [Stmt] {
        self.suite
    }

    /// The scan of a block, made once and shared by every pass over it.
    pub(crate) fn cached_facts(
        &self,
        body: &[Stmt],
        scan: impl FnOnce() -> BlockFacts<'a>,
    ) -> Rc<BlockFacts<'a>> {
        let key = (body.as_ptr() as usize, body.len());
        if let Some(f) = self.block_cache.borrow().get(&key) {
            return f.clone();
        }
        let f = Rc::new(scan());
        self.block_cache.borrow_mut().insert(key, f.clone());
        f
    }

    /// Does evaluating this call read its arguments (a function or class of this file)?
    pub(crate) fn follows_call(&self, call: &ExprCall) -> bool {
        match &*call.func {
            Expr::Name(n) => {
                let name = n.id.as_str();
                self.facts.functions.contains(name) || self.facts.classes.contains_key(name)
            }
            _ => false,
        }
    }

    /// How many (function, parameter) pairs are known to receive graphs. Parameters that
    /// receive numbers do not count: what the first walk learns of them serves the walks after
    /// it, and a file that passes no graph needs no second silent walk for them.
    pub(crate) fn taint_count(&self) -> usize {
        self.param_taint
            .borrow()
            .values()
            .map(|v| v.iter().filter(|t| t.is_some()).count())
            .sum()
    }

    // ----- where the walk is -----------------------------------------------------------------

    /// Is `method` the name of a method of some class of this file?
    pub fn is_method_name(&self, method: &str) -> bool {
        self.method_owners.contains_key(method)
    }

    pub fn scope(&self) -> &Scope<'a> {
        self.scopes.last().expect("a scope is always open")
    }

    pub(crate) fn scope_mut(&mut self) -> &mut Scope<'a> {
        self.scopes.last_mut().expect("a scope is always open")
    }

    /// The function being walked, if any.
    pub fn function(&self) -> Option<&'a StmtFunctionDef> {
        match self.scope().kind {
            ScopeKind::Function { def, .. } => Some(def),
            ScopeKind::Module => None,
        }
    }

    /// The class whose method is being walked.
    pub fn class(&self) -> Option<&'a StmtClassDef> {
        match self.scope().kind {
            ScopeKind::Function { class, .. } => class,
            ScopeKind::Module => None,
        }
    }

    /// The class of the method a nested function (a hook, a helper) is defined in, when `self`
    /// there is that method's: no function between them takes a `self` of its own.
    pub fn closure_class(&self) -> Option<&'a StmtClassDef> {
        for scope in self.scopes.iter().rev() {
            match scope.kind {
                ScopeKind::Function {
                    class: Some(class), ..
                } => return Some(class),
                ScopeKind::Function { .. } if scope.params.contains("self") => return None,
                ScopeKind::Function { .. } => {}
                ScopeKind::Module => return None,
            }
        }
        None
    }

    pub fn class_facts(&self) -> Option<&'a ClassFacts> {
        let facts = self.facts;
        self.class().and_then(|c| facts.class(c.name.as_str()))
    }

    /// Facts about `self.<attr>` in the current class.
    pub fn attr_facts(&self, attr: &str) -> Option<&'a PlaceFacts> {
        self.class_facts().and_then(|c| c.attrs.get(attr))
    }

    /// Facts about the long-lived place `expr` names: `self.<attr>` or a module global.
    pub fn place_facts(&self, expr: &Expr) -> Option<&'a PlaceFacts> {
        match self_attr(expr) {
            Some(attr) => self.attr_facts(attr),
            None => {
                let facts = self.facts;
                dotted(expr).and_then(|k| facts.globals.get(&k))
            }
        }
    }

    /// Does a method of the current class other than `current` (and `__init__`) rebind
    /// `self.<attr>`: a reset, a detach, `init_states()` run by each forward? A method the class
    /// inherits from a base of this file and does not override is one of its methods too (a
    /// spiking neuron's `reset()` in `BaseNode`).
    pub fn class_rebinds_attr(&self, attr: &str, current: &str) -> bool {
        let Some(class) = self.class_facts() else {
            return false;
        };
        let rebinds = |p: &PlaceFacts, own: bool| {
            p.changes.iter().any(|c| {
                c.mutation == super::mutation::Mutation::Rebind
                    && c.function != "__init__"
                    && c.function != current
                    && (own || !class.methods.contains(c.function.as_str()))
            })
        };
        class.attrs.get(attr).is_some_and(|p| rebinds(p, true))
            || class
                .in_file_bases
                .iter()
                .filter_map(|b| self.facts.class(b))
                .filter_map(|b| b.attrs.get(attr))
                .any(|p| rebinds(p, false))
    }

    pub fn in_module_class(&self) -> bool {
        self.class_facts().is_some_and(|c| c.is_module)
    }

    /// Is the current function a forward, backward or tensor hook?
    pub fn is_hook_function(&self) -> bool {
        matches!(
            self.cadence(),
            Cadence::Every(_, super::iteration::Reason::RegisteredHook)
        )
    }

    pub fn loops(&self) -> &[LoopFrame<'a>] {
        &self.scope().loops
    }

    pub fn innermost_loop(&self) -> Option<&LoopFrame<'a>> {
        self.scope().loops.last()
    }

    pub fn in_loop(&self) -> bool {
        !self.scope().loops.is_empty()
    }

    /// How often the current function runs over a training run.
    pub fn cadence(&self) -> &Cadence {
        static UNKNOWN: Cadence = Cadence::Unknown;
        match self.scope().kind {
            ScopeKind::Function { def, .. } => self.training().cadence(def),
            ScopeKind::Module => &UNKNOWN,
        }
    }

    /// Does the current function run once per training iteration?
    pub fn in_per_step_function(&self) -> bool {
        self.cadence().grain().is_some()
    }

    /// Where the current statement repeats across training: the innermost training loop around
    /// it in this function, else the function's own cadence.
    /// `None` also when the statement runs only once or with a debugging option switched on
    /// (`guard.rs`).
    pub fn iteration(&self) -> Option<Iteration> {
        // Rules ask at every statement, several times: remembered per position.
        let scope = self.scope();
        let key = (
            self.position.get(),
            self.scopes.len(),
            scope.loops.len(),
            scope.guards.len(),
        );
        if let Some((k, it)) = self.iteration_memo.get() {
            if k == key {
                return it;
            }
        }
        let it = self
            .loop_or_call()
            .filter(|&it| scope.guards.is_empty() || !self.rarely_runs(it));
        self.iteration_memo.set(Some((key, it)));
        it
    }

    fn loop_or_call(&self) -> Option<Iteration> {
        let loops = &self.scope().loops;
        for (depth, l) in loops.iter().enumerate().rev() {
            if let LoopRole::Training(grain) = l.role {
                return Some(Iteration::Loop { depth, grain });
            }
        }
        self.cadence()
            .grain()
            .map(|grain| Iteration::Call { grain })
    }

    /// Does the current statement run once per training iteration?
    pub fn per_step(&self) -> bool {
        self.iteration().is_some()
    }

    /// The loop frame of an iteration, when it is a loop.
    pub fn iteration_loop(&self, it: Iteration) -> Option<&LoopFrame<'a>> {
        match it {
            Iteration::Loop { depth, .. } => self.scope().loops.get(depth),
            Iteration::Call { .. } => None,
        }
    }

    /// The scan of the block one iteration runs: the training loop's body, or the function's.
    pub fn iteration_facts(&self, it: Iteration) -> &BlockFacts<'a> {
        match self.iteration_loop(it) {
            Some(l) => &l.facts,
            None => &self.scope().body_facts,
        }
    }

    /// Is autograd recording here (no enclosing `no_grad`/`inference_mode`)?
    pub fn grad_enabled(&self) -> bool {
        self.scope().no_grad == 0
    }

    /// Does the current function train (call `.backward()`, `autograd.grad` or an optimizer
    /// step)?
    pub fn function_trains(&self) -> bool {
        let f = &self.scope().body_facts;
        f.calls_backward || f.steps_optimizer
    }

    /// Can nothing the current function computes reach its caller with a graph: it returns
    /// nothing, or what the silent walks saw it return carries no graph in any element? At
    /// module level: always.
    pub fn returns_no_graph(&self) -> bool {
        let ScopeKind::Function { def, class } = self.scope().kind else {
            return true;
        };
        if !self.scope().body_facts.returns_value {
            return true;
        }
        // The summary was made in a silent walk, maybe before the walk reached the callers that
        // say what the parameters are: a graph it returns only because a parameter might carry
        // one (`chars = [start]` in `generate(model, start, n)`) is none when this walk knows
        // that parameter carries no graph (every caller passes a number).
        let env = &self.scope().env;
        let positional: Vec<Option<&Value>> = crate::summaries::extract::positional_params(def)
            .into_iter()
            .map(|n| env.get(n))
            .collect();
        let param_graphless = |i: usize| {
            positional
                .get(i)
                .copied()
                .flatten()
                .is_some_and(|v| v.graph == Graph::No)
        };
        fn graphless(v: &Value, param_graphless: &dyn Fn(usize) -> bool) -> bool {
            let own = match &v.graph {
                Graph::No => true,
                Graph::Yes(o) => o.param.is_some() && o.params().all(param_graphless),
                Graph::Unknown => false,
            };
            own && match &v.parts {
                Parts::Elements(e) => e.iter().all(|x| graphless(x, param_graphless)),
                Parts::Keys(k) => k.iter().all(|(_, x)| graphless(x, param_graphless)),
                _ => true,
            }
        }
        self.summaries
            .get(&super::summary::summary_key(def, class))
            .is_some_and(|v| graphless(v, &param_graphless))
    }

    /// Does the current statement run a number of times written in the source, at most `limit`:
    /// every loop around it goes through `range(K)` with `K` a constant (or a collection written
    /// out), and its function does not itself run once per step? Then what it keeps is as much as
    /// the author chose (26 rounds of an experiment), not growth with the length of a run.
    pub fn runs_fixed_times(&self, limit: u64) -> bool {
        !self.scope().loops.is_empty()
            && self.cadence().grain().is_none()
            && self.loops_run_fixed_times(0, limit)
    }

    /// Do the loops of the current function around the statement from `depth` inward run it a
    /// number of times written in the source, at most `limit`, in all? (What a local bound at
    /// loop depth `depth` gets before it is made afresh or its function returns.)
    pub fn loops_run_fixed_times(&self, depth: usize, limit: u64) -> bool {
        let loops = self.scope().loops.get(depth..).unwrap_or_default();
        let mut total: u64 = 1;
        for l in loops {
            let Stmt::For(f) = l.stmt else { return false };
            let n = if self.training().is_literal_collection(&f.iter) {
                match &*f.iter {
                    Expr::List(x) => x.elts.len() as u64,
                    Expr::Tuple(x) => x.elts.len() as u64,
                    Expr::Set(x) => x.elts.len() as u64,
                    _ => return false,
                }
            } else {
                let Expr::Call(c) = &*f.iter else {
                    return false;
                };
                if !super::names::is_dotted(&c.func, "range") {
                    return false;
                }
                let int = |e: &Expr| super::facts::int_value(e, &self.facts.constants);
                match c.arguments.args.as_ref() {
                    [stop] => match int(stop) {
                        Some(n) => n,
                        None => return false,
                    },
                    [start, stop, ..] => match (int(start), int(stop)) {
                        (Some(a), Some(b)) => b.saturating_sub(a),
                        _ => return false,
                    },
                    _ => return false,
                }
            };
            total = total.saturating_mul(n);
        }
        total <= limit
    }

    /// Does something run the current code with autograd on: a call of the function in this
    /// file or another, or the module's own top level?
    pub fn runs_with_grad(&self) -> bool {
        match self.scope().kind {
            ScopeKind::Function { def, .. } => self.training().called_with_grad(def),
            ScopeKind::Module => true,
        }
    }

    /// Facts of the innermost loop's body, or of the function body outside loops.
    pub fn block_facts(&self) -> &BlockFacts<'a> {
        match self.scope().loops.last() {
            Some(l) => &l.facts,
            None => &self.scope().body_facts,
        }
    }

    /// Is `key` cleared, trimmed or rebound within the same iteration (the training loop's body,
    /// or the call of a per-step function; the innermost loop elsewhere)?
    pub fn reset_in_iteration(&self, key: &str) -> bool {
        match self.iteration() {
            Some(it) => self.iteration_facts(it).resets(key) || self.block_facts().resets(key),
            None => self.block_facts().resets(key),
        }
    }

    /// Does the content of `key` flow into a `.backward()` in this function?
    pub fn consumed_by_backward(&self, key: &str) -> bool {
        self.scope().body_facts.backward_uses.contains(key)
            || self.block_facts().backward_uses.contains(key)
    }

    pub fn line(&self, offset: TextSize) -> usize {
        self.lines.line(offset)
    }

    /// Source text of a node, on one line and shortened for a message.
    pub fn snippet(&self, range: TextRange) -> String {
        shorten(&self.source[range])
    }

    pub fn text(&self, range: TextRange) -> &'a str {
        &self.source[range]
    }

    /// `torch.no_grad()`, `torch.inference_mode()`, `set_grad_enabled(False)` (or with an
    /// argument that may be false), or a context manager of this file that enters one of them
    /// (`with self._set_training_mode(False):`).
    pub fn is_grad_disabling(&self, expr: &Expr) -> bool {
        if super::iteration::disables_grad_expr(self.facts, expr) {
            return true;
        }
        let Expr::Call(call) = expr else {
            return false;
        };
        let def = match &*call.func {
            Expr::Attribute(a) if matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "self") => {
                self.class().and_then(|c| {
                    c.body.iter().find_map(|s| match s {
                        Stmt::FunctionDef(f) if f.name.as_str() == a.attr.as_str() => Some(f),
                        _ => None,
                    })
                })
            }
            Expr::Name(n) if self.facts.functions.contains(n.id.as_str()) => {
                self.suite.iter().find_map(|s| match s {
                    Stmt::FunctionDef(f) if f.name.as_str() == n.id.as_str() => Some(f),
                    _ => None,
                })
            }
            _ => None,
        };
        let Some(def) = def else { return false };
        let mut disables = false;
        super::facts::visit_body(&def.body, &mut |s| {
            if let Stmt::With(w) = s {
                if w.items
                    .iter()
                    .any(|i| super::iteration::disables_grad_expr(self.facts, &i.context_expr))
                {
                    disables = true;
                }
            }
        });
        disables
    }

    // ----- what statements bind ----------------------------------------------------------------

    /// What a name or attribute chain holds here, when the walk has bound it.
    pub fn key_value(&self, key: &str) -> Option<Value> {
        self.lookup(key).cloned()
    }

    pub(crate) fn lookup(&self, key: &str) -> Option<&Value> {
        for scope in self.scopes.iter().rev() {
            if let Some(v) = scope.env.get(key) {
                return Some(v);
            }
        }
        None
    }

    /// Binds `key` to a new object: its lifetime starts at the current loop depth.
    pub(crate) fn set(&mut self, key: String, value: Value) {
        self.record(&key);
        let depth = self.scope().loops.len();
        let scope = self.scope_mut();
        if !key.contains('.') {
            match scope.bound_depth.get_mut(&key) {
                Some(d) => *d = depth,
                None => {
                    scope.bound_depth.insert(key.clone(), depth);
                }
            }
        }
        scope.env.insert(key, value);
    }

    /// Updates what `key` holds without making it a new object (`c.append(x)`, `acc += x`,
    /// `acc = acc + x`): the container keeps the lifetime it had.
    pub(crate) fn update(&mut self, key: String, value: Value) {
        self.record(&key);
        self.scope_mut().env.insert(key, value);
    }

    /// Binds an assignment target. A name that is backpropagated later in the function carries
    /// a graph even when its value came from somewhere the analysis cannot see.
    pub(crate) fn bind(&mut self, target: &'a Expr, value_expr: &'a Expr, value: Value) {
        match (target, value_expr) {
            (Expr::Tuple(t), Expr::Tuple(v)) if t.elts.len() == v.elts.len() => {
                for (te, ve) in t.elts.iter().zip(v.elts.iter()) {
                    let vv = self.value(ve);
                    self.bind(te, ve, vv);
                }
            }
            (Expr::Subscript(sub), _) => {
                // `c[k] = v`: the container now holds `v`.
                if let Some(key) = dotted(&sub.value) {
                    let cur = self.value(&sub.value);
                    // `out["loss"] = out["loss"].detach()`: the entry that was known to hold
                    // the graph holds none now; what the others hold is not known.
                    if let (Some(o), Expr::StringLiteral(k)) = (cur.origin(), &*sub.slice) {
                        if !value.has_graph()
                            && o.what == format!("{key}[\"{}\"]", k.value.to_str())
                        {
                            self.update(
                                key,
                                Value {
                                    graph: Graph::Unknown,
                                    ..cur
                                },
                            );
                            return;
                        }
                    }
                    // `out["loss"] = out["loss"] * n` in a dict whose entries are known: that
                    // entry holds the new value, the others what they held.
                    if let (Parts::Keys(entries), Expr::StringLiteral(k)) =
                        (&cur.parts, &*sub.slice)
                    {
                        let k = k.value.to_str();
                        let mut entries: Vec<(Box<str>, Value)> =
                            entries.iter().filter(|(n, _)| &**n != k).cloned().collect();
                        entries.push((Box::from(k), value));
                        let graph = entries
                            .iter()
                            .find_map(|(_, v)| v.has_graph().then(|| v.graph.clone()))
                            .unwrap_or(cur.graph.clone());
                        let device = cur.device || entries.iter().any(|(_, v)| v.device);
                        self.update(
                            key,
                            Value {
                                graph,
                                device,
                                parts: Parts::Keys(entries.into()),
                                ..cur
                            },
                        );
                        return;
                    }
                    if value.has_graph() {
                        let joined = Value {
                            graph: value.graph.clone(),
                            kind: cur.kind,
                            device: cur.device || value.device,
                            ..Default::default()
                        };
                        self.update(key, joined);
                    }
                }
            }
            _ => self.bind_plain(target, value),
        }
    }

    pub(crate) fn bind_plain(&mut self, target: &Expr, value: Value) {
        match target {
            Expr::Tuple(t) => self.bind_unpacked(&t.elts, &value),
            Expr::List(l) => self.bind_unpacked(&l.elts, &value),
            Expr::Starred(s) => self.bind_plain(&s.value, value),
            Expr::Subscript(_) => {}
            _ => {
                if let Some(key) = dotted(target) {
                    self.bind_key(target, key, value);
                }
            }
        }
    }

    fn bind_unpacked(&mut self, targets: &[Expr], value: &Value) {
        let starred = targets.iter().any(|t| matches!(t, Expr::Starred(_)));
        for (i, e) in targets.iter().enumerate() {
            let part = if starred {
                value.part(0, 0)
            } else {
                value.part(i, targets.len())
            };
            self.bind_plain(e, part);
        }
    }

    /// Binds the name or attribute `target`, whose key is `key`.
    pub(crate) fn bind_key(&mut self, target: &Expr, key: String, value: Value) {
        let mut value = value;
        if value.graph == Graph::Unknown
            && self.grad_enabled()
            && self.scope().body_facts.backwarded.contains(&key)
        {
            value.graph = Graph::Yes(Rc::new(Origin {
                is_loss: true,
                backpropagated: true,
                ..Origin::new(key.clone(), target.start())
            }));
            value.kind = Kind::Tensor;
        } else if !value.has_graph() && self.grad_enabled() {
            // A dict or list one of whose entries is backpropagated (`out["loss"].backward()`)
            // holds that graph, whatever the analysis could tell of where it came from.
            if let Some(entry) = self.scope().body_facts.backwarded_within.get(&key) {
                let what = match entry {
                    Some(e) => format!("{key}[\"{e}\"]"),
                    None => key.clone(),
                };
                value.graph = Graph::Yes(Rc::new(Origin {
                    is_loss: true,
                    backpropagated: true,
                    ..Origin::new(what, target.start())
                }));
            }
        }
        self.set(key, value);
    }

    /// `c.append(x)` and friends: the container now holds what was put in it.
    pub(crate) fn apply_call_effects(&mut self, expr: &Expr) {
        let Expr::Call(call) = expr else { return };
        let Expr::Attribute(attr) = &*call.func else {
            return;
        };
        if !matches!(
            attr.attr.as_str(),
            "append" | "extend" | "insert" | "add" | "appendleft" | "push"
        ) {
            return;
        }
        let Some(key) = dotted(&attr.value) else {
            return;
        };
        let mut v = Value::no_graph(Kind::Unknown);
        for a in &*call.arguments.args {
            v = v.join(self.value(a));
        }
        if v.has_graph() {
            let cur = self.value(&attr.value);
            self.update(
                key,
                Value {
                    graph: v.graph,
                    kind: cur.kind,
                    device: cur.device || v.device,
                    ..Default::default()
                },
            );
        }
    }
}

/// What the call sites of one function pass to its parameters, by position (after `self`) and
/// by keyword: `Some(true)` while every argument seen there is a number (`range`'s ints, a
/// `len`, an `.item()`), `Some(false)` once one is not; and by position, whether every one is a
/// tensor, and what kind of object every one passes (a module, a module's parameters).
#[derive(Debug, Default, Clone)]
pub struct ArgNumbers {
    pub positional: Vec<Option<bool>>,
    pub keyword: FxHashMap<String, bool>,
    pub tensor: Vec<Option<bool>>,
    pub passed: Vec<Option<Option<crate::summaries::Passed>>>,
}

impl ArgNumbers {
    pub(crate) fn see(slot: &mut Option<bool>, number: bool) {
        *slot = Some(slot.unwrap_or(true) && number);
    }

    /// Is parameter `name` at `position` given a number at every call site that passes it
    /// (and at one at least)?
    pub fn always_number(&self, position: Option<usize>, name: &str) -> bool {
        let pos = position.and_then(|i| self.positional.get(i).copied().flatten());
        let kw = self.keyword.get(name).copied();
        (pos.is_some() || kw.is_some()) && pos != Some(false) && kw != Some(false)
    }

    /// Is positional parameter `i` given a tensor at every call site in this file (and at one
    /// at least)? Only positional calls count: a keyword use is not recorded.
    pub fn always_tensor(&self, i: usize) -> bool {
        self.tensor.get(i).copied().flatten() == Some(true)
    }

    /// What the call sites in this file pass at positional parameter `i`: `Some(Some(kind))`
    /// when every one passes that kind of object, `Some(None)` when they do not agree, `None`
    /// when none passes it.
    pub fn passed_at(&self, i: usize) -> Option<Option<crate::summaries::Passed>> {
        self.passed.get(i).copied().flatten()
    }
}

/// One line, at most 48 characters.
pub fn shorten(text: &str) -> String {
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() <= 48 {
        one
    } else {
        let cut: String = one.chars().take(45).collect();
        format!("{cut}...")
    }
}

//! Which code runs once per training iteration: the first half of every leak finding's claim
//! ("memory retained by this statement grows with the number of training steps").
//!
//! A statement runs once per training iteration when it is in a loop that drives training or
//! goes through data, or in a function that runs once per step (a framework's step hook, a
//! function that backpropagates on each call, a module's `forward`, a registered hook) or is
//! called from one of those in this file. Loops over layers, time steps of one forward pass,
//! heads of a loss or keys of a dict are not training iterations: what they build dies with the
//! call. One pre-pass over the file answers the question for every loop and function, as typed
//! answers the rules read (`LoopRole`, `Cadence`).

use ruff_python_ast::visitor::{walk_expr, Visitor};
use ruff_python_ast::{Expr, Stmt, StmtClassDef, StmtFunctionDef};
use ruff_text_size::{Ranged, TextSize};
use rustc_hash::{FxHashMap, FxHashSet};

use super::facts::ModuleFacts;
use super::names::{dotted, last_segment};
use super::scan::keys_in;

/// How often an iteration runs: once per training step, or once per epoch, episode or
/// generation (each of which holds many steps).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Grain {
    Epoch,
    Step,
}

/// What a loop is, as far as training goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopRole {
    /// Each iteration is a training or evaluation iteration: the body backpropagates, steps an
    /// optimizer or an environment (directly or through a function of this file that does), or
    /// the loop goes through data, steps, episodes or epochs by name.
    Training(Grain),
    /// Anything else: layers, time steps of one forward pass, heads of a loss, keys of a dict.
    Other,
}

impl LoopRole {
    pub fn is_training(self) -> bool {
        matches!(self, LoopRole::Training(_))
    }
}

/// How often a function runs over a training run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Cadence {
    /// Not known to run once per iteration: a builder, a set-up method, a whole training run.
    #[default]
    Unknown,
    /// Once per training step or epoch, and why the analysis says so.
    Every(Grain, Reason),
}

impl Cadence {
    pub fn grain(&self) -> Option<Grain> {
        match self {
            Cadence::Every(g, _) => Some(*g),
            Cadence::Unknown => None,
        }
    }
}

/// Why a function runs once per iteration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// A training framework calls it by this name (`training_step`, `on_train_batch_end`,
    /// `on_validation_epoch_end`, an environment's `step`).
    Hook,
    /// It backpropagates or steps an optimizer outside any loop of its own: a training step.
    Trains,
    /// `forward` (or `__call__`) of an `nn.Module`.
    Forward,
    /// Registered with `register_*_hook` (or made by a registered factory, or named `*_hook`).
    RegisteredHook,
    /// Called from a training loop or from a function that runs per iteration.
    CalledFrom { caller: String, offset: TextSize },
    /// Called so from another file of the project (the project index): `train() in
    /// train.py:29`.
    CalledElsewhere { caller: String },
}

/// The answers for one file.
#[derive(Debug, Default)]
pub struct Training {
    loops: FxHashMap<usize, LoopRole>,
    cadence: FxHashMap<usize, Cadence>,
    /// Function definitions (by address) whose every call in this file runs with autograd off.
    called_without_grad: FxHashSet<usize>,
    /// Function definitions (by address) that a call in this file or another runs with
    /// autograd on.
    called_with_grad: FxHashSet<usize>,
    /// Loops (by address) whose body backpropagates or steps an optimizer, directly or through
    /// a function of this file.
    training_loops: FxHashSet<usize>,
    /// Function definitions (by address) that backpropagate or step an optimizer, directly or
    /// through a function of this file (or one elsewhere that the index says trains).
    training_functions: FxHashSet<usize>,
    /// How often each method runs, by `Class.method`.
    methods: FxHashMap<String, Grain>,
    /// Classes of this file whose objects are made here outside test functions (`test_*`):
    /// their owner is in this file. An object a test makes lives for that test.
    owned: FxHashSet<String>,
    /// Classes of this file whose every object is made afresh in each iteration of a training
    /// loop (or by a function that runs once per iteration): an object lives one epoch, one
    /// evaluation, one episode. Also those a loop renews (`renewal`), and those only other
    /// files make, each afresh so (the project index's account).
    fresh: FxHashSet<String>,
    /// The calls whose object a loop renews (`renewal::renewed_calls`).
    renewed: FxHashSet<TextSize>,
    /// Module constants bound once to a collection written out in the source.
    constants: FxHashSet<String>,
}

impl Training {
    pub fn loop_role(&self, stmt: &Stmt) -> LoopRole {
        self.loops
            .get(&(stmt as *const Stmt as usize))
            .copied()
            .unwrap_or(LoopRole::Other)
    }

    /// Does the loop's body backpropagate or step an optimizer (directly or through a function
    /// of this file)?
    pub fn loop_trains(&self, stmt: &Stmt) -> bool {
        self.training_loops
            .contains(&(stmt as *const Stmt as usize))
    }

    /// Is `expr` a collection written out in the source (`{0, 2, n - 1}`), or a module constant
    /// bound once to one: a fixed, small number of elements.
    pub fn is_literal_collection(&self, expr: &Expr) -> bool {
        match expr {
            Expr::Name(n) => self.constants.contains(n.id.as_str()),
            e => literal_elements(e),
        }
    }

    /// Does this file make objects of `class` (outside test functions)?
    pub fn owns_instances(&self, class: &str) -> bool {
        self.owned.contains(class)
    }

    /// Is every object of `class` made afresh per training iteration, or renewed by the loop
    /// that grows it?
    pub fn made_per_iteration(&self, class: &str) -> bool {
        self.fresh.contains(class)
    }

    /// Does a loop renew the object the call at `at` makes (`renewal`)?
    pub fn renews(&self, at: TextSize) -> bool {
        self.renewed.contains(&at)
    }

    /// How often `class.method` runs, when it runs once per iteration.
    pub fn method_grain(&self, class: &str, method: &str) -> Option<Grain> {
        self.methods.get(&format!("{class}.{method}")).copied()
    }

    /// Does the function train (backpropagate or step an optimizer), itself or through what it
    /// calls?
    pub fn trains(&self, def: &StmtFunctionDef) -> bool {
        self.training_functions
            .contains(&(def as *const StmtFunctionDef as usize))
    }

    pub fn cadence(&self, def: &StmtFunctionDef) -> &Cadence {
        static UNKNOWN: Cadence = Cadence::Unknown;
        self.cadence
            .get(&(def as *const StmtFunctionDef as usize))
            .unwrap_or(&UNKNOWN)
    }

    /// Is every call of `def` in this file made with autograd off (under `no_grad`, or from a
    /// function that only runs so)? Then what it computes carries no graph.
    pub fn only_called_without_grad(&self, def: &StmtFunctionDef) -> bool {
        self.called_without_grad
            .contains(&(def as *const StmtFunctionDef as usize))
    }

    /// Does a call in this file or in another file of the project run `def` with autograd on?
    pub fn called_with_grad(&self, def: &StmtFunctionDef) -> bool {
        self.called_with_grad
            .contains(&(def as *const StmtFunctionDef as usize))
    }

    pub fn collect(
        source: &str,
        suite: &[Stmt],
        facts: &ModuleFacts,
        hooks: &FxHashSet<String>,
        external: &crate::summaries::ExternalFacts,
    ) -> Self {
        let mut c = Collector {
            facts,
            funcs: vec![Func {
                def: None,
                name: String::new(),
                ..Default::default()
            }],
            loops: Vec::new(),
            sites: Vec::new(),
            current: 0,
            class: None,
            loop_stack: Vec::new(),
            periodic: 0,
            no_grad: 0,
            defined: FxHashSet::default(),
            calls_buf: Vec::new(),
            constants: literal_constants(suite),
            event_handlers: event_handlers(source, suite),
            owned: FxHashSet::default(),
            made: FxHashMap::default(),
            renewed: super::renewal::renewed_calls(suite),
            external,
            test_suite: super::facts::imports_test_framework(&facts.imports),
        };
        defined_names(suite, &mut c.defined);
        c.body(suite);
        // Objects another file of the project makes have their owner in the project too.
        c.owned.extend(external.made_elsewhere.iter().cloned());
        c.finish(hooks, external)
    }
}

#[derive(Default)]
struct Func<'a> {
    def: Option<&'a StmtFunctionDef>,
    /// `Class.method` or `function`, for messages.
    name: String,
    class: Option<&'a str>,
    in_module_class: bool,
    /// Backpropagates or steps an optimizer outside any loop of its own.
    trains_outside_loops: bool,
    /// ... anywhere in its body.
    trains: bool,
    /// Decorated to run with autograd off.
    no_grad: bool,
    /// A framework hook by decorator (`@trainer.on(Events.ITERATION_COMPLETED)`).
    decorated: Option<Grain>,
    /// The function it is defined in (0: the module).
    parent: usize,
    /// A test of a test suite (`test_*` where pytest or unittest is imported), or a function
    /// defined in one: it runs once, with the test's fixed inputs.
    test: bool,
}

struct LoopInfo {
    stmt: usize,
    /// Backpropagates or steps an optimizer.
    trains: bool,
    /// Backpropagates, steps an optimizer or steps anything (an environment, a scheduler).
    steps: bool,
    /// Names of the loop say how often it runs.
    named: Option<Grain>,
    /// It goes through a collection written out in the source: a fixed, small number of
    /// iterations (environments to plot, the two optimizers of a GAN), never a training
    /// iteration of its own, whatever its names or body say.
    fixed: bool,
    /// Functions of this file called in the body.
    callees: Vec<usize>,
    /// The loop around it in the same function.
    parent: Option<usize>,
    /// The function it is in (index into `funcs`; 0: the module).
    func: usize,
}

struct Site {
    caller: usize,
    callee: usize,
    /// The innermost loop of the caller around the call (index into `loops`).
    innermost: Option<usize>,
    offset: TextSize,
    /// Under `no_grad` in the caller.
    no_grad: bool,
    /// Under a periodic condition of its loop (`if step % 100 == 0:`): it runs once every so
    /// many iterations, not once per iteration.
    periodic: bool,
}

/// A call as the pre-pass first sees it: (caller, callee's name, the receiver's class when
/// called on an object (`""` when unknown), the caller's loops around it, offset, under
/// `no_grad`, under a periodic condition).
type RawSite<'a> = (
    usize,
    &'a str,
    Option<&'a str>,
    Option<usize>,
    TextSize,
    bool,
    bool,
);

struct Collector<'a, 'f> {
    facts: &'f ModuleFacts,
    funcs: Vec<Func<'a>>,
    loops: Vec<LoopInfo>,
    sites: Vec<RawSite<'a>>,
    current: usize,
    class: Option<&'a StmtClassDef>,
    loop_stack: Vec<usize>,
    no_grad: u32,
    /// Periodic conditions (`if step % n == 0:`) around the statement within its innermost
    /// loop (or function).
    periodic: u32,
    /// Every function name defined in the file: calls of anything else need no record.
    defined: FxHashSet<&'a str>,
    /// Reused by `exprs`.
    calls_buf: Vec<&'a Expr>,
    /// Module constants bound once to a collection written out in the source.
    constants: FxHashSet<&'a str>,
    /// Functions registered as an event engine's handlers, and how often their event fires.
    event_handlers: FxHashMap<&'a str, Grain>,
    /// Classes of this file made outside test functions.
    owned: FxHashSet<String>,
    /// Where they are made: (function, innermost loop around the call, renewed by a loop).
    made: FxHashMap<String, Vec<(usize, Option<usize>, bool)>>,
    renewed: FxHashSet<TextSize>,
    /// What the project index says of other files: which of the functions this file calls
    /// there train.
    external: &'f crate::summaries::ExternalFacts,
    /// The file imports pytest or unittest: its `test*` functions are a suite's tests.
    test_suite: bool,
}

impl<'a> Collector<'a, '_> {
    fn body(&mut self, body: &'a [Stmt]) {
        for stmt in body {
            self.stmt(stmt);
        }
    }

    fn stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::FunctionDef(def) => {
                self.function(def);
                return;
            }
            Stmt::ClassDef(class) => {
                let outer = self.class.replace(class);
                let (current, loops) = (self.current, std::mem::take(&mut self.loop_stack));
                self.body(&class.body);
                self.current = current;
                self.loop_stack = loops;
                self.class = outer;
                return;
            }
            _ => {}
        }
        self.exprs(stmt);
        match stmt {
            Stmt::For(f) => {
                self.in_loop(stmt, named_grain(stmt), &f.body);
                if self.is_literal_collection(&f.iter) {
                    self.loops.last_mut().expect("pushed by in_loop").fixed = true;
                }
                self.body(&f.orelse);
            }
            Stmt::While(w) => {
                self.in_loop(stmt, named_grain(stmt), &w.body);
                self.body(&w.orelse);
            }
            Stmt::If(i) => {
                let periodic = u32::from(is_periodic(&i.test));
                self.periodic += periodic;
                self.body(&i.body);
                self.periodic -= periodic;
                for c in &i.elif_else_clauses {
                    self.body(&c.body);
                }
            }
            Stmt::With(w) => {
                let off = w
                    .items
                    .iter()
                    .filter(|i| disables_grad_expr(self.facts, &i.context_expr))
                    .count() as u32;
                self.no_grad += off;
                self.body(&w.body);
                self.no_grad -= off;
            }
            Stmt::Try(t) => {
                self.body(&t.body);
                for h in &t.handlers {
                    let ruff_python_ast::ExceptHandler::ExceptHandler(h) = h;
                    self.body(&h.body);
                }
                self.body(&t.orelse);
                self.body(&t.finalbody);
            }
            Stmt::Match(m) => {
                for case in &m.cases {
                    self.body(&case.body);
                }
            }
            _ => {}
        }
    }

    /// A list, tuple or set written out in the source (`["a", "b"]`, `(opt_g, opt_d)`), or a
    /// module constant bound to one: a loop over it runs a fixed, small number of times.
    fn is_literal_collection(&self, iter: &Expr) -> bool {
        match iter {
            Expr::List(_) | Expr::Tuple(_) | Expr::Set(_) => literal_elements(iter),
            Expr::Name(n) => self.constants.contains(n.id.as_str()),
            _ => false,
        }
    }

    fn in_loop(&mut self, stmt: &'a Stmt, named: Option<Grain>, body: &'a [Stmt]) {
        // A loop of a test runs the test's fixed number of times, never a job's iterations.
        let fixed = self.funcs[self.current].test;
        self.loops.push(LoopInfo {
            stmt: stmt as *const Stmt as usize,
            trains: false,
            steps: false,
            fixed,
            named,
            callees: Vec::new(),
            parent: self.loop_stack.last().copied(),
            func: self.current,
        });
        self.loop_stack.push(self.loops.len() - 1);
        // A condition outside the loop says how often the loop runs, not its body's statements.
        let periodic = std::mem::take(&mut self.periodic);
        self.body(body);
        self.periodic = periodic;
        self.loop_stack.pop();
    }

    fn function(&mut self, def: &'a StmtFunctionDef) {
        let class = self.class.filter(|c| {
            c.body
                .iter()
                .any(|s| matches!(s, Stmt::FunctionDef(f) if std::ptr::eq(f, def)))
        });
        let class_name = class.map(|c| c.name.as_str());
        let name = match class_name {
            Some(c) => format!("{c}.{}", def.name.as_str()),
            None => def.name.as_str().to_string(),
        };
        let no_grad = def
            .decorator_list
            .iter()
            .any(|d| disables_grad_expr(self.facts, &d.expression));
        let decorated = def
            .decorator_list
            .iter()
            .find_map(|d| event_grain(&d.expression))
            .or_else(|| self.event_handlers.get(def.name.as_str()).copied());
        let test = self.funcs[self.current].test
            || self.test_suite
                && def
                    .name
                    .as_str()
                    .trim_start_matches('_')
                    .starts_with("test");
        self.funcs.push(Func {
            def: Some(def),
            name,
            class: class_name,
            in_module_class: class_name
                .is_some_and(|c| self.facts.class(c).is_some_and(|f| f.is_module)),
            no_grad,
            decorated,
            parent: self.current,
            test,
            ..Default::default()
        });
        let (current, loops, outer_class, grad) = (
            self.current,
            std::mem::take(&mut self.loop_stack),
            self.class,
            std::mem::replace(&mut self.no_grad, u32::from(no_grad)),
        );
        self.current = self.funcs.len() - 1;
        // A nested function is not a method of the enclosing class.
        if class.is_none() {
            self.class = None;
        }
        self.body(&def.body);
        self.current = current;
        self.loop_stack = loops;
        self.class = outer_class;
        self.no_grad = grad;
    }

    /// The calls in the statement's own expressions.
    fn exprs(&mut self, stmt: &'a Stmt) {
        let mut buf = std::mem::take(&mut self.calls_buf);
        buf.clear();
        let mut calls = Calls { found: buf };
        match stmt {
            Stmt::Expr(e) => calls.visit_expr(&e.value),
            Stmt::Assign(a) => calls.visit_expr(&a.value),
            Stmt::AugAssign(a) => calls.visit_expr(&a.value),
            Stmt::AnnAssign(a) => {
                if let Some(v) = &a.value {
                    calls.visit_expr(v);
                }
            }
            Stmt::Return(r) => {
                if let Some(v) = &r.value {
                    calls.visit_expr(v);
                }
            }
            Stmt::If(i) => {
                calls.visit_expr(&i.test);
                for t in i.elif_else_clauses.iter().filter_map(|c| c.test.as_ref()) {
                    calls.visit_expr(t);
                }
            }
            Stmt::While(w) => calls.visit_expr(&w.test),
            Stmt::For(f) => calls.visit_expr(&f.iter),
            Stmt::With(w) => {
                for item in &w.items {
                    calls.visit_expr(&item.context_expr);
                }
            }
            _ => {}
        }
        for &call in &calls.found {
            let Expr::Call(call) = call else { continue };
            let (mut trains, steps) = training_call(call);
            // A function of another file that trains (or the override elsewhere of an
            // abstract method of this file), as the index says.
            if !self.external.trains.is_empty() && !trains {
                trains = self.trains_elsewhere(call);
            }
            if trains {
                let in_loop = !self.loop_stack.is_empty();
                let f = &mut self.funcs[self.current];
                f.trains = true;
                if !in_loop {
                    f.trains_outside_loops = true;
                }
            }
            if trains || steps {
                for &l in &self.loop_stack {
                    self.loops[l].steps = true;
                    self.loops[l].trains |= trains;
                }
            }
            let (name, receiver_self) = match &*call.func {
                Expr::Name(n) => (n.id.as_str(), None),
                Expr::Attribute(a) => (
                    a.attr.as_str(),
                    Some(
                        matches!(&*a.value, Expr::Name(n) if matches!(n.id.as_str(), "self" | "cls")),
                    ),
                ),
                _ => continue,
            };
            if receiver_self.is_none() && self.facts.classes.contains_key(name) {
                let in_test = self.funcs[self.current]
                    .def
                    .is_some_and(|d| d.name.as_str().starts_with("test"));
                if !in_test {
                    self.owned.insert(name.to_string());
                    self.made.entry(name.to_string()).or_default().push((
                        self.current,
                        self.loop_stack.last().copied(),
                        self.renewed.contains(&call.start()),
                    ));
                }
            }
            if !self.defined.contains(name) {
                continue;
            }
            let own_class = match receiver_self {
                Some(true) => self.funcs[self.current]
                    .class
                    .or(self.class.map(|c| c.name.as_str())),
                _ => None,
            };
            self.sites.push((
                self.current,
                name,
                if receiver_self.is_some() {
                    Some(own_class.unwrap_or(""))
                } else {
                    None
                },
                self.loop_stack.last().copied(),
                call.start(),
                self.no_grad > 0,
                self.periodic > 0,
            ));
        }
    }

    /// Does the call run a function that trains in another file (`utils.train_step(...)`,
    /// `self.training_step(batch)` whose overrides elsewhere train)?
    fn trains_elsewhere(&self, call: &ruff_python_ast::ExprCall) -> bool {
        let key = match &*call.func {
            Expr::Attribute(a) if matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "self") => {
                let Some(class) = self.funcs[self.current].class else {
                    return false;
                };
                format!("{class}.{}", a.attr.as_str())
            }
            // `self.agent.replay()`: the index's key for a method of an attribute.
            Expr::Attribute(a)
                if matches!(&*a.value, Expr::Attribute(inner)
                    if matches!(&*inner.value, Expr::Name(n) if n.id.as_str() == "self")) =>
            {
                let (Some(class), Expr::Attribute(inner)) =
                    (self.funcs[self.current].class, &*a.value)
                else {
                    return false;
                };
                format!("{class}.{}.{}", inner.attr.as_str(), a.attr.as_str())
            }
            func => match self.facts.imports.qualify(func) {
                Some(q) => q,
                None => return false,
            },
        };
        self.external.trains.contains(&key)
    }

    fn finish(
        self,
        hooks: &FxHashSet<String>,
        external: &crate::summaries::ExternalFacts,
    ) -> Training {
        let Collector {
            funcs,
            mut loops,
            sites: raw_sites,
            owned,
            made,
            constants,
            renewed,
            ..
        } = self;
        // Resolve callees: module functions and nested functions by name, methods through the
        // receiver's class when it is `self`, else every class of the file defining the name.
        let mut by_name: FxHashMap<&str, Vec<usize>> = FxHashMap::default();
        let mut methods: FxHashMap<&str, Vec<usize>> = FxHashMap::default();
        for (i, f) in funcs.iter().enumerate().skip(1) {
            let Some(def) = f.def else { continue };
            if f.class.is_some() {
                methods.entry(def.name.as_str()).or_default().push(i);
            } else {
                by_name.entry(def.name.as_str()).or_default().push(i);
            }
        }
        let mut sites: Vec<Site> = Vec::new();
        for (caller, name, receiver, innermost, offset, no_grad, periodic) in raw_sites {
            let targets: Vec<usize> = match receiver {
                None => by_name.get(name).cloned().unwrap_or_default(),
                Some(class) => {
                    let all = methods.get(name).cloned().unwrap_or_default();
                    let own: Vec<usize> = all
                        .iter()
                        .copied()
                        .filter(|&i| !class.is_empty() && funcs[i].class == Some(class))
                        .collect();
                    if own.is_empty() {
                        all
                    } else {
                        own
                    }
                }
            };
            for callee in targets {
                if callee == caller {
                    continue;
                }
                let mut l = innermost;
                while let Some(i) = l {
                    loops[i].callees.push(callee);
                    l = loops[i].parent;
                }
                sites.push(Site {
                    caller,
                    callee,
                    innermost,
                    offset,
                    no_grad,
                    periodic,
                });
            }
        }
        // Functions that train, directly or through a function they call.
        let mut trains: Vec<bool> = funcs.iter().map(|f| f.trains).collect();
        loop {
            let mut changed = false;
            for s in &sites {
                if trains[s.callee] && !trains[s.caller] {
                    trains[s.caller] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let loop_trains: Vec<bool> = loops
            .iter()
            .map(|l| l.trains || l.callees.iter().any(|&c| trains[c]))
            .collect();
        let in_pass = within_forward_pass(&funcs, &sites, external);
        let roles: Vec<LoopRole> = loops
            .iter()
            .zip(&loop_trains)
            .map(
                |(l, &trains_through)| match (l.named, l.steps || trains_through) {
                    _ if l.fixed => LoopRole::Other,
                    // A loop of one forward pass goes over its time steps, layers or samples
                    // (`for k in range(self.max_forecast_steps)`), whatever it is named: the
                    // step is the call.
                    (_, false) if in_pass[l.func] => LoopRole::Other,
                    (Some(g), _) => LoopRole::Training(g),
                    (None, true) => LoopRole::Training(Grain::Step),
                    (None, false) => LoopRole::Other,
                },
            )
            .collect();
        // Cadence: seeds, then along call sites.
        let mut cadence: Vec<Cadence> = funcs
            .iter()
            .map(|f| match seed_cadence(f, &funcs, hooks) {
                // A function a caller in another file runs per step or epoch.
                Cadence::Unknown if f.def.is_some() => external
                    .cadence
                    .get(&f.name)
                    .map(|(g, caller)| {
                        Cadence::Every(
                            *g,
                            Reason::CalledElsewhere {
                                caller: caller.clone(),
                            },
                        )
                    })
                    .unwrap_or_default(),
                c => c,
            })
            .collect();
        for _ in 0..funcs.len().min(64) {
            let mut changed = false;
            for s in &sites {
                let mut around = s.innermost;
                let mut in_training = None;
                while let Some(i) = around {
                    if let LoopRole::Training(g) = roles[i] {
                        in_training = Some(g);
                        break;
                    }
                    around = loops[i].parent;
                }
                let grain = match in_training {
                    Some(g) => Some(g),
                    None => cadence[s.caller].grain(),
                }
                // Every so many iterations: as often as an outer loop's iteration.
                .map(|g| if s.periodic { Grain::Epoch } else { g });
                let Some(grain) = grain else { continue };
                let finer = match cadence[s.callee].grain() {
                    None => true,
                    Some(g) => g < grain,
                };
                if finer
                    && !matches!(
                        cadence[s.callee],
                        Cadence::Every(_, Reason::Hook | Reason::Forward)
                    )
                {
                    cadence[s.callee] = Cadence::Every(
                        grain,
                        Reason::CalledFrom {
                            caller: funcs[s.caller].name.clone(),
                            offset: s.offset,
                        },
                    );
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        // Functions whose every call in this file and in the project's other files runs without
        // grad (and that are called).
        let elsewhere: Vec<Option<bool>> = funcs
            .iter()
            .map(|f| f.def.and(external.grad_calls.get(&f.name).copied()))
            .collect();
        let mut no_grad: Vec<bool> = funcs.iter().map(|f| f.no_grad).collect();
        let mut with_grad = vec![false; funcs.len()];
        for _ in 0..4 {
            let mut called: Vec<bool> = elsewhere.iter().map(Option::is_some).collect();
            with_grad = elsewhere.iter().map(|g| *g == Some(true)).collect();
            for s in &sites {
                called[s.callee] = true;
                if !s.no_grad && !no_grad[s.caller] {
                    with_grad[s.callee] = true;
                }
            }
            let mut changed = false;
            for i in 1..funcs.len() {
                // A function frameworks call (a hook, a forward) may run with grad whatever
                // this file does; so may one called elsewhere where the index cannot say how.
                let external = match &cadence[i] {
                    Cadence::Every(_, Reason::Hook | Reason::Forward | Reason::RegisteredHook) => {
                        true
                    }
                    Cadence::Every(_, Reason::CalledElsewhere { .. }) => elsewhere[i].is_none(),
                    _ => false,
                };
                if !no_grad[i] && called[i] && !with_grad[i] && !external {
                    no_grad[i] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let in_training_loop = |mut l: Option<usize>| {
            while let Some(i) = l {
                if roles[i].is_training() {
                    return true;
                }
                l = loops[i].parent;
            }
            false
        };
        let mut fresh: FxHashSet<String> = external
            .fresh_elsewhere
            .iter()
            .filter(|c| !made.contains_key(c.as_str()))
            .cloned()
            .collect();
        fresh.extend(
            made.into_iter()
                .filter(|(_, sites)| {
                    sites.iter().all(|&(f, l, renewed)| {
                        renewed || in_training_loop(l) || cadence[f].grain().is_some()
                    })
                })
                .map(|(class, _)| class),
        );
        let mut out = Training {
            owned,
            fresh,
            renewed,
            constants: constants.into_iter().map(str::to_string).collect(),
            ..Default::default()
        };
        for ((l, role), trains) in loops.iter().zip(roles).zip(loop_trains) {
            out.loops.insert(l.stmt, role);
            if trains {
                out.training_loops.insert(l.stmt);
            }
        }
        for (i, (f, c)) in funcs.iter().zip(cadence).enumerate() {
            let Some(def) = f.def else { continue };
            let key = def as *const StmtFunctionDef as usize;
            if no_grad[i] && !f.no_grad {
                out.called_without_grad.insert(key);
            }
            if with_grad[i] && !no_grad[i] {
                out.called_with_grad.insert(key);
            }
            if trains[i] {
                out.training_functions.insert(key);
            }
            if let (Some(g), Some(_)) = (c.grain(), f.class) {
                out.methods.insert(f.name.clone(), g);
            }
            if c != Cadence::Unknown {
                out.cadence.insert(key, c);
            }
        }
        out
    }
}

/// Is every element of a list, tuple or set literal a constant or a name (never a starred or
/// computed element, whose length the source does not show)? An empty one is filled later.
fn literal_elements(e: &Expr) -> bool {
    let elts = match e {
        Expr::List(l) => &l.elts,
        Expr::Tuple(t) => &t.elts,
        Expr::Set(s) => &s.elts,
        _ => return false,
    };
    !elts.is_empty()
        && elts
            .iter()
            .all(|e| simple_element(e) || literal_elements(e))
}

/// A constant, a name, or arithmetic on them (`n - 2`).
fn simple_element(e: &Expr) -> bool {
    match e {
        Expr::StringLiteral(_)
        | Expr::NumberLiteral(_)
        | Expr::BooleanLiteral(_)
        | Expr::Name(_)
        | Expr::Attribute(_) => true,
        Expr::BinOp(b) => simple_element(&b.left) && simple_element(&b.right),
        Expr::UnaryOp(u) => simple_element(&u.operand),
        _ => false,
    }
}

/// Module-level names bound exactly once, to a collection written out in the source
/// (`ENVS = ["Hopper-v4", "Walker2d-v4"]`).
fn literal_constants(suite: &[Stmt]) -> FxHashSet<&str> {
    let mut bound: FxHashMap<&str, bool> = FxHashMap::default();
    for stmt in suite {
        let (targets, value): (&[Expr], Option<&Expr>) = match stmt {
            Stmt::Assign(a) => (&a.targets, Some(&*a.value)),
            Stmt::AnnAssign(a) => (std::slice::from_ref(&*a.target), a.value.as_deref()),
            Stmt::AugAssign(a) => (std::slice::from_ref(&*a.target), None),
            _ => continue,
        };
        for t in targets {
            if let Expr::Name(n) = t {
                let literal = value.is_some_and(literal_elements);
                bound
                    .entry(n.id.as_str())
                    .and_modify(|l| *l = false)
                    .or_insert(literal);
            }
        }
    }
    bound
        .into_iter()
        .filter_map(|(n, literal)| literal.then_some(n))
        .collect()
}

/// The names of every function and method the file defines, nested ones included.
fn defined_names<'a>(body: &'a [Stmt], out: &mut FxHashSet<&'a str>) {
    for stmt in body {
        match stmt {
            Stmt::FunctionDef(f) => {
                out.insert(f.name.as_str());
                defined_names(&f.body, out);
            }
            Stmt::ClassDef(c) => defined_names(&c.body, out),
            Stmt::For(f) => {
                defined_names(&f.body, out);
                defined_names(&f.orelse, out);
            }
            Stmt::While(w) => {
                defined_names(&w.body, out);
                defined_names(&w.orelse, out);
            }
            Stmt::If(i) => {
                defined_names(&i.body, out);
                for c in &i.elif_else_clauses {
                    defined_names(&c.body, out);
                }
            }
            Stmt::With(w) => defined_names(&w.body, out),
            Stmt::Try(t) => {
                defined_names(&t.body, out);
                for h in &t.handlers {
                    let ruff_python_ast::ExceptHandler::ExceptHandler(h) = h;
                    defined_names(&h.body, out);
                }
                defined_names(&t.orelse, out);
                defined_names(&t.finalbody, out);
            }
            _ => {}
        }
    }
}

struct Calls<'a> {
    found: Vec<&'a Expr>,
}

impl<'a> Visitor<'a> for Calls<'a> {
    fn visit_expr(&mut self, expr: &'a Expr) {
        if matches!(expr, Expr::Lambda(_)) {
            return;
        }
        if matches!(expr, Expr::Call(_)) {
            self.found.push(expr);
        }
        walk_expr(self, expr);
    }
}

/// (backpropagates or steps an optimizer, steps something else: an environment, a scheduler).
/// `torch.autograd.grad` computes gradients as values (a trust region, a penalty); a loop that
/// trains with it also steps an optimizer.
fn training_call(call: &ruff_python_ast::ExprCall) -> (bool, bool) {
    let Expr::Attribute(attr) = &*call.func else {
        return (false, false);
    };
    match attr.attr.as_str() {
        "backward" | "manual_backward" => (true, false),
        "step" => {
            let optimizer = dotted(&attr.value).is_some_and(|d| {
                let last = last_segment(&d).to_ascii_lowercase();
                last.contains("opt") || last == "scaler"
            });
            (optimizer, !optimizer)
        }
        // `policy.step_batch(obs, actions)`, `env.step_async(actions)`: a step of something.
        m if m.starts_with("step_") => (false, true),
        _ => (false, false),
    }
}

/// `torch.no_grad()`, `torch.inference_mode()`, `set_grad_enabled(False)` as a context or a
/// decorator.
pub fn disables_grad_expr(facts: &ModuleFacts, expr: &Expr) -> bool {
    let callee = match expr {
        Expr::Call(c) => &*c.func,
        e => e,
    };
    // `@smart_inference_mode()`: a function of the project that turns grad off.
    if matches!(callee, Expr::Name(n) if facts.grad_off.contains(n.id.as_str())) {
        return true;
    }
    let Some(q) = facts.imports.qualify(callee) else {
        return false;
    };
    if super::names::disables_grad(&q) {
        return true;
    }
    if last_segment(&q) == "set_grad_enabled" {
        if let Expr::Call(c) = expr {
            return !matches!(c.arguments.args.first(), Some(Expr::BooleanLiteral(b)) if b.value);
        }
    }
    false
}

/// `@trainer.on(Events.ITERATION_COMPLETED)`: an event handler of a training engine.
fn event_grain(decorator: &Expr) -> Option<Grain> {
    let Expr::Call(call) = decorator else {
        return None;
    };
    let Expr::Attribute(a) = &*call.func else {
        return None;
    };
    if a.attr.as_str() != "on" {
        return None;
    }
    event_arg_grain(call.arguments.args.first()?)
}

/// `Events.ITERATION_COMPLETED`, or with a filter (`Events.ITERATION_COMPLETED(every=10)`):
/// how often the handler of that event runs (`hooks.rs`).
fn event_arg_grain(arg: &Expr) -> Option<Grain> {
    let arg = match arg {
        Expr::Call(c) => &*c.func,
        e => e,
    };
    let arg = dotted(arg)?;
    super::hooks::event(last_segment(&arg)).map(|h| h.grain)
}

/// Handlers registered with `engine.add_event_handler(Events.X, handler)`, by name.
fn event_handlers<'a>(source: &str, suite: &'a [Stmt]) -> FxHashMap<&'a str, Grain> {
    let mut out = FxHashMap::default();
    if memchr::memmem::find(source.as_bytes(), b"add_event_handler").is_none() {
        return out;
    }
    struct H<'a, 'o> {
        out: &'o mut FxHashMap<&'a str, Grain>,
    }
    impl<'a> Visitor<'a> for H<'a, '_> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Call(call) = expr {
                if let Expr::Attribute(a) = &*call.func {
                    if a.attr.as_str() == "add_event_handler" {
                        if let [event, Expr::Name(handler), ..] = &*call.arguments.args {
                            if let Some(g) = event_arg_grain(event) {
                                self.out.insert(handler.id.as_str(), g);
                            }
                        }
                    }
                }
            }
            walk_expr(self, expr);
        }
    }
    let mut h = H { out: &mut out };
    for stmt in suite {
        ruff_python_ast::visitor::walk_stmt(&mut h, stmt);
    }
    out
}

/// Which functions run only inside a module's forward pass: `forward` (or `__call__`) of an
/// `nn.Module`, and a function of this file that only such functions call (and that no other
/// file is known to call). Their loops iterate within one step.
fn within_forward_pass(
    funcs: &[Func],
    sites: &[Site],
    external: &crate::summaries::ExternalFacts,
) -> Vec<bool> {
    let mut pass: Vec<bool> = funcs
        .iter()
        .map(|f| {
            f.in_module_class
                && f.decorated.is_none()
                && f.def
                    .is_some_and(|d| matches!(d.name.as_str(), "forward" | "__call__"))
        })
        .collect();
    for _ in 0..funcs.len().min(16) {
        let mut changed = false;
        for (i, f) in funcs.iter().enumerate().skip(1) {
            if pass[i]
                || f.def.is_none()
                || f.decorated.is_some()
                || external.cadence.contains_key(&f.name)
            {
                continue;
            }
            let mut callers = sites.iter().filter(|s| s.callee == i).peekable();
            if callers.peek().is_some() && callers.all(|s| pass[s.caller]) {
                pass[i] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    pass
}

fn seed_cadence(f: &Func, funcs: &[Func], hooks: &FxHashSet<String>) -> Cadence {
    let Some(def) = f.def else {
        return Cadence::Unknown;
    };
    if f.test {
        return Cadence::Unknown;
    }
    let name = def.name.as_str();
    if let Some(g) = f.decorated {
        return Cadence::Every(g, Reason::Hook);
    }
    if f.in_module_class && matches!(name, "forward" | "__call__") {
        return Cadence::Every(Grain::Step, Reason::Forward);
    }
    // A hook is registered by name, made by a registered factory, or named like one.
    let factory = funcs
        .get(f.parent)
        .and_then(|p| p.def)
        .is_some_and(|p| hooks.contains(p.name.as_str()));
    if hooks.contains(name) || factory || named_like_hook(name) {
        return Cadence::Every(Grain::Step, Reason::RegisteredHook);
    }
    if let Some(g) = hook_grain(name) {
        return Cadence::Every(g, Reason::Hook);
    }
    if f.trains_outside_loops {
        return Cadence::Every(Grain::Step, Reason::Trains);
    }
    Cadence::Unknown
}

/// Is the function named like a hook itself (`log_grad_hook`, `hook`)? One named for what it
/// does with hooks (`register_in_epoch_hook(self, hook)`, `add_hook`, `make_hook`) runs when
/// the hooks are set up or made, not each time they fire.
fn named_like_hook(name: &str) -> bool {
    const HANDLES_HOOKS: &[&str] = &[
        "register",
        "unregister",
        "add",
        "remove",
        "set",
        "install",
        "attach",
        "detach",
        "clear",
        "get",
        "make",
        "build",
        "create",
        "new",
    ];
    if name == "hook" {
        return true;
    }
    if !name.ends_with("_hook") {
        return false;
    }
    let verb = name.trim_start_matches('_').split('_').next().unwrap_or("");
    !HANDLES_HOOKS.contains(&verb)
}

/// Names training frameworks call once per step or epoch: Lightning's `training_step` and
/// `on_train_batch_end`, Hugging Face's `on_step_end`, fastai's `after_batch`, Avalanche's
/// `after_training_iteration`, Keras-style `on_batch_end`, an environment's or agent's `step`.
pub fn hook_grain(name: &str) -> Option<Grain> {
    if let Some(h) = super::hooks::method(name) {
        return Some(h.grain);
    }
    let n = name.trim_start_matches('_');
    if n == "step" || n.ends_with("_step") || n.ends_with("_step_end") {
        // `lr_scheduler_step` runs per epoch in most set-ups; either way it keeps nothing.
        return Some(Grain::Step);
    }
    let event = n
        .strip_prefix("on_")
        .or_else(|| n.strip_prefix("before_"))
        .or_else(|| n.strip_prefix("after_"))?;
    let words: Vec<&str> = event.split('_').collect();
    let has = |w: &[&str]| words.iter().any(|x| w.contains(x));
    if has(&[
        "epoch",
        "episode",
        "exp",
        "experience",
        "eval",
        "evaluate",
        "fit",
        "train",
        "validation",
        "test",
        "predict",
    ]) && !has(&[
        "batch",
        "step",
        "iteration",
        "iter",
        "backward",
        "forward",
        "loss",
        "optimizer",
        "substep",
        "update",
    ]) {
        // `on_train_epoch_end`, `after_eval`, `before_training_exp`; `on_train_start` runs once.
        if has(&["start", "begin", "setup", "init"]) && !has(&["epoch", "episode"]) {
            return None;
        }
        if has(&[
            "epoch",
            "episode",
            "exp",
            "experience",
            "eval",
            "evaluate",
            "validation",
        ]) {
            return Some(Grain::Epoch);
        }
        return None;
    }
    if has(&[
        "batch",
        "step",
        "iteration",
        "iter",
        "backward",
        "forward",
        "loss",
        "pred",
        "optimizer",
        "substep",
        "update",
        "log",
    ]) {
        return Some(Grain::Step);
    }
    None
}

// ----- loops named after what they iterate ---------------------------------------------------

/// Words of an identifier (`num_epochs` -> `num`, `epochs`; `GRADIENT_STEPS` -> `gradient`,
/// `steps`).
pub fn name_words(name: &str) -> impl Iterator<Item = String> + '_ {
    name.split(|c: char| c == '_' || c == '.' || c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_ascii_lowercase())
}

const STEP_WORDS: &[&str] = &[
    "step",
    "steps",
    "batch",
    "batches",
    "iter",
    "iters",
    "iteration",
    "iterations",
    "it",
    "micro",
    "microbatch",
    "accum",
    "timestep",
    "timesteps",
    "update",
    "updates",
    "loader",
    "dataloader",
];

/// What a job iterates: data sets, loaders and rollouts. Not environments: going through a
/// list of environments (a plotting script, one evaluation per task) steps none of them; a loop
/// that does calls `env.step()`, which makes it a training loop by itself.
const DATA_WORDS: &[&str] = &[
    "loader",
    "dataloader",
    "data",
    "dataset",
    "rollout",
    "rollouts",
    "trajectory",
    "trajectories",
];

const EPOCH_WORDS: &[&str] = &[
    "epoch",
    "epochs",
    "ep",
    "eps",
    "gen",
    "gens",
    "generation",
    "generations",
    "episode",
    "episodes",
    "fold",
    "folds",
    "trial",
    "trials",
    "round",
    "rounds",
    "cycle",
    "cycles",
];

/// Does a name read as an epoch/generation/episode counter (`Some(true)`), a step counter or a
/// data source (`Some(false)`), or neither (`None`)? The name's last word says what it is
/// (`num_steps`, `train_loader`; `batch_size` is a size, `this_batch_input_ids` ids), or the
/// word before an index word (`batch_idx`, `epoch_i`).
pub fn coarse_name(name: &str) -> Option<bool> {
    let words: Vec<String> = name_words(name).collect();
    let mut last = words.last()?.as_str();
    if matches!(
        last,
        "idx" | "index" | "id" | "i" | "n" | "no" | "num" | "nb" | "count" | "counter" | "ix"
    ) && words.len() > 1
    {
        last = words[words.len() - 2].as_str();
    }
    if STEP_WORDS.contains(&last) || DATA_WORDS.contains(&last) {
        return Some(false);
    }
    if EPOCH_WORDS.contains(&last) {
        return Some(true);
    }
    None
}

/// The names that say what a loop iterates: the collection's own name (`loader`,
/// `self.train_loader`), what a wrapper wraps (`enumerate(loader)`, `range(num_epochs)`,
/// `tqdm(batches)`), or the method that makes it (`train_dataloader()`; `batch.keys()` iterates
/// keys, not batches).
fn iterated_names(expr: &Expr, out: &mut Vec<String>) {
    match expr {
        Expr::Name(n) => out.push(n.id.to_string()),
        Expr::Attribute(a) => out.push(a.attr.to_string()),
        Expr::Call(c) => match &*c.func {
            Expr::Name(n)
                if matches!(
                    n.id.as_str(),
                    "range"
                        | "enumerate"
                        | "zip"
                        | "tqdm"
                        | "trange"
                        | "iter"
                        | "reversed"
                        | "sorted"
                        | "list"
                        | "len"
                        | "islice"
                ) =>
            {
                for a in &*c.arguments.args {
                    iterated_names(a, out);
                }
            }
            Expr::Attribute(a) if matches!(a.attr.as_str(), "tqdm" | "trange") => {
                for a in &*c.arguments.args {
                    iterated_names(a, out);
                }
            }
            Expr::Attribute(a) => out.push(a.attr.to_string()),
            Expr::Name(n) => out.push(n.id.to_string()),
            _ => {}
        },
        Expr::BinOp(b) => {
            iterated_names(&b.left, out);
            iterated_names(&b.right, out);
        }
        Expr::Compare(c) => {
            iterated_names(&c.left, out);
            for e in &*c.comparators {
                iterated_names(e, out);
            }
        }
        Expr::BoolOp(b) => {
            for e in &b.values {
                iterated_names(e, out);
            }
        }
        Expr::UnaryOp(u) => iterated_names(&u.operand, out),
        _ => {}
    }
}

/// `step % n == 0`, `(i + 1) % every == 0`, `not step % n`: a test true once every so many
/// iterations (a `%` of numbers, not of a format string).
pub(crate) fn is_periodic(test: &Expr) -> bool {
    match test {
        Expr::Compare(c) => std::iter::once(&*c.left)
            .chain(c.comparators.iter())
            .any(is_modulo),
        Expr::UnaryOp(u) if u.op == ruff_python_ast::UnaryOp::Not => is_modulo(&u.operand),
        Expr::BoolOp(b) if b.op == ruff_python_ast::BoolOp::And => b.values.iter().any(is_periodic),
        // `step % n == 0 or i + 1 == iterations`: every n iterations, and once more at the end.
        Expr::BoolOp(b) if b.op == ruff_python_ast::BoolOp::Or => {
            b.values.iter().any(is_periodic)
                && b.values.iter().all(|v| is_periodic(v) || is_once(v))
        }
        _ => false,
    }
}

/// `i + 1 == iterations`, `epoch == 0`, `step == len(loader) - 1`: a counter's equality with one
/// value, true in one iteration. Only a side with a number in it (a literal, or arithmetic
/// with one) says it is a counter: `mode == TRAIN` may hold in every iteration.
fn is_once(test: &Expr) -> bool {
    fn counted(e: &Expr) -> bool {
        match e {
            Expr::NumberLiteral(_) => true,
            Expr::BinOp(b) => {
                matches!(
                    b.op,
                    ruff_python_ast::Operator::Add | ruff_python_ast::Operator::Sub
                ) && (matches!(&*b.left, Expr::NumberLiteral(_))
                    || matches!(&*b.right, Expr::NumberLiteral(_)))
            }
            _ => false,
        }
    }
    matches!(test, Expr::Compare(c) if c.ops.len() == 1
        && c.ops[0] == ruff_python_ast::CmpOp::Eq
        && (counted(&c.left) || c.comparators.iter().any(counted)))
}

fn is_modulo(e: &Expr) -> bool {
    matches!(e, Expr::BinOp(b) if b.op == ruff_python_ast::Operator::Mod
        && !matches!(&*b.left, Expr::StringLiteral(_) | Expr::BytesLiteral(_) | Expr::FString(_)))
}

/// How often a loop runs by its names: the target's first, then what it iterates (or tests,
/// for `while`: `while step < max_steps`, `while not done`).
/// What a loop's names alone say of how often it runs (`for epoch in ...`, `for batch in
/// loader`, `while step < total_steps`), whatever its body does.
pub fn named_grain(stmt: &Stmt) -> Option<Grain> {
    match stmt {
        Stmt::For(f) => {
            let mut names: Vec<String> = keys_in(&f.target).into_iter().collect();
            names.sort_unstable();
            loop_grain(&names, &f.iter, false)
        }
        Stmt::While(w) => loop_grain(&[], &w.test, true),
        _ => None,
    }
}

fn loop_grain(targets: &[String], iter: &Expr, is_while: bool) -> Option<Grain> {
    let as_grain = |coarse: bool| if coarse { Grain::Epoch } else { Grain::Step };
    for n in targets {
        if let Some(coarse) = coarse_name(n) {
            return Some(as_grain(coarse));
        }
    }
    let mut verdict = None;
    let mut names = Vec::new();
    iterated_names(iter, &mut names);
    for last in names {
        let last = last.as_str();
        if is_while && matches!(last, "done" | "terminated" | "truncated") {
            return Some(Grain::Step);
        }
        match coarse_name(last) {
            Some(false) => return Some(Grain::Step),
            Some(true) => verdict = Some(Grain::Epoch),
            None => {}
        }
    }
    verdict
}

/// Functions registered as forward/backward/tensor hooks anywhere in the file (by name, or the
/// factory that makes them).
pub fn collect_hook_functions(source: &str, suite: &[Stmt]) -> FxHashSet<String> {
    if !registers_hooks(source) {
        return FxHashSet::default();
    }
    struct H {
        names: FxHashSet<String>,
    }
    impl<'a> Visitor<'a> for H {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Call(call) = expr {
                if let Expr::Attribute(attr) = &*call.func {
                    let m = attr.attr.as_str();
                    if m.starts_with("register_") && m.ends_with("hook") {
                        for a in &*call.arguments.args {
                            match a {
                                Expr::Name(n) => {
                                    self.names.insert(n.id.as_str().to_string());
                                }
                                Expr::Attribute(x) => {
                                    self.names.insert(x.attr.as_str().to_string());
                                }
                                Expr::Call(inner) => {
                                    // `register_forward_hook(make_hook(name))`: the factory's
                                    // inner function is the hook; mark the factory.
                                    if let Some(d) = dotted(&inner.func) {
                                        self.names.insert(last_segment(&d).to_string());
                                    }
                                }
                                _ => {}
                            }
                        }
                    }
                }
            }
            walk_expr(self, expr);
        }
    }
    let mut h = H {
        names: FxHashSet::default(),
    };
    for stmt in suite {
        ruff_python_ast::visitor::walk_stmt(&mut h, stmt);
    }
    h.names
}

/// Does the text name a `register_...hook` method? Many files call `register_buffer` or
/// `register_parameter` and no hook registration: they need no walk for hooks.
fn registers_hooks(source: &str) -> bool {
    const PREFIX: &str = "register_";
    let bytes = source.as_bytes();
    memchr::memmem::find_iter(bytes, PREFIX).any(|at| {
        let rest = &bytes[at + PREFIX.len()..];
        // The identifier goes on while its characters do (non-ASCII ones included).
        let len = rest
            .iter()
            .position(|&b| !(b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80))
            .unwrap_or(rest.len());
        rest[..len].ends_with(b"hook")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roles(src: &str) -> Vec<(usize, LoopRole)> {
        let parsed = ruff_python_parser::parse_module(src).unwrap();
        let suite = parsed.suite();
        let facts = ModuleFacts::collect(suite);
        let t = Training::collect(
            src,
            suite,
            &facts,
            &FxHashSet::default(),
            &crate::summaries::ExternalFacts::NONE,
        );
        let mut out = Vec::new();
        super::super::facts::visit_body(suite, &mut |s| {
            if matches!(s, Stmt::For(_) | Stmt::While(_)) {
                let line = src[..usize::from(s.start())].matches('\n').count() + 1;
                out.push((line, t.loop_role(s)));
            }
        });
        out
    }

    #[test]
    fn training_loops_and_the_rest() {
        let src = "\
def train(model, loader, opt):
    for epoch in range(10):
        for x, y in loader:
            loss = model(x).sum()
            loss.backward()
            opt.step()
    for layer in model.layers:
        pass

class Net(nn.Module):
    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        for t in range(x.shape[0]):
            pass
        return x

def fit(agent, env):
    for g in range(5):
        agent.learn()

class Agent:
    def learn(self):
        self.opt.step()
";
        let got = roles(src);
        assert_eq!(
            got,
            vec![
                (2, LoopRole::Training(Grain::Epoch)),
                (3, LoopRole::Training(Grain::Step)),
                (7, LoopRole::Other),
                (12, LoopRole::Other),
                (14, LoopRole::Other),
                (19, LoopRole::Training(Grain::Step)),
            ]
        );
    }

    #[test]
    fn cadence_of_functions() {
        let src = "\
class Net(nn.Module):
    def forward(self, x):
        return self.helper(x)
    def helper(self, x):
        return x
    def build(self):
        pass

class LitModel:
    def training_step(self, batch, i):
        return batch
    def on_train_epoch_end(self):
        pass
    def add(self, x):
        pass

def update(model, opt, x):
    model(x).sum().backward()
    opt.step()
    log(x)

def log(x):
    pass
";
        let parsed = ruff_python_parser::parse_module(src).unwrap();
        let suite = parsed.suite();
        let facts = ModuleFacts::collect(suite);
        let t = Training::collect(
            src,
            suite,
            &facts,
            &FxHashSet::default(),
            &crate::summaries::ExternalFacts::NONE,
        );
        let mut got = Vec::new();
        super::super::facts::visit_body(suite, &mut |s| {
            if let Stmt::FunctionDef(f) = s {
                got.push((f.name.as_str().to_string(), t.cadence(f).grain()));
            }
        });
        let want: Vec<(String, Option<Grain>)> = vec![
            ("forward".into(), Some(Grain::Step)),
            ("helper".into(), Some(Grain::Step)),
            ("build".into(), None),
            ("training_step".into(), Some(Grain::Step)),
            ("on_train_epoch_end".into(), Some(Grain::Epoch)),
            ("add".into(), None),
            ("update".into(), Some(Grain::Step)),
            ("log".into(), Some(Grain::Step)),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn hook_names() {
        for (n, g) in [
            ("training_step", Some(Grain::Step)),
            ("on_train_batch_end", Some(Grain::Step)),
            ("on_validation_epoch_end", Some(Grain::Epoch)),
            ("after_training_iteration", Some(Grain::Step)),
            ("after_batch", Some(Grain::Step)),
            ("on_step_end", Some(Grain::Step)),
            ("on_train_start", None),
            ("on_fit_start", None),
            ("before_training_exp", Some(Grain::Epoch)),
            ("add", None),
            ("update", None),
            ("step", Some(Grain::Step)),
        ] {
            assert_eq!(hook_grain(n), g, "{n}");
        }
    }

    #[test]
    fn hooks_by_name_are_the_hooks_not_their_registrars() {
        for (n, want) in [
            ("hook", true),
            ("grad_norm_hook", true),
            ("_save_activation_hook", true),
            ("register_in_epoch_hook", false),
            ("add_hook", false),
            ("_make_hook", false),
            ("remove_forward_hook", false),
            ("hooks", false),
        ] {
            assert_eq!(named_like_hook(n), want, "{n}");
        }
    }

    #[test]
    fn periodic_tests() {
        let test = |src: &str| {
            let parsed = ruff_python_parser::parse_expression(src).unwrap();
            is_periodic(parsed.expr())
        };
        for (src, want) in [
            ("step % 100 == 0", true),
            ("not step % every", true),
            ("step % n == 0 and rank == 0", true),
            ("step % n == 0 or i + 1 == iterations", true),
            ("epoch == 0 or epoch % 10 == 0", true),
            ("step % n == 0 or i == len(loader) - 1", true),
            ("step % n == 0 or mode == 'verbose'", false),
            ("step % n == 0 or verbose", false),
            ("i + 1 == iterations", false),
            ("'%d' % step == s", false),
        ] {
            assert_eq!(test(src), want, "{src}");
        }
    }
}

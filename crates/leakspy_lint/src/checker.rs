//! The walk over one file. It keeps, per function, an environment of what each name holds
//! (graph or not, module, container...), the stack of enclosing loops with a scan of their
//! bodies, and whether autograd is recording; rules are called at statements, calls, loops and
//! functions and ask it questions. Loop bodies are walked twice, the first time silently, so a
//! value carried around the loop (`h` in `out, h = rnn(x, h)`) is known on the second walk.

use crate::lines::Lines;
use ruff_python_ast::visitor::{walk_expr, Visitor};
use ruff_python_ast::{Expr, ExprCall, Stmt, StmtClassDef, StmtFunctionDef};
use ruff_text_size::{Ranged, TextRange, TextSize};
use std::rc::Rc;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::diagnostic::Diagnostic;
use crate::registry::{Rule, RuleSet};
use crate::rules;
use crate::semantic::facts::{
    init_kind_of_call, is_loss_ctor, is_module_ctor, self_attr, ModuleFacts, PlaceFacts,
};
use crate::semantic::names::{
    builtin_cuts, builtin_passes, disables_grad, dotted, is_conventional_loss_param,
    is_conventional_module_param, is_dotted, is_functional_loss, is_per_step_method, last_segment,
    tensor_attr_cuts, tensor_method_cuts, torch_function_cuts,
};
use crate::semantic::scan::BlockFacts;
use crate::semantic::value::{Graph, Kind, Origin, Value};

/// Who keeps a container alive beyond one iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// `self.<attr>` or `obj.<attr>`: lives as long as the object.
    Attribute,
    /// A module global: lives as long as the process.
    Global,
    /// A variable of an enclosing function, captured by a closure.
    Closure,
    /// A local bound before the loop: lives until the function returns or an outer loop
    /// rebinds it.
    OuterLocal,
    /// A parameter of a function that runs per step: the caller's container.
    Param,
}

#[derive(Debug, Clone)]
pub struct Lifetime {
    pub key: String,
    pub holder: Holder,
    /// Ends the sentence "keeps ... alive ", e.g. "until `self.losses` is cleared in
    /// `on_epoch_end()` (line 40)".
    pub until: String,
}

#[derive(Debug)]
pub enum ScopeKind<'a> {
    Module,
    Function {
        def: &'a StmtFunctionDef,
        class: Option<&'a StmtClassDef>,
        per_step: bool,
        hook: bool,
    },
}

pub struct LoopFrame<'a> {
    pub stmt: &'a Stmt,
    pub facts: Rc<BlockFacts<'a>>,
    /// Offset of the loop header, for messages.
    pub offset: TextSize,
    /// Does the loop run once per epoch or episode; asked at many calls, answered once.
    pub coarse: std::cell::OnceCell<bool>,
}

impl LoopFrame<'_> {
    pub fn is_coarse(&self) -> bool {
        *self
            .coarse
            .get_or_init(|| crate::rules::helpers::is_coarse_loop(self.stmt))
    }
}

pub struct Scope<'a> {
    pub kind: ScopeKind<'a>,
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
}

impl<'a> Scope<'a> {
    fn new(kind: ScopeKind<'a>, body_facts: Rc<BlockFacts<'a>>) -> Self {
        Self {
            kind,
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
        }
    }
}

const SILENT_PASSES: usize = 3;

pub struct Checker<'a> {
    pub source: &'a str,
    pub facts: &'a ModuleFacts,
    lines: &'a Lines<'a>,
    rules: &'a RuleSet,
    diagnostics: Vec<Diagnostic>,
    emit: bool,
    scopes: Vec<Scope<'a>>,
    classes: Vec<&'a StmtClassDef>,
    /// Return values of this file's functions (`f`, `Class.method`), and of methods by bare
    /// name when only one class defines that name.
    summaries: FxHashMap<String, Value>,
    method_owners: FxHashMap<String, Vec<String>>,
    /// Names of functions registered as forward/backward/tensor hooks anywhere in the file.
    pub hook_functions: FxHashSet<String>,
    /// Graph-carrying arguments seen at call sites of this file's functions, per parameter
    /// position (after `self`): the callee's parameter then carries a graph.
    param_taint: std::cell::RefCell<FxHashMap<String, Vec<Option<std::rc::Rc<Origin>>>>>,
    /// Positional argument count of the call being evaluated, for arity matching.
    current_call_args: std::cell::Cell<usize>,
    block_cache: std::cell::RefCell<FxHashMap<(usize, usize), Rc<BlockFacts<'a>>>>,
    /// Names that appear called (`name(`) anywhere in the file; `None` when unknown.
    called_names: Option<FxHashSet<&'a str>>,
    /// Reused by `visit_calls`.
    calls_buffer: Vec<&'a ExprCall>,
    /// The last `qualified_function` answer, by callee address; cleared at each statement.
    qualified_memo: std::cell::RefCell<Option<(usize, Option<Rc<str>>)>>,
}

impl<'a> Checker<'a> {
    pub fn new(
        source: &'a str,
        facts: &'a ModuleFacts,
        lines: &'a Lines<'a>,
        rules: &'a RuleSet,
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
            rules,
            diagnostics: Vec::new(),
            emit: false,
            scopes: Vec::new(),
            classes: Vec::new(),
            summaries: FxHashMap::default(),
            method_owners,
            hook_functions: FxHashSet::default(),
            param_taint: Default::default(),
            current_call_args: Default::default(),
            block_cache: Default::default(),
            qualified_memo: Default::default(),
            calls_buffer: Vec::new(),
            called_names: None,
        }
    }

    /// Tells the summary passes which names the file calls, so they skip functions whose
    /// return value nothing here asks for.
    pub fn with_called_names(mut self, names: FxHashSet<&'a str>) -> Self {
        self.called_names = Some(names);
        self
    }

    /// Runs the analysis on a module and returns its diagnostics.
    pub fn check_module(mut self, suite: &'a [Stmt]) -> Vec<Diagnostic> {
        // Only files that register hooks need the walk that finds them.
        if registers_hooks(self.source) {
            self.hook_functions = collect_hook_functions(suite);
        }
        // Silent walks learn what this file's functions return and which parameters receive
        // graphs; a graph passed on through two calls (`trainer -> agent.update(x) ->
        // normalizer.update(x)`) needs a second one. Then the walk that reports.
        let mut known = usize::MAX;
        for _ in 0..SILENT_PASSES {
            let taints = self.taint_count();
            if taints == known {
                break;
            }
            known = taints;
            self.emit = false;
            self.scopes.push(Scope::new(
                ScopeKind::Module,
                self.cached_facts(suite, || BlockFacts::scan(suite)),
            ));
            self.walk_body(suite);
            self.scopes.pop();
        }
        self.emit = true;
        self.scopes.push(Scope::new(
            ScopeKind::Module,
            self.cached_facts(suite, || BlockFacts::scan(suite)),
        ));
        self.walk_body(suite);
        self.scopes.pop();
        let mut diagnostics = self.diagnostics;
        diagnostics.sort_by_key(|d| (d.range.start(), d.rule));
        diagnostics.dedup_by(|a, b| a.rule == b.rule && a.range == b.range);
        diagnostics
    }

    /// The scan of a block, made once and shared by every pass over it.
    fn cached_facts(
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

    /// How many (function, parameter) pairs are known to receive graphs.
    fn taint_count(&self) -> usize {
        self.param_taint
            .borrow()
            .values()
            .map(|v| v.iter().filter(|t| t.is_some()).count())
            .sum()
    }

    // ----- questions rules ask ---------------------------------------------------------------

    pub fn enabled(&self, rule: Rule) -> bool {
        self.rules.contains(rule)
    }

    /// Is `method` the name of a method of some class of this file?
    pub fn is_method_name(&self, method: &str) -> bool {
        self.method_owners.contains_key(method)
    }

    pub fn report(&mut self, diagnostic: Diagnostic) {
        if self.emit {
            self.diagnostics.push(diagnostic);
        }
    }

    pub fn scope(&self) -> &Scope<'a> {
        self.scopes.last().expect("a scope is always open")
    }

    fn scope_mut(&mut self) -> &mut Scope<'a> {
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

    pub fn class_facts(&self) -> Option<&'a crate::semantic::facts::ClassFacts> {
        let facts = self.facts;
        self.class().and_then(|c| facts.class(c.name.as_str()))
    }

    /// Facts about `self.<attr>` in the current class.
    pub fn attr_facts(&self, attr: &str) -> Option<&'a PlaceFacts> {
        self.class_facts().and_then(|c| c.attrs.get(attr))
    }

    pub fn in_module_class(&self) -> bool {
        self.class_facts().is_some_and(|c| c.is_module)
    }

    pub fn is_hook_function(&self) -> bool {
        matches!(self.scope().kind, ScopeKind::Function { hook: true, .. })
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

    /// In a loop, or in a method that training frameworks call once per step.
    pub fn per_step(&self) -> bool {
        self.in_loop()
            || matches!(
                self.scope().kind,
                ScopeKind::Function { per_step: true, .. }
            )
    }

    pub fn in_per_step_function(&self) -> bool {
        matches!(
            self.scope().kind,
            ScopeKind::Function { per_step: true, .. }
        )
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

    /// Facts of the innermost loop's body, or of the function body outside loops.
    pub fn block_facts(&self) -> &BlockFacts<'a> {
        match self.scope().loops.last() {
            Some(l) => &l.facts,
            None => &self.scope().body_facts,
        }
    }

    /// Is `key` cleared, trimmed or rebound within the same iteration (or call of a per-step
    /// function)?
    pub fn reset_in_iteration(&self, key: &str) -> bool {
        self.block_facts().resets(key)
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

    /// Who keeps the container `expr` alive beyond the current iteration, if anyone.
    pub fn lifetime(&self, expr: &Expr) -> Option<Lifetime> {
        let expr = match expr {
            Expr::Subscript(s) => &*s.value,
            e => e,
        };
        let key = dotted(expr)?;
        let scope = self.scope();
        let depth = scope.loops.len();
        let rebound_here = scope.loops.last().is_some_and(|l| l.facts.rebinds(&key));
        if let Some(attr) = self_attr(expr) {
            if rebound_here {
                return None;
            }
            let until = match self.attr_facts(attr) {
                Some(place) => match place.resets().next() {
                    Some(reset) => format!(
                        "until `{key}` is {} in `{}()` (line {})",
                        match reset.mutation {
                            crate::semantic::mutation::Mutation::Rebind => "rebound",
                            crate::semantic::mutation::Mutation::Trim => "trimmed",
                            _ => "cleared",
                        },
                        reset.function,
                        self.line(reset.offset)
                    ),
                    None => "for the life of the object (nothing clears it)".to_string(),
                },
                None => "for the life of the object".to_string(),
            };
            return Some(Lifetime {
                key,
                holder: Holder::Attribute,
                until,
            });
        }
        let head = key.split('.').next().unwrap_or(&key).to_string();
        if key.contains('.') {
            // `obj.attr`: long-lived unless `obj` itself is made in this iteration.
            if rebound_here || scope.loops.last().is_some_and(|l| l.facts.rebinds(&head)) {
                return None;
            }
            if scope
                .bound_depth
                .get(&head)
                .is_some_and(|d| *d >= depth && depth > 0)
            {
                return None;
            }
            if !self.in_loop() && !self.in_per_step_function() {
                return None;
            }
            return Some(Lifetime {
                until: format!("for as long as `{head}` lives"),
                key,
                holder: Holder::Attribute,
            });
        }
        match &scope.kind {
            ScopeKind::Module => {
                if depth == 0 || rebound_here {
                    return None;
                }
                Some(Lifetime {
                    until: "for the life of the process (a module global)".to_string(),
                    key,
                    holder: Holder::Global,
                })
            }
            ScopeKind::Function { def, .. } => {
                if scope.declared_global.contains(&key) {
                    return Some(Lifetime {
                        until: "for the life of the process (a module global)".to_string(),
                        key,
                        holder: Holder::Global,
                    });
                }
                if rebound_here {
                    return None;
                }
                let fname = def.name.as_str();
                if let Some(&bound) = scope.bound_depth.get(&key) {
                    if depth == 0 || bound >= depth {
                        return None;
                    }
                    let until = match scope.loops[..depth - 1]
                        .iter()
                        .rev()
                        .find(|l| l.facts.rebinds(&key))
                    {
                        Some(outer) => format!(
                            "until the loop at line {} rebinds `{key}`",
                            self.line(outer.offset)
                        ),
                        None => format!("until `{fname}()` returns"),
                    };
                    return Some(Lifetime {
                        key,
                        holder: Holder::OuterLocal,
                        until,
                    });
                }
                if scope.params.contains(&key) {
                    if depth == 0 && !self.in_per_step_function() {
                        return None;
                    }
                    return Some(Lifetime {
                        until: format!("for as long as the caller of `{fname}()` keeps `{key}`"),
                        key,
                        holder: Holder::Param,
                    });
                }
                // A free variable: a closure cell or a module global.
                if self.facts.globals.contains_key(&key) {
                    if depth == 0 && !self.in_per_step_function() && !self.is_hook_function() {
                        return None;
                    }
                    return Some(Lifetime {
                        until: "for the life of the process (a module global)".to_string(),
                        key,
                        holder: Holder::Global,
                    });
                }
                if self.scopes.len() > 2
                    && self.scopes[..self.scopes.len() - 1]
                        .iter()
                        .any(|s| s.env.contains_key(&key))
                {
                    return Some(Lifetime {
                        until: "for as long as the closure lives".to_string(),
                        key,
                        holder: Holder::Closure,
                    });
                }
                None
            }
        }
    }

    // ----- values ----------------------------------------------------------------------------

    /// What the analysis knows about the value of `expr` at this point.
    pub fn value(&self, expr: &Expr) -> Value {
        let mut v = self.value_inner(expr);
        // A summary pass's parameter placeholder never reaches a rule as a real graph.
        if v.origin().is_some_and(|o| o.param.is_some()) && self.emit {
            v = Value::unknown();
        }
        if !self.grad_enabled()
            && v.has_graph()
            && !matches!(
                expr,
                Expr::Name(_) | Expr::Attribute(_) | Expr::Subscript(_)
            )
        {
            // Computed under no_grad: no graph, whatever the inputs.
            return Value {
                graph: Graph::No,
                ..v
            };
        }
        v
    }

    fn lookup(&self, key: &str) -> Option<&Value> {
        for scope in self.scopes.iter().rev() {
            if let Some(v) = scope.env.get(key) {
                return Some(v);
            }
        }
        None
    }

    fn origin_of_call(&self, call: &ExprCall, is_loss: bool) -> Origin {
        Origin {
            what: format!("{}(...)", shorten(&self.source[call.func.range()])),
            offset: call.start(),
            is_loss,
            backpropagated: false,
            param: None,
        }
    }

    fn value_inner(&self, expr: &Expr) -> Value {
        match expr {
            Expr::Name(name) => {
                let id = name.id.as_str();
                if let Some(v) = self.lookup(id) {
                    return v.clone();
                }
                if let Some(g) = self.facts.globals.get(id) {
                    return Value::of_kind(g.init);
                }
                Value::unknown()
            }
            Expr::Attribute(attr) => {
                if let Some(key) = dotted(expr) {
                    if let Some(v) = self.lookup(&key) {
                        return v.clone();
                    }
                }
                if let Some(a) = self_attr(expr) {
                    if let Some(place) = self.attr_facts(a) {
                        return Value::of_kind(place.init);
                    }
                }
                let recv = self.value_inner(&attr.value);
                let name = attr.attr.as_str();
                if recv.kind == Kind::Module {
                    // `model.weight`, `model.fc`: parameters and submodules.
                    return Value {
                        graph: Graph::No,
                        kind: Kind::Unknown,
                        device: recv.device,
                    };
                }
                if tensor_attr_cuts(name) {
                    return Value {
                        graph: Graph::No,
                        kind: Kind::Unknown,
                        device: recv.device,
                    };
                }
                if recv.has_graph() {
                    return Value {
                        kind: Kind::Tensor,
                        ..recv
                    };
                }
                Value::unknown()
            }
            Expr::Subscript(sub) => {
                let recv = self.value_inner(&sub.value);
                if recv.has_graph() {
                    return Value {
                        kind: Kind::Tensor,
                        ..recv
                    };
                }
                Value {
                    graph: recv.graph,
                    kind: if recv.kind == Kind::Array {
                        Kind::Array
                    } else {
                        Kind::Unknown
                    },
                    device: recv.device,
                }
            }
            Expr::BinOp(bin) => {
                let l = self.value_inner(&bin.left);
                let r = self.value_inner(&bin.right);
                arith(l, r)
            }
            Expr::UnaryOp(u) => {
                if matches!(u.op, ruff_python_ast::UnaryOp::Not) {
                    Value::plain()
                } else {
                    self.value_inner(&u.operand)
                }
            }
            Expr::Compare(_) | Expr::BoolOp(_) => Value::plain(),
            Expr::If(e) => self.value_inner(&e.body).join(self.value_inner(&e.orelse)),
            Expr::Named(n) => self.value_inner(&n.value),
            Expr::Starred(s) => self.value_inner(&s.value),
            Expr::Await(a) => self.value_inner(&a.value),
            Expr::List(l) => self.container(l.elts.iter(), Kind::List),
            Expr::Tuple(t) => self.container(t.elts.iter(), Kind::Unknown),
            Expr::Set(s) => self.container(s.elts.iter(), Kind::Set),
            Expr::Dict(d) => self.container(d.items.iter().map(|i| &i.value), Kind::Dict),
            Expr::ListComp(c) => {
                let v = self.comprehension_value(&c.elt, &c.generators);
                Value {
                    kind: Kind::List,
                    ..v
                }
            }
            Expr::SetComp(c) => self.comprehension_value(&c.elt, &c.generators),
            Expr::Generator(c) => self.comprehension_value(&c.elt, &c.generators),
            Expr::DictComp(c) => {
                let v = self.comprehension_value(&c.value, &c.generators);
                Value {
                    kind: Kind::Dict,
                    ..v
                }
            }
            Expr::Call(call) => self.call_value(call),
            Expr::NumberLiteral(_)
            | Expr::StringLiteral(_)
            | Expr::BytesLiteral(_)
            | Expr::BooleanLiteral(_)
            | Expr::NoneLiteral(_)
            | Expr::EllipsisLiteral(_)
            | Expr::FString(_)
            | Expr::TString(_)
            | Expr::Lambda(_) => Value::plain(),
            _ => Value::unknown(),
        }
    }

    fn container<'e>(&self, elts: impl Iterator<Item = &'e Expr>, kind: Kind) -> Value {
        let mut graph = Graph::No;
        let mut device = false;
        for e in elts {
            let v = self.value_inner(e);
            device |= v.device;
            match v.graph {
                Graph::Yes(o) => {
                    graph = Graph::Yes(o);
                    break;
                }
                Graph::Unknown => graph = Graph::Unknown,
                Graph::No => {}
            }
        }
        Value {
            graph,
            kind,
            device,
        }
    }

    /// The element of a comprehension: its generators' targets take the graph of what they
    /// iterate (a list of losses yields losses).
    fn comprehension_value(
        &self,
        elt: &Expr,
        generators: &[ruff_python_ast::Comprehension],
    ) -> Value {
        let v = self.value_inner(elt);
        if v.has_graph() {
            return v;
        }
        // `[l for l in losses]`: elements of a graph container keep the graph.
        if let Expr::Name(n) = elt {
            for g in generators {
                if is_dotted(&g.target, n.id.as_str()) {
                    let it = self.value_inner(&g.iter);
                    if it.has_graph() {
                        return Value {
                            kind: Kind::Tensor,
                            ..it
                        };
                    }
                }
            }
        }
        v
    }

    /// The dotted, import-resolved name of a function being called, when the call is of a
    /// module-level function (`torch.cat`, `F.mse_loss`, `np.zeros`), not a method on a value.
    pub fn qualified_function(&self, func: &Expr) -> Option<Rc<str>> {
        // Every call hook of every rule asks this of the same callee; the environment does not
        // change between them, so the last answer is kept until the next statement.
        let at = func as *const Expr as usize;
        if let Some((key, q)) = &*self.qualified_memo.borrow() {
            if *key == at {
                return q.clone();
            }
        }
        let q: Option<Rc<str>> = self.qualify_uncached(func).map(Rc::from);
        *self.qualified_memo.borrow_mut() = Some((at, q.clone()));
        q
    }

    fn qualify_uncached(&self, func: &Expr) -> Option<String> {
        let mut head = func;
        while let Expr::Attribute(a) = head {
            head = &a.value;
        }
        let Expr::Name(n) = head else { return None };
        let head = n.id.as_str();
        if head == "self" || self.lookup(head).is_some() {
            return None;
        }
        self.facts.imports.qualify(func)
    }

    fn call_value(&self, call: &ExprCall) -> Value {
        let grad = self.grad_enabled();
        self.current_call_args.set(call.arguments.args.len());
        if let Some(q) = self.qualified_function(&call.func) {
            return self.function_call_value(call, &q, grad);
        }
        match &*call.func {
            Expr::Attribute(attr) => self.method_call_value(call, attr, grad),
            Expr::Name(_) => {
                let callee = self.value_inner(&call.func);
                self.call_of_value(call, &callee, grad)
            }
            other => {
                let callee = self.value_inner(other);
                self.call_of_value(call, &callee, grad)
            }
        }
    }

    fn args_value(&self, call: &ExprCall) -> Value {
        let mut v = Value::no_graph(Kind::Unknown);
        for a in &*call.arguments.args {
            v = v.join(self.value_inner(a));
        }
        for k in &call.arguments.keywords {
            v = v.join(self.value_inner(&k.value));
        }
        v
    }

    fn call_of_value(&self, call: &ExprCall, callee: &Value, grad: bool) -> Value {
        match callee.kind {
            Kind::Module | Kind::LossFn => {
                if !grad {
                    return Value {
                        graph: Graph::No,
                        kind: Kind::Tensor,
                        device: callee.device,
                    };
                }
                let args = self.args_value(call);
                Value {
                    graph: Graph::Yes(std::rc::Rc::new(
                        self.origin_of_call(call, callee.kind == Kind::LossFn),
                    )),
                    kind: Kind::Tensor,
                    device: callee.device || args.device,
                }
            }
            _ => {
                // A function of this file.
                if let Some(name) = dotted(&call.func) {
                    if let Some(v) = self.summary_call(&name, call, grad) {
                        return v;
                    }
                    if let Some(c) = self.facts.classes.get(&name) {
                        return Value::of_kind(if c.is_module {
                            Kind::Module
                        } else {
                            Kind::Unknown
                        });
                    }
                }
                Value::unknown()
            }
        }
    }

    fn function_call_value(&self, call: &ExprCall, q: &str, grad: bool) -> Value {
        let last = last_segment(q);
        let requires_grad = call.arguments.keywords.iter().any(|k| {
            k.arg
                .as_ref()
                .is_some_and(|a| a.as_str() == "requires_grad")
                && matches!(&k.value, Expr::BooleanLiteral(b) if b.value)
        });
        let on_device = call.arguments.keywords.iter().any(|k| {
            k.arg.as_ref().is_some_and(|a| a.as_str() == "device")
                && !matches!(&k.value, Expr::StringLiteral(s) if s.value.to_str() == "cpu")
        });
        if is_functional_loss(q) {
            let args = self.args_value(call);
            if !grad || args.graph == Graph::No {
                return Value {
                    graph: Graph::No,
                    kind: Kind::Tensor,
                    device: args.device,
                };
            }
            return Value {
                graph: Graph::Yes(std::rc::Rc::new(self.origin_of_call(call, true))),
                kind: Kind::Tensor,
                device: args.device,
            };
        }
        if self.facts.functions.contains(q) {
            if let Some(v) = self.summary_call(q, call, grad) {
                return v;
            }
        }
        if is_module_ctor(q, &self.facts.classes) {
            return Value::no_graph(Kind::Module);
        }
        if is_loss_ctor(q) {
            return Value::no_graph(Kind::LossFn);
        }
        if q.starts_with("torch.optim.") {
            return Value::no_graph(Kind::Optimizer);
        }
        if q == "torch.nn.Parameter" || q == "torch.nn.parameter.Parameter" {
            return Value {
                graph: Graph::No,
                kind: Kind::Tensor,
                device: false,
            };
        }
        // Differentiable operations live in `torch`, `torch.nn.functional`, `torch.linalg`,
        // `torch.fft` and `torch.special`, and are lowercase functions; classes and utilities
        // elsewhere in the package (`torch.utils.weak.TensorWeakRef`) are not operations.
        let op_namespace = matches!(
            q.rsplit_once('.').map(|(ns, _)| ns),
            Some("torch" | "torch.nn.functional" | "torch.linalg" | "torch.fft" | "torch.special")
        ) && last.starts_with(|c: char| c.is_ascii_lowercase());
        if q.starts_with("torch.") && !op_namespace {
            return Value::unknown();
        }
        if q.starts_with("torch.") {
            if requires_grad && grad {
                // A leaf that requires grad: storing it is fine, but what is computed from it
                // carries a graph; report it as the origin.
                return Value {
                    graph: Graph::No,
                    kind: Kind::Tensor,
                    device: on_device,
                };
            }
            if torch_function_cuts(last) || !grad {
                return Value {
                    graph: Graph::No,
                    kind: Kind::Tensor,
                    device: on_device,
                };
            }
            if matches!(
                last,
                "zeros"
                    | "ones"
                    | "empty"
                    | "full"
                    | "randn"
                    | "rand"
                    | "tensor"
                    | "as_tensor"
                    | "from_numpy"
                    | "eye"
                    | "linspace"
                    | "logspace"
            ) {
                return Value {
                    graph: Graph::No,
                    kind: Kind::Tensor,
                    device: on_device,
                };
            }
            let args = self.args_value(call);
            return Value {
                graph: args.graph,
                kind: Kind::Tensor,
                device: args.device || on_device,
            };
        }
        if q.starts_with("numpy.") {
            return Value::no_graph(Kind::Array);
        }
        if q == "copy.deepcopy" || q == "copy.copy" {
            return call
                .arguments
                .args
                .first()
                .map(|a| self.value_inner(a))
                .unwrap_or_default();
        }
        if !q.contains('.') {
            if builtin_cuts(q) {
                return Value::plain();
            }
            if builtin_passes(q) {
                let v = self.args_value(call);
                let kind = match q {
                    "list" | "sorted" => Kind::List,
                    "dict" => Kind::Dict,
                    "set" | "frozenset" => Kind::Set,
                    _ => v.kind,
                };
                return Value { kind, ..v };
            }
        }
        if let Some(class) = self.facts.classes.get(q) {
            return Value::of_kind(if class.is_module {
                Kind::Module
            } else {
                Kind::Unknown
            });
        }
        let kind = init_kind_of_call(call, &self.facts.imports, &self.facts.classes);
        Value::of_kind(kind)
    }

    fn method_call_value(
        &self,
        call: &ExprCall,
        attr: &ruff_python_ast::ExprAttribute,
        grad: bool,
    ) -> Value {
        let method = attr.attr.as_str();
        let recv_expr = &*attr.value;
        // `self.fc(x)`, `self.criterion(a, b)`: an attribute holding a module or loss.
        if let Some(a) = self_attr(&call.func) {
            let held = match self.lookup(&format!("self.{a}")) {
                Some(v) => v.kind,
                None => self.attr_facts(a).map(|p| p.init).unwrap_or_default(),
            };
            if matches!(held, Kind::Module | Kind::LossFn) {
                return self.call_of_value(call, &Value::no_graph(held), grad);
            }
        }
        // A method of a class of this file, on an instance whose class is known; or an
        // attribute of it that holds a module (`agent.actor(obs)`).
        if let Some(class) = self.class_of(recv_expr) {
            let held = self
                .facts
                .class(&class)
                .and_then(|c| c.attrs.get(method))
                .map(|p| p.init);
            if let Some(kind @ (Kind::Module | Kind::LossFn)) = held {
                return self.call_of_value(call, &Value::no_graph(kind), grad);
            }
            if self
                .facts
                .class(&class)
                .is_some_and(|c| c.methods.contains(method))
            {
                let key = format!("{class}.{method}");
                return self.summary_call(&key, call, grad).unwrap_or_default();
            }
        }
        // `self.helper(...)`: a method of this class.
        if matches!(recv_expr, Expr::Name(n) if n.id.as_str() == "self") {
            if let Some(class) = self.class() {
                let key = format!("{}.{}", class.name.as_str(), method);
                if let Some(v) = self.summary_call(&key, call, grad) {
                    return v;
                }
            }
        }
        let recv = self.value_inner(recv_expr);
        if recv.kind == Kind::Module || recv.kind == Kind::LossFn {
            return match method {
                "forward" | "__call__" => self.call_of_value(call, &recv, grad),
                "to" | "cuda" => Value {
                    device: method == "cuda"
                        || !call.arguments.args.first().is_some_and(is_cpu_literal),
                    ..recv
                },
                "cpu" | "train" | "eval" | "float" | "half" | "double" | "requires_grad_"
                | "bfloat16" => recv,
                _ => self
                    .unique_method_summary(method, call, grad)
                    .unwrap_or_else(|| Value::no_graph(Kind::Unknown)),
            };
        }
        if recv.kind == Kind::Optimizer {
            return Value::plain();
        }
        // A parameter's placeholder graph (summary pass) may be any object: a method of a class
        // of this file explains the call better than "a tensor method".
        if recv.origin().is_some_and(|o| o.param.is_some()) {
            if let Some(v) = self.unique_method_summary(method, call, grad) {
                return v;
            }
        }
        if recv.has_graph() {
            if tensor_method_cuts(method) {
                let kind = match method {
                    "item" | "tolist" | "size" | "dim" | "numel" => Kind::Plain,
                    "numpy" => Kind::Array,
                    _ => Kind::Tensor,
                };
                return Value {
                    graph: Graph::No,
                    kind,
                    device: recv.device && method != "numpy" && kind == Kind::Tensor,
                };
            }
            if !grad
                && !matches!(
                    recv.kind,
                    Kind::List | Kind::Dict | Kind::Set | Kind::Deque { .. }
                )
            {
                return Value {
                    graph: Graph::No,
                    kind: Kind::Tensor,
                    device: recv.device,
                };
            }
            let device = match method {
                "cpu" | "numpy" => false,
                "cuda" => true,
                "to" => !call.arguments.args.first().is_some_and(is_cpu_literal) || recv.device,
                _ => recv.device,
            };
            return match recv.kind {
                Kind::List | Kind::Dict | Kind::Set | Kind::Deque { .. } => match method {
                    "pop" | "get" | "values" | "items" | "copy" | "popleft" => Value {
                        kind: Kind::Unknown,
                        ..recv
                    },
                    _ => Value::plain(),
                },
                _ => Value {
                    kind: Kind::Tensor,
                    device,
                    ..recv
                },
            };
        }
        match method {
            "item" | "tolist" => return Value::plain(),
            "detach" | "detach_" => {
                return Value {
                    graph: Graph::No,
                    kind: Kind::Tensor,
                    device: recv.device,
                }
            }
            "numpy" => return Value::no_graph(Kind::Array),
            "cuda" => {
                return Value {
                    device: true,
                    kind: if recv.kind == Kind::Unknown {
                        Kind::Tensor
                    } else {
                        recv.kind
                    },
                    ..recv
                }
            }
            "to" if call
                .arguments
                .args
                .first()
                .is_some_and(|a| !is_cpu_literal(a) && looks_like_device(a)) =>
            {
                return Value {
                    device: true,
                    ..recv
                };
            }
            "cpu" => {
                return Value {
                    device: false,
                    ..recv
                }
            }
            _ => {}
        }
        if recv.graph == Graph::No && recv.kind == Kind::Tensor {
            return Value {
                graph: Graph::No,
                kind: Kind::Tensor,
                device: recv.device,
            };
        }
        if matches!(recv_expr, Expr::Name(n) if n.id.as_str() == "self") {
            return Value::unknown();
        }
        self.unique_method_summary(method, call, grad)
            .unwrap_or_default()
    }

    /// A method defined by exactly one class of this file (`agent.update(...)` when only
    /// `DDPGAgent` has `update`).
    fn unique_method_summary(&self, method: &str, call: &ExprCall, grad: bool) -> Option<Value> {
        let owners = self.method_owners.get(method)?;
        let nargs = self.current_call_args.get();
        let fitting: Vec<&String> = owners
            .iter()
            .filter(|c| {
                self.facts
                    .class(c)
                    .and_then(|f| f.arity.get(method))
                    .is_none_or(|(min, max)| nargs >= *min && nargs <= *max)
            })
            .collect();
        if fitting.len() != 1 {
            return None;
        }
        self.summary_call(&format!("{}.{}", fitting[0], method), call, grad)
    }

    /// The class of this file whose instance `expr` holds, when known.
    pub fn class_of(&self, expr: &Expr) -> Option<String> {
        match expr {
            Expr::Name(n) => {
                let id = n.id.as_str();
                if id == "self" {
                    return self.class().map(|c| c.name.as_str().to_string());
                }
                for scope in self.scopes.iter().rev() {
                    if let Some(c) = scope.instances.get(id) {
                        return Some(c.clone());
                    }
                    if scope.env.contains_key(id) {
                        return None;
                    }
                }
                self.facts.globals.get(id).and_then(|g| g.class.clone())
            }
            Expr::Attribute(a) => self.instance_attr(a)?.class.clone(),
            Expr::Call(call) => {
                let q = self.qualified_function(&call.func)?;
                self.facts.classes.contains_key(&*q).then(|| q.to_string())
            }
            Expr::Subscript(sub) => self.elem_class_of(&sub.value),
            _ => None,
        }
    }

    /// Facts of `obj.attr` when `obj` is an instance of a class of this file.
    fn instance_attr(&self, a: &ruff_python_ast::ExprAttribute) -> Option<&'a PlaceFacts> {
        let owner = self.class_of(&a.value)?;
        let facts = self.facts;
        facts.class(&owner)?.attrs.get(a.attr.as_str())
    }

    /// The class of the elements of a list of instances (`self.population`).
    pub fn elem_class_of(&self, expr: &Expr) -> Option<String> {
        match expr {
            Expr::Attribute(a) => self.instance_attr(a)?.elem_class.clone(),
            Expr::Name(n) => {
                let key = n.id.as_str();
                for scope in self.scopes.iter().rev() {
                    if let Some(c) = scope.elem_instances.get(key) {
                        return Some(c.clone());
                    }
                }
                self.facts
                    .globals
                    .get(n.id.as_str())
                    .and_then(|g| g.elem_class.clone())
            }
            Expr::Call(call) => {
                // `reversed(xs)`, `list(xs)`: the elements of `xs`.
                let Expr::Name(name) = &*call.func else {
                    return None;
                };
                if matches!(name.id.as_str(), "reversed" | "list" | "sorted" | "iter") {
                    return self.elem_class_of(call.arguments.args.first()?);
                }
                None
            }
            _ => None,
        }
    }

    /// The value a call of this file's function or method returns, remembering the
    /// graph-carrying arguments it receives (for the callee's parameters).
    fn summary_call(&self, key: &str, call: &ExprCall, grad: bool) -> Option<Value> {
        let mut taints: Vec<Option<std::rc::Rc<Origin>>> = Vec::new();
        let args: Vec<Value> = call
            .arguments
            .args
            .iter()
            .map(|a| self.value_inner(a))
            .collect();
        for (i, a) in args.iter().enumerate() {
            if let Graph::Yes(o) = &a.graph {
                if o.param.is_none() {
                    taints.resize(i + 1, None);
                    taints[i] = Some(o.clone());
                }
            }
        }
        if !taints.is_empty() && grad {
            let mut map = self.param_taint.borrow_mut();
            let entry = map.entry(key.to_string()).or_default();
            if entry.len() < taints.len() {
                entry.resize(taints.len(), None);
            }
            for (slot, t) in entry.iter_mut().zip(taints) {
                if slot.is_none() {
                    *slot = t;
                }
            }
        }
        let v = self.summaries.get(key)?;
        if !grad {
            return Some(Value {
                graph: Graph::No,
                ..v.clone()
            });
        }
        // A summary whose graph comes from parameter `i` passes the argument's graph through.
        if let Graph::Yes(o) = &v.graph {
            if let Some(i) = o.param {
                return Some(match args.get(i) {
                    Some(a) if a.has_graph() => Value {
                        graph: a.graph.clone(),
                        ..v.clone()
                    },
                    // What the summary knew of the result came from the placeholder.
                    _ => Value::unknown(),
                });
            }
        }
        Some(v.clone())
    }

    // ----- the walk --------------------------------------------------------------------------

    fn walk_body(&mut self, body: &'a [Stmt]) {
        for stmt in body {
            self.walk_stmt(stmt);
        }
    }

    fn walk_stmt(&mut self, stmt: &'a Stmt) {
        *self.qualified_memo.get_mut() = None;
        // Rules see the environment as it is before the statement runs. Silent passes only
        // learn values: running rules there would be wasted work.
        if self.emit {
            rules::analyze_stmt(self, stmt);
            self.visit_calls(stmt);
        }
        match stmt {
            Stmt::FunctionDef(def) => self.walk_function(def),
            Stmt::ClassDef(class) => {
                self.classes.push(class);
                if self.emit {
                    rules::analyze_class(self, class);
                }
                self.walk_body(&class.body);
                self.classes.pop();
            }
            Stmt::Assign(assign) => {
                // The class first: it asks for the callee's qualified name, which the value's
                // evaluation then finds kept instead of qualifying it again after the arguments.
                let class = self.class_of(&assign.value);
                let value = self.value(&assign.value);
                let elem = match &*assign.value {
                    Expr::ListComp(c) => self.class_of(&c.elt),
                    e => self.elem_class_of(e),
                };
                for target in &assign.targets {
                    if let Expr::Name(n) = target {
                        let id = n.id.as_str();
                        let scope = self.scope_mut();
                        match &class {
                            Some(c) => scope.instances.insert(id.to_string(), c.clone()),
                            None => scope.instances.remove(id),
                        };
                        match &elem {
                            Some(c) => scope.elem_instances.insert(id.to_string(), c.clone()),
                            None => scope.elem_instances.remove(id),
                        };
                    }
                }
                for target in &assign.targets {
                    match dotted(target) {
                        // `acc = acc + x` keeps the old value inside the new one.
                        Some(key)
                            if crate::semantic::mutation::is_self_update(&key, &assign.value) =>
                        {
                            self.update(key, value.clone());
                        }
                        // A name or attribute: its key is built already.
                        Some(key) => self.bind_key(target, key, value.clone()),
                        None => self.bind(target, &assign.value, value.clone()),
                    }
                }
            }
            Stmt::AnnAssign(assign) => {
                if let Some(v) = &assign.value {
                    let value = self.value(v);
                    self.bind(&assign.target, v, value);
                }
            }
            Stmt::AugAssign(aug) => {
                let cur = self.value(&aug.target);
                let add = self.value(&aug.value);
                let new = arith(cur, add);
                if let Some(key) = dotted(&aug.target) {
                    self.update(key, new);
                }
            }
            Stmt::Expr(e) => {
                if !self.emit && matches!(&*e.value, Expr::Call(_)) {
                    // Evaluated for its side effect on the analysis: the call site tells the
                    // callee which of its parameters receive graphs.
                    let _ = self.value(&e.value);
                }
                self.apply_call_effects(&e.value);
            }
            Stmt::Return(ret) => {
                let mut v = ret
                    .value
                    .as_deref()
                    .map(|e| self.value(e))
                    .unwrap_or_else(Value::plain);
                if let (Some(e), Graph::Yes(origin)) = (ret.value.as_deref(), &v.graph) {
                    // A returned loss that was backpropagated here keeps only its nodes.
                    let uses = &self.scope().body_facts.backward_uses;
                    if !origin.backpropagated
                        && crate::semantic::scan::keys_in(e)
                            .iter()
                            .any(|k| uses.contains(k))
                    {
                        let mut o = (**origin).clone();
                        o.backpropagated = true;
                        v.graph = Graph::Yes(std::rc::Rc::new(o));
                    }
                }
                let scope = self.scope_mut();
                scope.returned = Some(match scope.returned.take() {
                    Some(prev) => prev.join(v),
                    None => v,
                });
            }
            Stmt::For(for_) => {
                let elem_class = self
                    .elem_class_of(&for_.iter)
                    .map(|c| (c, &*for_.target))
                    .or_else(|| {
                        // `for i, agent in enumerate(self.population)`
                        let Expr::Call(call) = &*for_.iter else {
                            return None;
                        };
                        if !is_dotted(&call.func, "enumerate") {
                            return None;
                        }
                        let Expr::Tuple(t) = &*for_.target else {
                            return None;
                        };
                        let c = self.elem_class_of(call.arguments.args.first()?)?;
                        Some((c, t.elts.get(1)?))
                    });
                if let Some((c, Expr::Name(n))) = elem_class {
                    self.scope_mut()
                        .instances
                        .insert(n.id.as_str().to_string(), c);
                }
                let iter = self.value(&for_.iter);
                let elem = match iter.graph {
                    Graph::Yes(_) => Value {
                        kind: Kind::Tensor,
                        ..iter
                    },
                    _ => Value::unknown(),
                };
                self.walk_loop(stmt, &for_.body, Some((&for_.target, elem)));
                self.walk_body(&for_.orelse);
            }
            Stmt::While(w) => {
                self.walk_loop(stmt, &w.body, None);
                self.walk_body(&w.orelse);
            }
            Stmt::If(i) => {
                self.walk_body(&i.body);
                for clause in &i.elif_else_clauses {
                    self.walk_body(&clause.body);
                }
            }
            Stmt::With(with) => {
                let mut disabled = 0;
                for item in &with.items {
                    if self.is_grad_disabling(&item.context_expr) {
                        disabled += 1;
                    }
                    if let Some(vars) = &item.optional_vars {
                        let v = self.value(&item.context_expr);
                        self.bind(vars, &item.context_expr, v);
                    }
                }
                self.scope_mut().no_grad += disabled;
                self.walk_body(&with.body);
                self.scope_mut().no_grad -= disabled;
            }
            Stmt::Try(t) => {
                self.walk_body(&t.body);
                for h in &t.handlers {
                    let ruff_python_ast::ExceptHandler::ExceptHandler(h) = h;
                    self.walk_body(&h.body);
                }
                self.walk_body(&t.orelse);
                self.walk_body(&t.finalbody);
            }
            Stmt::Match(m) => {
                for case in &m.cases {
                    self.walk_body(&case.body);
                }
            }
            Stmt::Global(g) => {
                let names: Vec<String> = g.names.iter().map(|n| n.as_str().to_string()).collect();
                self.scope_mut().declared_global.extend(names);
            }
            Stmt::Nonlocal(g) => {
                let names: Vec<String> = g.names.iter().map(|n| n.as_str().to_string()).collect();
                self.scope_mut().declared_global.extend(names);
            }
            Stmt::Delete(d) => {
                for t in &d.targets {
                    if let Some(key) = dotted(t) {
                        self.scope_mut().env.remove(&key);
                    }
                }
            }
            _ => {}
        }
    }

    fn walk_loop(&mut self, stmt: &'a Stmt, body: &'a [Stmt], target: Option<(&'a Expr, Value)>) {
        let facts = self.cached_facts(body, || {
            let mut facts = BlockFacts::scan(body);
            if let Some((t, _)) = &target {
                // The loop target is rebound by every iteration.
                for key in crate::semantic::scan::keys_in(t) {
                    facts
                        .changes
                        .entry(key)
                        .or_default()
                        .push(crate::semantic::mutation::Mutation::Rebind);
                }
            }
            facts
        });
        let frame = LoopFrame {
            stmt,
            facts,
            offset: stmt.start(),
            coarse: std::cell::OnceCell::new(),
        };
        self.scope_mut().loops.push(frame);
        if self.emit {
            rules::analyze_loop(self, stmt);
        }
        let depth = self.scope().loops.len();
        let emit = self.emit;
        // Walk twice only near the top: deeper loops are walked often enough by their parents.
        // Summary passes need no second walk: what they learn converges over their own repeats.
        let passes = if emit && depth <= 2 { 2 } else { 1 };
        for pass in 0..passes {
            self.emit = emit && pass == passes - 1;
            if let Some((t, v)) = &target {
                self.bind_plain(t, v.clone());
            }
            self.walk_body(body);
        }
        self.emit = emit;
        self.scope_mut().loops.pop();
    }

    fn walk_function(&mut self, def: &'a StmtFunctionDef) {
        // A method is a function directly in the body of the class being walked.
        let class = self.classes.last().copied().filter(|c| {
            c.body
                .iter()
                .any(|s| matches!(s, Stmt::FunctionDef(f) if std::ptr::eq(f, def)))
        });
        let name = def.name.as_str();
        // A hook is registered by name, made by a registered factory, or named like one.
        let enclosing = self.function().map(|f| f.name.as_str());
        let hook = self.hook_functions.contains(name)
            || enclosing.is_some_and(|e| self.hook_functions.contains(e))
            || name.ends_with("_hook")
            || name == "hook";
        let per_step = is_per_step_method(name) || hook;
        let body_facts = self.cached_facts(&def.body, || BlockFacts::scan(&def.body));
        let key = match class {
            Some(c) => format!("{}.{}", c.name.as_str(), name),
            None => name.to_string(),
        };
        // A summary pass learns return values and the graphs passed to this file's functions:
        // a function that returns nothing (or that nothing in the file calls by name) and calls
        // none of them teaches it nothing.
        let teaches = self.emit || {
            let called = self
                .called_names
                .as_ref()
                .is_none_or(|names| names.contains(name));
            (body_facts.returns_value && called) || {
                let facts = self.facts;
                let owners = &self.method_owners;
                body_facts.callees.iter().any(|c| {
                    facts.functions.contains(*c)
                        || owners.contains_key(*c)
                        || facts.classes.contains_key(*c)
                })
            }
        };
        if !teaches {
            // Its body is not walked, so nothing is ever returned: the summary is what an empty
            // body gives, and binding the parameters would be wasted.
            self.summaries.insert(key, Value::plain());
            return;
        }
        let mut scope = Scope::new(
            ScopeKind::Function {
                def,
                class,
                per_step,
                hook,
            },
            body_facts,
        );
        for p in def.parameters.iter() {
            let pname = p.name().as_str().to_string();
            let annotated_module = p
                .annotation()
                .and_then(|a| self.facts.imports.qualify(a))
                .is_some_and(|q| q == "torch.nn.Module" || self.facts.is_module_class(&q));
            let v = if annotated_module || is_conventional_module_param(&pname) {
                Value::no_graph(Kind::Module)
            } else if is_conventional_loss_param(&pname) {
                Value::no_graph(Kind::LossFn)
            } else if pname == "self"
                && class.is_some_and(|c| {
                    self.facts
                        .class(c.name.as_str())
                        .is_some_and(|f| f.is_module)
                })
            {
                Value::no_graph(Kind::Module)
            } else {
                Value::unknown()
            };
            scope.env.insert(pname.clone(), v);
            scope.params.insert(pname);
        }
        // In the silent pass, unknown parameters carry a placeholder graph, so the summary can
        // say "returns a graph when argument i carries one" (`def compute(pred, y): return
        // F.mse_loss(pred, y)`, a normalizer's `update(x)`).
        if !self.emit {
            let positional = def
                .parameters
                .posonlyargs
                .iter()
                .chain(def.parameters.args.iter())
                .map(|p| p.parameter.name.as_str())
                .filter(|n| !matches!(*n, "self" | "cls"));
            for (i, pname) in positional.enumerate() {
                if scope
                    .env
                    .get(pname)
                    .is_some_and(|v| v.kind == Kind::Unknown && v.graph == Graph::Unknown)
                {
                    scope.env.insert(
                        pname.to_string(),
                        Value {
                            graph: Graph::Yes(std::rc::Rc::new(Origin {
                                what: pname.to_string(),
                                offset: def.start(),
                                is_loss: false,
                                backpropagated: false,
                                param: Some(i),
                            })),
                            kind: Kind::Unknown,
                            device: false,
                        },
                    );
                }
            }
        }
        // Parameters that callers in this file pass graph-carrying values to.
        if let Some(taints) = self.param_taint.borrow().get(&key) {
            let positional = def
                .parameters
                .posonlyargs
                .iter()
                .chain(def.parameters.args.iter())
                .map(|p| p.parameter.name.as_str())
                .filter(|n| !matches!(*n, "self" | "cls"));
            for (pname, taint) in positional.zip(taints) {
                if let Some(origin) = taint {
                    scope.env.insert(
                        pname.to_string(),
                        Value {
                            graph: Graph::Yes(origin.clone()),
                            kind: Kind::Tensor,
                            device: false,
                        },
                    );
                }
            }
        }
        if def
            .decorator_list
            .iter()
            .any(|d| self.is_grad_disabling(&d.expression))
        {
            scope.no_grad = 1;
        }
        self.scopes.push(scope);
        if self.emit {
            rules::analyze_function(self, def);
        }
        self.walk_body(&def.body);
        let scope = self.scopes.pop().expect("pushed above");
        if !self.emit {
            let mut ret = scope.returned.unwrap_or_else(Value::plain);
            if scope.no_grad > 0 {
                ret.graph = Graph::No;
            }
            self.summaries.insert(key, ret);
        }
    }

    pub fn is_grad_disabling(&self, expr: &Expr) -> bool {
        let callee = match expr {
            Expr::Call(c) => &*c.func,
            e => e,
        };
        let Some(q) = self.facts.imports.qualify(callee) else {
            return false;
        };
        if disables_grad(&q) {
            return true;
        }
        if last_segment(&q) == "set_grad_enabled" {
            // `set_grad_enabled(False)` disables; `set_grad_enabled(is_train)` may: either way
            // graphs made inside are not certain, so treat it as disabled.
            if let Expr::Call(c) = expr {
                return !matches!(c.arguments.args.first(), Some(Expr::BooleanLiteral(b)) if b.value);
            }
        }
        false
    }

    /// Binds `key` to a new object: its lifetime starts at the current loop depth.
    fn set(&mut self, key: String, value: Value) {
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
    fn update(&mut self, key: String, value: Value) {
        self.scope_mut().env.insert(key, value);
    }

    /// Binds an assignment target. A name that is backpropagated later in the function carries
    /// a graph even when its value came from somewhere the analysis cannot see.
    fn bind(&mut self, target: &'a Expr, value_expr: &'a Expr, value: Value) {
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
                    if value.has_graph() {
                        let joined = Value {
                            graph: value.graph.clone(),
                            kind: cur.kind,
                            device: cur.device || value.device,
                        };
                        self.update(key, joined);
                    }
                }
            }
            _ => self.bind_plain(target, value),
        }
    }

    fn bind_plain(&mut self, target: &Expr, value: Value) {
        match target {
            Expr::Tuple(t) => {
                for e in &t.elts {
                    self.bind_plain(e, value.clone());
                }
            }
            Expr::List(l) => {
                for e in &l.elts {
                    self.bind_plain(e, value.clone());
                }
            }
            Expr::Starred(s) => self.bind_plain(&s.value, value),
            Expr::Subscript(_) => {}
            _ => {
                if let Some(key) = dotted(target) {
                    self.bind_key(target, key, value);
                }
            }
        }
    }

    /// Binds the name or attribute `target`, whose key is `key`.
    fn bind_key(&mut self, target: &Expr, key: String, value: Value) {
        let mut value = value;
        if value.graph == Graph::Unknown
            && self.grad_enabled()
            && self.scope().body_facts.backwarded.contains(&key)
        {
            value.graph = Graph::Yes(std::rc::Rc::new(Origin {
                what: key.clone(),
                offset: target.start(),
                is_loss: true,
                backpropagated: true,
                param: None,
            }));
            value.kind = Kind::Tensor;
        }
        self.set(key, value);
    }

    /// `c.append(x)` and friends: the container now holds what was put in it.
    fn apply_call_effects(&mut self, expr: &Expr) {
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
                },
            );
        }
    }

    /// Calls rules on every call expression of the statement itself (not of nested bodies).
    fn visit_calls(&mut self, stmt: &'a Stmt) {
        // Asked at every statement of the reporting walk: one buffer serves them all.
        let mut calls = std::mem::take(&mut self.calls_buffer);
        calls.clear();
        match stmt {
            Stmt::Expr(e) => collect_calls(&e.value, &mut calls),
            Stmt::Assign(a) => collect_calls(&a.value, &mut calls),
            Stmt::AugAssign(a) => collect_calls(&a.value, &mut calls),
            Stmt::AnnAssign(a) => {
                if let Some(v) = &a.value {
                    collect_calls(v, &mut calls);
                }
            }
            Stmt::Return(r) => {
                if let Some(v) = &r.value {
                    collect_calls(v, &mut calls);
                }
            }
            Stmt::If(i) => {
                collect_calls(&i.test, &mut calls);
                for test in i.elif_else_clauses.iter().filter_map(|c| c.test.as_ref()) {
                    collect_calls(test, &mut calls);
                }
            }
            Stmt::While(w) => collect_calls(&w.test, &mut calls),
            Stmt::For(f) => collect_calls(&f.iter, &mut calls),
            Stmt::With(w) => {
                for item in &w.items {
                    collect_calls(&item.context_expr, &mut calls);
                }
            }
            _ => {}
        }
        for &call in &calls {
            rules::analyze_call(self, call, stmt);
        }
        self.calls_buffer = calls;
    }
}

fn collect_calls<'a>(expr: &'a Expr, out: &mut Vec<&'a ExprCall>) {
    struct C<'a, 'o> {
        out: &'o mut Vec<&'a ExprCall>,
    }
    impl<'a> Visitor<'a> for C<'a, '_> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Call(c) = expr {
                self.out.push(c);
            }
            if !matches!(expr, Expr::Lambda(_)) {
                walk_expr(self, expr);
            }
        }
    }
    C { out }.visit_expr(expr);
}

/// Arithmetic: a graph on either side (or a leaf that requires grad) gives a graph.
fn arith(l: Value, r: Value) -> Value {
    let kind = if l.kind == Kind::Tensor || r.kind == Kind::Tensor || l.has_graph() || r.has_graph()
    {
        Kind::Tensor
    } else if l.kind == Kind::Array || r.kind == Kind::Array {
        Kind::Array
    } else if l.kind == Kind::List && r.kind == Kind::List {
        Kind::List
    } else {
        Kind::Unknown
    };
    Value { kind, ..l.join(r) }
}

fn is_cpu_literal(e: &Expr) -> bool {
    matches!(e, Expr::StringLiteral(s) if s.value.to_str() == "cpu")
}

fn looks_like_device(e: &Expr) -> bool {
    match e {
        Expr::StringLiteral(s) => {
            let v = s.value.to_str();
            v.starts_with("cuda") || v == "mps" || v.starts_with("xpu")
        }
        Expr::Name(n) => n.id.as_str().contains("device") || n.id.as_str() == "dev",
        Expr::Attribute(a) => a.attr.as_str().contains("device"),
        Expr::Call(c) => dotted(&c.func).is_some_and(|d| d.ends_with("device")),
        _ => false,
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

/// Functions passed to `register_forward_hook`, `register_full_backward_hook`,
/// `register_hook` and friends anywhere in the file, plus functions named like hooks.
fn collect_hook_functions(suite: &[Stmt]) -> FxHashSet<String> {
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

//! A pre-pass over the whole file: classes (which are `nn.Module`s), what each `self.<attr>` and
//! module global is initialised with, and everywhere it is grown, trimmed, cleared or rebound.
//! Rules ask these facts "is this container ever bounded?" without walking the file again.

use ruff_python_ast::{Expr, ExprCall, Stmt, StmtClassDef, StmtFunctionDef};
use ruff_text_size::{Ranged, TextSize};
use rustc_hash::{FxHashMap, FxHashSet};

use super::mutation::{for_each_mutation_of, for_each_target_mutation, Keys, Mutation};
use super::names::{last_segment, Imports};
use super::value::Kind;

#[derive(Debug, Clone)]
pub struct Change {
    /// The method (or function) that makes the change; empty at module level.
    pub function: String,
    pub mutation: Mutation,
    pub offset: TextSize,
}

/// Facts about one long-lived place: `self.<attr>` of a class, or a module global.
#[derive(Debug, Clone, Default)]
pub struct PlaceFacts {
    /// The kind it is initialised with (in `__init__`, the class body or at module level).
    pub init: Kind,
    pub init_offset: Option<TextSize>,
    pub changes: Vec<Change>,
    /// Functions that read it.
    pub read_in: FxHashSet<String>,
    /// Initialised with an instance of a class of this file (`Normalizer(dim)`).
    pub class: Option<String>,
    /// Initialised with a list of instances of a class of this file
    /// (`[DDPGAgent() for _ in range(n)]`).
    pub elem_class: Option<String>,
    /// Initialised with an instance of a class another module of the project may define, by
    /// its qualified name (`self.norm = DBN(8)` after `from layers import DBN`: `layers.DBN`).
    pub foreign_class: Option<String>,
    /// Bound in `__init__` from its positional parameter `i` (after `self`), not rebound there
    /// (`self.agent = agent`): the object each caller passes, which the project index can tell.
    pub from_param: Option<usize>,
    /// Bound (`self.x = ...`) in the class's methods, and every time to a number or `None`
    /// (`self._start = time.perf_counter()`): it holds a number wherever it is read.
    pub bound_to_numbers: Option<bool>,
}

impl PlaceFacts {
    /// A reset outside the initialisers: `.clear()`, a trim, or a rebinding. `__init__` and the
    /// set-up methods frameworks call once (skorch's `initialize`, `setup`) make the attribute,
    /// they do not reset it.
    pub fn resets(&self) -> impl Iterator<Item = &Change> {
        self.changes.iter().filter(|c| {
            c.mutation != Mutation::Grow
                && !(c.mutation == Mutation::Rebind
                    && matches!(
                        c.function.trim_start_matches('_'),
                        "init__" | "initialize" | "setup"
                    ))
        })
    }
    pub fn is_bounded(&self) -> bool {
        matches!(self.init, Kind::Deque { bounded: true })
    }

    /// Is every binding of it a number (or `None`)?
    pub fn holds_numbers(&self) -> bool {
        self.bound_to_numbers == Some(true)
    }
}

#[derive(Debug, Clone, Default)]
pub struct ClassFacts {
    pub name: String,
    pub is_module: bool,
    /// A subclass of one of torch's losses (`class SmoothCE(nn.CrossEntropyLoss)`): its
    /// instances are loss functions, and `.cuda()` moves the loss, not a tensor.
    pub is_loss: bool,
    pub offset: TextSize,
    pub attrs: FxHashMap<String, PlaceFacts>,
    pub methods: FxHashSet<String>,
    /// Positional arguments each method accepts besides `self`: (required, maximum).
    pub arity: FxHashMap<String, (usize, usize)>,
    /// Every base class is one the analysis sees: a class of this file (whose bases are seen
    /// too), or a class of a library that knows nothing of its subclasses' attributes (torch,
    /// Lightning, gym...). Otherwise a base defined elsewhere in the project may reset an
    /// attribute where this file cannot see it.
    pub bases_seen: bool,
    /// Base classes defined in this file.
    pub in_file_bases: Vec<String>,
    /// Every base, as the file's imports name it (`torch.nn.Module`, `.base.Trainer`).
    pub bases: Vec<String>,
    /// Methods whose body only documents them (`pass`, `...`, `raise NotImplementedError`) or
    /// marked `@abstractmethod`: a subclass's override is what runs.
    pub abstract_methods: FxHashSet<String>,
    /// A class of another file of the project, as the project index describes it: its
    /// attributes' resets are that file's business (`bases_seen` is false).
    pub external: bool,
    /// It may make parameters or submodules (`may_make_parameters`): a module that makes none
    /// computes from its inputs only. Known for classes of other files (from the index) and for
    /// this file's classes once the file is checked in a project (`adopt`).
    pub makes_parameters: bool,
    /// A framework makes the object drive it and owns it (`hooks::FRAMEWORK_OWNED`): nothing
    /// outside the class resets its attributes.
    pub framework_owned: bool,
}

impl ClassFacts {
    /// What calling the class makes.
    pub fn instance_kind(&self) -> Kind {
        if self.is_module {
            Kind::Module
        } else if self.is_loss {
            Kind::LossFn
        } else {
            Kind::Unknown
        }
    }
}

#[derive(Debug, Default)]
pub struct ModuleFacts {
    pub imports: Imports,
    pub classes: FxHashMap<String, ClassFacts>,
    pub globals: FxHashMap<String, PlaceFacts>,
    /// Names of module-level functions.
    pub functions: FxHashSet<String>,
    /// Module-level functions that return a view of one of their parameters (`def
    /// first_token(h): return h[:, 0]`), by name: the parameter's position.
    pub view_returns: FxHashMap<String, usize>,
    /// Does some module class of this file define `forward` (so that calling one of its
    /// instances runs this file's code)?
    pub has_module_forward: bool,
    /// Module-level integer constants (`BATCH = 64`, `N = 2 * BATCH`).
    pub constants: FxHashMap<String, u64>,
    /// Module-level names bound once, to a number or a string (`CHARS = string.printable`,
    /// `N_CHARS = len(CHARS)`), and never declared `global` in a function: plain values
    /// wherever they are read, in this file and in those that import them.
    pub plain_globals: FxHashSet<String>,
    /// Functions and context-manager classes (of this file, or imported from another file of
    /// the project) whose body turns autograd off (`return (torch.inference_mode if new else
    /// torch.no_grad)()(fn)`, `with eval_context(model):`): used as a decorator or a context
    /// manager, what they wrap runs without grad. By the name this file calls them.
    pub grad_off: FxHashSet<String>,
    /// Does the file use torch at all (import or `torch.` access)? Several rules only make
    /// sense in ML code.
    pub uses_torch: bool,
    /// Is the file a test module (`is_test_module`)?
    pub test_module: bool,
}

impl ModuleFacts {
    pub fn collect(suite: &[Stmt]) -> Self {
        // Every import, top-level and nested, in source order (the last binding of a name wins).
        let mut facts = ModuleFacts::default();
        collect_imports_deep(suite, &mut facts.imports);
        facts.uses_torch = facts.imports.qualify_head_is("torch")
            || facts.imports.qualify_head_is("lightning")
            || facts.imports.qualify_head_is("pytorch_lightning");
        // Module classes first, in order, so a subclass of a module class defined earlier is
        // a module class too.
        for stmt in suite {
            if let Stmt::ClassDef(class) = stmt {
                let is_module = facts.is_module_class_def(class);
                let is_loss = class.arguments.iter().flat_map(|a| a.args.iter()).any(|b| {
                    facts.imports.qualify(b).is_some_and(|q| {
                        is_loss_ctor(&q) || facts.classes.get(q.as_str()).is_some_and(|c| c.is_loss)
                    })
                });
                let (bases_seen, in_file_bases) = facts.bases_of(class);
                let bases = class
                    .arguments
                    .iter()
                    .flat_map(|a| a.args.iter())
                    .filter_map(|b| facts.imports.qualify(b))
                    .collect();
                let framework_owned = class.arguments.iter().flat_map(|a| a.args.iter()).any(|b| {
                    facts
                        .imports
                        .qualify(b)
                        .is_some_and(|q| super::hooks::framework_owned(&q))
                });
                facts.classes.insert(
                    class.name.as_str().to_string(),
                    ClassFacts {
                        name: class.name.as_str().to_string(),
                        is_module,
                        is_loss,
                        offset: class.start(),
                        bases_seen,
                        in_file_bases,
                        bases,
                        framework_owned,
                        ..Default::default()
                    },
                );
            }
        }
        for stmt in suite {
            match stmt {
                Stmt::ClassDef(class) => facts.collect_class(class),
                Stmt::FunctionDef(func) => {
                    facts.functions.insert(func.name.as_str().to_string());
                    if let Some(i) = returned_view_of_param(func) {
                        facts.view_returns.insert(func.name.as_str().to_string(), i);
                    }
                }
                _ => {
                    let imports = &facts.imports;
                    let classes = &facts.classes;
                    let mut inits = Vec::new();
                    if let Stmt::Assign(assign) = stmt {
                        for target in &assign.targets {
                            if let Expr::Name(name) = target {
                                inits.push((
                                    name.id.as_str().to_string(),
                                    init_kind(&assign.value, imports, classes),
                                    assign.start(),
                                    instance_classes(&assign.value, imports, classes),
                                ));
                            }
                        }
                    }
                    if let Stmt::Assign(assign) = stmt {
                        if let [Expr::Name(n)] = assign.targets.as_slice() {
                            if let Some(v) = int_value(&assign.value, &facts.constants) {
                                facts.constants.insert(n.id.to_string(), v);
                            }
                        }
                    }
                    for (name, kind, offset, (class, elem)) in inits {
                        let place = facts.globals.entry(name).or_default();
                        place.init = kind;
                        place.init_offset = Some(offset);
                        place.class = class;
                        place.elem_class = elem;
                    }
                }
            }
        }
        // Functions that grow or reset module-level containers (`__all__` and other dunders
        // are not state); only worth a walk when the module has such a container.
        let has_state = facts.globals.iter().any(|(name, g)| {
            !name.starts_with("__")
                && matches!(
                    g.init,
                    Kind::List | Kind::Dict | Kind::Set | Kind::Deque { .. }
                )
        });
        if has_state {
            // Every function and method (with what is nested in them): a stack pushed in one
            // hook is popped in its pair, often a method or a closure.
            let mut funcs = Vec::new();
            crate::semantic::scan::visit_block(suite, &mut |stmt| match stmt {
                Stmt::FunctionDef(func) => funcs.push(func),
                Stmt::ClassDef(class) => {
                    funcs.extend(class.body.iter().filter_map(|s| match s {
                        Stmt::FunctionDef(f) => Some(f),
                        _ => None,
                    }));
                }
                _ => {}
            });
            for func in funcs {
                facts.collect_global_changes(func);
            }
        }
        facts.plain_globals = plain_globals(suite, &facts.imports);
        facts.grad_off = grad_off_functions(suite, &facts.imports);
        facts.test_module = is_test_module(suite, &facts.imports);
        facts.has_module_forward = facts
            .classes
            .values()
            .any(|c| c.is_module && c.methods.contains("forward"));
        facts
    }

    fn is_module_class_def(&self, class: &StmtClassDef) -> bool {
        let Some(args) = &class.arguments else {
            return false;
        };
        args.args.iter().any(|base| self.is_module_base(base))
    }

    fn bases_of(&self, class: &StmtClassDef) -> (bool, Vec<String>) {
        let mut seen = true;
        let mut in_file = Vec::new();
        for base in class.arguments.iter().flat_map(|a| a.args.iter()) {
            let Some(q) = self.imports.qualify(base) else {
                seen = false;
                continue;
            };
            match self.classes.get(q.as_str()) {
                Some(c) => {
                    seen &= c.bases_seen;
                    in_file.push(q);
                }
                None => seen &= is_modelled_library_class(&q),
            }
        }
        (seen, in_file)
    }

    fn is_module_base(&self, base: &Expr) -> bool {
        let Some(q) = self.imports.qualify(base) else {
            return false;
        };
        if let Some(c) = self.classes.get(q.as_str()) {
            return c.is_module;
        }
        // Any of torch's own layers is a module: a hand-written batch norm that subclasses
        // `nn.BatchNorm2d` runs its `forward` with autograd on like any `nn.Module`'s.
        // OpenMMLab's `BaseModule` (mmengine, and mmcv before it) is an `nn.Module` with
        // weight initialisation added.
        matches!(
            q.as_str(),
            "torch.nn.Module"
                | "torch.nn.modules.module.Module"
                | "mmengine.model.BaseModule"
                | "mmengine.model.base_module.BaseModule"
                | "mmcv.runner.BaseModule"
                | "mmcv.runner.base_module.BaseModule"
        ) || matches!(last_segment(&q), "Module" | "LightningModule")
            || q.starts_with("torch.nn.") && is_module_ctor(&q, &self.classes)
    }

    /// Whether each attribute the statement binds (`self.x = v`, `self.x += v`,
    /// `self.x: T = v`, `self.x, y = ...`) gets a number (or `None`): `bound_to_numbers`.
    fn bind_numbers(&self, stmt: &Stmt, attrs: &mut FxHashMap<String, PlaceFacts>) {
        let number = |value: &Expr| {
            value.is_none_literal_expr()
                || init_kind(value, &self.imports, &self.classes) == Kind::Plain
        };
        let mut bind = |target: &Expr, value: Option<&Expr>| {
            let mut mark = |attr: &str, is_number: bool| {
                let place = attrs.entry(attr.to_string()).or_default();
                place.bound_to_numbers = Some(place.bound_to_numbers.unwrap_or(true) && is_number);
            };
            match target {
                Expr::Tuple(t) => t
                    .elts
                    .iter()
                    .filter_map(self_attr)
                    .for_each(|a| mark(a, false)),
                Expr::List(l) => l
                    .elts
                    .iter()
                    .filter_map(self_attr)
                    .for_each(|a| mark(a, false)),
                t => {
                    if let Some(attr) = self_attr(t) {
                        mark(attr, value.is_some_and(number));
                    }
                }
            }
        };
        match stmt {
            Stmt::Assign(a) => a.targets.iter().for_each(|t| bind(t, Some(&a.value))),
            Stmt::AugAssign(a) => bind(&a.target, Some(&a.value)),
            Stmt::AnnAssign(a) => bind(&a.target, a.value.as_deref()),
            _ => {}
        }
    }

    fn collect_class(&mut self, class: &StmtClassDef) {
        let name = class.name.as_str().to_string();
        let mut attrs: FxHashMap<String, PlaceFacts> = FxHashMap::default();
        let mut methods = FxHashSet::default();
        let mut arity = FxHashMap::default();
        let mut abstract_methods = FxHashSet::default();
        for stmt in &class.body {
            match stmt {
                Stmt::FunctionDef(func) => {
                    methods.insert(func.name.as_str().to_string());
                    if is_abstract(func) {
                        abstract_methods.insert(func.name.as_str().to_string());
                    }
                    arity.insert(func.name.as_str().to_string(), method_arity(func));
                    let method = func.name.as_str();
                    visit_body(&func.body, &mut |stmt| {
                        self.bind_numbers(stmt, &mut attrs);
                        if let Stmt::Assign(assign) = stmt {
                            if method == "__init__"
                                || method == "reset"
                                || method.starts_with("_init")
                                || method.starts_with("init")
                                || method == "setup"
                            {
                                for target in &assign.targets {
                                    if let Some(attr) = self_attr(target) {
                                        let place = attrs.entry(attr.to_string()).or_default();
                                        let kind =
                                            init_kind(&assign.value, &self.imports, &self.classes);
                                        // One branch of an initialiser making it a
                                        // `deque(maxlen=...)` and another a list (of such
                                        // deques): a growth may be the deque's, so the bound
                                        // stands. (A later method that rebinds it replaces it.)
                                        let bounded_here = place.is_bounded()
                                            && place
                                                .init_offset
                                                .is_some_and(|o| func.range().contains(o));
                                        if !bounded_here {
                                            place.init = kind;
                                        }
                                        place.init_offset = Some(assign.start());
                                        let (class, elem) = instance_classes(
                                            &assign.value,
                                            &self.imports,
                                            &self.classes,
                                        );
                                        place.class = class;
                                        place.elem_class = elem;
                                        place.from_param = (method == "__init__")
                                            .then(|| positional_param(func, &assign.value))
                                            .flatten();
                                        place.foreign_class = foreign_class(
                                            &assign.value,
                                            &self.imports,
                                        )
                                        .or_else(|| {
                                            annotated_class(func, &assign.value, &self.imports)
                                        });
                                    }
                                }
                            }
                        }
                        for_each_mutation_of(
                            stmt,
                            Keys::SelfAttrs,
                            &mut |key, mutation, offset| {
                                if let Some(attr) = key.strip_prefix("self.") {
                                    if !attr.contains('.') {
                                        attrs.entry(attr.to_string()).or_default().changes.push(
                                            Change {
                                                function: method.to_string(),
                                                mutation,
                                                offset,
                                            },
                                        );
                                    }
                                }
                            },
                        );
                        record_reads(stmt, method, &mut attrs);
                    });
                }
                Stmt::Assign(assign) => {
                    for target in &assign.targets {
                        if let Expr::Name(n) = target {
                            let place = attrs.entry(n.id.as_str().to_string()).or_default();
                            place.init = init_kind(&assign.value, &self.imports, &self.classes);
                            place.init_offset = Some(assign.start());
                        }
                    }
                }
                _ => {}
            }
        }
        let entry = self
            .classes
            .entry(name.clone())
            .or_insert_with(|| ClassFacts {
                name,
                offset: class.start(),
                ..Default::default()
            });
        entry.attrs = attrs;
        entry.methods = methods;
        entry.arity = arity;
        entry.abstract_methods = abstract_methods;
    }

    /// Takes in what the project index says of other files (`summaries::ExternalFacts`): the
    /// classes this file uses from them, under the names it uses, and what its own classes
    /// inherit from bases there. Called before the walk, on a file whose facts are not empty.
    pub fn adopt(&mut self, external: &crate::summaries::ExternalFacts, suite: &[Stmt]) {
        self.grad_off.extend(external.grad_off.iter().cloned());
        let place = |a: &crate::summaries::AttrSummary| PlaceFacts {
            init: a.init,
            class: a.class.clone(),
            elem_class: a.elem_class.clone(),
            ..Default::default()
        };
        for (name, c) in &external.classes {
            if self.classes.contains_key(name) {
                continue;
            }
            self.classes.insert(
                name.clone(),
                ClassFacts {
                    name: name.clone(),
                    // A module that makes no parameters (a test function, a fixed transform)
                    // computes from its inputs only: calling it makes no graph of its own.
                    is_module: c.is_module && c.makes_parameters,
                    attrs: c.attrs.iter().map(|a| (a.name.clone(), place(a))).collect(),
                    methods: c.methods.iter().map(|m| m.name.clone()).collect(),
                    arity: c
                        .methods
                        .iter()
                        .map(|m| (m.name.clone(), (m.min, m.max)))
                        .collect(),
                    abstract_methods: c
                        .methods
                        .iter()
                        .filter(|m| m.is_abstract)
                        .map(|m| m.name.clone())
                        .collect(),
                    framework_owned: c.framework_owned,
                    external: true,
                    ..Default::default()
                },
            );
        }
        for (name, inherited) in &external.inherited {
            let own_parameters = suite.iter().any(|s| {
                matches!(s, Stmt::ClassDef(c) if c.name.as_str() == name && may_make_parameters(c, self))
            });
            let Some(class) = self.classes.get_mut(name) else {
                continue;
            };
            class.makes_parameters = own_parameters;
            class.is_module |=
                inherited.is_module && (inherited.makes_parameters || class.makes_parameters);
            class.framework_owned |= inherited.framework_owned;
            // An attribute the class only reads (`self.model(x)`) is what its base made it.
            for a in &inherited.attrs {
                let own = class.attrs.entry(a.name.clone()).or_default();
                if own.init_offset.is_none() && own.init == Kind::Unknown {
                    own.init = a.init;
                    own.class = a.class.clone();
                    own.elem_class = a.elem_class.clone();
                }
            }
            for m in &inherited.methods {
                if class.methods.insert(m.name.clone()) {
                    class.arity.insert(m.name.clone(), (m.min, m.max));
                }
            }
        }
        self.has_module_forward = self
            .classes
            .values()
            .any(|c| c.is_module && c.methods.contains("forward"));
    }

    fn collect_global_changes(&mut self, func: &StmtFunctionDef) {
        let locals = local_bindings(func);
        let fname = func.name.as_str().to_string();
        let globals = &mut self.globals;
        visit_body(&func.body, &mut |stmt| {
            for_each_mutation_of(stmt, Keys::Names, &mut |key, mutation, offset| {
                if key.contains('.') || locals.contains(key.as_str()) {
                    return;
                }
                if let Some(place) = globals.get_mut(key.as_str()) {
                    place.changes.push(Change {
                        function: fname.clone(),
                        mutation,
                        offset,
                    });
                }
            });
        });
    }

    pub fn class(&self, name: &str) -> Option<&ClassFacts> {
        self.classes.get(name)
    }

    pub fn is_module_class(&self, qualified: &str) -> bool {
        self.classes.get(qualified).is_some_and(|c| c.is_module)
    }
}

impl Imports {
    fn qualify_head_is(&self, module: &str) -> bool {
        let e = Expr::Name(ruff_python_ast::ExprName {
            node_index: Default::default(),
            range: Default::default(),
            id: ruff_python_ast::name::Name::new(module),
            ctx: ruff_python_ast::ExprContext::Load,
        });
        // An alias resolving to the module means the file imports it.
        self.qualify(&e).is_some_and(|q| q == module) && self.has_alias_for(module)
    }
}

fn collect_imports_deep(suite: &[Stmt], imports: &mut Imports) {
    visit_body(suite, &mut |stmt| {
        if matches!(stmt, Stmt::Import(_) | Stmt::ImportFrom(_)) {
            imports.add(stmt);
        }
    });
}

/// Does the block (or a block nested in it) assign to `name`?
pub fn rebound_in(body: &[Stmt], name: &str) -> bool {
    let mut rebound = false;
    visit_body(body, &mut |s| {
        let targets: Vec<&Expr> = match s {
            Stmt::Assign(a) => a.targets.iter().collect(),
            Stmt::AugAssign(a) => vec![&a.target],
            Stmt::AnnAssign(a) => vec![&a.target],
            Stmt::For(f) => vec![&f.target],
            _ => return,
        };
        rebound |= targets
            .iter()
            .any(|t| super::scan::keys_in(t).contains(name));
    });
    rebound
}

/// Calls `f` on every statement of a body, nested blocks and nested functions included.
pub fn visit_body(body: &[Stmt], f: &mut dyn FnMut(&Stmt)) {
    for stmt in body {
        f(stmt);
        match stmt {
            Stmt::FunctionDef(d) => visit_body(&d.body, f),
            Stmt::ClassDef(c) => visit_body(&c.body, f),
            Stmt::For(s) => {
                visit_body(&s.body, f);
                visit_body(&s.orelse, f);
            }
            Stmt::While(s) => {
                visit_body(&s.body, f);
                visit_body(&s.orelse, f);
            }
            Stmt::If(s) => {
                visit_body(&s.body, f);
                for clause in &s.elif_else_clauses {
                    visit_body(&clause.body, f);
                }
            }
            Stmt::With(s) => visit_body(&s.body, f),
            Stmt::Try(s) => {
                visit_body(&s.body, f);
                for h in &s.handlers {
                    let ruff_python_ast::ExceptHandler::ExceptHandler(h) = h;
                    visit_body(&h.body, f);
                }
                visit_body(&s.orelse, f);
                visit_body(&s.finalbody, f);
            }
            Stmt::Match(m) => {
                for case in &m.cases {
                    visit_body(&case.body, f);
                }
            }
            _ => {}
        }
    }
}

/// `self.<attr>` (or `cls.<attr>`) of a target expression.
pub fn self_attr(expr: &Expr) -> Option<&str> {
    let Expr::Attribute(attr) = expr else {
        return None;
    };
    let Expr::Name(base) = &*attr.value else {
        return None;
    };
    matches!(base.id.as_str(), "self" | "cls").then(|| attr.attr.as_str())
}

/// Names a function binds locally (parameters, assignments, loop targets), less `global` ones.
pub fn local_bindings(func: &StmtFunctionDef) -> FxHashSet<String> {
    let mut locals: FxHashSet<String> = func
        .parameters
        .iter()
        .map(|p| p.name().as_str().to_string())
        .collect();
    let mut globals: FxHashSet<String> = FxHashSet::default();
    visit_body(&func.body, &mut |stmt| match stmt {
        Stmt::Global(g) => globals.extend(g.names.iter().map(|n| n.as_str().to_string())),
        Stmt::Nonlocal(g) => globals.extend(g.names.iter().map(|n| n.as_str().to_string())),
        // Only assignments and `del` rebind: the calls in the statement need no visit.
        _ => for_each_target_mutation(stmt, Keys::Names, &mut |key, m, _| {
            if m == Mutation::Rebind && !key.contains('.') {
                locals.insert(key);
            }
        }),
    });
    for g in globals {
        locals.remove(&g);
    }
    locals
}

fn record_reads(stmt: &Stmt, method: &str, attrs: &mut FxHashMap<String, PlaceFacts>) {
    use ruff_python_ast::visitor::{walk_expr, walk_stmt, Visitor};
    struct R<'m> {
        method: &'m str,
        attrs: &'m mut FxHashMap<String, PlaceFacts>,
    }
    impl<'a> Visitor<'a> for R<'_> {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            // Only this statement's own expressions: nested bodies are visited by the caller.
            match stmt {
                Stmt::FunctionDef(_) | Stmt::ClassDef(_) => {}
                Stmt::For(f) => self.visit_expr(&f.iter),
                Stmt::While(w) => self.visit_expr(&w.test),
                Stmt::If(i) => self.visit_expr(&i.test),
                Stmt::With(w) => {
                    for item in &w.items {
                        self.visit_expr(&item.context_expr);
                    }
                }
                Stmt::Try(_) | Stmt::Match(_) => {}
                _ => walk_stmt(self, stmt),
            }
        }
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Attribute(a) = expr {
                if a.ctx.is_load() {
                    if let Some(attr) = self_attr(expr) {
                        // Most reads repeat an attribute and method already recorded: look up
                        // before allocating the keys.
                        match self.attrs.get_mut(attr) {
                            Some(place) => {
                                if !place.read_in.contains(self.method) {
                                    place.read_in.insert(self.method.to_string());
                                }
                            }
                            None => {
                                let mut place = PlaceFacts::default();
                                place.read_in.insert(self.method.to_string());
                                self.attrs.insert(attr.to_string(), place);
                            }
                        }
                    }
                }
            }
            walk_expr(self, expr);
        }
    }
    R { method, attrs }.visit_stmt(stmt);
}

/// The value of an integer expression made of literals and known constants.
pub fn int_value(expr: &Expr, constants: &FxHashMap<String, u64>) -> Option<u64> {
    use ruff_python_ast::Operator;
    match expr {
        Expr::NumberLiteral(n) => n.value.as_int()?.as_u64(),
        Expr::Name(n) => constants.get(n.id.as_str()).copied(),
        Expr::BinOp(b) => {
            let (l, r) = (
                int_value(&b.left, constants)?,
                int_value(&b.right, constants)?,
            );
            match b.op {
                Operator::Add => l.checked_add(r),
                Operator::Mult => l.checked_mul(r),
                Operator::Sub => l.checked_sub(r),
                Operator::FloorDiv => l.checked_div(r),
                Operator::Pow => l.checked_pow(u32::try_from(r).ok()?),
                _ => None,
            }
        }
        _ => None,
    }
}

/// What kind of object an initialiser creates.
pub fn init_kind(value: &Expr, imports: &Imports, classes: &FxHashMap<String, ClassFacts>) -> Kind {
    if holds_parameters(value) {
        return Kind::Parameters;
    }
    match value {
        Expr::List(_) | Expr::ListComp(_) => Kind::List,
        Expr::Dict(_) | Expr::DictComp(_) => Kind::Dict,
        Expr::Set(_) | Expr::SetComp(_) => Kind::Set,
        // `self.model = model.to(device)`: moving or switching a module gives the module.
        Expr::Call(call)
            if matches!(&*call.func, Expr::Attribute(a)
                if matches!(a.attr.as_str(), "to" | "cuda" | "cpu" | "eval" | "train" | "float"
                    | "half" | "double" | "bfloat16")
                    && init_kind(&a.value, imports, classes) == Kind::Module) =>
        {
            Kind::Module
        }
        Expr::Call(call) => init_kind_of_call(call, imports, classes),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::BooleanLiteral(_) => Kind::Plain,
        // `self.model = model` where the parameter is conventionally a module.
        Expr::Name(n) if super::names::is_conventional_module_param(n.id.as_str()) => Kind::Module,
        _ => Kind::Unknown,
    }
}

/// A module's parameters, as such: `model.parameters()`, `list(model.parameters())`,
/// `[p for p in model.parameters() if p.requires_grad]`.
pub fn holds_parameters(value: &Expr) -> bool {
    match value {
        Expr::Call(call) if call.arguments.args.is_empty() => {
            matches!(&*call.func, Expr::Attribute(a) if a.attr.as_str() == "parameters")
        }
        Expr::Call(call) if call.arguments.len() == 1 => {
            matches!(&*call.func, Expr::Name(n) if matches!(n.id.as_str(), "list" | "tuple"))
                && call.arguments.args.first().is_some_and(holds_parameters)
        }
        Expr::ListComp(c) => {
            c.generators.len() == 1
                && matches!((&*c.elt, &c.generators[0].target),
                    (Expr::Name(e), Expr::Name(t)) if e.id == t.id)
                && holds_parameters(&c.generators[0].iter)
        }
        _ => false,
    }
}

/// What a call used as an initialiser makes (`deque(maxlen=...)`, `nn.Linear(...)`).
pub fn init_kind_of_call(
    call: &ExprCall,
    imports: &Imports,
    classes: &FxHashMap<String, ClassFacts>,
) -> Kind {
    let Some(q) = imports.qualify(&call.func) else {
        return Kind::Unknown;
    };
    // The standard library's clocks and math functions return numbers, and so do torch's
    // memory counters.
    if matches!(
        q.as_str(),
        "time.time"
            | "time.perf_counter"
            | "time.monotonic"
            | "time.process_time"
            | "torch.cuda.memory_allocated"
            | "torch.cuda.max_memory_allocated"
            | "torch.cuda.memory_reserved"
            | "torch.cuda.max_memory_reserved"
            | "torch.cuda.device_count"
            | "torch.cuda.current_device"
    ) || q.starts_with("math.")
        || q.starts_with("random.")
    {
        return Kind::Plain;
    }
    match last_segment(&q) {
        "list" => Kind::List,
        "dict" | "defaultdict" | "OrderedDict" | "Counter" => Kind::Dict,
        "set" => Kind::Set,
        "deque" => {
            let bounded = call.arguments.keywords.iter().any(|k| {
                k.arg.as_ref().is_some_and(|a| a.as_str() == "maxlen")
                    && !k.value.is_none_literal_expr()
            }) || call.arguments.args.len() >= 2;
            Kind::Deque { bounded }
        }
        "figure" | "subplots" | "subplot_mosaic" if q.starts_with("matplotlib.pyplot") => {
            Kind::Figure
        }
        _ if is_module_ctor(&q, classes) => Kind::Module,
        _ if is_loss_ctor(&q) => Kind::LossFn,
        _ if q.starts_with("torch.optim.") => Kind::Optimizer,
        _ if q.starts_with("numpy.") => Kind::Array,
        _ if q.starts_with("torch.") && !q.starts_with("torch.nn.") => Kind::Tensor,
        _ => Kind::Unknown,
    }
}

/// The class of this file an initialiser instantiates, directly or as the elements of a list.
pub fn instance_classes(
    value: &Expr,
    imports: &Imports,
    classes: &FxHashMap<String, ClassFacts>,
) -> (Option<String>, Option<String>) {
    let ctor = |e: &Expr| -> Option<String> {
        let Expr::Call(call) = e else { return None };
        let q = imports.qualify(&call.func)?;
        classes.contains_key(q.as_str()).then_some(q)
    };
    match value {
        Expr::ListComp(c) => (None, ctor(&c.elt)),
        Expr::List(l) => (None, l.elts.first().and_then(ctor)),
        e => (ctor(e), None),
    }
}

/// `DBN(8)` where an import binds `DBN` to a class another module of the project may define:
/// its qualified name. A capitalised last segment says a class (`utils.make_layer(...)` is a
/// function, whose result is unknown).
pub fn foreign_class(value: &Expr, imports: &Imports) -> Option<String> {
    let Expr::Call(call) = value else { return None };
    project_class(&call.func, imports)
}

/// `agent` in `def __init__(self, agent, env)`: 0, the index of the positional parameter (after
/// `self`) the name is, when the body never rebinds it.
fn positional_param(func: &StmtFunctionDef, value: &Expr) -> Option<usize> {
    let Expr::Name(n) = value else { return None };
    let i = func
        .parameters
        .posonlyargs
        .iter()
        .chain(&func.parameters.args)
        .map(|p| p.parameter.name.as_str())
        .filter(|p| !matches!(*p, "self" | "cls"))
        .position(|p| p == n.id.as_str())?;
    (!rebinds(func, n.id.as_str())).then_some(i)
}

/// `self.logger = logger` in `def __init__(self, logger: Logger)`, where an import binds
/// `Logger` to a class another module of the project may define: its qualified name. The
/// annotation is the caller's promise of what is passed; a parameter rebound in the body first
/// is not what the annotation says, and is left unknown.
pub fn annotated_class(func: &StmtFunctionDef, value: &Expr, imports: &Imports) -> Option<String> {
    let Expr::Name(n) = value else { return None };
    let param = func
        .parameters
        .posonlyargs
        .iter()
        .chain(&func.parameters.args)
        .chain(&func.parameters.kwonlyargs)
        .find(|p| p.parameter.name.as_str() == n.id.as_str())?;
    let annotation = param.parameter.annotation.as_deref()?;
    if rebinds(func, n.id.as_str()) {
        return None;
    }
    project_class(annotation, imports)
}

/// Does the body assign the name anywhere (`x = ...`)?
fn rebinds(func: &StmtFunctionDef, name: &str) -> bool {
    let mut rebound = false;
    visit_body(&func.body, &mut |stmt| {
        if let Stmt::Assign(a) = stmt {
            rebound |= a
                .targets
                .iter()
                .any(|t| matches!(t, Expr::Name(t) if t.id.as_str() == name));
        }
    });
    rebound
}

/// `layers.DBN` for `DBN` (or `layers.DBN`) where an import binds its head: a class another
/// module of the project may define. A capitalised last segment says a class
/// (`utils.make_layer` is a function).
fn project_class(name: &Expr, imports: &Imports) -> Option<String> {
    let mut head = name;
    while let Expr::Attribute(a) = head {
        head = &a.value;
    }
    if !matches!(head, Expr::Name(h) if imports.binds(h.id.as_str())) {
        return None;
    }
    let q = imports.qualify(name)?;
    let class_like = q
        .rsplit('.')
        .next()
        .is_some_and(|l| l.starts_with(|c: char| c.is_uppercase()));
    (class_like && crate::summaries::extract::may_be_in_project(&q)).then_some(q)
}

/// `def f(x, ...): return x[:, 0]`: a function whose body (after its docstring) only returns
/// a basic slice of a positional parameter (constant indices and slices, which select a view).
fn returned_view_of_param(func: &StmtFunctionDef) -> Option<usize> {
    let body: Vec<&Stmt> = func
        .body
        .iter()
        .filter(|s| !matches!(s, Stmt::Expr(e) if e.value.is_string_literal_expr()))
        .collect();
    let [Stmt::Return(ret)] = body.as_slice() else {
        return None;
    };
    let Expr::Subscript(sub) = ret.value.as_deref()? else {
        return None;
    };
    let Expr::Name(base) = &*sub.value else {
        return None;
    };
    fn constant_index(e: &Expr) -> bool {
        match e {
            Expr::Tuple(t) => t.elts.iter().all(constant_index),
            Expr::Slice(s) => [&s.lower, &s.upper, &s.step]
                .iter()
                .all(|b| b.as_deref().is_none_or(constant_index)),
            Expr::NumberLiteral(_) | Expr::NoneLiteral(_) | Expr::EllipsisLiteral(_) => true,
            Expr::UnaryOp(u) => constant_index(&u.operand),
            _ => false,
        }
    }
    if !constant_index(&sub.slice) {
        return None;
    }
    func.parameters
        .posonlyargs
        .iter()
        .chain(func.parameters.args.iter())
        .position(|p| p.parameter.name.as_str() == base.id.as_str())
}

/// May the class make parameters or submodules? `false` only when no base is one of torch's
/// layers, nothing registers a parameter or module, and every attribute it sets is inert (a
/// number, a string, a tensor made from numbers, a container of those, a plain name that does
/// not conventionally hold a module).
pub(crate) fn may_make_parameters(class: &StmtClassDef, facts: &ModuleFacts) -> bool {
    let layer_base = class.arguments.iter().flat_map(|a| a.args.iter()).any(|b| {
        facts.imports.qualify(b).is_some_and(|q| {
            super::names::last_segment(&q) != "Module" && is_module_ctor(&q, &facts.classes)
        })
    });
    if layer_base {
        return true;
    }
    let mut makes = false;
    visit_body(&class.body, &mut |stmt| {
        let (targets, value): (&[Expr], Option<&Expr>) = match stmt {
            Stmt::Assign(a) => (&a.targets, Some(&*a.value)),
            Stmt::AnnAssign(a) => (std::slice::from_ref(&*a.target), a.value.as_deref()),
            Stmt::Expr(e) => (&[], Some(&*e.value)),
            _ => (&[], None),
        };
        let Some(value) = value else { return };
        let sets_attr = targets.iter().any(|t| self_attr(t).is_some());
        if sets_attr && !inert(value, facts) || registers(value) {
            makes = true;
        }
    });
    makes
}

/// `self.register_parameter(...)`, `self.add_module(...)`, `setattr(self, ...)`.
fn registers(e: &Expr) -> bool {
    let Expr::Call(call) = e else { return false };
    match &*call.func {
        Expr::Attribute(a) => matches!(
            a.attr.as_str(),
            "register_parameter" | "add_module" | "register_module"
        ),
        Expr::Name(n) => n.id.as_str() == "setattr",
        _ => false,
    }
}

/// A value that is no parameter and no module: see `may_make_parameters`.
fn inert(e: &Expr, facts: &ModuleFacts) -> bool {
    match e {
        Expr::NumberLiteral(_)
        | Expr::StringLiteral(_)
        | Expr::BytesLiteral(_)
        | Expr::BooleanLiteral(_)
        | Expr::NoneLiteral(_)
        | Expr::EllipsisLiteral(_)
        | Expr::FString(_) => true,
        Expr::Name(n) => !super::names::is_conventional_module_param(n.id.as_str()),
        Expr::Attribute(a) => inert(&a.value, facts),
        Expr::List(l) => l.elts.iter().all(|x| inert(x, facts)),
        Expr::Tuple(t) => t.elts.iter().all(|x| inert(x, facts)),
        Expr::Set(s) => s.elts.iter().all(|x| inert(x, facts)),
        Expr::Dict(d) => d.items.iter().all(|i| inert(&i.value, facts)),
        Expr::ListComp(c) => inert(&c.elt, facts),
        Expr::SetComp(c) => inert(&c.elt, facts),
        Expr::Generator(c) => inert(&c.elt, facts),
        Expr::DictComp(c) => inert(&c.value, facts),
        Expr::BinOp(b) => inert(&b.left, facts) && inert(&b.right, facts),
        Expr::UnaryOp(u) => inert(&u.operand, facts),
        Expr::Compare(_) | Expr::BoolOp(_) => true,
        Expr::If(i) => inert(&i.body, facts) && inert(&i.orelse, facts),
        Expr::Subscript(s) => inert(&s.value, facts),
        Expr::Call(call) => {
            let args = call.arguments.args.iter().all(|a| inert(a, facts))
                && call
                    .arguments
                    .keywords
                    .iter()
                    .all(|k| inert(&k.value, facts));
            let callee = match &*call.func {
                // A builtin (`list(range(n))`) or a method of an inert value (`d.get(k)`).
                Expr::Name(n) => {
                    !facts.imports.binds(n.id.as_str())
                        && n.id.as_str().starts_with(|c: char| c.is_ascii_lowercase())
                        && !facts.functions.contains(n.id.as_str())
                }
                Expr::Attribute(a) => {
                    let mut head = &*a.value;
                    while let Expr::Attribute(x) = head {
                        head = &x.value;
                    }
                    let imported = matches!(head, Expr::Name(n)
                        if facts.imports.binds(n.id.as_str())
                            || matches!(n.id.as_str(), "torch" | "nn" | "F" | "np" | "math"));
                    if imported {
                        // A function of a library that makes a value from numbers
                        // (`torch.tensor(...)`, `np.zeros(...)`), never a layer or a class.
                        facts.imports.qualify(&call.func).is_some_and(|q| {
                            !q.starts_with("torch.nn.")
                                && q.split('.').next().is_some_and(|top| {
                                    matches!(top, "torch" | "numpy" | "math" | "random")
                                })
                                && super::names::last_segment(&q)
                                    .starts_with(|c: char| c.is_ascii_lowercase())
                        })
                    } else {
                        // A method of an inert value (`optima.get(dim)`).
                        inert(&a.value, facts)
                            && !matches!(a.attr.as_str(), "to" | "cuda" | "copy" | "clone")
                    }
                }
                _ => false,
            };
            callee && args
        }
        _ => false,
    }
}

/// A method that only documents itself: after its docstring, `pass`, `...` or `raise
/// NotImplementedError`; or one decorated `@abstractmethod`.
fn is_abstract(func: &StmtFunctionDef) -> bool {
    if func.decorator_list.iter().any(|d| {
        super::names::dotted(&d.expression).is_some_and(|n| last_segment(&n) == "abstractmethod")
    }) {
        return true;
    }
    let body: Vec<&Stmt> = func
        .body
        .iter()
        .filter(|s| !matches!(s, Stmt::Expr(e) if e.value.is_string_literal_expr()))
        .collect();
    match body.as_slice() {
        [] => true,
        [Stmt::Pass(_)] => true,
        [Stmt::Expr(e)] => e.value.is_ellipsis_literal_expr(),
        [Stmt::Raise(r)] => r.exc.as_deref().is_some_and(|e| {
            let name = match e {
                Expr::Call(c) => super::names::dotted(&c.func),
                e => super::names::dotted(e),
            };
            name.is_some_and(|n| last_segment(&n) == "NotImplementedError")
        }),
        _ => false,
    }
}

/// Positional arguments a method takes besides `self`: (required, maximum).
fn method_arity(func: &StmtFunctionDef) -> (usize, usize) {
    let params = &func.parameters;
    let positional: Vec<_> = params
        .posonlyargs
        .iter()
        .chain(params.args.iter())
        .collect();
    let skip = usize::from(
        positional
            .first()
            .is_some_and(|p| matches!(p.parameter.name.as_str(), "self" | "cls")),
    );
    let total = positional.len().saturating_sub(skip);
    let required = positional
        .iter()
        .skip(skip)
        .filter(|p| p.default.is_none())
        .count();
    let max = if params.vararg.is_some() {
        usize::MAX
    } else {
        total
    };
    (required, max)
}

/// A class of a library (or a builtin) that knows nothing of the attributes its subclasses
/// add: it never clears or trims them.
fn is_modelled_library_class(qualified: &str) -> bool {
    let top = qualified.split('.').next().unwrap_or(qualified);
    matches!(
        top,
        "torch"
            | "nn"
            | "lightning"
            | "pytorch_lightning"
            | "lightning_fabric"
            | "transformers"
            | "skorch"
            | "stable_baselines3"
            | "sb3_contrib"
            | "ignite"
            | "gym"
            | "gymnasium"
            | "abc"
            | "typing"
            | "typing_extensions"
            | "collections"
            | "enum"
            | "dataclasses"
            | "object"
            | "dict"
            | "list"
            | "Exception"
            | "ABC"
            | "Generic"
            | "Protocol"
            | "NamedTuple"
    )
}

pub fn is_loss_ctor(qualified: &str) -> bool {
    qualified.starts_with("torch.nn.") && last_segment(qualified).ends_with("Loss")
}

/// A call that creates an `nn.Module`: `nn.Linear(...)`, a module class of this file,
/// `torchvision.models.resnet18()`, `X.from_pretrained(...)`.
pub fn is_module_ctor(qualified: &str, classes: &FxHashMap<String, ClassFacts>) -> bool {
    if classes.get(qualified).is_some_and(|c| c.is_module) {
        return true;
    }
    let last = last_segment(qualified);
    if let Some(rest) = qualified.strip_prefix("torch.nn.") {
        let first = rest.split('.').next().unwrap_or(rest);
        let class = if first == "modules" || first == "parallel" {
            last
        } else {
            first
        };
        return class.starts_with(|c: char| c.is_ascii_uppercase())
            && !class.ends_with("Loss")
            && class != "Parameter"
            && class != "ParameterList"
            && class != "ParameterDict";
    }
    // `X.from_pretrained(...)` loads a model, unless `X` is one of the companions libraries
    // load the same way: a tokenizer, a processor, a configuration, a scheduler, a pipeline
    // (which runs models under `no_grad` and returns its own objects).
    let loads_model = || {
        let class = qualified
            .rsplit('.')
            .nth(1)
            .unwrap_or_default()
            .to_ascii_lowercase();
        ![
            "tokenizer",
            "tokenizerfast",
            "processor",
            "config",
            "extractor",
            "scheduler",
            "pipeline",
        ]
        .iter()
        .any(|w| class.ends_with(w))
    };
    last == "from_pretrained" && loads_model()
        || qualified.starts_with("torchvision.models.")
        || qualified == "timm.create_model"
}

/// Module-level names bound exactly once, by an assignment of a number or a string, that no
/// function declares `global`.
fn plain_globals(suite: &[Stmt], imports: &Imports) -> FxHashSet<String> {
    // Per name: how many bindings, and whether each was of a plain value.
    let mut bindings: FxHashMap<String, (usize, bool)> = FxHashMap::default();
    crate::semantic::scan::visit_block(suite, &mut |stmt| {
        let mut targets: Vec<(&Expr, bool)> = Vec::new();
        match stmt {
            Stmt::Assign(a) => {
                let plain = |n: &str| bindings.get(n).is_some_and(|b| *b == (1, true));
                let is_plain = is_plain_value(&a.value, imports, &plain);
                targets.extend(a.targets.iter().map(|t| (t, is_plain)));
            }
            Stmt::AnnAssign(a) => targets.push((&a.target, false)),
            Stmt::AugAssign(a) => targets.push((&a.target, false)),
            Stmt::For(f) => targets.push((&f.target, false)),
            Stmt::With(w) => {
                targets.extend(
                    w.items
                        .iter()
                        .filter_map(|i| i.optional_vars.as_deref())
                        .map(|v| (v, false)),
                );
            }
            _ => {}
        }
        for (t, is_plain) in targets {
            // Only a bare name keeps its value: `a, b = ...` and `x[0] = ...` make it unknown.
            let simple = matches!(t, Expr::Name(_));
            for name in crate::semantic::scan::keys_in(t) {
                if name.contains('.') {
                    continue;
                }
                let e = bindings.entry(name).or_insert((0, true));
                e.0 += 1;
                e.1 &= is_plain && simple;
            }
        }
    });
    let mut declared: FxHashSet<String> = FxHashSet::default();
    visit_body(suite, &mut |s| {
        if let Stmt::Global(g) = s {
            declared.extend(g.names.iter().map(|n| n.as_str().to_string()));
        }
    });
    bindings
        .into_iter()
        .filter(|(n, b)| *b == (1, true) && !declared.contains(n))
        .map(|(n, _)| n)
        .collect()
}

/// A number or a string written out (`0.1`, `"abc"`, `f"{x}"`, `-1`, `2 * N`), a constant of
/// the standard library's `string` and `math` modules, `len(...)`, or a name bound so above.
fn is_plain_value(e: &Expr, imports: &Imports, plain: &dyn Fn(&str) -> bool) -> bool {
    match e {
        Expr::NumberLiteral(_)
        | Expr::StringLiteral(_)
        | Expr::FString(_)
        | Expr::BooleanLiteral(_) => true,
        Expr::UnaryOp(u) => is_plain_value(&u.operand, imports, plain),
        Expr::BinOp(b) => {
            is_plain_value(&b.left, imports, plain) && is_plain_value(&b.right, imports, plain)
        }
        Expr::Name(n) => plain(n.id.as_str()),
        Expr::Attribute(_) => imports.qualify(e).is_some_and(|q| {
            q.strip_prefix("string.").is_some_and(|c| {
                matches!(
                    c,
                    "ascii_letters"
                        | "ascii_lowercase"
                        | "ascii_uppercase"
                        | "digits"
                        | "hexdigits"
                        | "octdigits"
                        | "printable"
                        | "punctuation"
                        | "whitespace"
                )
            }) || matches!(q.as_str(), "math.pi" | "math.e" | "math.tau" | "math.inf")
        }),
        Expr::Call(c) => {
            matches!(&*c.func, Expr::Name(n) if n.id.as_str() == "len")
                && imports.qualify(&c.func).is_none_or(|q| q == "len")
        }
        _ => false,
    }
}

/// Does the file import pytest or unittest? Its `test*` functions are tests, each run once with
/// fixed inputs (`iteration.rs`).
pub fn imports_test_framework(imports: &Imports) -> bool {
    imports.has_alias_for("pytest") || imports.has_alias_for("unittest")
}

/// A module of tests, as pytest and unittest collect them: it imports one of them and defines
/// tests (`def test_*`, or a `Test*` class or `TestCase` subclass with `test*` methods). Each
/// test runs for seconds and drops what it made: what its code keeps never lives through a
/// training job's steps. A training script's own `def test_epoch()` does not make it one: it
/// imports no test framework.
fn is_test_module(suite: &[Stmt], imports: &Imports) -> bool {
    imports_test_framework(imports)
        && suite.iter().any(|s| match s {
            Stmt::FunctionDef(f) => f.name.as_str().starts_with("test_"),
            Stmt::ClassDef(c) => {
                let named = c.name.as_str().starts_with("Test")
                    || c.arguments.iter().flat_map(|a| a.args.iter()).any(|b| {
                        let b = match b {
                            Expr::Attribute(a) => a.attr.as_str(),
                            Expr::Name(n) => n.id.as_str(),
                            _ => "",
                        };
                        b.ends_with("TestCase")
                    });
                named
                && c.body.iter().any(
                    |m| matches!(m, Stmt::FunctionDef(f) if f.name.as_str().starts_with("test")),
                )
            }
            _ => false,
        })
}

/// Top-level functions whose body (nested functions included) names `torch.no_grad` or
/// `torch.inference_mode`: decorators and context managers that turn autograd off. So are the
/// classes whose protocol methods (`__init__`, `__enter__`, `__call__`), or those of a base
/// class of the same file, name them (`class eval_context(mode_context)` entering the
/// `torch.no_grad()` its base built); a class whose other methods do (a trainer's
/// `evaluate()`) is not one.
fn grad_off_functions(suite: &[Stmt], imports: &Imports) -> FxHashSet<String> {
    use ruff_python_ast::visitor::{walk_expr, walk_stmt, Visitor};
    struct Finds<'i> {
        imports: &'i Imports,
        found: bool,
    }
    impl<'a> Visitor<'a> for Finds<'_> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if matches!(expr, Expr::Name(_) | Expr::Attribute(_))
                && self
                    .imports
                    .qualify(expr)
                    .is_some_and(|q| q.contains('.') && super::names::disables_grad(&q))
            {
                self.found = true;
            }
            walk_expr(self, expr);
        }
    }
    let names_grad_off = |body: &[Stmt]| {
        let mut finds = Finds {
            imports,
            found: false,
        };
        for s in body {
            walk_stmt(&mut finds, s);
        }
        finds.found
    };
    let mut out = FxHashSet::default();
    for stmt in suite {
        match stmt {
            Stmt::FunctionDef(f) if names_grad_off(&f.body) => {
                out.insert(f.name.as_str().to_string());
            }
            Stmt::ClassDef(c) => {
                // In file order, so a base defined above is already known.
                let protocol = c.body.iter().any(|s| {
                    matches!(s, Stmt::FunctionDef(f)
                        if matches!(f.name.as_str(), "__init__" | "__enter__" | "__call__")
                            && names_grad_off(&f.body))
                });
                let base_is = c
                    .arguments
                    .iter()
                    .flat_map(|a| a.args.iter())
                    .any(|b| matches!(b, Expr::Name(n) if out.contains(n.id.as_str())));
                if protocol || base_is {
                    out.insert(c.name.as_str().to_string());
                }
            }
            _ => {}
        }
    }
    out
}

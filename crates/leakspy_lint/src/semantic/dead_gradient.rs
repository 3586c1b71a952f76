//! Does anything ever differentiate through a statistic an object keeps? Detaching the inputs
//! of `self.mean = 0.99 * self.mean + 0.01 * h.mean(0)` (LS011's fix) changes no value the
//! program computes, only which gradients exist, and those only where a backward pass could
//! reach the statistic. This proves that none can, for a statistic on `self` of a class of
//! this file: every read of it (and of what is computed from it: locals, other statistics the
//! class updates from it, what its methods return) ends in a value nothing backpropagates
//! through: `.detach()`, `.item()`, a comparison, code under `torch.no_grad()`, or a result
//! thrown away. The objects of the class are followed through the whole file: each is only
//! called or has its methods called, never handed elsewhere. Anything else, or a class other
//! files make or subclass, and the answer is no: the fix stays unsafe.

use ruff_python_ast::visitor::{walk_expr, walk_stmt, Visitor};
use ruff_python_ast::{Expr, Stmt, StmtClassDef, StmtFunctionDef};
use ruff_text_size::{Ranged, TextRange};
use rustc_hash::FxHashSet;

use super::facts::ModuleFacts;
use super::iteration::disables_grad_expr;
use super::model::SemanticModel;
use super::names::{dotted, last_segment};

/// Methods whose result carries no graph, whatever their receiver carries.
const CUTS: &[&str] = &["detach", "item", "tolist", "numpy", "size", "dim", "numel"];
/// Attributes that describe a tensor without its values.
const METADATA: &[&str] = &[
    "shape",
    "dtype",
    "device",
    "ndim",
    "requires_grad",
    "is_cuda",
];
/// Rounds of the fixed point over the class's methods (a statistic made from another, a method
/// returning what another returns).
const ROUNDS: usize = 6;

/// Is the gradient of `self.<attr>` of `class` unused everywhere the program can reach it?
pub(crate) fn gradient_unused(model: &SemanticModel, class: &StmtClassDef, attr: &str) -> bool {
    let name = class.name.as_str();
    if model.external.used_elsewhere.contains(name)
        || model
            .facts
            .classes
            .values()
            .any(|c| c.in_file_bases.iter().any(|b| b == name))
    {
        return false;
    }
    // A base's methods read `self` too, where this class's walk does not look: only a plain
    // class or an `nn.Module` (whose own code reaches buffers only through `state_dict`, which
    // detaches, and `.to()`).
    let plain_bases = class.bases().iter().all(|b| {
        dotted(b).is_some_and(|d| matches!(d.as_str(), "object" | "nn.Module" | "torch.nn.Module"))
    });
    if !plain_bases || !class.keywords().is_empty() {
        return false;
    }
    let Some(flow) = ClassFlow::of(class, attr, model.facts) else {
        return false;
    };
    objects_only_called(model, class, &flow)
}

/// What a class's own methods do with a statistic.
struct ClassFlow {
    /// The statistic and every attribute of `self` updated from it.
    stats: FxHashSet<String>,
    /// Methods that return something computed from them.
    returning: FxHashSet<String>,
    methods: FxHashSet<String>,
}

impl ClassFlow {
    /// `None` when a read of the statistic goes somewhere this cannot follow.
    fn of(class: &StmtClassDef, attr: &str, facts: &ModuleFacts) -> Option<Self> {
        let methods: Vec<&StmtFunctionDef> = class
            .body
            .iter()
            .filter_map(|s| s.as_function_def_stmt())
            .collect();
        let mut flow = ClassFlow {
            stats: FxHashSet::from_iter([attr.to_string()]),
            returning: FxHashSet::default(),
            methods: methods.iter().map(|m| m.name.to_string()).collect(),
        };
        for _ in 0..ROUNDS {
            let before = (flow.stats.len(), flow.returning.len());
            for m in &methods {
                let mut walk = MethodWalk {
                    facts,
                    flow: &mut flow,
                    method: m.name.as_str(),
                    locals: FxHashSet::default(),
                    dead: no_grad_decorated(facts, m),
                    escapes: false,
                };
                walk.block(&m.body);
                if walk.escapes {
                    return None;
                }
            }
            if (flow.stats.len(), flow.returning.len()) == before {
                return Some(flow);
            }
        }
        None
    }
}

/// One method of the class, statement by statement.
struct MethodWalk<'f> {
    facts: &'f ModuleFacts,
    flow: &'f mut ClassFlow,
    method: &'f str,
    /// Locals computed from a statistic.
    locals: FxHashSet<String>,
    /// Under `torch.no_grad()`: nothing here is differentiated.
    dead: bool,
    escapes: bool,
}

impl MethodWalk<'_> {
    fn block(&mut self, body: &[Stmt]) {
        for s in body {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, stmt: &Stmt) {
        if bare_self(stmt) {
            // `return self`, `register(self)`: the object, statistics and all, goes elsewhere.
            self.escapes = true;
            return;
        }
        match stmt {
            Stmt::Assign(a) => {
                let live = self.live(&a.value);
                for t in &a.targets {
                    self.bind(t, live);
                }
            }
            Stmt::AugAssign(a) => {
                let live = self.live(&a.value);
                self.bind(&a.target, live);
            }
            Stmt::AnnAssign(a) => {
                let live = a.value.as_deref().is_some_and(|v| self.live(v));
                self.bind(&a.target, live);
            }
            Stmt::Return(r) => {
                if r.value.as_deref().is_some_and(|v| self.live(v)) {
                    self.flow.returning.insert(self.method.to_string());
                }
            }
            Stmt::Expr(e) => {
                // `self.mean.mul_(m).add_(x)`: an update of the attribute the chain starts at.
                if let Some(root) = in_place_root(&e.value) {
                    if self.live(&e.value) {
                        self.bind(root, true);
                    }
                } else if self.live_args(&e.value) {
                    // `self.history.append(self.mean)`, `log(self.mean)`: kept or passed on.
                    self.escapes = true;
                }
            }
            Stmt::If(i) => {
                self.block(&i.body);
                for c in &i.elif_else_clauses {
                    self.block(&c.body);
                }
            }
            Stmt::For(f) => {
                if self.live(&f.iter) {
                    self.escapes = true;
                }
                self.block(&f.body);
                self.block(&f.orelse);
            }
            Stmt::While(w) => {
                self.block(&w.body);
                self.block(&w.orelse);
            }
            Stmt::With(w) => {
                let was = self.dead;
                self.dead |= w
                    .items
                    .iter()
                    .any(|i| disables_grad_expr(self.facts, &i.context_expr));
                self.block(&w.body);
                self.dead = was;
            }
            Stmt::Try(t) => {
                self.block(&t.body);
                for h in &t.handlers {
                    let ruff_python_ast::ExceptHandler::ExceptHandler(h) = h;
                    self.block(&h.body);
                }
                self.block(&t.orelse);
                self.block(&t.finalbody);
            }
            // Tests and assertions make booleans.
            Stmt::Assert(_) | Stmt::Pass(_) | Stmt::Break(_) | Stmt::Continue(_) => {}
            Stmt::Raise(_) | Stmt::Global(_) | Stmt::Nonlocal(_) | Stmt::Delete(_) => {}
            // Nested definitions, `yield` in statements, `match`: not followed.
            _ => {
                if self.mentions_stat(stmt) {
                    self.escapes = true;
                }
            }
        }
    }

    /// An assignment target receiving a value computed from a statistic (`live`) or not.
    fn bind(&mut self, target: &Expr, live: bool) {
        match target {
            Expr::Name(n) => {
                if live {
                    self.locals.insert(n.id.to_string());
                } else {
                    self.locals.remove(n.id.as_str());
                }
            }
            Expr::Tuple(t) => t.elts.iter().for_each(|e| self.bind(e, live)),
            Expr::List(t) => t.elts.iter().for_each(|e| self.bind(e, live)),
            Expr::Subscript(s) => self.bind(&s.value, live),
            _ if !live => {}
            t => match self_attribute(t) {
                // Another statistic of the object, updated from this one.
                Some(a) => {
                    self.flow.stats.insert(a.to_string());
                }
                None => self.escapes = true,
            },
        }
    }

    /// Does the value of `expr` carry a statistic's graph (a read not cut on the way)?
    fn live(&self, expr: &Expr) -> bool {
        if self.dead {
            return false;
        }
        let mut reads = Reads {
            walk: self,
            found: false,
        };
        reads.visit_expr(expr);
        reads.found
    }

    /// A call's arguments, or an expression that is not a call, carry a statistic.
    fn live_args(&self, expr: &Expr) -> bool {
        match expr {
            Expr::Call(c) => {
                let through_self = matches!(&*c.func, Expr::Attribute(a) if is_self(&a.value));
                (through_self && self.live(&c.func))
                    || c.arguments.args.iter().any(|a| self.live(a))
                    || c.arguments.keywords.iter().any(|k| self.live(&k.value))
            }
            e => self.live(e),
        }
    }

    fn mentions_stat(&self, stmt: &Stmt) -> bool {
        let mut m = Mentions {
            walk: self,
            found: false,
        };
        m.visit_stmt(stmt);
        m.found
    }

    fn is_stat_read(&self, expr: &Expr) -> bool {
        match expr {
            Expr::Name(n) => self.locals.contains(n.id.as_str()),
            e => self_attribute(e).is_some_and(|a| self.flow.stats.contains(a)),
        }
    }
}

/// Finds a live read in an expression.
struct Reads<'w, 'f> {
    walk: &'w MethodWalk<'f>,
    found: bool,
}

impl<'a> Visitor<'a> for Reads<'_, '_> {
    fn visit_expr(&mut self, expr: &'a Expr) {
        if self.found {
            return;
        }
        if self.walk.is_stat_read(expr) {
            self.found = true;
            return;
        }
        match expr {
            Expr::Call(c) => {
                if let Expr::Attribute(a) = &*c.func {
                    if CUTS.contains(&a.attr.as_str()) {
                        // `stat.detach()`: only the arguments can carry a graph on.
                        c.arguments.args.iter().for_each(|e| self.visit_expr(e));
                        return;
                    }
                    if is_self(&a.value) && self.walk.flow.returning.contains(a.attr.as_str()) {
                        self.found = true;
                        return;
                    }
                }
                walk_expr(self, expr);
            }
            Expr::Attribute(a) if METADATA.contains(&a.attr.as_str()) => {}
            Expr::Compare(_) => {}
            _ => walk_expr(self, expr),
        }
    }
}

/// Any mention of a statistic, cut or not.
struct Mentions<'w, 'f> {
    walk: &'w MethodWalk<'f>,
    found: bool,
}

impl<'a> Visitor<'a> for Mentions<'_, '_> {
    fn visit_expr(&mut self, expr: &'a Expr) {
        if self.walk.is_stat_read(expr) {
            self.found = true;
        } else {
            walk_expr(self, expr);
        }
    }
}

/// Every object of the class in this file: attributes and names bound to `Class(...)`. Each
/// may only be called, or have its methods called, with what the statistic's methods return
/// cut (`norm(x).detach()`) or thrown away.
fn objects_only_called(model: &SemanticModel, class: &StmtClassDef, flow: &ClassFlow) -> bool {
    let name = class.name.as_str();
    let facts = model.facts;
    // A list of objects (`[Normalizer() for _ in ...]`) is not followed.
    let in_lists = facts
        .classes
        .values()
        .flat_map(|c| c.attrs.values())
        .chain(facts.globals.values())
        .any(|p| p.elem_class.as_deref() == Some(name));
    if in_lists {
        return false;
    }
    let mut attrs: FxHashSet<String> = FxHashSet::default();
    for (owner, c) in &facts.classes {
        for (a, p) in &c.attrs {
            if p.class.as_deref() == Some(name) {
                // `agent.normalizer.mean` read in a file that makes the agent is out of sight.
                if model.external.used_elsewhere.contains(owner.as_str()) {
                    return false;
                }
                attrs.insert(a.clone());
            }
        }
    }
    let mut scan = Objects {
        facts,
        class: name,
        call_method: if flow.methods.contains("__call__") {
            "__call__"
        } else {
            "forward"
        },
        flow,
        attrs,
        names: FxHashSet::default(),
        cut: FxHashSet::default(),
        dead: 0,
        made: 0,
        unsafe_use: false,
    };
    // Names first, so a use before the binding in the file's text is seen.
    names_bound_to(model.suite(), name, &mut scan.names);
    for s in model.suite() {
        scan.visit_stmt(s);
        if scan.unsafe_use {
            return false;
        }
    }
    // Objects made nowhere here come from where the scan cannot see.
    !scan.unsafe_use && scan.made > 0
}

fn names_bound_to(suite: &[Stmt], class: &str, out: &mut FxHashSet<String>) {
    struct Bound<'c, 'o> {
        class: &'c str,
        out: &'o mut FxHashSet<String>,
    }
    impl<'a> Visitor<'a> for Bound<'_, '_> {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            if let Stmt::Assign(a) = stmt {
                if constructs(&a.value, self.class) {
                    for t in &a.targets {
                        if let Expr::Name(n) = t {
                            self.out.insert(n.id.to_string());
                        }
                    }
                }
            }
            walk_stmt(self, stmt);
        }
    }
    let mut b = Bound { class, out };
    for s in suite {
        b.visit_stmt(s);
    }
}

struct Objects<'c> {
    facts: &'c ModuleFacts,
    class: &'c str,
    call_method: &'static str,
    flow: &'c ClassFlow,
    /// Attribute names and local or global names that hold an object of the class.
    attrs: FxHashSet<String>,
    names: FxHashSet<String>,
    /// Calls whose result is cut or thrown away.
    cut: FxHashSet<TextRange>,
    dead: u32,
    /// Objects made, each into a name or attribute.
    made: usize,
    unsafe_use: bool,
}

impl Objects<'_> {
    fn is_object(&self, expr: &Expr) -> bool {
        match expr {
            Expr::Name(n) => self.names.contains(n.id.as_str()),
            Expr::Attribute(a) => self.attrs.contains(a.attr.as_str()),
            _ => false,
        }
    }

    /// A call of an object's method: fine when the method returns nothing computed from the
    /// statistic, or when what it returns is cut.
    fn method_call(&mut self, call: &Expr, method: &str) {
        if !self.flow.methods.contains(method)
            || self.flow.returning.contains(method)
                && self.dead == 0
                && !self.cut.contains(&call.range())
        {
            self.unsafe_use = true;
        }
    }
}

impl<'a> Visitor<'a> for Objects<'_> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::Assign(a) if constructs(&a.value, self.class) => {
                // `self.norm = Normalizer(dim)`: where the object is made, into a name or an
                // attribute the scan follows.
                self.made += 1;
                if !a
                    .targets
                    .iter()
                    .all(|t| matches!(t, Expr::Name(_) | Expr::Attribute(_)))
                {
                    self.unsafe_use = true;
                }
                if let Expr::Call(c) = &*a.value {
                    self.visit_arguments(&c.arguments);
                }
            }
            Stmt::Expr(e) => {
                // A result thrown away: `norm.update(x)`.
                self.cut.insert(e.value.range());
                self.visit_expr(&e.value);
            }
            Stmt::With(w)
                if w.items
                    .iter()
                    .any(|i| disables_grad_expr(self.facts, &i.context_expr)) =>
            {
                self.dead += 1;
                walk_stmt(self, stmt);
                self.dead -= 1;
            }
            Stmt::FunctionDef(f) if no_grad_decorated(self.facts, f) => {
                self.dead += 1;
                walk_stmt(self, stmt);
                self.dead -= 1;
            }
            _ => walk_stmt(self, stmt),
        }
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        if self.unsafe_use {
            return;
        }
        if self.is_object(expr) || constructs(expr, self.class) {
            // Passed, returned, stored, or an attribute read; or made where no name keeps it
            // (`train(Normalizer(d))`): not followed.
            self.unsafe_use = true;
            return;
        }
        let Expr::Call(call) = expr else {
            walk_expr(self, expr);
            return;
        };
        if let Expr::Attribute(a) = &*call.func {
            if CUTS.contains(&a.attr.as_str()) {
                self.cut.insert(a.value.range());
            }
            if self.is_object(&a.value) {
                self.method_call(expr, a.attr.as_str());
                self.visit_arguments(&call.arguments);
                return;
            }
        }
        if self.is_object(&call.func) {
            self.method_call(expr, self.call_method);
            self.visit_arguments(&call.arguments);
            return;
        }
        walk_expr(self, expr);
    }
}

/// `Class(...)`.
fn constructs(value: &Expr, class: &str) -> bool {
    matches!(value, Expr::Call(c) if dotted(&c.func).is_some_and(|d| last_segment(&d) == class))
}

fn is_self(expr: &Expr) -> bool {
    matches!(expr, Expr::Name(n) if n.id.as_str() == "self")
}

/// `self.<attr>` (one level).
fn self_attribute(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Attribute(a) if is_self(&a.value) => Some(a.attr.as_str()),
        _ => None,
    }
}

/// `self` used other than to reach an attribute or call a method.
fn bare_self(stmt: &Stmt) -> bool {
    struct Bare {
        found: bool,
    }
    impl<'a> Visitor<'a> for Bare {
        fn visit_expr(&mut self, expr: &'a Expr) {
            match expr {
                Expr::Attribute(a) if is_self(&a.value) => {}
                e if is_self(e) => self.found = true,
                e => walk_expr(self, e),
            }
        }
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            // A nested function's own `self` is another object.
            if !matches!(stmt, Stmt::FunctionDef(_) | Stmt::ClassDef(_)) {
                walk_stmt(self, stmt);
            }
        }
    }
    let mut b = Bare { found: false };
    b.visit_stmt(stmt);
    b.found
}

/// The attribute an in-place chain starts at: `self.mean` in `self.mean.mul_(m).add_(x)`.
fn in_place_root(expr: &Expr) -> Option<&Expr> {
    let mut cur = expr;
    let mut in_place = false;
    while let Expr::Call(c) = cur {
        let Expr::Attribute(a) = &*c.func else {
            return None;
        };
        if !a.attr.ends_with('_') || a.attr.starts_with('_') {
            return None;
        }
        in_place = true;
        cur = &a.value;
    }
    let cur = match cur {
        Expr::Subscript(s) => &*s.value,
        e => e,
    };
    (in_place && self_attribute(cur).is_some()).then_some(cur)
}

fn no_grad_decorated(facts: &ModuleFacts, f: &StmtFunctionDef) -> bool {
    f.decorator_list
        .iter()
        .any(|d| disables_grad_expr(facts, &d.expression))
}

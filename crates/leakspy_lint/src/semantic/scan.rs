//! Scans of a block (a loop body or a function body) made before it is walked, so a rule at an
//! `.append` can ask what happens later in the same iteration: is the container cleared,
//! rebound, or consumed by `.backward()`?

use ruff_python_ast::visitor::{walk_expr, walk_stmt, Visitor};
use ruff_python_ast::{Expr, ExprCall, Stmt};
use rustc_hash::{FxHashMap, FxHashSet};

use super::facts::visit_body;
use super::mutation::{call_mutation, for_each_target_mutation, Keys, Mutation};
use super::names::dotted;

#[derive(Debug, Default, Clone)]
pub struct BlockFacts<'a> {
    /// Every change to each container key in the block (nested blocks included, nested
    /// functions excluded).
    pub changes: FxHashMap<String, Vec<Mutation>>,
    /// Keys whose contents flow into a `.backward()` (directly or through one assignment).
    pub backward_uses: FxHashSet<String>,
    /// Names on which `.backward()` is called (or passed to `autograd.backward/grad`).
    pub backwarded: FxHashSet<String>,
    /// Names holding what `.backward()` is called on (`out` of `out["loss"].backward()`), with
    /// the string key it is under.
    pub backwarded_within: FxHashMap<String, Option<Box<str>>>,
    /// Of those, the names whose entry is backpropagated with `retain_graph=True`: the whole
    /// graph stays after the backward.
    pub retained_within: FxHashSet<String>,
    pub calls_backward: bool,
    /// Every `.backward()` of the block passes `retain_graph=True` (meaningful only with
    /// `calls_backward`).
    pub every_backward_retains: bool,
    pub steps_optimizer: bool,
    /// `plt.close(...)`/`fig.clf()`-style closing happens in the block.
    pub closes_figures: FxHashSet<String>,
    pub closes_all_figures: bool,
    /// A `return` with a value somewhere in the block.
    pub returns_value: bool,
    /// The last name of every callee given positional arguments (`f` of `f(x)`, `update` of
    /// `agent.update(x)`): the calls through which a graph can reach a parameter.
    pub callees: FxHashSet<&'a str>,
}

impl<'a> BlockFacts<'a> {
    pub fn scan(body: &'a [Stmt]) -> Self {
        let mut facts = BlockFacts::default();
        let mut backward_exprs: Vec<FxHashSet<String>> = Vec::new();
        let mut assigns: Vec<&'a Stmt> = Vec::new();
        visit_block(body, &mut |stmt| {
            // Method-call changes (`xs.append`) are recorded by the call scan below, in the
            // same visit of the statement's expressions.
            for_each_target_mutation(stmt, Keys::All, &mut |key, m, _| {
                facts.changes.entry(key).or_default().push(m);
            });
            if matches!(stmt, Stmt::Assign(_) | Stmt::AugAssign(_)) {
                assigns.push(stmt);
            }
            CallScan {
                facts: &mut facts,
                backward_exprs: &mut backward_exprs,
                in_lambda: 0,
            }
            .scan_stmt(stmt);
        });
        if backward_exprs.is_empty() {
            return facts;
        }
        // Which keys each assignment reads: needed only where something is backpropagated.
        let mut deps: FxHashMap<String, FxHashSet<String>> = FxHashMap::default();
        for stmt in assigns {
            if let Stmt::Assign(assign) = stmt {
                let used = keys_in(&assign.value);
                for target in &assign.targets {
                    if let Some(t) = dotted(target) {
                        deps.entry(t).or_default().extend(used.iter().cloned());
                    }
                }
            }
            if let Stmt::AugAssign(aug) = stmt {
                if let Some(t) = dotted(&aug.target) {
                    deps.entry(t).or_default().extend(keys_in(&aug.value));
                }
            }
        }
        // A key is consumed by backward when it appears in a backpropagated expression, or in
        // the value of a name that is, however many assignments away (`values` kept in a
        // rollout, then `advantage = returns - values`, `critic_loss = advantage.pow(2)
        // .mean()`, `loss = actor_loss + critic_loss`, `loss.backward()`).
        let mut work: Vec<String> = backward_exprs.into_iter().flatten().collect();
        while let Some(key) = work.pop() {
            if !facts.backward_uses.insert(key.clone()) {
                continue;
            }
            if let Some(d) = deps.get(&key) {
                work.extend(
                    d.iter()
                        .filter(|k| !facts.backward_uses.contains(*k))
                        .cloned(),
                );
            }
        }
        facts
    }

    pub fn resets(&self, key: &str) -> bool {
        self.changes
            .get(key)
            .is_some_and(|ms| ms.iter().any(|m| *m != Mutation::Grow))
    }

    pub fn rebinds(&self, key: &str) -> bool {
        self.changes
            .get(key)
            .is_some_and(|ms| ms.contains(&Mutation::Rebind))
    }

    pub fn grows(&self, key: &str) -> bool {
        self.changes
            .get(key)
            .is_some_and(|ms| ms.contains(&Mutation::Grow))
    }
}

/// Like `visit_body`, but does not enter nested function or class definitions: their bodies do
/// not run as part of this block.
pub fn visit_block<'a>(body: &'a [Stmt], f: &mut dyn FnMut(&'a Stmt)) {
    for stmt in body {
        f(stmt);
        match stmt {
            Stmt::FunctionDef(_) | Stmt::ClassDef(_) => {}
            Stmt::For(s) => {
                visit_block(&s.body, f);
                visit_block(&s.orelse, f);
            }
            Stmt::While(s) => {
                visit_block(&s.body, f);
                visit_block(&s.orelse, f);
            }
            Stmt::If(s) => {
                visit_block(&s.body, f);
                for c in &s.elif_else_clauses {
                    visit_block(&c.body, f);
                }
            }
            Stmt::With(s) => visit_block(&s.body, f),
            Stmt::Try(s) => {
                visit_block(&s.body, f);
                for h in &s.handlers {
                    let ruff_python_ast::ExceptHandler::ExceptHandler(h) = h;
                    visit_block(&h.body, f);
                }
                visit_block(&s.orelse, f);
                visit_block(&s.finalbody, f);
            }
            Stmt::Match(m) => {
                for case in &m.cases {
                    visit_block(&case.body, f);
                }
            }
            _ => {}
        }
    }
    let _ = visit_body;
}

/// `losses[-1]`, `history[0]`: one entry of a container, by a constant position.
fn one_entry(expr: &Expr) -> bool {
    let Expr::Subscript(s) = expr else {
        return false;
    };
    match &*s.slice {
        Expr::NumberLiteral(_) => true,
        Expr::UnaryOp(u) => matches!(&*u.operand, Expr::NumberLiteral(_)),
        _ => false,
    }
}

/// Every name and dotted attribute chain mentioned in an expression (`self.parts` yields both
/// `self` and `self.parts`).
pub fn keys_in(expr: &Expr) -> FxHashSet<String> {
    struct K {
        keys: FxHashSet<String>,
    }
    impl<'a> Visitor<'a> for K {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Some(d) = dotted(expr) {
                self.keys.insert(d);
            }
            walk_expr(self, expr);
        }
    }
    let mut k = K {
        keys: FxHashSet::default(),
    };
    k.visit_expr(expr);
    k.keys
}

struct CallScan<'f, 'a> {
    /// Inside a lambda body: its container calls run later, if ever, and change nothing here.
    in_lambda: u32,
    facts: &'f mut BlockFacts<'a>,
    backward_exprs: &'f mut Vec<FxHashSet<String>>,
}

impl<'a> CallScan<'_, 'a> {
    fn scan_stmt(&mut self, stmt: &'a Stmt) {
        let exprs: Vec<&'a Expr> = match stmt {
            Stmt::Expr(e) => vec![&e.value],
            Stmt::Assign(a) => vec![&a.value],
            Stmt::AugAssign(a) => vec![&a.value],
            Stmt::AnnAssign(a) => a.value.as_deref().into_iter().collect(),
            Stmt::Return(r) => {
                if r.value.is_some() {
                    self.facts.returns_value = true;
                }
                r.value.as_deref().into_iter().collect()
            }
            Stmt::If(i) => vec![&i.test],
            Stmt::While(w) => vec![&w.test],
            Stmt::For(f) => vec![&f.iter],
            Stmt::With(w) => w.items.iter().map(|i| &i.context_expr).collect(),
            _ => vec![],
        };
        for e in exprs {
            self.visit_expr(e);
        }
    }
}

impl<'a> Visitor<'a> for CallScan<'_, 'a> {
    fn visit_expr(&mut self, expr: &'a Expr) {
        if let Expr::Lambda(_) = expr {
            self.in_lambda += 1;
            walk_expr(self, expr);
            self.in_lambda -= 1;
            return;
        }
        if self.in_lambda == 0 {
            if let Some((key, m)) = expr.as_call_expr().and_then(call_mutation) {
                self.facts.changes.entry(key).or_default().push(m);
            }
        }
        if let Some(call) = expr.as_call_expr().filter(|c| !c.arguments.args.is_empty()) {
            match &*call.func {
                Expr::Name(n) => {
                    self.facts.callees.insert(n.id.as_str());
                }
                Expr::Attribute(a) => {
                    self.facts.callees.insert(a.attr.as_str());
                }
                _ => {}
            }
        }
        if let Expr::Call(call) = expr {
            if let Expr::Attribute(attr) = &*call.func {
                let method = attr.attr.as_str();
                match method {
                    "backward" | "manual_backward" => {
                        let retains = call.arguments.keywords.iter().any(|k| {
                            k.arg.as_ref().is_some_and(|a| a.as_str() == "retain_graph")
                                && !matches!(&k.value, Expr::BooleanLiteral(b) if !b.value)
                                && !k.value.is_none_literal_expr()
                        });
                        self.facts.every_backward_retains = retains
                            && (!self.facts.calls_backward || self.facts.every_backward_retains);
                        self.facts.calls_backward = true;
                        // `loss.backward()`, `scaler.scale(loss).backward()`,
                        // `accelerator.backward(loss)`, `self.manual_backward(loss)`.
                        // `losses[-1].backward()` backpropagates one entry: the others, each
                        // backpropagated once before, are kept, not consumed.
                        let mut used = if one_entry(&attr.value) {
                            FxHashSet::default()
                        } else {
                            keys_in(&attr.value)
                        };
                        // `accelerator.backward(loss)`, `self.manual_backward(loss)`: a call given
                        // a value backpropagates that value, not its receiver; a tensor's own
                        // `backward()` takes no value but a `gradient`.
                        let args = &call.arguments.args;
                        let receiver_is_loss = method == "backward"
                            && (args.is_empty()
                                || call.arguments.keywords.iter().any(|k| {
                                    k.arg.as_ref().is_some_and(|a| a.as_str() == "gradient")
                                }));
                        for (i, arg) in args.iter().enumerate() {
                            used.extend(keys_in(arg));
                            if i == 0 && !receiver_is_loss {
                                if let Some(d) = dotted(arg) {
                                    self.facts.backwarded.insert(d);
                                }
                            }
                        }
                        if receiver_is_loss {
                            if let Some(d) = dotted(&attr.value) {
                                self.facts.backwarded.insert(d);
                            }
                            // `out["loss"].backward()`: `out` holds a graph, under "loss".
                            if let Expr::Subscript(s) = &*attr.value {
                                if let Some(d) = dotted(&s.value) {
                                    let entry = match &*s.slice {
                                        Expr::StringLiteral(k) => Some(k.value.to_str().into()),
                                        _ => None,
                                    };
                                    if retains {
                                        self.facts.retained_within.insert(d.clone());
                                    }
                                    self.facts.backwarded_within.insert(d, entry);
                                }
                            }
                        }
                        if let Expr::Call(inner) = &*attr.value {
                            // `scaler.scale(loss).backward()`.
                            for arg in &*inner.arguments.args {
                                if let Some(d) = dotted(arg) {
                                    self.facts.backwarded.insert(d);
                                }
                            }
                        }
                        self.backward_exprs.push(used);
                    }
                    "grad" if dotted(&attr.value).is_some_and(|d| d.ends_with("autograd")) => {
                        self.facts.calls_backward = true;
                        self.facts.every_backward_retains = false;
                        if let Some(first) = call.arguments.args.first() {
                            self.backward_exprs.push(keys_in(first));
                            if let Some(d) = dotted(first) {
                                self.facts.backwarded.insert(d);
                            }
                        }
                    }
                    "step" => {
                        if let Some(d) = dotted(&attr.value) {
                            let last = d.rsplit('.').next().unwrap_or(&d).to_ascii_lowercase();
                            if last.contains("optim") || last.contains("opt") || last == "scaler" {
                                self.facts.steps_optimizer = true;
                            }
                        }
                    }
                    "close" | "clf" | "clear" => {
                        let recv = dotted(&attr.value);
                        if recv
                            .as_deref()
                            .is_some_and(|r| r == "plt" || r.ends_with("pyplot"))
                        {
                            match call.arguments.args.first() {
                                None => self.facts.closes_all_figures = true,
                                Some(Expr::StringLiteral(s)) if s.value.to_str() == "all" => {
                                    self.facts.closes_all_figures = true;
                                }
                                Some(arg) => {
                                    if let Some(d) = dotted(arg) {
                                        self.facts.closes_figures.insert(d);
                                    }
                                }
                            }
                        } else if method == "close" {
                            if let Some(r) = recv {
                                self.facts.closes_figures.insert(r);
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        walk_expr(self, expr);
    }
}

/// Is `key` bound afresh, from a value that does not read it, on every path from the start of
/// `body` to the statement at `at`: a plain assignment before it in its block or in a block
/// around it, or an `if`/`elif`/`else` whose every branch does so (`self.loss = None` in one,
/// `self.loss = f(x)` in the other)? Then what the statement reads under `key` was made by this
/// run of the body, not kept from an earlier one.
pub fn rebound_before(body: &[Stmt], key: &str, at: ruff_text_size::TextSize) -> bool {
    use ruff_text_size::Ranged;
    for s in body {
        if s.range().contains(at) {
            let inner: Vec<&[Stmt]> = match s {
                Stmt::If(i) => std::iter::once(&i.body[..])
                    .chain(i.elif_else_clauses.iter().map(|c| &c.body[..]))
                    .collect(),
                Stmt::For(f) => vec![&f.body[..], &f.orelse[..]],
                Stmt::While(w) => vec![&w.body[..], &w.orelse[..]],
                Stmt::With(w) => vec![&w.body[..]],
                Stmt::Try(t) => {
                    let mut v = vec![&t.body[..], &t.orelse[..], &t.finalbody[..]];
                    v.extend(t.handlers.iter().map(|h| {
                        let ruff_python_ast::ExceptHandler::ExceptHandler(h) = h;
                        &h.body[..]
                    }));
                    v
                }
                _ => return false,
            };
            return inner
                .into_iter()
                .find(|b| b.iter().any(|x| x.range().contains(at)))
                .is_some_and(|b| rebound_before(b, key, at));
        }
        if s.end() <= at && rebinds_on_every_path(s, key) {
            return true;
        }
    }
    false
}

/// Methods that grow a container in place.
pub const GROW_METHODS: &[&str] = &["append", "extend", "insert", "appendleft", "extendleft"];

/// Is `name` used in `body` only as what it is bound to and what grows (`xs = []`,
/// `xs.append(v)`), and as an argument of the calls `reader` allows (`torch.stack(xs)`)?
pub fn only_grown(body: &[Stmt], name: &str, reader: &dyn Fn(&ExprCall) -> bool) -> bool {
    struct Uses<'n, 'r> {
        name: &'n str,
        reader: &'r dyn Fn(&ExprCall) -> bool,
        read: bool,
    }
    impl<'a> Visitor<'a> for Uses<'_, '_> {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            if let Stmt::Expr(e) = stmt {
                if let Expr::Call(c) = &*e.value {
                    if let Expr::Attribute(a) = &*c.func {
                        if GROW_METHODS.contains(&a.attr.as_str())
                            && super::names::is_dotted(&a.value, self.name)
                        {
                            for arg in &*c.arguments.args {
                                self.visit_expr(arg);
                            }
                            return;
                        }
                    }
                }
            }
            if let Stmt::Assign(a) = stmt {
                if a.targets
                    .iter()
                    .all(|t| super::names::is_dotted(t, self.name))
                {
                    self.visit_expr(&a.value);
                    return;
                }
            }
            walk_stmt(self, stmt);
        }
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Call(c) = expr {
                if (self.reader)(c)
                    && c.arguments
                        .args
                        .iter()
                        .any(|a| super::names::is_dotted(a, self.name))
                {
                    for arg in c.arguments.args.iter() {
                        if !super::names::is_dotted(arg, self.name) {
                            self.visit_expr(arg);
                        }
                    }
                    for k in c.arguments.keywords.iter() {
                        self.visit_expr(&k.value);
                    }
                    return;
                }
            }
            if matches!(expr, Expr::Name(n) if n.id.as_str() == self.name) {
                self.read = true;
            }
            walk_expr(self, expr);
        }
    }
    let mut uses = Uses {
        name,
        reader,
        read: false,
    };
    uses.visit_body(body);
    !uses.read
}

/// Is `key` detached by a statement before `at` in `body` (`x = x.detach()`, `x.detach_()`)?
/// Where that statement runs on every path the value is seen as detached already, so this
/// finds the detach an option guards (`if not self.differentiable: x = x.detach()`): the
/// author chose when the value keeps its graph.
pub fn detached_before(body: &[Stmt], key: &str, at: ruff_text_size::TextSize) -> bool {
    use ruff_text_size::Ranged;
    let detach_of = |e: &Expr| {
        let Expr::Call(c) = e else { return false };
        let Expr::Attribute(a) = &*c.func else {
            return false;
        };
        matches!(a.attr.as_str(), "detach" | "detach_") && super::names::is_dotted(&a.value, key)
    };
    let mut found = false;
    visit_block(body, &mut |s| {
        if s.end() > at || found {
            return;
        }
        found = match s {
            Stmt::Assign(a) => {
                a.targets.iter().any(|t| super::names::is_dotted(t, key)) && detach_of(&a.value)
            }
            Stmt::Expr(e) => detach_of(&e.value),
            _ => false,
        };
    });
    found
}

fn rebinds_on_every_path(s: &Stmt, key: &str) -> bool {
    let fresh = |targets: &[&Expr], value: &Expr| {
        targets.iter().any(|t| super::names::is_dotted(t, key)) && !keys_in(value).contains(key)
    };
    match s {
        Stmt::Assign(a) => fresh(&a.targets.iter().collect::<Vec<_>>(), &a.value),
        Stmt::AnnAssign(a) => a.value.as_deref().is_some_and(|v| fresh(&[&*a.target], v)),
        Stmt::If(i) => {
            i.elif_else_clauses.iter().any(|c| c.test.is_none())
                && i.body.iter().any(|x| rebinds_on_every_path(x, key))
                && i.elif_else_clauses
                    .iter()
                    .all(|c| c.body.iter().any(|x| rebinds_on_every_path(x, key)))
        }
        Stmt::With(w) => w.body.iter().any(|x| rebinds_on_every_path(x, key)),
        _ => false,
    }
}

/// Does `def` add one of its positional parameters (after `self`) into another in place
/// (`buf.add_(value)`, `buf.sub_(value)`)? The positions (target, added) and where.
pub fn in_place_add(
    def: &ruff_python_ast::StmtFunctionDef,
) -> Option<(usize, usize, ruff_text_size::TextSize)> {
    let params = crate::summaries::extract::positional_params(def);
    let mut found = None;
    visit_block(&def.body, &mut |s| {
        let Stmt::Expr(e) = s else { return };
        let Expr::Call(c) = &*e.value else { return };
        let Expr::Attribute(a) = &*c.func else { return };
        if !matches!(a.attr.as_str(), "add_" | "sub_") {
            return;
        }
        let (Expr::Name(t), [Expr::Name(v)]) = (&*a.value, &*c.arguments.args) else {
            return;
        };
        let i = params.iter().position(|p| *p == t.id.as_str());
        let j = params.iter().position(|p| *p == v.id.as_str());
        if let (Some(i), Some(j)) = (i, j) {
            found = found.or(Some((i, j, ruff_text_size::Ranged::start(s))));
        }
    });
    found
}

/// The keys a function's return values are computed from: those its `return`s mention, and
/// those the assignments of its body bind them from, however many assignments away.
pub fn returned_keys(body: &[Stmt]) -> FxHashSet<String> {
    let mut deps: FxHashMap<String, FxHashSet<String>> = FxHashMap::default();
    let mut work: Vec<String> = Vec::new();
    visit_block(body, &mut |s| match s {
        Stmt::Return(r) => {
            if let Some(v) = &r.value {
                work.extend(keys_in(v));
            }
        }
        Stmt::Assign(a) => {
            let used = keys_in(&a.value);
            for t in &a.targets {
                if let Some(d) = dotted(t) {
                    deps.entry(d).or_default().extend(used.iter().cloned());
                }
            }
        }
        Stmt::AugAssign(a) => {
            if let Some(d) = dotted(&a.target) {
                deps.entry(d).or_default().extend(keys_in(&a.value));
            }
        }
        _ => {}
    });
    let mut read = FxHashSet::default();
    while let Some(k) = work.pop() {
        if !read.insert(k.clone()) {
            continue;
        }
        if let Some(d) = deps.get(&k) {
            work.extend(d.iter().filter(|x| !read.contains(*x)).cloned());
        }
    }
    read
}

/// Does any statement of the block (nested definitions aside) mention `key`?
pub fn mentions_key(body: &[Stmt], key: &str) -> bool {
    struct M<'k> {
        key: &'k str,
        found: bool,
    }
    impl<'a> Visitor<'a> for M<'_> {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            if !matches!(stmt, Stmt::FunctionDef(_) | Stmt::ClassDef(_)) {
                walk_stmt(self, stmt);
            }
        }
        fn visit_expr(&mut self, expr: &'a Expr) {
            if dotted(expr).as_deref() == Some(self.key) {
                self.found = true;
            }
            walk_expr(self, expr);
        }
    }
    let mut m = M { key, found: false };
    for s in body {
        m.visit_stmt(s);
    }
    m.found
}

/// The callees of every call in the block (nested definitions aside), as dotted keys
/// (`self._test`, `self.losshistory.append`).
pub fn called_keys(body: &[Stmt]) -> FxHashSet<String> {
    struct C {
        keys: FxHashSet<String>,
    }
    impl<'a> Visitor<'a> for C {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            if !matches!(stmt, Stmt::FunctionDef(_) | Stmt::ClassDef(_)) {
                walk_stmt(self, stmt);
            }
        }
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Call(c) = expr {
                if let Some(d) = dotted(&c.func) {
                    self.keys.insert(d);
                }
            }
            walk_expr(self, expr);
        }
    }
    let mut c = C {
        keys: FxHashSet::default(),
    };
    for s in body {
        c.visit_stmt(s);
    }
    c.keys
}

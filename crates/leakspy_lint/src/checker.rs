//! The walk over one file. It tells the semantic model (`semantic/model.rs`) what each
//! statement binds, opens and closes scopes and loops, and calls the rules at statements, calls,
//! loops and functions, where they ask the model questions. Silent walks first learn what this
//! file's functions return; then the walk that reports. Loop bodies near the top are walked
//! twice in the reporting walk (the first time silently), so a value carried around the loop
//! (`h` in `out, h = rnn(x, h)`) is known on the second walk.

use ruff_python_ast::visitor::{walk_expr, Visitor};
use ruff_python_ast::{Expr, ExprCall, Stmt, StmtFunctionDef};
use ruff_text_size::{Ranged, TextRange};

use crate::diagnostic::Diagnostic;
use crate::lines::Lines;
use crate::registry::{Rule, RuleSet};
use crate::rules;
use crate::semantic::facts::ModuleFacts;
use crate::semantic::model::{LoopFrame, Scope, ScopeKind, SemanticModel};
use crate::semantic::names::{dotted, is_dotted};
use crate::semantic::scan::BlockFacts;
use crate::semantic::value::Value;

pub use crate::semantic::lifetime::{Across, Holder, Lifetime, Until};
pub use crate::semantic::model::shorten;

const SILENT_PASSES: usize = 3;

pub struct Checker<'a> {
    semantic: SemanticModel<'a>,
    rules: &'a RuleSet,
    /// Each finding with the statement it was raised at.
    diagnostics: Vec<(TextRange, Diagnostic)>,
    /// The statement the rules are looking at.
    statement: TextRange,
    /// Reused by `visit_calls`.
    calls_buffer: Vec<&'a ExprCall>,
}

/// Rules read the semantic model through the checker: `checker.value(expr)`,
/// `checker.lifetime(container)`.
impl<'a> std::ops::Deref for Checker<'a> {
    type Target = SemanticModel<'a>;
    fn deref(&self) -> &Self::Target {
        &self.semantic
    }
}

impl<'a> Checker<'a> {
    pub fn new(
        source: &'a str,
        facts: &'a ModuleFacts,
        lines: &'a Lines<'a>,
        rules: &'a RuleSet,
        suite: &'a [Stmt],
    ) -> Self {
        Self {
            semantic: SemanticModel::new(source, facts, lines, suite),
            rules,
            diagnostics: Vec::new(),
            statement: TextRange::default(),
            calls_buffer: Vec::new(),
        }
    }

    /// Tells the summary passes which names the file calls, so they skip functions whose
    /// return value nothing here asks for.
    pub fn with_called_names(mut self, names: rustc_hash::FxHashSet<&'a str>) -> Self {
        self.semantic.called_names = Some(names);
        self
    }

    /// Takes in what the project index says of other files (`summaries::ExternalFacts`).
    pub fn with_external(mut self, external: &'a crate::summaries::ExternalFacts) -> Self {
        if !external.is_empty() {
            self.semantic.adopt(external);
        }
        self
    }

    /// Records, as the reporting walk goes, the calls that leave the file, for its summary.
    pub fn summarizing(mut self) -> Self {
        self.semantic.calls_out = Some(Default::default());
        self
    }

    /// Tells the analysis whether the text is a notebook's cells (run by a kernel).
    pub fn with_source_kind(mut self, kind: crate::SourceKind<'a>) -> Self {
        self.semantic.source_kind = kind;
        self
    }

    pub fn semantic(&self) -> &SemanticModel<'a> {
        &self.semantic
    }

    /// Runs the analysis on a module and returns its diagnostics, in order, one per rule and
    /// statement.
    pub fn check_module(self, suite: &'a [Stmt]) -> Vec<Diagnostic> {
        self.check_module_summarized(suite).0
    }

    /// Runs the analysis and returns the diagnostics and the file's summary (with the calls
    /// that leave the file when `summarizing`).
    pub fn check_module_summarized(
        mut self,
        suite: &'a [Stmt],
    ) -> (Vec<Diagnostic>, crate::summaries::FileSummary) {
        // Silent walks learn what this file's functions return and which parameters receive
        // graphs; a graph passed on through two calls (`trainer -> agent.update(x) ->
        // normalizer.update(x)`) needs a second one. Then the walk that reports.
        let mut known = usize::MAX;
        for _ in 0..SILENT_PASSES {
            let taints = self.semantic.taint_count();
            if taints == known {
                break;
            }
            known = taints;
            self.semantic.reporting = false;
            self.walk_module(suite);
        }
        self.semantic.reporting = true;
        self.walk_module(suite);
        let summary = if self.semantic.calls_out.is_some() {
            self.semantic.file_summary()
        } else {
            Default::default()
        };
        (one_per_statement(self.diagnostics), summary)
    }

    fn walk_module(&mut self, suite: &'a [Stmt]) {
        let facts = self
            .semantic
            .cached_facts(suite, || BlockFacts::scan(suite));
        self.semantic
            .scopes
            .push(Scope::new(ScopeKind::Module, facts));
        self.walk_body(suite);
        self.semantic.scopes.pop();
    }

    pub fn enabled(&self, rule: Rule) -> bool {
        self.rules.contains(rule)
    }

    pub fn report(&mut self, diagnostic: Diagnostic) {
        if self.semantic.reporting {
            self.diagnostics.push((self.statement, diagnostic));
        }
    }

    // ----- the walk --------------------------------------------------------------------------

    fn walk_body(&mut self, body: &'a [Stmt]) {
        for stmt in body {
            self.walk_stmt(stmt);
        }
    }

    fn walk_stmt(&mut self, stmt: &'a Stmt) {
        *self.semantic.qualified_memo.get_mut() = None;
        self.semantic.position.set(stmt.start());
        // Rules see the environment as it is before the statement runs. Silent passes only
        // learn values: running rules there would be wasted work.
        if self.semantic.reporting {
            self.statement = stmt.range();
            rules::analyze_stmt(self, stmt);
            let per_step = self.semantic.iteration().is_some();
            if per_step || self.semantic.calls_out.is_some() {
                self.visit_calls(stmt, per_step);
            }
        }
        let sem = &mut self.semantic;
        match stmt {
            Stmt::FunctionDef(def) => self.walk_function(def),
            Stmt::ClassDef(class) => {
                self.semantic.classes.push(class);
                if self.semantic.reporting {
                    rules::analyze_class(self, class);
                }
                self.walk_body(&class.body);
                self.semantic.classes.pop();
            }
            Stmt::Assign(assign) => {
                // The class first: it asks for the callee's qualified name, which the value's
                // evaluation then finds kept instead of qualifying it again after the arguments.
                let class = sem.class_of(&assign.value);
                let value = sem.value(&assign.value);
                let elem = match &*assign.value {
                    Expr::ListComp(c) => sem.class_of(&c.elt),
                    e => sem.elem_class_of(e),
                };
                // What a class of another module makes: calls on it leave the file.
                let foreign = match &*assign.value {
                    Expr::Call(call) if sem.calls_out.is_some() && class.is_none() => {
                        sem.qualified_function(&call.func).filter(|q| {
                            crate::summaries::extract::may_be_in_project(q)
                                && q.rsplit('.')
                                    .next()
                                    .is_some_and(|l| l.starts_with(|c: char| c.is_uppercase()))
                        })
                    }
                    _ => None,
                };
                for target in &assign.targets {
                    if let Expr::Name(n) = target {
                        let id = n.id.as_str();
                        let scope = sem.scope_mut();
                        match &foreign {
                            Some(q) => scope
                                .foreign_instances
                                .insert(id.to_string(), q.to_string()),
                            None => scope.foreign_instances.remove(id),
                        };
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
                            sem.update(key, value.clone());
                        }
                        // A name or attribute: its key is built already.
                        Some(key) => sem.bind_key(target, key, value.clone()),
                        None => sem.bind(target, &assign.value, value.clone()),
                    }
                }
            }
            Stmt::AnnAssign(assign) => {
                if let Some(v) = &assign.value {
                    let value = sem.value(v);
                    sem.bind(&assign.target, v, value);
                }
            }
            Stmt::AugAssign(aug) => {
                let cur = sem.value(&aug.target);
                let add = sem.value(&aug.value);
                let new = crate::semantic::eval::arith(cur, add);
                if let Some(key) = dotted(&aug.target) {
                    sem.update(key, new);
                }
            }
            Stmt::Expr(e) => {
                if let (false, Expr::Call(call)) = (sem.reporting, &*e.value) {
                    // Evaluated for its side effect on the analysis: the call site tells the
                    // callee which of its parameters receive graphs. So do the calls in the
                    // arguments of a call the analysis does not follow (`print(generate(m,
                    // 1, 200))`), which its evaluation leaves unread.
                    let _ = sem.value(&e.value);
                    if !sem.follows_call(call) {
                        for arg in call.arguments.args.iter() {
                            if matches!(arg, Expr::Call(_)) {
                                let _ = sem.value(arg);
                            }
                        }
                    }
                }
                sem.apply_call_effects(&e.value);
            }
            Stmt::Return(ret) => sem.record_return(ret),
            Stmt::For(for_) => {
                let elem_class = sem
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
                        let c = sem.elem_class_of(call.arguments.args.first()?)?;
                        Some((c, t.elts.get(1)?))
                    });
                if let Some((c, Expr::Name(n))) = elem_class {
                    sem.scope_mut()
                        .instances
                        .insert(n.id.as_str().to_string(), c);
                }
                let elem = sem.element_value(&for_.iter);
                self.walk_loop(stmt, &for_.body, Some((&for_.target, elem)));
                self.walk_body(&for_.orelse);
            }
            Stmt::While(w) => {
                self.walk_loop(stmt, &w.body, None);
                self.walk_body(&w.orelse);
            }
            Stmt::If(i) => {
                // Each branch starts from the state before the `if`; what they bind is joined.
                let mut branches = Vec::with_capacity(1 + i.elif_else_clauses.len());
                let mark = self.semantic.branch_start();
                self.walk_guarded(Some(&i.test), &i.body);
                branches.push(self.semantic.branch_end(mark));
                for clause in &i.elif_else_clauses {
                    let mark = self.semantic.branch_start();
                    self.walk_guarded(clause.test.as_ref(), &clause.body);
                    branches.push(self.semantic.branch_end(mark));
                }
                let exhaustive = i.elif_else_clauses.iter().any(|c| c.test.is_none());
                self.semantic.join_branches(branches, exhaustive);
            }
            Stmt::With(with) => {
                let mut disabled = 0;
                for item in &with.items {
                    if self.semantic.is_grad_disabling(&item.context_expr) {
                        disabled += 1;
                    }
                    if let Some(vars) = &item.optional_vars {
                        let v = self.semantic.value(&item.context_expr);
                        self.semantic.bind(vars, &item.context_expr, v);
                    }
                }
                self.semantic.scope_mut().no_grad += disabled;
                self.walk_body(&with.body);
                self.semantic.scope_mut().no_grad -= disabled;
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
                sem.scope_mut().declared_global.extend(names);
            }
            Stmt::Nonlocal(g) => {
                let names: Vec<String> = g.names.iter().map(|n| n.as_str().to_string()).collect();
                sem.scope_mut().declared_global.extend(names);
            }
            Stmt::Delete(d) => {
                for t in &d.targets {
                    if let Some(key) = dotted(t) {
                        sem.scope_mut().env.remove(&key);
                    }
                }
            }
            _ => {}
        }
    }

    /// A block under an `if` test (`None`: an `else`, which runs whenever the tests fail).
    fn walk_guarded(&mut self, test: Option<&'a Expr>, body: &'a [Stmt]) {
        let Some(test) = test else {
            self.walk_body(body);
            return;
        };
        let depth = self.semantic.scope().loops.len();
        self.semantic
            .scope_mut()
            .guards
            .push(crate::semantic::model::Guard { test, body, depth });
        self.walk_body(body);
        self.semantic.scope_mut().guards.pop();
    }

    fn walk_loop(&mut self, stmt: &'a Stmt, body: &'a [Stmt], target: Option<(&'a Expr, Value)>) {
        let facts = self.semantic.cached_facts(body, || {
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
        // A silent walk learns values only: what the loop is matters to rules alone.
        let (role, trains) = if self.semantic.reporting {
            let t = self.semantic.training();
            (t.loop_role(stmt), t.loop_trains(stmt))
        } else {
            (crate::semantic::iteration::LoopRole::Other, false)
        };
        self.semantic.scope_mut().loops.push(LoopFrame {
            stmt,
            facts,
            offset: stmt.start(),
            role,
            trains,
        });
        if self.semantic.reporting {
            rules::analyze_loop(self, stmt);
        }
        let depth = self.semantic.scope().loops.len();
        let reporting = self.semantic.reporting;
        // Walk twice only near the top: deeper loops are walked often enough by their parents.
        // Summary passes need no second walk: what they learn converges over their own repeats.
        // Nor does a loop no rule reports in: one that does not train, in code that does not run
        // once per training iteration (values carried around it matter to no finding).
        let twice = trains || self.semantic.iteration().is_some();
        let passes = if reporting && depth <= 2 && twice {
            2
        } else {
            1
        };
        for pass in 0..passes {
            self.semantic.reporting = reporting && pass == passes - 1;
            if let Some((t, v)) = &target {
                self.semantic.bind_plain(t, v.clone());
            }
            self.walk_body(body);
        }
        self.semantic.reporting = reporting;
        self.semantic.scope_mut().loops.pop();
    }

    fn walk_function(&mut self, def: &'a StmtFunctionDef) {
        // A method is a function directly in the body of the class being walked.
        let class = self.semantic.classes.last().copied().filter(|c| {
            c.body
                .iter()
                .any(|s| matches!(s, Stmt::FunctionDef(f) if std::ptr::eq(f, def)))
        });
        if self.semantic.enter_function(def, class).is_none() {
            return;
        }
        if self.semantic.reporting {
            rules::analyze_function(self, def);
        }
        self.walk_body(&def.body);
        self.semantic.leave_function(def, class);
    }

    /// Calls rules on every call expression of the statement itself (not of nested bodies).
    fn visit_calls(&mut self, stmt: &'a Stmt, per_step: bool) {
        // Asked at every statement of the reporting walk: one buffer serves them all.
        let mut calls = std::mem::take(&mut self.calls_buffer);
        calls.clear();
        match stmt {
            Stmt::Expr(e) => collect_calls(&e.value, &mut calls),
            Stmt::Assign(a) => {
                self.semantic.record_layer_lists(&a.value);
                collect_calls(&a.value, &mut calls);
            }
            Stmt::AugAssign(a) => {
                self.semantic.record_layer_lists(&a.value);
                collect_calls(&a.value, &mut calls);
            }
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
            if per_step {
                rules::analyze_call(self, call, stmt);
            }
            self.semantic.record_call(call);
        }
        self.calls_buffer = calls;
    }
}

/// One finding per statement, in source order: where several rules see one statement, a rule
/// about a particular kind of leak (a running statistic, a deep copy of a model) says more than
/// one about keeping anything (a stored graph, a module's state, an unbounded history), and
/// among those left the one that points at the narrowest part of it says the most (`out.cpu()`
/// as a snapshot that is not detached, rather than the `append` that stores it).
fn one_per_statement(mut found: Vec<(TextRange, Diagnostic)>) -> Vec<Diagnostic> {
    let generic = |r: Rule| matches!(r, Rule::LS002 | Rule::LS007 | Rule::LS014);
    // Of two specific rules, the one that reports at the statement itself (LS010 on
    // `h = torch.cat([h, x])`, with its fix) says more about it than one that reports at the
    // loop around it (LS009).
    found.sort_by_key(|(stmt, d)| {
        (
            stmt.start(),
            stmt.end(),
            generic(d.rule),
            !stmt.contains_range(d.range),
            d.range.len(),
            d.rule,
        )
    });
    found.dedup_by(|later, first| later.0 == first.0);
    let mut diagnostics: Vec<Diagnostic> = found.into_iter().map(|(_, d)| d).collect();
    // A rule that reports at a loop header (LS009) from several statements of the loop.
    diagnostics.sort_by_key(|d| (d.range.start(), d.rule));
    diagnostics.dedup_by(|a, b| a.rule == b.rule && a.range == b.range);
    diagnostics
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

//! How a kept value is used after it is kept, for fix safety: detaching what a container or a
//! running total holds changes nothing training computes only when every use of the container
//! is logging, printing, counting or arithmetic that ends in numbers. A use that returns it,
//! stores it in another object, passes it to a function the analysis does not know (a loss, a
//! module, a helper) or calls `.backward()` through it might need the graph: the fix is then
//! unsafe.
//!
//! Storing `x.item()` instead is stricter still: the container then holds Python floats, which
//! are equal to the tensors one by one, but whose sums and means are computed in float64, and
//! which have no tensor methods. That edit is safe only when everything made from the container
//! ends as text (printed, logged, written to TensorBoard) or as a count, never in a comparison,
//! a branch or a value that leaves the function (`Stored::Numbers`).

use ruff_python_ast::visitor::{walk_expr, Visitor};
use ruff_python_ast::{Expr, ExprCall, Stmt, StmtFunctionDef};
use ruff_text_size::{Ranged, TextRange};

use super::model::SemanticModel;
use super::names::{dotted, last_segment};

/// Calls that show or count what they are given: the result is not the value.
fn shows(callee: &str) -> bool {
    matches!(
        last_segment(callee),
        "print"
            | "len"
            | "float"
            | "int"
            | "str"
            | "repr"
            | "round"
            | "format"
            | "bool"
            | "info"
            | "debug"
            | "warning"
            | "warn"
            | "error"
            | "log"
            | "log_dict"
            | "log_metrics"
            | "add_scalar"
            | "add_scalars"
            | "add_histogram"
            | "set_postfix"
            | "set_description"
            | "write"
            | "isnan"
            | "isfinite"
            | "isinf"
    )
}

/// Calls that turn what they are given into text or a count, whatever its type: a float and a
/// 0-d tensor give the same count and print the same number.
fn shows_as_text(callee: &str) -> bool {
    matches!(
        last_segment(callee),
        "print"
            | "len"
            | "str"
            | "repr"
            | "format"
            | "info"
            | "debug"
            | "warning"
            | "warn"
            | "error"
            | "add_scalar"
            | "add_scalars"
            | "set_postfix"
            | "set_description"
            | "write"
    )
}

/// Calls that draw or record what they are given for people to look at (`plt.plot(losses)`,
/// `ax.semilogy(losses)`, `wandb.log({...})`): matplotlib and the experiment trackers take
/// floats and 0-d tensors alike, and nothing reads back what they drew.
fn draws(callee: &str) -> bool {
    let mut parts = callee.split('.');
    let first = parts.next().unwrap_or_default();
    let last = last_segment(callee);
    let plots = matches!(
        last,
        "plot" | "scatter" | "hist" | "semilogy" | "semilogx" | "loglog" | "bar" | "errorbar"
    ) && (matches!(first, "plt" | "pyplot") || first.starts_with("ax"));
    plots
        || matches!(
            callee,
            "wandb.log" | "mlflow.log_metric" | "mlflow.log_metrics"
        )
}

/// What the fix stores in place of the graph-carrying value.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// `x.detach()`: the same tensors, so every number made from them is the same.
    Detached,
    /// `x.item()`: Python floats, equal one by one, but not as sums, and without tensor methods.
    Numbers,
}

/// Calls whose result is made of their arguments' values: aggregation and arithmetic
/// (`sum`, `max`, `np.mean`, `torch.stack`, `statistics.mean`). What they return is used as
/// the value itself.
fn passes_through(callee: &str, stored: Stored) -> bool {
    let last = last_segment(callee);
    if stored == Stored::Numbers {
        // A float becomes a float again; torch's functions want tensors (`torch.stack`).
        return matches!(
            last,
            "sum"
                | "max"
                | "min"
                | "abs"
                | "sorted"
                | "list"
                | "tuple"
                | "reversed"
                | "zip"
                | "float"
                | "int"
                | "round"
                | "bool"
        ) && !callee.contains('.')
            || callee.starts_with("np.")
            || callee.starts_with("numpy.")
            || callee.starts_with("statistics.")
            || callee.starts_with("math.");
    }
    matches!(
        last,
        "sum" | "max" | "min" | "abs" | "sorted" | "list" | "tuple" | "reversed" | "zip"
    ) || (callee.starts_with("np.")
        || callee.starts_with("numpy.")
        || callee.starts_with("statistics.")
        || callee.starts_with("math."))
        || callee.starts_with("torch.")
            && matches!(
                last,
                "stack" | "cat" | "mean" | "sum" | "std" | "tensor" | "as_tensor" | "max" | "min"
            )
}

struct Uses<'k> {
    key: &'k str,
    stored: Stored,
    /// The edited statement: its own use of the key is the one being fixed.
    skip: TextRange,
    safe: bool,
    /// Names and containers filled from the key: their uses must be safe too.
    derived: Vec<String>,
    /// The file's functions: a call of one with the value is followed into its body.
    functions: &'k [&'k StmtFunctionDef],
    /// How many calls deep this look is (followed two deep at most).
    depth: u8,
}

impl Uses<'_> {
    /// Is a call of `callee` an end: its result shows or counts the value, and is not it?
    fn shown(&self, callee: &str) -> bool {
        match self.stored {
            Stored::Detached => shows(callee),
            Stored::Numbers => shows_as_text(callee) || draws(callee),
        }
    }

    /// A test or comparison that reads the value: numbers made from floats may differ from
    /// those made from tensors in their last bits, so a branch on them may change.
    fn tested(&mut self, e: &Expr) {
        match self.stored {
            Stored::Detached => self.visit_children(e),
            Stored::Numbers => {
                // The container's own truth is its length, the same either way.
                if dotted(e).is_some_and(|d| d == self.key) {
                    return;
                }
                if self.carries(e) {
                    self.safe = false;
                }
            }
        }
    }

    fn is_key(&self, e: &Expr) -> bool {
        dotted(e).is_some_and(|d| d == self.key || self.derived.contains(&d))
    }

    fn derive(&mut self, target: &Expr) {
        match target {
            Expr::Name(_) => {
                if let Some(d) = dotted(target) {
                    if !self.derived.contains(&d) {
                        self.derived.push(d);
                    }
                }
            }
            // `log["loss"] = total`: the dict holds it.
            Expr::Subscript(s) => self.derive(&s.value),
            Expr::Tuple(t) => t.elts.iter().for_each(|e| self.derive(e)),
            Expr::List(l) => l.elts.iter().for_each(|e| self.derive(e)),
            Expr::Starred(s) => self.derive(&s.value),
            // `self.best = total`, `other.x = total`: kept by an object whose uses are not
            // followed.
            _ => {
                if dotted(target).is_some_and(|d| d != self.key) {
                    self.safe = false;
                }
            }
        }
    }

    /// Does the value of `e` carry the key (or something filled from it)? Marks the use unsafe
    /// when `e` hands it to code that might need its graph.
    fn carries(&mut self, e: &Expr) -> bool {
        if !self.safe {
            return false;
        }
        match e {
            Expr::Name(_) | Expr::Attribute(_) if self.is_key(e) => true,
            Expr::Attribute(a) => self.carries(&a.value),
            Expr::Subscript(s) => {
                self.carries(&s.slice);
                self.carries(&s.value)
            }
            Expr::BinOp(b) => {
                let l = self.carries(&b.left);
                let r = self.carries(&b.right);
                l || r
            }
            Expr::UnaryOp(u) => self.carries(&u.operand),
            Expr::If(i) => {
                self.tested(&i.test);
                let a = self.carries(&i.body);
                let b = self.carries(&i.orelse);
                a || b
            }
            Expr::FString(_) => {
                self.visit_children(e);
                false
            }
            Expr::Compare(c) if self.stored == Stored::Numbers => {
                let l = self.carries(&c.left);
                if self.any(&c.comparators) || l {
                    self.safe = false;
                }
                false
            }
            Expr::BoolOp(b) if self.stored == Stored::Numbers => {
                if self.any(&b.values) {
                    self.safe = false;
                }
                false
            }
            Expr::Compare(_) | Expr::BoolOp(_) => {
                self.visit_children(e);
                false
            }
            Expr::List(l) => self.any(&l.elts),
            Expr::Tuple(t) => self.any(&t.elts),
            Expr::Set(s) => self.any(&s.elts),
            Expr::Dict(d) => {
                let mut any = false;
                for item in &d.items {
                    any |= self.carries(&item.value);
                }
                any
            }
            Expr::Starred(s) => self.carries(&s.value),
            Expr::Call(call) => {
                if let Expr::Attribute(a) = &*call.func {
                    let method = a.attr.as_str();
                    let on_key = self.carries(&a.value);
                    let args = self.any(&call.arguments.args);
                    if on_key && self.stored == Stored::Numbers {
                        // A float has none of a tensor's methods; the container's own are
                        // the same. What `pop` hands back is the value.
                        return match method {
                            "pop" | "popleft" => true,
                            "clear" | "append" | "extend" | "appendleft" | "index" | "count"
                            | "__len__" | "keys" => false,
                            _ => {
                                self.safe = false;
                                false
                            }
                        };
                    }
                    if on_key {
                        return match method {
                            "backward" => {
                                self.safe = false;
                                false
                            }
                            // Numbers out, or the container managed.
                            "item" | "tolist" | "numpy" | "detach" | "clear" | "append"
                            | "extend" | "pop" | "popleft" | "appendleft" | "index" | "count"
                            | "__len__" | "keys" => false,
                            // A tensor method (`.mean()`, `.cpu()`): still the value.
                            _ => true,
                        };
                    }
                    if args {
                        let callee = dotted(&call.func).unwrap_or_default();
                        if self.shown(&callee) {
                            return false;
                        }
                        if passes_through(&callee, self.stored) {
                            return true;
                        }
                        self.safe = false;
                    }
                    return false;
                }
                let callee = dotted(&call.func).unwrap_or_default();
                let carrying: Vec<usize> = (0..call.arguments.args.len())
                    .filter(|&i| self.carries(&call.arguments.args[i]))
                    .collect();
                // Every argument is visited: a use inside one may be unsafe on its own.
                let mut kwargs = false;
                for k in &call.arguments.keywords {
                    kwargs |= self.carries(&k.value);
                }
                if carrying.is_empty() && !kwargs {
                    return false;
                }
                if self.shown(&callee) {
                    false
                } else if passes_through(&callee, self.stored) {
                    true
                } else if !kwargs && self.follows_into(&callee, &carrying, call) {
                    // A function of the file that ends the value in numbers.
                    false
                } else {
                    self.safe = false;
                    false
                }
            }
            Expr::ListComp(c) => {
                // `[x.item() for x in losses]`: the targets are the elements; the result is
                // what the element expression makes of them.
                for g in &c.generators {
                    if self.carries(&g.iter) {
                        self.derive(&g.target);
                    }
                }
                self.carries(&c.elt)
            }
            Expr::Generator(c) => {
                // `[x.item() for x in losses]`: the targets are the elements; the result is
                // what the element expression makes of them.
                for g in &c.generators {
                    if self.carries(&g.iter) {
                        self.derive(&g.target);
                    }
                }
                self.carries(&c.elt)
            }
            Expr::Lambda(l) => {
                // A callback given the value might do anything with it.
                if self.carries(&l.body) {
                    self.safe = false;
                }
                false
            }
            _ => {
                self.visit_children(e);
                false
            }
        }
    }

    /// Does a call of the file's function `callee`, given the value at the positions
    /// `carrying`, use it only as logging, counting or arithmetic ending in numbers, never
    /// returning it (`explained_variance(history, returns)` ending in `.item()`)?
    fn follows_into(&self, callee: &str, carrying: &[usize], call: &ExprCall) -> bool {
        if self.depth >= 2 || call.arguments.args.iter().any(Expr::is_starred_expr) {
            return false;
        }
        let Some(f) = self.functions.iter().find(|f| f.name.as_str() == callee) else {
            return false;
        };
        let params = &f.parameters;
        if params.vararg.is_some() || !params.posonlyargs.is_empty() {
            return false;
        }
        carrying.iter().all(|&i| {
            let Some(p) = params.args.get(i) else {
                return false;
            };
            let mut inner = Uses {
                key: p.parameter.name.as_str(),
                stored: self.stored,
                skip: TextRange::default(),
                safe: true,
                derived: Vec::new(),
                functions: self.functions,
                depth: self.depth + 1,
            };
            for _ in 0..2 {
                inner.body(&f.body);
            }
            inner.safe
        })
    }

    fn any(&mut self, elts: &[Expr]) -> bool {
        let mut any = false;
        for e in elts {
            any |= self.carries(e);
        }
        any
    }

    /// Children of an expression that ends in a bool or a string: any use there is safe, but a
    /// call inside it may still hand the value on.
    fn visit_children(&mut self, e: &Expr) {
        struct C<'u, 'k> {
            uses: &'u mut Uses<'k>,
        }
        impl<'a> Visitor<'a> for C<'_, '_> {
            fn visit_expr(&mut self, expr: &'a Expr) {
                if let Expr::Call(_) = expr {
                    self.uses.carries(expr);
                    return;
                }
                walk_expr(self, expr);
            }
        }
        walk_expr(&mut C { uses: self }, e);
    }

    fn stmt(&mut self, stmt: &Stmt) {
        if !self.safe || self.skip.contains_range(stmt.range()) {
            return;
        }
        match stmt {
            // A function that binds a local of the same name reads its own, not this one.
            // The names a function fills from the value are its locals: another method's
            // `loss` is not the `loss` this one computed from the container (twice: names
            // derived late in the body are known on the second pass).
            Stmt::FunctionDef(f) => {
                if self.key.contains('.') || !super::facts::local_bindings(f).contains(self.key) {
                    let outer = self.derived.clone();
                    self.body(&f.body);
                    self.body(&f.body);
                    self.derived = outer;
                }
            }
            Stmt::ClassDef(c) => self.body(&c.body),
            Stmt::Return(r) => {
                if let Some(v) = &r.value {
                    if self.carries(v) {
                        self.safe = false;
                    }
                }
            }
            Stmt::Expr(e) => {
                self.carries(&e.value);
            }
            Stmt::Assign(a) => {
                let resets = a.targets.iter().all(|t| self.is_key(t));
                if self.carries(&a.value) && !resets {
                    for t in &a.targets {
                        if !self.is_key(t) {
                            self.derive(t);
                        }
                    }
                }
            }
            Stmt::AnnAssign(a) => {
                if let Some(v) = &a.value {
                    if self.carries(v) && !self.is_key(&a.target) {
                        self.derive(&a.target);
                    }
                }
            }
            Stmt::AugAssign(a) => {
                if self.carries(&a.value) && !self.is_key(&a.target) {
                    self.derive(&a.target);
                }
            }
            Stmt::For(f) => {
                if self.carries(&f.iter) {
                    self.derive(&f.target);
                }
                self.body(&f.body);
                self.body(&f.orelse);
            }
            Stmt::While(w) => {
                self.tested(&w.test);
                self.body(&w.body);
                self.body(&w.orelse);
            }
            Stmt::If(i) => {
                self.tested(&i.test);
                self.body(&i.body);
                for c in &i.elif_else_clauses {
                    if let Some(t) = &c.test {
                        self.tested(t);
                    }
                    self.body(&c.body);
                }
            }
            Stmt::With(w) => {
                for item in &w.items {
                    self.carries(&item.context_expr);
                }
                self.body(&w.body);
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
            Stmt::Assert(a) => self.tested(&a.test),
            Stmt::Delete(_) | Stmt::Pass(_) | Stmt::Break(_) | Stmt::Continue(_) => {}
            Stmt::Global(_) | Stmt::Nonlocal(_) | Stmt::Import(_) | Stmt::ImportFrom(_) => {}
            // Anything else that mentions the key (`yield`, `raise`, `match`): not followed.
            other => {
                let mut m = Mentions {
                    uses: self,
                    found: false,
                };
                ruff_python_ast::visitor::walk_stmt(&mut m, other);
                if m.found {
                    self.safe = false;
                }
            }
        }
    }

    fn body(&mut self, body: &[Stmt]) {
        for s in body {
            self.stmt(s);
        }
    }
}

struct Mentions<'u, 'k> {
    uses: &'u Uses<'k>,
    found: bool,
}

impl<'a> Visitor<'a> for Mentions<'_, '_> {
    fn visit_expr(&mut self, expr: &'a Expr) {
        if self.uses.is_key(expr) {
            self.found = true;
        }
        walk_expr(self, expr);
    }
}

impl SemanticModel<'_> {
    /// Is every use of `key` (a local of the current function, `self.<attr>` in any method of
    /// the class and through objects elsewhere in the file, or a global anywhere in the file),
    /// other than the statement at `skip`, logging, printing, counting or arithmetic that ends
    /// in numbers?
    pub fn only_numeric_uses(&self, key: &str, skip: TextRange) -> bool {
        self.uses_end_in(key, skip, Stored::Detached)
    }

    /// Does everything made from `key` (as `only_numeric_uses` follows it) end as text or a
    /// count, so that storing Python numbers in it in place of 0-d tensors changes nothing
    /// training computes?
    pub fn only_text_uses(&self, key: &str, skip: TextRange) -> bool {
        self.uses_end_in(key, skip, Stored::Numbers)
    }

    /// Are all of `key`'s readers in this file? A parameter's container is its caller's, and
    /// the attributes of a class other files use may be read there: a float where they expect
    /// a tensor (`torch.stack(trainer.losses)`) would fail, so numbers are not stored there.
    fn numbers_stay_here(&self, key: &str, attr: Option<&str>) -> bool {
        if attr.is_some() {
            return self
                .class()
                .is_some_and(|c| !self.external.used_elsewhere.contains(c.name.as_str()));
        }
        let root = key.split('.').next().unwrap_or(key);
        !self.function().is_some_and(|f| {
            f.parameters
                .iter_non_variadic_params()
                .any(|p| p.parameter.name.as_str() == root)
        })
    }

    fn uses_end_in(&self, key: &str, skip: TextRange, stored: Stored) -> bool {
        let functions: Vec<&StmtFunctionDef> = self
            .suite()
            .iter()
            .filter_map(|s| match s {
                Stmt::FunctionDef(f) => Some(f),
                _ => None,
            })
            .collect();
        let mut uses = Uses {
            key,
            stored,
            skip,
            safe: true,
            derived: Vec::new(),
            functions: &functions,
            depth: 0,
        };
        let attr = key.strip_prefix("self.");
        if stored == Stored::Numbers && !self.numbers_stay_here(key, attr) {
            return false;
        }
        let body: &[Stmt] = match (attr, self.function(), self.class()) {
            (Some(_), _, Some(c)) => &c.body,
            (Some(_), _, None) => return false,
            // A local, even one named as a global is (`losses` in a function and in the
            // script): read in its function alone.
            (None, Some(f), _)
                if !self.facts.globals.contains_key(key)
                    || super::facts::local_bindings(f).contains(key) =>
            {
                &f.body
            }
            _ => self.suite(),
        };
        // Twice: names derived late in the body are known on the second pass.
        for _ in 0..2 {
            uses.body(body);
        }
        // The attribute read through another object elsewhere in the file (`log.losses` in
        // `main()`): each such name's uses in its own function must be as safe.
        if let (Some(attr), Some(class)) = (attr, self.class()) {
            if !uses.safe {
                return false;
            }
            let Some(reads) = reads_elsewhere(self.suite(), attr, class.range()) else {
                return false;
            };
            for (name, body) in reads {
                let mut there = Uses {
                    key: &name,
                    stored,
                    skip,
                    safe: true,
                    derived: Vec::new(),
                    functions: &functions,
                    depth: 0,
                };
                for _ in 0..2 {
                    there.body(body);
                }
                if !there.safe {
                    return false;
                }
            }
        }
        uses.safe
    }
}

/// Where `.attr` is read outside `inside` in the file: each read's dotted name
/// (`log.losses`) with the body of the function it is in (the module's, at top level),
/// once per pair. None when a read is not a dotted name (`make().losses`): its uses cannot
/// be followed.
fn reads_elsewhere<'s>(
    suite: &'s [Stmt],
    attr: &str,
    inside: TextRange,
) -> Option<Vec<(String, &'s [Stmt])>> {
    struct R<'a, 's> {
        attr: &'a str,
        inside: TextRange,
        scope: &'s [Stmt],
        found: Vec<(String, &'s [Stmt])>,
        opaque: bool,
    }
    impl<'s> Visitor<'s> for R<'_, 's> {
        fn visit_stmt(&mut self, stmt: &'s Stmt) {
            if let Stmt::FunctionDef(f) = stmt {
                let outer = std::mem::replace(&mut self.scope, &f.body);
                ruff_python_ast::visitor::walk_stmt(self, stmt);
                self.scope = outer;
            } else {
                ruff_python_ast::visitor::walk_stmt(self, stmt);
            }
        }
        fn visit_expr(&mut self, expr: &'s Expr) {
            if let Expr::Attribute(a) = expr {
                if a.attr.as_str() == self.attr && !self.inside.contains_range(expr.range()) {
                    match dotted(expr) {
                        Some(d) => {
                            let scope = self.scope;
                            if !self
                                .found
                                .iter()
                                .any(|(n, b)| *n == d && std::ptr::eq(*b, scope))
                            {
                                self.found.push((d, scope));
                            }
                        }
                        None => self.opaque = true,
                    }
                }
            }
            walk_expr(self, expr);
        }
    }
    let mut r = R {
        attr,
        inside,
        scope: suite,
        found: Vec::new(),
        opaque: false,
    };
    for s in suite {
        r.visit_stmt(s);
    }
    (!r.opaque).then_some(r.found)
}

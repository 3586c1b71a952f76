//! The grad mode a hook runs in: that of the calls that trigger it. A hook defined and
//! registered inside a function whose every call of the hooked model runs under `no_grad`
//! (a feature extractor run once in dataset preprocessing, an embedding helper) receives
//! outputs that carry no graph.

use ruff_python_ast::visitor::{walk_expr, walk_stmt, Visitor};
use ruff_python_ast::{Expr, Stmt, StmtFunctionDef};

use super::hook_scope::registered_on;
use super::iteration::disables_grad_expr;
use super::model::{ScopeKind, SemanticModel};

/// Methods of a module that configure or inspect it without running its forward pass.
const NOT_A_FORWARD: &[&str] = &[
    "eval",
    "train",
    "to",
    "cuda",
    "cpu",
    "half",
    "float",
    "double",
    "bfloat16",
    "modules",
    "named_modules",
    "children",
    "named_children",
    "parameters",
    "named_parameters",
    "buffers",
    "apply",
    "requires_grad_",
    "zero_grad",
    "state_dict",
    "load_state_dict",
];

impl SemanticModel<'_> {
    /// Is the hook `hook`, a function nested in the function that encloses it, triggered only by
    /// calls of the hooked model that this enclosing function makes under `no_grad`?
    pub fn hook_runs_without_grad(&self, hook: &StmtFunctionDef) -> bool {
        let Some(outer) = self.scopes.len().checked_sub(2).map(|i| &self.scopes[i]) else {
            return false;
        };
        let ScopeKind::Function { def: outer, .. } = outer.kind else {
            return false;
        };
        let roots = hooked_roots(&outer.body, hook.name.as_str());
        if roots.is_empty() {
            return false;
        }
        let decorated_off = outer
            .decorator_list
            .iter()
            .any(|d| disables_grad_expr(self.facts, &d.expression));
        let mut runs = Runs {
            roots: &roots,
            no_grad: u32::from(decorated_off),
            facts: self.facts,
            with_grad: false,
            any: false,
        };
        for s in &outer.body {
            runs.visit_stmt(s);
        }
        runs.any && !runs.with_grad
    }
}

/// The names whose modules get `hook` registered on them in `body`: the head of the receiver
/// (`vgg.features[20].register_forward_hook(hook)` -> `vgg`), or for a loop variable the head
/// of what the loop goes through (`for m in model.modules(): m.register_forward_hook(hook)`).
fn hooked_roots(body: &[Stmt], hook: &str) -> Vec<String> {
    struct R<'h> {
        hook: &'h str,
        /// Loop targets and the head of what they iterate.
        loops: Vec<(String, Option<String>)>,
        roots: Vec<String>,
    }
    impl<'a> Visitor<'a> for R<'_> {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            match stmt {
                Stmt::FunctionDef(_) | Stmt::ClassDef(_) => {}
                Stmt::For(f) => {
                    if let Expr::Name(t) = &*f.target {
                        self.loops.push((t.id.to_string(), head(&f.iter)));
                        walk_stmt(self, stmt);
                        self.loops.pop();
                    } else {
                        walk_stmt(self, stmt);
                    }
                }
                _ => walk_stmt(self, stmt),
            }
        }
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Call(call) = expr {
                if let Some(h) = registered_on(call, self.hook).and_then(head) {
                    let root = self
                        .loops
                        .iter()
                        .rev()
                        .find(|(t, _)| *t == h)
                        .map_or(Some(h), |(_, iter)| iter.clone());
                    self.roots.extend(root);
                }
            }
            walk_expr(self, expr);
        }
    }
    let mut r = R {
        hook,
        loops: Vec::new(),
        roots: Vec::new(),
    };
    for s in body {
        r.visit_stmt(s);
    }
    r.roots
}

/// The first name of an attribute, subscript or call chain (`vgg.features[20]` -> `vgg`).
fn head(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Name(n) => Some(n.id.to_string()),
        Expr::Attribute(a) => head(&a.value),
        Expr::Subscript(s) => head(&s.value),
        Expr::Call(c) => head(&c.func),
        _ => None,
    }
}

/// Calls that run a hooked model, and whether any runs with grad on.
struct Runs<'r> {
    roots: &'r [String],
    no_grad: u32,
    facts: &'r super::facts::ModuleFacts,
    with_grad: bool,
    any: bool,
}

impl<'a> Visitor<'a> for Runs<'_> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::FunctionDef(_) | Stmt::ClassDef(_) => {}
            Stmt::With(w) => {
                let off = w
                    .items
                    .iter()
                    .filter(|i| disables_grad_expr(self.facts, &i.context_expr))
                    .count() as u32;
                for i in &w.items {
                    self.visit_expr(&i.context_expr);
                }
                self.no_grad += off;
                for s in &w.body {
                    self.visit_stmt(s);
                }
                self.no_grad -= off;
            }
            _ => walk_stmt(self, stmt),
        }
    }
    fn visit_expr(&mut self, expr: &'a Expr) {
        if let Expr::Call(call) = expr {
            let runs_forward = match &*call.func {
                Expr::Attribute(a) => {
                    let m = a.attr.as_str();
                    !(NOT_A_FORWARD.contains(&m) || m.starts_with("register_"))
                }
                _ => true,
            };
            if runs_forward && head(&call.func).is_some_and(|h| self.roots.contains(&h)) {
                self.any = true;
                if self.no_grad == 0 {
                    self.with_grad = true;
                }
            }
        }
        walk_expr(self, expr);
    }
}

//! How long a hook's closure lives: as long as its registration. A list a hook closes over
//! (`grads_list` in `def hook(grad): grads_list.append(grad)`) outlives one call of the function
//! that owns it only while the hook stays registered. A hook registered on a tensor or module
//! that function makes (`input_grad.register_hook(save_grad())`) goes with that object when the
//! call returns; a hook whose handle the function removes (`handle.remove()`, `for h in hooks:
//! h.remove()`), or hands to its caller to remove (`return hooks`), lasts as the registration's
//! owner chooses, not one step after another by itself.

use ruff_python_ast::visitor::{walk_expr, walk_stmt, Visitor};
use ruff_python_ast::{Expr, ExprCall, Stmt, StmtFunctionDef};
use rustc_hash::FxHashSet;

use super::model::{ScopeKind, SemanticModel};

impl SemanticModel<'_> {
    /// Is the closure cell `cell`, grown by the hook being checked, held only while registrations
    /// that end with its owner's call (or are handed out to be removed) last? `false` when the
    /// owner registers the hook on what outlives the call and keeps no handle.
    pub fn hook_cell_scoped(&self, cell: &str) -> bool {
        let n = self.scopes.len();
        // The function whose local the cell is, and its child on the way to the hook.
        let Some(owner) = (0..n.saturating_sub(1)).rev().find(|&i| {
            self.scopes[i].env.contains_key(cell) || self.scopes[i].params.contains(cell)
        }) else {
            return false;
        };
        let ScopeKind::Function { def: owner_def, .. } = self.scopes[owner].kind else {
            return false;
        };
        let Some(ScopeKind::Function { def: child, .. }) =
            self.scopes.get(owner + 1).map(|s| &s.kind)
        else {
            return false;
        };
        let registrations = registrations(owner_def, child.name.as_str());
        if registrations.is_empty() {
            return false;
        }
        let facts = OwnerFacts::of(owner_def);
        registrations.iter().all(|r| {
            // A name the owner binds (a parameter it rebinds too: `x = x.clone()`) is its own.
            let on_local = r
                .receiver
                .as_ref()
                .is_some_and(|h| facts.assigned.contains(h) && !facts.escapes.contains(h));
            let handle_ends = r
                .handle
                .as_ref()
                .is_some_and(|h| facts.removed.contains(h) || facts.returned.contains(h));
            on_local || handle_ends || r.returned
        })
    }
}

/// One `X.register_*hook(...)` of the hook (or the factory that makes it).
struct Registration {
    /// The name `X` is when it is a plain name.
    receiver: Option<String>,
    /// The name its handle is bound to or appended into.
    handle: Option<String>,
    /// `return X.register_forward_hook(hook)`.
    returned: bool,
}

/// What `call` registers `hook` on, when it is a `register_*hook` call given `hook` (or what a
/// call of `hook` makes: `x.register_hook(save_grad())`): its receiver.
pub(super) fn registered_on<'c>(call: &'c ExprCall, hook: &str) -> Option<&'c Expr> {
    let Expr::Attribute(a) = &*call.func else {
        return None;
    };
    let m = a.attr.as_str();
    if !(m.starts_with("register_") && m.ends_with("hook")) {
        return None;
    }
    let names_hook = |e: &Expr| match e {
        Expr::Name(n) => n.id.as_str() == hook,
        Expr::Call(c) => matches!(&*c.func, Expr::Name(n) if n.id.as_str() == hook),
        _ => false,
    };
    call.arguments
        .args
        .iter()
        .any(names_hook)
        .then_some(&*a.value)
}

/// The name a registration's receiver is bound to, when it is a plain name.
fn registers(call: &ExprCall, hook: &str) -> Option<Option<String>> {
    registered_on(call, hook).map(|r| match r {
        Expr::Name(n) => Some(n.id.to_string()),
        _ => None,
    })
}

/// The registrations of `hook` in `owner`'s own body (not in functions it defines).
fn registrations(owner: &StmtFunctionDef, hook: &str) -> Vec<Registration> {
    struct R<'h> {
        hook: &'h str,
        out: Vec<Registration>,
        /// Calls already recorded with their handle, by position.
        seen: FxHashSet<u32>,
    }
    impl R<'_> {
        fn record(&mut self, value: &Expr, handle: Option<String>, returned: bool) {
            if let Expr::Call(call) = value {
                if let Some(receiver) = registers(call, self.hook) {
                    self.seen
                        .insert(u32::from(ruff_text_size::Ranged::start(call)));
                    self.out.push(Registration {
                        receiver,
                        handle,
                        returned,
                    });
                }
            }
        }
    }
    impl<'a> Visitor<'a> for R<'_> {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            match stmt {
                Stmt::FunctionDef(_) | Stmt::ClassDef(_) => return,
                Stmt::Assign(a) => {
                    if let [Expr::Name(t)] = a.targets.as_slice() {
                        self.record(&a.value, Some(t.id.to_string()), false);
                    }
                }
                Stmt::Return(r) => {
                    if let Some(v) = &r.value {
                        self.record(v, None, true);
                    }
                }
                Stmt::Expr(e) => {
                    // `hooks.append(layer.register_forward_hook(hook))`
                    if let Expr::Call(c) = &*e.value {
                        if let Expr::Attribute(a) = &*c.func {
                            if matches!(a.attr.as_str(), "append" | "extend") {
                                if let (Expr::Name(list), [arg]) = (&*a.value, &*c.arguments.args) {
                                    self.record(arg, Some(list.id.to_string()), false);
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
            walk_stmt(self, stmt);
        }
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Call(call) = expr {
                let at = u32::from(ruff_text_size::Ranged::start(call));
                if !self.seen.contains(&at) {
                    if let Some(receiver) = registers(call, self.hook) {
                        self.seen.insert(at);
                        self.out.push(Registration {
                            receiver,
                            handle: None,
                            returned: false,
                        });
                    }
                }
            }
            walk_expr(self, expr);
        }
    }
    let mut r = R {
        hook,
        out: Vec::new(),
        seen: FxHashSet::default(),
    };
    for s in &owner.body {
        r.visit_stmt(s);
    }
    r.out
}

/// What the owner's body does with its names.
#[derive(Default)]
struct OwnerFacts {
    /// Bound by an assignment.
    assigned: FxHashSet<String>,
    /// Returned, or stored into an attribute, item or global: they outlive the call.
    escapes: FxHashSet<String>,
    /// Handles removed: `h.remove()`, or every element of `hooks` by `for h in hooks: h.remove()`.
    removed: FxHashSet<String>,
    /// Names in a `return` value.
    returned: FxHashSet<String>,
}

impl OwnerFacts {
    fn of(owner: &StmtFunctionDef) -> Self {
        struct F {
            facts: OwnerFacts,
            loops: Vec<(String, String)>,
        }
        impl<'a> Visitor<'a> for F {
            fn visit_stmt(&mut self, stmt: &'a Stmt) {
                match stmt {
                    Stmt::FunctionDef(_) | Stmt::ClassDef(_) => return,
                    Stmt::Assign(a) => {
                        for t in &a.targets {
                            match t {
                                Expr::Name(n) => {
                                    self.facts.assigned.insert(n.id.to_string());
                                }
                                Expr::Attribute(_) | Expr::Subscript(_) => {
                                    names_in(&a.value, &mut self.facts.escapes);
                                }
                                _ => {}
                            }
                        }
                    }
                    Stmt::Return(r) => {
                        if let Some(v) = &r.value {
                            names_in(v, &mut self.facts.escapes);
                            names_in(v, &mut self.facts.returned);
                        }
                    }
                    Stmt::For(f) => {
                        if let (Expr::Name(t), Expr::Name(it)) = (&*f.target, &*f.iter) {
                            self.loops.push((t.id.to_string(), it.id.to_string()));
                            walk_stmt(self, stmt);
                            self.loops.pop();
                            return;
                        }
                    }
                    _ => {}
                }
                walk_stmt(self, stmt);
            }
            fn visit_expr(&mut self, expr: &'a Expr) {
                if let Expr::Call(c) = expr {
                    if let Expr::Attribute(a) = &*c.func {
                        if a.attr.as_str() == "remove" && c.arguments.args.is_empty() {
                            if let Expr::Name(n) = &*a.value {
                                let name = n.id.to_string();
                                if let Some((_, list)) = self.loops.iter().find(|(t, _)| *t == name)
                                {
                                    self.facts.removed.insert(list.clone());
                                }
                                self.facts.removed.insert(name);
                            }
                        }
                    }
                }
                walk_expr(self, expr);
            }
        }
        let mut f = F {
            facts: OwnerFacts::default(),
            loops: Vec::new(),
        };
        for s in &owner.body {
            f.visit_stmt(s);
        }
        f.facts
    }
}

fn names_in(expr: &Expr, out: &mut FxHashSet<String>) {
    match expr {
        Expr::Name(n) => {
            out.insert(n.id.to_string());
        }
        Expr::Tuple(t) => t.elts.iter().for_each(|e| names_in(e, out)),
        Expr::List(l) => l.elts.iter().for_each(|e| names_in(e, out)),
        _ => {}
    }
}

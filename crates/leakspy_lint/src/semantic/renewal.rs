//! Objects a loop renews: `episode[i] = EpisodeBuffer()` under `if done:` in the loop that
//! calls `episode[i].put(...)` on every step. The loop replaces the object it grows whenever a
//! condition says its stretch is over (an episode, a segment), so each object lives for one
//! stretch: what it keeps is bounded by the stretch, not by the run. The holder's first value
//! made before the loop (`episode = [EpisodeBuffer() for _ in range(n)]`) is renewed the same
//! way. A loop that makes one object per iteration without a condition (`for cfg in configs:
//! trainer = Trainer(cfg); trainer.fit()`) renews nothing: each object may live through a whole
//! training run.

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, Stmt};
use ruff_text_size::{Ranged, TextSize};
use rustc_hash::{FxHashMap, FxHashSet};

use super::located::child_blocks;
use super::names::dotted;

/// The offsets of the constructor-like calls (`Name(...)`, `mod.Name(...)`) that a loop of
/// their function renews, and those of their holders' first values, in every scope of
/// `suite` (the module's code and each function's, apart).
pub fn renewed_calls(suite: &[Stmt]) -> FxHashSet<TextSize> {
    let mut out = FxHashSet::default();
    scope(suite, &mut out);
    out
}

/// One binding of a holder to a call's result.
struct Site {
    offset: TextSize,
    /// Made under an `if` inside a loop that calls a method through the holder.
    renews: bool,
}

fn scope(body: &[Stmt], out: &mut FxHashSet<TextSize>) {
    // (callee, holder) -> sites
    let mut sites: FxHashMap<(String, String), Vec<Site>> = FxHashMap::default();
    let mut walk = Walk {
        loops: Vec::new(),
        sites: &mut sites,
        nested: Vec::new(),
    };
    walk.block(body);
    let nested = std::mem::take(&mut walk.nested);
    for group in sites.values() {
        if group.iter().any(|s| s.renews) {
            out.extend(group.iter().map(|s| s.offset));
        }
    }
    for body in nested {
        scope(body, out);
    }
}

struct Walk<'a, 'm> {
    /// The bodies of the loops around the statement, innermost last, each with whether an
    /// `if` lies between it and the statement.
    loops: Vec<(&'a [Stmt], bool)>,
    sites: &'m mut FxHashMap<(String, String), Vec<Site>>,
    nested: Vec<&'a [Stmt]>,
}

impl<'a> Walk<'a, '_> {
    fn block(&mut self, body: &'a [Stmt]) {
        for stmt in body {
            self.stmt(stmt);
        }
    }

    fn stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::FunctionDef(f) => self.nested.push(&f.body),
            Stmt::ClassDef(c) => {
                for s in &c.body {
                    if let Stmt::FunctionDef(f) = s {
                        self.nested.push(&f.body);
                    }
                }
            }
            Stmt::For(f) => {
                self.looped(&f.body);
                self.block(&f.orelse);
            }
            Stmt::While(w) => {
                self.looped(&w.body);
                self.block(&w.orelse);
            }
            Stmt::If(_) => {
                let saved: Vec<bool> = self.loops.iter().map(|l| l.1).collect();
                for l in &mut self.loops {
                    l.1 = true;
                }
                for block in child_blocks(stmt) {
                    self.block(block);
                }
                for (l, s) in self.loops.iter_mut().zip(saved) {
                    l.1 = s;
                }
            }
            Stmt::Assign(a) => {
                let [target] = &a.targets[..] else { return };
                self.binding(target, &a.value);
            }
            // `with`, `try`, `match`: their blocks run where the statement is.
            _ => {
                for block in child_blocks(stmt) {
                    self.block(block);
                }
            }
        }
    }

    fn looped(&mut self, body: &'a [Stmt]) {
        self.loops.push((body, false));
        self.block(body);
        self.loops.pop();
    }

    fn binding(&mut self, target: &Expr, value: &Expr) {
        let Some(holder) = holder_of(target) else {
            return;
        };
        let call = match value {
            Expr::Call(c) => c,
            Expr::ListComp(l) => match &*l.elt {
                Expr::Call(c) => c,
                _ => return,
            },
            Expr::List(l) => match &l.elts[..] {
                [Expr::Call(c)] => c,
                _ => return,
            },
            _ => return,
        };
        let Some(callee) = dotted(&call.func) else {
            return;
        };
        // Constructors by the convention of their names; a factory function's result is not
        // known to be a new object.
        if !super::names::last_segment(&callee).starts_with(|c: char| c.is_ascii_uppercase()) {
            return;
        }
        let renews = self
            .loops
            .iter()
            .any(|(body, under_if)| *under_if && calls_through(body, &holder));
        self.sites.entry((callee, holder)).or_default().push(Site {
            offset: call.start(),
            renews,
        });
    }
}

/// The name or attribute chain a target binds, through subscripts (`episode[i]` binds into
/// `episode`).
fn holder_of(target: &Expr) -> Option<String> {
    match target {
        Expr::Subscript(s) => holder_of(&s.value),
        e => dotted(e),
    }
}

/// Does `body` call a method through `holder` (`holder.put(...)`, `holder[i].put(...)`)?
fn calls_through(body: &[Stmt], holder: &str) -> bool {
    struct Calls<'h> {
        holder: &'h str,
        found: bool,
    }
    impl<'a> Visitor<'a> for Calls<'_> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::Call(c) = expr {
                if let Expr::Attribute(a) = &*c.func {
                    if holder_of(&a.value).as_deref() == Some(self.holder) {
                        self.found = true;
                    }
                }
            }
            visitor::walk_expr(self, expr);
        }
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            if !matches!(stmt, Stmt::FunctionDef(_) | Stmt::ClassDef(_)) {
                visitor::walk_stmt(self, stmt);
            }
        }
    }
    let mut calls = Calls {
        holder,
        found: false,
    };
    calls.visit_body(body);
    calls.found
}

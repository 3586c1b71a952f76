//! Where a statement sits in its function (the compound statements around it, its block), and
//! what that says about how often it runs: once per training step, only every N steps (under a
//! `step % N` test), only after an error (in an `except` handler), or a few deliberate rounds.

use ruff_python_ast::{Expr, Stmt};
use ruff_text_size::Ranged;

use super::iteration::Grain;
use super::model::SemanticModel;

/// Where a statement sits: the compound statements around it (outermost first), the block that
/// holds it and its index in that block.
pub struct Located<'s> {
    pub ancestors: Vec<&'s Stmt>,
    pub body: &'s [Stmt],
    pub index: usize,
}

impl<'s> Located<'s> {
    pub fn stmt(&self) -> &'s Stmt {
        &self.body[self.index]
    }
}

/// The blocks directly inside a compound statement (not nested function or class bodies).
pub fn child_blocks(stmt: &Stmt) -> Vec<&[Stmt]> {
    match stmt {
        Stmt::For(s) => vec![&s.body, &s.orelse],
        Stmt::While(s) => vec![&s.body, &s.orelse],
        Stmt::If(s) => {
            let mut v: Vec<&[Stmt]> = vec![&s.body];
            v.extend(s.elif_else_clauses.iter().map(|c| c.body.as_slice()));
            v
        }
        Stmt::With(s) => vec![&s.body],
        Stmt::Try(s) => {
            let mut v: Vec<&[Stmt]> = vec![&s.body];
            for h in &s.handlers {
                let ruff_python_ast::ExceptHandler::ExceptHandler(h) = h;
                v.push(&h.body);
            }
            v.push(&s.orelse);
            v.push(&s.finalbody);
            v
        }
        Stmt::Match(m) => m.cases.iter().map(|c| c.body.as_slice()).collect(),
        _ => vec![],
    }
}

/// Finds the statement with exactly `target` as its range under `body`, following only the
/// statements whose range contains it (cheap: one path down the tree).
pub fn locate(body: &[Stmt], target: ruff_text_size::TextRange) -> Option<Located<'_>> {
    for (index, stmt) in body.iter().enumerate() {
        if stmt.range() == target {
            return Some(Located {
                ancestors: Vec::new(),
                body,
                index,
            });
        }
        if stmt.range().contains_range(target) {
            for block in child_blocks(stmt) {
                if let Some(mut found) = locate(block, target) {
                    found.ancestors.insert(0, stmt);
                    return Some(found);
                }
            }
            return None;
        }
    }
    None
}

/// The statements of the walk's current root: the function body, or the outermost loop of
/// module-level code.
pub fn scope_root<'s>(model: &SemanticModel<'s>) -> Option<&'s [Stmt]> {
    if let Some(f) = model.function() {
        return Some(&f.body);
    }
    model.loops().first().map(|l| std::slice::from_ref(l.stmt))
}

/// Locates `stmt` in the current function (or module-level loop).
pub fn locate_in_scope<'s>(model: &SemanticModel<'s>, stmt: &Stmt) -> Option<Located<'s>> {
    locate(scope_root(model)?, stmt.range())
}

/// Runs once per training step: in a training loop that is not an epoch, generation or
/// episode loop, or in a function that runs once per step (`training_step`, a function that
/// backpropagates, one called from a step loop).
pub fn runs_every_step(model: &SemanticModel) -> bool {
    model
        .iteration()
        .is_some_and(|it| it.grain() == Grain::Step)
}

/// Is the located statement under an `if` (below the innermost loop or the function body)
/// whose test uses `%`, like `if step % 100 == 0:`? Such code runs every N steps.
pub fn under_modulo_guard(located: &Located) -> bool {
    for stmt in located.ancestors.iter().rev() {
        match stmt {
            Stmt::For(_) | Stmt::While(_) => return false,
            Stmt::If(i) => {
                let tests = std::iter::once(&*i.test)
                    .chain(i.elif_else_clauses.iter().filter_map(|c| c.test.as_ref()));
                for t in tests {
                    if contains_modulo(t) {
                        return true;
                    }
                }
            }
            _ => {}
        }
    }
    false
}

fn contains_modulo(expr: &Expr) -> bool {
    use ruff_python_ast::visitor::{walk_expr, Visitor};
    struct M(bool);
    impl<'a> Visitor<'a> for M {
        fn visit_expr(&mut self, expr: &'a Expr) {
            if let Expr::BinOp(b) = expr {
                if matches!(b.op, ruff_python_ast::Operator::Mod) {
                    self.0 = true;
                }
            }
            walk_expr(self, expr);
        }
    }
    let mut m = M(false);
    m.visit_expr(expr);
    m.0
}

/// Is the located statement inside an `except` handler (below the innermost loop)?
pub fn in_except_handler(located: &Located, target: ruff_text_size::TextRange) -> bool {
    for stmt in located.ancestors.iter().rev() {
        match stmt {
            Stmt::For(_) | Stmt::While(_) => return false,
            Stmt::Try(t) if t.handlers.iter().any(|h| h.range().contains_range(target)) => {
                return true;
            }
            _ => {}
        }
    }
    false
}

/// `for _ in range(5):` — a few deliberate rounds (collecting until finalizers have run), not a
/// training loop.
pub fn few_rounds(stmt: &Stmt) -> bool {
    let Stmt::For(f) = stmt else { return false };
    let Expr::Call(call) = &*f.iter else {
        return false;
    };
    if !matches!(&*call.func, Expr::Name(n) if n.id.as_str() == "range") {
        return false;
    }
    !call.arguments.args.is_empty()
        && call.arguments.args.iter().all(|a| match a {
            Expr::NumberLiteral(n) => n
                .value
                .as_int()
                .and_then(|i| i.as_u64())
                .is_some_and(|v| v <= 100),
            _ => false,
        })
}

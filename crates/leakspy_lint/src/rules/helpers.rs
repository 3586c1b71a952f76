//! Wording and edits several rules share.

use ruff_python_ast::Expr;
use ruff_text_size::Ranged;

use crate::checker::{Checker, Holder, Lifetime, Until};
use crate::diagnostic::Edit;
use crate::semantic::mutation::Mutation;
use crate::semantic::value::Value;

/// What a stored graph-carrying value keeps alive. After `.backward()` the saved activations
/// are freed and the chain of autograd nodes remains; without it, whole activations stay.
pub(crate) fn retained(checker: &Checker, value: &Value) -> &'static str {
    let backpropagated = value.origin().is_some_and(|o| o.backpropagated);
    // A framework's step hook (`training_step`) returns the loss for the framework to
    // backpropagate once the hook returns.
    let framework_step = matches!(
        checker.cadence(),
        crate::semantic::iteration::Cadence::Every(_, crate::semantic::iteration::Reason::Hook)
    ) && checker
        .function()
        .is_some_and(|f| f.name.as_str().contains("train"));
    let loop_trains = checker.loops().iter().any(|l| l.trains);
    if backpropagated
        || checker.function_trains()
        || checker.block_facts().calls_backward
        || loop_trains
    {
        "its chain of autograd nodes; `.backward()` freed the activations"
    } else if framework_step {
        "every saved activation until the framework's `.backward()` frees them, its chain of \
         autograd nodes after"
    } else {
        "with every saved activation: no `.backward()` frees them"
    }
}

/// "the autograd graph of `self.critic(...)` (line 12)".
pub(crate) fn origin_phrase(checker: &Checker, value: &Value) -> String {
    match value.origin() {
        Some(o) => format!(
            "the autograd graph of `{}` (line {})",
            o.what,
            checker.line(o.offset)
        ),
        None => "an autograd graph".to_string(),
    }
}

/// An edit appending a method call to an expression (`x` -> `x.detach()`), adding parentheses
/// when the expression binds looser than attribute access.
pub(crate) fn append_call(checker: &Checker, expr: &Expr, method: &str) -> Vec<Edit> {
    let _ = checker;
    if !needs_parens(expr) {
        vec![Edit::insertion(expr.end(), format!(".{method}()"))]
    } else {
        vec![
            Edit::insertion(expr.start(), "("),
            Edit::insertion(expr.end(), format!(").{method}()")),
        ]
    }
}

/// A fix that detaches what `key` (a container or a running total) keeps. It is safe only when
/// every use of `key` besides the statement at `site` is logging, printing, counting or
/// arithmetic on numbers (`uses.rs`): nothing that might need the graph can see the change.
pub(crate) fn detach_fix(
    checker: &Checker,
    key: &str,
    site: ruff_text_size::TextRange,
    message: String,
    edits: Vec<Edit>,
) -> crate::diagnostic::Fix {
    let applicability = if checker.only_numeric_uses(key, site) {
        crate::diagnostic::Applicability::Safe
    } else {
        crate::diagnostic::Applicability::Unsafe
    };
    crate::diagnostic::Fix::new(applicability, message, edits)
}

/// How `append_call` shows in a message: `x.detach()`, or `(a * b).detach()` for an expression
/// that binds looser than attribute access. Long expressions are shortened.
pub(crate) fn call_text(checker: &Checker, expr: &Expr, method: &str) -> String {
    let text = short(checker, expr);
    if needs_parens(expr) {
        format!("({text}).{method}()")
    } else {
        format!("{text}.{method}()")
    }
}

pub(crate) fn detached_text(checker: &Checker, expr: &Expr) -> String {
    call_text(checker, expr, "detach")
}

fn needs_parens(expr: &Expr) -> bool {
    !matches!(
        expr,
        Expr::Name(_) | Expr::Attribute(_) | Expr::Call(_) | Expr::Subscript(_)
    )
}

/// Ends the sentence "keeps ... alive ": "until `self.losses` is cleared in `on_epoch_end()`
/// (line 40)", "until `train()` returns".
pub(crate) fn until(checker: &Checker, lifetime: &Lifetime) -> String {
    let key = &lifetime.key;
    match &lifetime.until {
        Until::Reset {
            mutation,
            function,
            offset,
        } => format!(
            "until `{key}` is {} in `{function}()` (line {})",
            match mutation {
                Mutation::Rebind => "rebound",
                Mutation::Trim => "trimmed",
                _ => "cleared",
            },
            checker.line(*offset)
        ),
        Until::LifeOfObject { known: true } => {
            "for the life of the object (nothing clears it)".to_string()
        }
        Until::LifeOfObject { known: false } => "for the life of the object".to_string(),
        Until::ObjectLives { object } => format!("for as long as `{object}` lives"),
        Until::Process => "for the life of the process (a module global)".to_string(),
        Until::Return { function } if lifetime.holder == Holder::Param => {
            format!("for as long as the caller of `{function}()` keeps `{key}`")
        }
        Until::Return { function } => format!("until `{function}()` returns"),
        Until::OuterLoop { offset } => format!(
            "until the loop at line {} rebinds `{key}`",
            checker.line(*offset)
        ),
        Until::Closure => "for as long as the closure lives".to_string(),
    }
}

/// The text of a node, shortened.
pub(crate) fn short(checker: &Checker, expr: &Expr) -> String {
    checker.snippet(expr.range())
}

// ----- statement paths, statement removal, per-step heuristics (R3: LS012, LS014, LS101-LS104) --

/// Where a statement sits: the compound statements around it (outermost first), the block that
/// holds it and its index in that block.
pub(crate) struct Located<'s> {
    pub ancestors: Vec<&'s ruff_python_ast::Stmt>,
    pub body: &'s [ruff_python_ast::Stmt],
    pub index: usize,
}

impl<'s> Located<'s> {
    pub fn stmt(&self) -> &'s ruff_python_ast::Stmt {
        &self.body[self.index]
    }
}

/// The blocks directly inside a compound statement (not nested function or class bodies).
pub(crate) fn child_blocks(stmt: &ruff_python_ast::Stmt) -> Vec<&[ruff_python_ast::Stmt]> {
    use ruff_python_ast::Stmt;
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
pub(crate) fn locate(
    body: &[ruff_python_ast::Stmt],
    target: ruff_text_size::TextRange,
) -> Option<Located<'_>> {
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
pub(crate) fn scope_root<'s>(checker: &Checker<'s>) -> Option<&'s [ruff_python_ast::Stmt]> {
    if let Some(f) = checker.function() {
        return Some(&f.body);
    }
    checker
        .loops()
        .first()
        .map(|l| std::slice::from_ref(l.stmt))
}

/// Locates `stmt` in the current function (or module-level loop).
pub(crate) fn locate_in_scope<'s>(
    checker: &Checker<'s>,
    stmt: &ruff_python_ast::Stmt,
) -> Option<Located<'s>> {
    locate(scope_root(checker)?, stmt.range())
}

/// Offset of the start of the line holding `offset`.
pub(crate) fn line_start(source: &str, offset: ruff_text_size::TextSize) -> usize {
    let o = usize::from(offset);
    source[..o].rfind('\n').map_or(0, |i| i + 1)
}

/// Offset just after the newline ending the line that holds `offset` (or the end of the file).
pub(crate) fn next_line_start(source: &str, offset: ruff_text_size::TextSize) -> usize {
    let o = usize::from(offset);
    source[o..].find('\n').map_or(source.len(), |i| o + i + 1)
}

/// Does the statement have its lines to itself (only indentation before it, only a comment
/// after it)?
pub(crate) fn owns_its_lines(source: &str, stmt: &ruff_python_ast::Stmt) -> bool {
    let start = usize::from(stmt.start());
    let before = &source[line_start(source, stmt.start())..start];
    let end = usize::from(stmt.end());
    let after_end = next_line_start(source, stmt.end());
    let after = source[end..after_end].trim();
    before.trim().is_empty() && (after.is_empty() || after.starts_with('#'))
}

/// An edit removing the located statement: its whole lines, or `pass` in its place when it is
/// the only statement of its block. `None` when it shares a line with other code.
pub(crate) fn remove_statement(checker: &Checker, located: &Located) -> Option<Edit> {
    let stmt = located.stmt();
    if located.body.len() == 1 {
        return Some(Edit::replacement(stmt.range(), "pass"));
    }
    if !owns_its_lines(checker.source, stmt) {
        return None;
    }
    let start = line_start(checker.source, stmt.start());
    let end = next_line_start(checker.source, stmt.end());
    Some(Edit::deletion(ruff_text_size::TextRange::new(
        ruff_text_size::TextSize::try_from(start).ok()?,
        ruff_text_size::TextSize::try_from(end).ok()?,
    )))
}

pub(crate) use crate::semantic::iteration::coarse_name;

/// Runs once per training step: in a training loop that is not an epoch, generation or
/// episode loop, or in a function that runs once per step (`training_step`, a function that
/// backpropagates, one called from a step loop).
pub(crate) fn runs_every_step(checker: &Checker) -> bool {
    checker
        .iteration()
        .is_some_and(|it| it.grain() == crate::semantic::iteration::Grain::Step)
}

/// Is the located statement under an `if` (below the innermost loop or the function body)
/// whose test uses `%`, like `if step % 100 == 0:`? Such code runs every N steps.
pub(crate) fn under_modulo_guard(located: &Located) -> bool {
    use ruff_python_ast::Stmt;
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
pub(crate) fn in_except_handler(located: &Located, target: ruff_text_size::TextRange) -> bool {
    use ruff_python_ast::Stmt;
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

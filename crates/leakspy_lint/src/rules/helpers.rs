//! Wording and edits several rules share.

use ruff_python_ast::Expr;
use ruff_text_size::Ranged;

use crate::checker::Checker;
use crate::diagnostic::Edit;
use crate::semantic::names::dotted;
use crate::semantic::scan::keys_in;
use crate::semantic::value::Value;

/// What a stored graph-carrying value keeps once `.backward()` ran through it.
pub const RETAINED_AFTER_BACKWARD: &str =
    "its chain of autograd nodes; `.backward()` freed the activations";
/// ... and when no `.backward()` did (the run report corrects either with
/// what the probe saw: a framework may call backward where the file does not).
pub const RETAINED_WITHOUT_BACKWARD: &str =
    "with every saved activation: no `.backward()` frees them";

/// What a stored graph-carrying value keeps alive. After `.backward()` the saved activations
/// are freed and the chain of autograd nodes remains; without it, whole activations stay.
pub(crate) fn retained(checker: &Checker, value: &Value) -> &'static str {
    let backpropagated = value.origin().is_some_and(|o| o.backpropagated);
    if backpropagated || checker.function_trains() || checker.block_facts().calls_backward {
        RETAINED_AFTER_BACKWARD
    } else {
        RETAINED_WITHOUT_BACKWARD
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
    let simple = matches!(
        expr,
        Expr::Name(_) | Expr::Attribute(_) | Expr::Call(_) | Expr::Subscript(_)
    );
    if simple {
        vec![Edit::insertion(expr.end(), format!(".{method}()"))]
    } else {
        let _ = checker;
        vec![
            Edit::insertion(expr.start(), "("),
            Edit::insertion(expr.end(), format!(").{method}()")),
        ]
    }
}

/// Does the expression change from one iteration of the innermost loop to the next (it mentions
/// the loop target or something rebound in the loop)?
pub(crate) fn varies_per_iteration(checker: &Checker, expr: &Expr) -> bool {
    let Some(frame) = checker.innermost_loop() else {
        return false;
    };
    let keys = keys_in(expr);
    if keys.iter().any(|k| frame.facts.rebinds(k)) {
        return true;
    }
    // f-strings and calls such as `len(history)` or `step()` change too.
    matches!(expr, Expr::FString(_)) || matches!(expr, Expr::Call(_)) && dotted(expr).is_none()
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

/// Words of an identifier (`num_epochs` -> `num`, `epochs`; `GRADIENT_STEPS` -> `gradient`,
/// `steps`).
fn name_words(name: &str) -> impl Iterator<Item = String> + '_ {
    name.split(|c: char| c == '_' || c == '.' || c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_ascii_lowercase())
}

const STEP_WORDS: &[&str] = &[
    "step",
    "steps",
    "batch",
    "batches",
    "iter",
    "iters",
    "iteration",
    "iterations",
    "it",
    "micro",
    "microbatch",
    "accum",
    "timestep",
    "timesteps",
    "frame",
    "frames",
    "update",
    "updates",
    "loader",
    "dataloader",
    "sample",
    "samples",
];
const EPOCH_WORDS: &[&str] = &[
    "epoch",
    "epochs",
    "ep",
    "eps",
    "gen",
    "gens",
    "generation",
    "generations",
    "episode",
    "episodes",
    "fold",
    "folds",
    "trial",
    "trials",
    "round",
    "rounds",
    "cycle",
    "cycles",
];

/// Does a name read as an epoch/generation/episode counter rather than a step counter?
/// `Some(true)` coarse, `Some(false)` per step, `None` no opinion.
pub(crate) fn coarse_name(name: &str) -> Option<bool> {
    let words: Vec<String> = name_words(name).collect();
    if words.iter().any(|w| STEP_WORDS.contains(&w.as_str())) {
        return Some(false);
    }
    if words.iter().any(|w| EPOCH_WORDS.contains(&w.as_str())) {
        return Some(true);
    }
    None
}

/// A loop that runs once per epoch, generation or episode (its target or what it iterates is
/// named so): each iteration holds many steps, so per-iteration costs are paid rarely.
pub(crate) fn is_coarse_loop(stmt: &ruff_python_ast::Stmt) -> bool {
    use ruff_python_ast::Stmt;
    let mut names: Vec<String> = Vec::new();
    let exprs: Vec<&Expr> = match stmt {
        Stmt::For(f) => {
            names.extend(keys_in(&f.target));
            vec![&*f.iter]
        }
        Stmt::While(w) => vec![&*w.test],
        _ => return false,
    };
    for n in &names {
        if let Some(coarse) = coarse_name(n) {
            return coarse;
        }
    }
    let mut verdict = None;
    for e in exprs {
        for k in keys_in(e) {
            let last = k.rsplit('.').next().unwrap_or(&k).to_string();
            match coarse_name(&last) {
                Some(false) => return false,
                Some(true) => verdict = Some(true),
                None => {}
            }
        }
    }
    verdict.unwrap_or(false)
}

/// A function that frameworks call once per epoch or run (`on_train_epoch_end`, `fit`,
/// `setup`, `save_checkpoint`) rather than once per step.
pub(crate) fn is_coarse_function(name: &str) -> bool {
    name_words(name).any(|w| {
        EPOCH_WORDS.contains(&w.as_str())
            || matches!(
                w.as_str(),
                "fit" | "setup" | "teardown" | "start" | "save" | "load" | "checkpoint" | "sanity"
            )
    })
}

/// Runs once per training step: in a loop that is not an epoch/generation/episode loop, or
/// directly in a per-step method (`training_step`, `update`, `on_train_batch_end`...).
pub(crate) fn runs_every_step(checker: &Checker) -> bool {
    if let Some(l) = checker.innermost_loop() {
        return !l.is_coarse();
    }
    checker.in_per_step_function()
        && !checker
            .function()
            .is_some_and(|f| is_coarse_function(f.name.as_str()))
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

//! ## What it does
//! Flags a notebook cell whose last statement is an expression that carries an autograd graph
//! (`F.cross_entropy(model(X_val), y_val)`, `model(x)`), shown as the cell's result.
//!
//! ## Why is this bad?
//! IPython keeps every cell's result in the output history (`Out[n]`, `_`, `__`, `___`) for the
//! rest of the session. A tensor that carries a graph keeps the whole graph alive with it: every
//! activation saved for a backward pass that never comes (a loss over a whole validation split
//! holds the split's activations). Each run of the cell adds another entry, so memory grows with
//! every run, and `del` of the names in the cell frees nothing while `Out` holds the result. The
//! kernel watch (`leakspy.watch()`) names `Out` as the holder when it happens.
//!
//! ## Example
//! ```python
//! model = nn.Linear(128, 10)
//! x, y = torch.randn(5000, 128), torch.randint(0, 10, (5000,))
//! nn.functional.cross_entropy(model(x), y)
//! ```
//!
//! ## Use instead
//! ```python
//! model = nn.Linear(128, 10)
//! x, y = torch.randn(5000, 128), torch.randint(0, 10, (5000,))
//! nn.functional.cross_entropy(model(x), y).item()
//! ```
//!
//! ## Fix safety
//! The fix shows `.item()` of a value the analysis knows to be a number-sized tensor (a loss, a
//! mean): the cell then shows the number instead of the tensor, which changes what is displayed,
//! so it is unsafe. No fix is offered for other tensors (compute them under `torch.no_grad()`, or
//! end the line with `;`, which shows nothing and keeps nothing).
//!
//! ## Stays silent on
//! Python files (only a kernel keeps results); a last expression ending with `;` (IPython shows
//! and keeps nothing); values computed under `torch.no_grad()` or detached; expressions that are
//! not the last statement of their cell; values not known to be tensors carrying a graph (what a
//! model or a pipeline returns may be an object whose display keeps nothing).

use ruff_python_ast::Stmt;
use ruff_text_size::{Ranged, TextSize};

use crate::checker::Checker;
use crate::diagnostic::{Diagnostic, Edit, Fix};
use crate::registry::Rule;
use crate::rules::helpers::{append_call, origin_phrase, short};
use crate::SourceKind;

pub(crate) fn stmt(checker: &mut Checker, stmt: &Stmt) {
    let SourceKind::Notebook { cell_ends } = checker.source_kind else {
        return;
    };
    let Stmt::Expr(expr) = stmt else { return };
    if checker.function().is_some() || !checker.scope().guards.is_empty() || checker.in_loop() {
        return;
    }
    // The last statement of its cell: the next top-level statement starts in a later cell.
    let i = cell_ends.partition_point(|&end| end <= stmt.start());
    let Some(&cell_end) = cell_ends.get(i) else {
        return;
    };
    let next = checker
        .suite()
        .iter()
        .find(|s| s.start() > stmt.start())
        .map(Ranged::start);
    if next.is_some_and(|n| n < cell_end) {
        return;
    }
    if ends_with_semicolon(checker.source, stmt.end(), cell_end) {
        return;
    }
    // A tensor: what a module returns may be any object (a pipeline's annotation, a model's
    // output object) whose display holds no graph.
    let value = checker.value(&expr.value);
    if !value.has_graph() || !value.is_tensor() {
        return;
    }
    let message = format!(
        "the cell ends with `{}`, which carries {}: IPython keeps each cell's result in `Out` for \
         the rest of the session, with its graph and every activation saved in it, one more per \
         run of the cell; show a number (`.item()`), compute it under `torch.no_grad()`, or end \
         the line with `;`",
        short(checker, &expr.value),
        origin_phrase(checker, &value),
    );
    let mut diagnostic = Diagnostic::new(Rule::LS016, message, stmt.range());
    if value.scalar && value.is_tensor() {
        let edits: Vec<Edit> = append_call(checker, &expr.value, "item");
        diagnostic = diagnostic.with_fix(Fix::unsafe_edit("Show `.item()`", edits));
    }
    checker.report(diagnostic);
}

/// Is the statement ending at `end` followed by `;` on its line (before the cell ends)?
fn ends_with_semicolon(source: &str, end: TextSize, cell_end: TextSize) -> bool {
    let rest = &source[usize::from(end)..usize::from(cell_end.max(end))];
    let line = rest.split('\n').next().unwrap_or("");
    line.split('#')
        .next()
        .unwrap_or("")
        .trim_start()
        .starts_with(';')
}

//! `leakspy check` on a Jupyter notebook: its code cells checked as one module, fixes written
//! back into the cells (`leakspy_lint::notebook` keeps the rest of the JSON as it was), and the
//! diff shown per cell.

use std::path::Path;

use leakspy_lint::notebook::Notebook;
use leakspy_lint::output::FileResult;
use leakspy_lint::summaries::{ExternalFacts, FileSummary};
use leakspy_lint::{check_in_project, check_source_in, select_fixes, Applicability, RuleSet};

use crate::commands::check::{display_path, Checked, Problem};

/// Checks (and, when asked, fixes) one notebook whose text is read, with what the project says
/// of other files; returns its summary beside. Fixing loops until no fix applies, at most a few
/// rounds, as for a Python file.
pub(crate) fn check(
    path: &Path,
    text: String,
    rules: &RuleSet,
    fix: Option<Applicability>,
    write: bool,
    project: Option<&ExternalFacts>,
) -> Result<(Checked, FileSummary), Problem> {
    let problem = |reason: String, fatal: bool| Problem {
        path: path.to_path_buf(),
        reason,
        fatal,
    };
    let notebook = Notebook::parse(text).map_err(|e| {
        let fatal = !matches!(e, leakspy_lint::notebook::NotebookError::NotPython(_));
        problem(e.to_string(), fatal)
    })?;
    let checked = std::panic::catch_unwind(|| {
        let before = notebook.clone();
        let mut notebook = notebook;
        let mut joined = notebook.joined();
        let (mut result, summary) =
            check_source_in(&joined.checked, rules, joined.source_kind(), project);
        let mut applied = 0;
        if let Some(min) = fix {
            for _ in 0..4 {
                if result.syntax_error.is_some() {
                    break;
                }
                let (edits, n) = select_fixes(&result.diagnostics, min, |f| joined.allows(f));
                if n == 0 {
                    break;
                }
                let mut next = notebook.clone();
                next.apply(&joined, &edits);
                let next_joined = next.joined();
                let (again, _) = check_source_in(
                    &next_joined.checked,
                    rules,
                    next_joined.source_kind(),
                    project,
                );
                if again.syntax_error.is_some() {
                    // Never write a fix that breaks the notebook.
                    break;
                }
                applied += n;
                notebook = next;
                joined = next_joined;
                result = again;
            }
        }
        (before, notebook, joined, result, applied, summary)
    });
    let (before, notebook, joined, mut result, applied, summary) = checked.map_err(|_| {
        problem(
            "internal error while checking this notebook (a leakspy bug: please report it with the file)".into(),
            true,
        )
    })?;
    let display = display_path(path);
    let mut diff = String::new();
    if applied > 0 {
        if write {
            std::fs::write(path, notebook.to_json())
                .map_err(|e| problem(format!("cannot write the fixed notebook: {e}"), true))?;
        } else {
            for (cell, old, new) in notebook.changed_cells(&before) {
                let name = format!("{}:cell {cell}", display.display());
                diff.push_str(
                    &similar::TextDiff::from_lines(old, new)
                        .unified_diff()
                        .header(&name, &name)
                        .to_string(),
                );
            }
        }
    }
    let line_index = result.take_line_index(&joined.display);
    // "line N" in a message is a row of the joined module: said as the cell's.
    for d in &mut result.diagnostics {
        let row = line_index
            .line_column(d.range.start(), &joined.display)
            .line
            .get();
        let (cell, _) = joined.index.cell_row(row);
        d.message = joined.index.translate_message(&d.message, cell);
        if let Some(fix) = &mut d.fix {
            fix.message = joined.index.translate_message(&fix.message, cell);
        }
    }
    Ok((
        Checked {
            result: FileResult {
                path: display,
                source: joined.display,
                line_index,
                diagnostics: result.diagnostics,
                syntax_error: result.syntax_error,
                notebook: Some(joined.index),
            },
            applied,
            diff,
        },
        summary,
    ))
}

/// The summary of a notebook another file's check needs (no findings kept): `None` when it
/// cannot be read as one.
pub(crate) fn summary(text: String, facts: &ExternalFacts) -> Option<FileSummary> {
    let notebook = Notebook::parse(text).ok()?;
    let joined = notebook.joined();
    std::panic::catch_unwind(|| {
        check_in_project(
            &joined.checked,
            &RuleSet::empty(),
            joined.source_kind(),
            facts,
        )
        .1
    })
    .ok()
}

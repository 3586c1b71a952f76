//! The default format: one finding per block, with a code frame, ruff-style.

use std::fmt::Write as _;

use crate::diagnostic::Applicability;
use crate::output::FileResult;

/// Renders findings with a code frame of the flagged line(s).
pub fn render(files: &[FileResult], show_fixes: bool) -> String {
    let mut out = String::new();
    for file in files {
        let path = file.display_path();
        if let Some(err) = &file.syntax_error {
            let loc = file.location(err.range.start());
            writeln!(
                out,
                "{}: syntax-error {}",
                position(&path, file, err.range.start()),
                err.message
            )
            .unwrap();
            frame(&mut out, file, loc.row, loc.column, loc.column + 1);
            out.push('\n');
        }
        for d in &file.diagnostics {
            let start = file.location(d.range.start());
            let end = file.location(d.range.end());
            let fixable = match d.fix.as_ref().map(|f| f.applicability) {
                Some(Applicability::Safe) => " [*]",
                _ => "",
            };
            writeln!(
                out,
                "{}: {}{fixable} {}",
                position(&path, file, d.range.start()),
                d.rule.code(),
                d.message
            )
            .unwrap();
            let end_col = if end.row == start.row {
                end.column
            } else {
                usize::MAX
            };
            frame(&mut out, file, start.row, start.column, end_col);
            if show_fixes {
                if let Some(fix) = &d.fix {
                    let kind = match fix.applicability {
                        Applicability::Safe => "fix",
                        Applicability::Unsafe => "unsafe fix",
                    };
                    writeln!(out, "  = help ({kind}): {}", fix.message).unwrap();
                }
            }
            writeln!(out, "  = rule: {} ({})", d.rule.name(), d.rule.code()).unwrap();
            out.push('\n');
        }
    }
    out
}

/// `path:row:column`, or `path:cell N:line R` in a notebook (ruff's cell numbering; the
/// caret of the frame shows the column).
fn position(path: &str, file: &FileResult, offset: ruff_text_size::TextSize) -> String {
    match file.cell_location(offset) {
        (Some(cell), loc) => format!("{path}:cell {cell}:line {}", loc.row),
        (None, loc) => format!("{path}:{}:{}", loc.row, loc.column),
    }
}

/// Three lines of context: the one before, the flagged one with a caret underline, the one after
/// (in a notebook, of the same cell, numbered in it).
fn frame(out: &mut String, file: &FileResult, row: usize, start_col: usize, end_col: usize) {
    let (first, last) = file.frame_rows(row);
    let shown = file.shown_row(row);
    let width = (shown + 1).to_string().len();
    writeln!(out, "{:width$} |", "").unwrap();
    if row > first {
        writeln!(out, "{:>width$} | {}", shown - 1, file.line_text(row - 1)).unwrap();
    }
    let line = file.line_text(row);
    writeln!(out, "{shown:>width$} | {line}").unwrap();
    let len = line.chars().count();
    let end = end_col.min(len + 1).max(start_col + 1);
    let pad: String = line
        .chars()
        .take(start_col.saturating_sub(1))
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    writeln!(out, "{:width$} | {pad}{}", "", "^".repeat(end - start_col)).unwrap();
    if row < last && !file.line_text(row + 1).is_empty() {
        writeln!(out, "{:>width$} | {}", shown + 1, file.line_text(row + 1)).unwrap();
    }
    writeln!(out, "{:width$} |", "").unwrap();
}

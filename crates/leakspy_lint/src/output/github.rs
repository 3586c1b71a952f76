//! GitHub Actions workflow commands: findings show up as annotations on the pull request.

use std::fmt::Write as _;

use crate::output::FileResult;

/// Escapes a workflow command's message (`%`, CR, LF) as GitHub documents.
fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Property values additionally escape `:` and `,`.
fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// A notebook's annotation says which cell its line is in (GitHub knows no cells).
fn in_cell(cell: Option<usize>, row: usize) -> String {
    cell.map(|c| format!("cell {c}:line {row}: "))
        .unwrap_or_default()
}

pub fn render(files: &[FileResult]) -> String {
    let mut out = String::new();
    for file in files {
        let path = escape_property(&file.display_path());
        if let Some(err) = &file.syntax_error {
            let (cell, loc) = file.cell_location(err.range.start());
            writeln!(
                out,
                "::error title=leakspy (syntax-error),file={path},line={},col={}::{}",
                loc.row,
                loc.column,
                escape_data(&format!(
                    "{}syntax-error {}",
                    in_cell(cell, loc.row),
                    err.message
                ))
            )
            .unwrap();
        }
        for d in &file.diagnostics {
            let (cell, start) = file.cell_location(d.range.start());
            let end = file.cell_location(d.range.end()).1;
            let level = match d.rule.kind() {
                crate::RuleKind::Leak => "error",
                crate::RuleKind::Advice => "warning",
            };
            writeln!(
                out,
                "::{level} title=leakspy ({}),file={path},line={},col={},endLine={},endColumn={}::{}",
                d.rule.code(),
                start.row,
                start.column,
                end.row,
                end.column,
                escape_data(&format!(
                    "{}{} {}",
                    in_cell(cell, start.row),
                    d.rule.code(),
                    d.message
                ))
            )
            .unwrap();
        }
    }
    out
}

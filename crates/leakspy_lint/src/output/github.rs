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

pub fn render(files: &[FileResult]) -> String {
    let mut out = String::new();
    for file in files {
        let path = escape_property(&file.display_path());
        if let Some(err) = &file.syntax_error {
            let loc = file.location(err.range.start());
            writeln!(
                out,
                "::error title=leakspy (syntax-error),file={path},line={},col={}::{}",
                loc.row,
                loc.column,
                escape_data(&format!("syntax-error {}", err.message))
            )
            .unwrap();
        }
        for d in &file.diagnostics {
            let start = file.location(d.range.start());
            let end = file.location(d.range.end());
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
                escape_data(&format!("{} {}", d.rule.code(), d.message))
            )
            .unwrap();
        }
    }
    out
}

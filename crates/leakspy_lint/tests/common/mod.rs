//! What the fixture tests share: the findings `# expect:` comments mark, and the findings the
//! default rule set raises. Each test binary uses its own part of it.
#![allow(dead_code)]

use leakspy_lint::{check_source_as, RuleSet, SourceKind};

/// (line, code) pairs from `# expect: LSxxx[, LSyyy]` comments.
pub fn expected(source: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in source.lines().enumerate() {
        if let Some(codes) = line.split("# expect:").nth(1) {
            for code in codes.split(',') {
                out.push((i + 1, code.trim().to_string()));
            }
        }
    }
    out
}

/// (line, code) of each finding at the default rule set, in order.
pub fn found(source: &str, kind: SourceKind) -> Vec<(usize, String)> {
    let mut checked = check_source_as(source, &RuleSet::default(), kind);
    assert!(checked.syntax_error.is_none(), "{:?}", checked.syntax_error);
    let index = checked.take_line_index(source);
    let mut out: Vec<(usize, String)> = checked
        .diagnostics
        .iter()
        .map(|d| {
            let line = index.line_column(d.range.start(), source).line.get();
            (line, d.rule.code().to_string())
        })
        .collect();
    out.sort();
    out
}

/// Where the cells of a notebook written as a Python file end: at each `# %%` line, and at the
/// end of the text (the percent format of Jupytext and editors).
pub fn percent_cells(source: &str) -> Vec<ruff_text_size::TextSize> {
    let mut ends = Vec::new();
    let mut at = 0;
    for line in source.split_inclusive('\n') {
        if line.starts_with("# %%") && at > 0 {
            ends.push(ruff_text_size::TextSize::try_from(at).unwrap());
        }
        at += line.len();
    }
    ends.push(ruff_text_size::TextSize::try_from(at).unwrap());
    ends
}

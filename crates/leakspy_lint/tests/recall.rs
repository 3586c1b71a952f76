//! Recall on leak shapes from real reports (issue 16). Each `resources/test/recall/NAME.py` is a
//! small, real-looking training program with a leak; at the default rule set `check` must report
//! exactly the lines marked `# expect: LSxxx` (one finding per statement, with that code), and
//! its twin `NAME_fixed.py`, the same program with the leak fixed, must raise nothing.

use std::path::PathBuf;

use leakspy_lint::{check_source, RuleSet};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("resources/test/recall")
}

/// (line, code) pairs from `# expect: LSxxx[, LSyyy]` comments.
fn expected(source: &str) -> Vec<(usize, String)> {
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

fn found(source: &str) -> Vec<(usize, String)> {
    let mut checked = check_source(source, &RuleSet::default());
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

#[test]
fn each_leak_shape_is_caught_at_its_line_and_its_fixed_twin_is_clean() {
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".py") && !n.ends_with("_fixed.py"))
        .collect();
    names.sort();
    assert!(names.len() >= 14, "recall fixtures: {names:?}");
    let mut failures = Vec::new();
    for name in &names {
        let source = std::fs::read_to_string(dir().join(name)).unwrap();
        let want = expected(&source);
        assert!(!want.is_empty(), "{name} marks no expected finding");
        let got = found(&source);
        if got != want {
            failures.push(format!("{name}: expected {want:?}, found {got:?}"));
        }
        let twin = name.replace(".py", "_fixed.py");
        let fixed =
            std::fs::read_to_string(dir().join(&twin)).unwrap_or_else(|e| panic!("{twin}: {e}"));
        let got = found(&fixed);
        if !got.is_empty() {
            failures.push(format!("{twin}: expected nothing, found {got:?}"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

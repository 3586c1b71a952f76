//! Per-rule fixtures. `LSxxx.py` must raise the rule exactly on the lines marked
//! `# expect: LSxxx` (the snapshot records messages and fixes); `LSxxx_ok.py` holds the rule's
//! "must stay silent" cases and must raise nothing.

use std::fmt::Write as _;
use std::path::PathBuf;

mod common;

use leakspy_lint::{
    apply_fixes, check_source, check_source_as, Applicability, CheckedSource, Rule, RuleSet,
    SourceKind,
};

/// Checks a fixture with only `rule` on: as a notebook (cells at `# %%` lines) for a rule only
/// notebooks raise.
fn check_fixture(rule: Rule, source: &str) -> CheckedSource {
    if rule.notebook_only() {
        let cells = common::percent_cells(source);
        check_source_as(
            source,
            &only(rule),
            SourceKind::Notebook { cell_ends: &cells },
        )
    } else {
        check_source_as(source, &only(rule), SourceKind::Python)
    }
}

fn fixture(name: &str) -> (PathBuf, String) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("resources/test/fixtures")
        .join(name);
    let source = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()));
    (path, source)
}

fn only(rule: Rule) -> RuleSet {
    RuleSet::from_selectors(Some(&[rule.code().to_string()]), &[], &[]).unwrap()
}

/// Lines (1-based) carrying `# expect: <code>`.
fn expected_lines(source: &str, rule: Rule) -> Vec<usize> {
    source
        .lines()
        .enumerate()
        .filter(|(_, l)| {
            l.split("# expect:")
                .nth(1)
                .is_some_and(|codes| codes.split(',').any(|c| c.trim() == rule.code()))
        })
        .map(|(i, _)| i + 1)
        .collect()
}

fn render(rule: Rule, source: &str) -> String {
    let mut checked = check_fixture(rule, source);
    assert!(checked.syntax_error.is_none(), "{:?}", checked.syntax_error);
    let index = checked.take_line_index(source);
    let mut out = String::new();
    for d in &checked.diagnostics {
        let loc = index.line_column(d.range.start(), source);
        let line = source.lines().nth(loc.line.to_zero_indexed()).unwrap_or("");
        writeln!(
            out,
            "{}:{}: {} {}",
            loc.line,
            loc.column,
            d.rule.code(),
            d.message
        )
        .unwrap();
        writeln!(out, "    | {}", line.trim_end()).unwrap();
        if let Some(fix) = &d.fix {
            let kind = match fix.applicability {
                Applicability::Safe => "safe",
                Applicability::Unsafe => "unsafe",
            };
            writeln!(out, "    = fix ({kind}): {}", fix.message).unwrap();
        }
    }
    let fixed = apply_fixes(source, &checked.diagnostics, Applicability::Unsafe);
    if fixed.applied > 0 {
        writeln!(
            out,
            "\n--- fixes applied (safe and unsafe): {} ---",
            fixed.applied
        )
        .unwrap();
        let diff = similar::TextDiff::from_lines(source, &fixed.source);
        write!(out, "{}", diff.unified_diff().context_radius(1)).unwrap();
        // A fix must leave valid Python.
        let again = check_source(&fixed.source, &RuleSet::default());
        assert!(
            again.syntax_error.is_none(),
            "fix broke syntax: {:?}\n{}",
            again.syntax_error,
            fixed.source
        );
    }
    out
}

fn check_rule(rule: Rule) {
    let (_, source) = fixture(&format!("{}.py", rule.code()));
    let mut checked = check_fixture(rule, &source);
    let index = checked.take_line_index(&source);
    let mut got: Vec<usize> = checked
        .diagnostics
        .iter()
        .map(|d| index.line_index(d.range.start()).get())
        .collect();
    got.dedup();
    let want = expected_lines(&source, rule);
    assert!(
        !want.is_empty(),
        "{} fixture marks no `# expect:` line",
        rule.code()
    );
    assert_eq!(
        got,
        want,
        "{}: lines flagged vs lines marked `# expect`",
        rule.code()
    );
    insta::assert_snapshot!(rule.code(), render(rule, &source));

    let (_, ok) = fixture(&format!("{}_ok.py", rule.code()));
    let mut checked = check_fixture(rule, &ok);
    assert!(checked.syntax_error.is_none());
    let index = checked.take_line_index(&ok);
    let rendered: Vec<String> = checked
        .diagnostics
        .iter()
        .map(|d| {
            format!(
                "line {}: {}",
                index.line_index(d.range.start()).get(),
                d.message
            )
        })
        .collect();
    assert!(
        rendered.is_empty(),
        "{}_ok.py must stay silent, got:\n{}",
        rule.code(),
        rendered.join("\n")
    );
}

macro_rules! rule_tests {
    ($($test:ident => $rule:ident,)*) => {
        $(
            #[test]
            fn $test() {
                check_rule(Rule::$rule);
            }
        )*
    };
}

rule_tests! {
    ls001 => LS001,
    ls002 => LS002,
    ls003 => LS003,
    ls004 => LS004,
    ls005 => LS005,
    ls006 => LS006,
    ls007 => LS007,
    ls008 => LS008,
    ls009 => LS009,
    ls010 => LS010,
    ls011 => LS011,
    ls012 => LS012,
    ls013 => LS013,
    ls014 => LS014,
    ls015 => LS015,
    ls016 => LS016,
    ls101 => LS101,
    ls102 => LS102,
    ls103 => LS103,
    ls104 => LS104,
}

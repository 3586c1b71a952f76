//! `docs/rules.md` is generated from the rules' own documentation; this test keeps it in sync.
//! Regenerate with `LEAKSPY_UPDATE_DOCS=1 cargo test -p leakspy_lint --test docs`.

use leakspy_lint::{Rule, RuleDefault, RuleKind};

fn generate() -> String {
    let mut out = String::from(
        "# leakspy rules\n\n<!-- Generated from crates/leakspy_lint/src/rules/*.rs and registry.rs by `LEAKSPY_UPDATE_DOCS=1 cargo test -p leakspy_lint --test docs`. Do not edit. -->\n\nRules marked *opt-in* run with `--select ALL` or `extend-select`: their precision on real training code (the corpus in `bench/corpus`, figures in `bench/RESULTS.md`) is below 90 %.\n\n| code | name | kind | default |\n| --- | --- | --- | --- |\n",
    );
    for rule in Rule::ALL {
        let kind = match rule.kind() {
            RuleKind::Leak => "leak",
            RuleKind::Advice => "advice",
        };
        let default = match rule.default() {
            RuleDefault::On(_) => "on",
            RuleDefault::OptIn(_) => "opt-in",
        };
        out.push_str(&format!(
            "| [{}](#{}) | {} | {kind} | {default} |\n",
            rule.code(),
            rule.code().to_ascii_lowercase(),
            rule.name()
        ));
    }
    for rule in Rule::ALL {
        let default = match rule.default() {
            RuleDefault::On(why) => format!("On by default: {why}."),
            RuleDefault::OptIn(why) => {
                format!("Opt-in (`--select ALL` or `extend-select`): {why}.")
            }
        };
        out.push_str(&format!(
            "\n## {}\n\n`{}`. {default}\n\n",
            rule.code(),
            rule.name()
        ));
        // Rule docs use `##` sections; nest them under the rule's heading.
        for line in rule.documentation().lines() {
            if line.starts_with("## ") {
                out.push('#');
            }
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[test]
fn rules_md_is_up_to_date() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/rules.md");
    let want = generate();
    if std::env::var_os("LEAKSPY_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/rules.md is out of date: run `LEAKSPY_UPDATE_DOCS=1 cargo test -p leakspy_lint --test docs`"
    );
}

//! `docs/rules.md` is generated from the rules' own documentation; this test keeps it in sync.
//! Regenerate with `LEAKSPY_UPDATE_DOCS=1 cargo test -p leakspy_lint --test docs`.

use leakspy_lint::{Rule, RuleDefault, RuleKind};

fn generate() -> String {
    let mut out = String::from(
        "# leakspy rules\n\n<!-- Generated from crates/leakspy_lint/src/rules/*.rs and registry.rs by `LEAKSPY_UPDATE_DOCS=1 cargo test -p leakspy_lint --test docs`. Do not edit. -->\n\nRules marked *opt-in* run with `--select ALL` or `extend-select`: their precision on real training code (the corpus in `bench/corpus`, figures in `bench/RESULTS.md`) is below 90 %. The leak rules speak of what a job keeps through its steps, so they stay silent in a module of tests (one that imports pytest or unittest and defines tests): what a test keeps dies with it.\n\n| code | name | kind | default |\n| --- | --- | --- | --- |\n",
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

/// The first ```python block after `## heading` in a rule's documentation.
fn code_block(doc: &str, heading: &str) -> Option<String> {
    let rest = doc.split(&format!("## {heading}\n")).nth(1)?;
    let body = rest.strip_prefix("```python\n")?;
    Some(body.split("\n```").next()?.to_string())
}

/// Each rule's "Example" raises it and its "Use instead" does not: the documentation shows what
/// the rule really does. The snippets get the imports they take for granted.
#[test]
fn each_rule_example_raises_it_and_its_fix_does_not() {
    const IMPORTS: &str = "import copy\nimport functools\nimport gc\nimport weakref\n\
        from collections import deque\n\nimport matplotlib.pyplot as plt\nimport numpy as np\n\
        import torch\nimport torch.nn as nn\n\n";
    let mut failures = Vec::new();
    for rule in Rule::ALL {
        let only =
            leakspy_lint::RuleSet::from_selectors(Some(&[rule.code().to_string()]), &[], &[])
                .unwrap();
        let doc = rule.documentation();
        for (heading, want) in [("Example", true), ("Use instead", false)] {
            let Some(code) = code_block(&doc, heading) else {
                failures.push(format!("{}: no {heading} block", rule.code()));
                continue;
            };
            let source = format!("{IMPORTS}{code}\n");
            let cells = [ruff_text_size::TextSize::try_from(source.len()).unwrap()];
            let kind = if rule.notebook_only() {
                leakspy_lint::SourceKind::Notebook { cell_ends: &cells }
            } else {
                leakspy_lint::SourceKind::Python
            };
            let checked = leakspy_lint::check_source_as(&source, &only, kind);
            let raised = !checked.diagnostics.is_empty();
            if raised != want {
                failures.push(format!(
                    "{}: {heading} {}",
                    rule.code(),
                    if want {
                        "raises nothing"
                    } else {
                        "still raises the rule"
                    }
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

//! `leakspy rule`: a rule's documentation, from its source.

use anyhow::{bail, Result};
use clap::Args;
use leakspy_lint::{Rule, RuleDefault, RuleKind};

#[derive(Args)]
pub struct RuleArgs {
    /// Rule code or name, e.g. LS001 or accumulate-graph-tensor.
    #[arg(required_unless_present = "all")]
    pub code: Option<String>,
    /// Print every rule's documentation.
    #[arg(long, conflicts_with = "code")]
    pub all: bool,
}

pub fn run(args: RuleArgs) -> Result<u8> {
    let rules: Vec<Rule> = if args.all {
        Rule::ALL.to_vec()
    } else {
        let code = args.code.unwrap_or_default();
        match Rule::from_code(&code) {
            Some(r) => vec![r],
            None => bail!(
                "unknown rule `{code}`: expected a code such as LS001 (see `leakspy rule --all`)"
            ),
        }
    };
    let mut out = String::new();
    for (i, rule) in rules.iter().enumerate() {
        if i > 0 {
            out.push_str("\n---\n\n");
        }
        out.push_str(&render(*rule));
    }
    crate::write_stdout(&out)?;
    Ok(crate::EXIT_CLEAN)
}

pub fn render(rule: Rule) -> String {
    let kind = match rule.kind() {
        RuleKind::Leak => "A leak rule",
        RuleKind::Advice => "An advice rule",
    };
    let default = match rule.default() {
        RuleDefault::On(why) => format!("On by default: {why}."),
        RuleDefault::OptIn(why) => format!(
            "Opt-in (`--select ALL`, `--extend-select {}` or `extend-select` in `[tool.leakspy]`): {why}.",
            rule.code()
        ),
    };
    format!(
        "# {} ({})\n\n{kind}. {default}\n\n{}",
        rule.name(),
        rule.code(),
        rule.documentation()
    )
}

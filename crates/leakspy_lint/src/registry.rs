//! The rule registry: one line per rule. Adding a rule touches its file in `rules/`, one line
//! here, its dispatch in `checker.rs`, a fixture and a snapshot.

use serde::Serialize;

/// Leak rules retain memory that grows with work done; advice rules flag the seeds' cargo cult.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleKind {
    Leak,
    Advice,
}

/// Whether a rule runs when nothing selects rules, and why (its measured precision on the
/// corpus of real training code, `bench/corpus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Default {
    On(&'static str),
    OptIn(&'static str),
}

const MEASURED: &str = "its precision is measured by judging every finding on real training \
    code (`bench/corpus`): the leak rules on by default were right on 1 of 1 findings on the part \
    they were tuned on (54 PyPI packages and torch's own sources) and on 6 of 16 on the held-out \
    part (27 packages), and on 20 of 107 on forty later draws of 367 packages no rule had \
    been tuned on (before the fixes those findings led to); each rule's figures are in `bench/RESULTS.md`";
const LS103_MEASURED: &str = "its findings on real training code (`bench/corpus`) were right 53 \
    times of 53 on the part it was tuned on (54 PyPI packages and torch's own sources), 8 of 9 \
    on the held-out part (27 packages) and 154 of 156 on forty later draws of 367 packages \
    (`bench/RESULTS.md`)";

macro_rules! define_rules {
    ($( $variant:ident, $code:literal, $name:literal, $kind:ident, $default:expr, $file:literal; )*) => {
        /// A rule, named by its code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Rule { $( $variant, )* }

        impl Rule {
            pub const ALL: &'static [Rule] = &[ $( Rule::$variant, )* ];

            pub const fn code(self) -> &'static str {
                match self { $( Rule::$variant => $code, )* }
            }

            /// The kebab-case name, reading as the bad pattern.
            pub const fn name(self) -> &'static str {
                match self { $( Rule::$variant => $name, )* }
            }

            pub const fn kind(self) -> RuleKind {
                match self { $( Rule::$variant => RuleKind::$kind, )* }
            }

            /// On by default, or opt-in, with the reason.
            pub const fn default(self) -> Default {
                match self { $( Rule::$variant => $default, )* }
            }

            /// The rule's source file; its `//!` module doc is the rule's documentation.
            const fn source(self) -> &'static str {
                match self { $( Rule::$variant => include_str!(concat!("rules/", $file)), )* }
            }
        }
    };
}

define_rules! {
    LS001, "LS001", "accumulate-graph-tensor", Leak, Default::On(MEASURED), "ls001_accumulate_graph_tensor.rs";
    LS002, "LS002", "store-graph-tensor", Leak, Default::On(MEASURED), "ls002_store_graph_tensor.rs";
    LS003, "LS003", "clone-is-not-detach", Leak, Default::On(MEASURED), "ls003_clone_is_not_detach.rs";
    LS004, "LS004", "device-tensor-history", Leak, Default::On(MEASURED), "ls004_device_tensor_history.rs";
    LS005, "LS005", "view-retains-base", Leak, Default::On(MEASURED), "ls005_view_retains_base.rs";
    LS006, "LS006", "hook-retains-activation", Leak, Default::On(MEASURED), "ls006_hook_retains_activation.rs";
    LS007, "LS007", "module-state-retains-graph", Leak, Default::On(MEASURED), "ls007_module_state_retains_graph.rs";
    LS008, "LS008", "recurrent-state-carry", Leak, Default::On(MEASURED), "ls008_recurrent_state_carry.rs";
    LS009, "LS009", "grad-enabled-eval-loop", Leak, Default::On(MEASURED), "ls009_grad_enabled_eval_loop.rs";
    LS010, "LS010", "self-referential-history", Leak, Default::On(MEASURED), "ls010_self_referential_history.rs";
    LS011, "LS011", "running-stat-graph", Leak, Default::On(MEASURED), "ls011_running_stat_graph.rs";
    LS012, "LS012", "unclosed-figure", Leak, Default::On(MEASURED), "ls012_unclosed_figure.rs";
    LS013, "LS013", "strong-ref-cache", Leak, Default::On(MEASURED), "ls013_strong_ref_cache.rs";
    LS014, "LS014", "unbounded-history", Leak, Default::On(MEASURED), "ls014_unbounded_history.rs";
    LS015, "LS015", "retained-module-copies", Leak, Default::On(MEASURED), "ls015_retained_module_copies.rs";
    LS016, "LS016", "notebook-output-keeps-graph", Leak, Default::On(MEASURED), "ls016_notebook_output_keeps_graph.rs";
    LS101, "LS101", "empty-cache-in-loop", Advice, Default::OptIn("on real projects most `empty_cache()` calls in loops are deliberate (between the phases of one RLHF update, behind an option): its precision on the corpus is far below 90 % (`bench/RESULTS.md`)"), "ls101_empty_cache_in_loop.rs";
    LS102, "LS102", "gc-collect-in-loop", Advice, Default::OptIn("on real projects the `gc.collect()` calls it finds in loops are deliberate, once per long update: its precision on the corpus is far below 90 % (`bench/RESULTS.md`)"), "ls102_gc_collect_in_loop.rs";
    LS103, "LS103", "useless-del", Advice, Default::On(LS103_MEASURED), "ls103_useless_del.rs";
    LS104, "LS104", "per-step-allocation", Advice, Default::OptIn("most allocations it finds in real loops are small or of a size that changes: its precision on the corpus is far below 90 % (`bench/RESULTS.md`)"), "ls104_per_step_allocation.rs";
}

impl Rule {
    /// Looks a rule up by code (`LS001`, case-insensitive) or by name.
    pub fn from_code(text: &str) -> Option<Rule> {
        Rule::ALL
            .iter()
            .copied()
            .find(|r| r.code().eq_ignore_ascii_case(text) || r.name() == text)
    }

    /// The rule's documentation in Markdown, taken from its source file's `//!` comment.
    pub fn documentation(self) -> String {
        let mut doc = String::new();
        for line in self.source().lines() {
            let Some(rest) = line.strip_prefix("//!") else {
                break;
            };
            doc.push_str(rest.strip_prefix(' ').unwrap_or(rest));
            doc.push('\n');
        }
        doc
    }

    /// Words a file must contain for the rule to find anything in it (any one of them), or
    /// none when the rule can fire anywhere. A rule that looks for one library call can only
    /// see it where its name is written, whatever alias it is called through.
    pub fn needs(self) -> &'static [&'static str] {
        match self {
            Rule::LS012 => crate::rules::ls012_unclosed_figure::NEEDS,
            Rule::LS101 => crate::rules::ls101_empty_cache_in_loop::NEEDS,
            Rule::LS102 => crate::rules::ls102_gc_collect_in_loop::NEEDS,
            _ => &[],
        }
    }

    /// A rule only a notebook can raise (what a kernel keeps between cells): its fixture and its
    /// documentation's examples are checked as notebooks, cells split at `# %%` lines.
    pub fn notebook_only(self) -> bool {
        matches!(self, Rule::LS016)
    }

    /// Documentation page, shown as `url` in JSON and SARIF output.
    pub fn url(self) -> String {
        format!(
            "https://github.com/leakspy/leakspy/blob/main/docs/rules.md#{}",
            self.code().to_ascii_lowercase()
        )
    }
}

/// Which rules run, from `--select/--ignore/--extend-select` and `[tool.leakspy]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSet {
    enabled: [bool; Rule::ALL.len()],
}

/// The rules that run when nothing selects rules: those that earned it on real code
/// (`Rule::default`). `--select ALL` or `extend-select` adds the others.
impl std::default::Default for RuleSet {
    fn default() -> Self {
        let mut enabled = [false; Rule::ALL.len()];
        for &rule in Rule::ALL {
            enabled[rule as usize] = matches!(rule.default(), Default::On(_));
        }
        Self { enabled }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown rule selector `{0}`: expected a code like LS001, a prefix like LS0 or LS1, a rule name, or ALL")]
pub struct UnknownSelector(pub String);

impl RuleSet {
    pub fn empty() -> Self {
        Self {
            enabled: [false; Rule::ALL.len()],
        }
    }

    pub fn contains(&self, rule: Rule) -> bool {
        self.enabled[rule as usize]
    }

    /// The rules of this set that can find something in `source` (see `Rule::needs`).
    pub fn for_source(&self, source: &str) -> RuleSet {
        let mut set = self.clone();
        for &rule in Rule::ALL {
            let needs = rule.needs();
            if set.contains(rule) && !needs.is_empty() && !needs.iter().any(|w| source.contains(w))
            {
                set.enabled[rule as usize] = false;
            }
        }
        set
    }

    pub fn rules(&self) -> impl Iterator<Item = Rule> + '_ {
        Rule::ALL.iter().copied().filter(|r| self.contains(*r))
    }

    /// The rules a selector names: `ALL`, a code prefix (`LS`, `LS0`, `LS00`, `LS001`) or a name.
    pub fn matching(selector: &str) -> Result<Vec<Rule>, UnknownSelector> {
        let sel = selector.trim();
        if sel.eq_ignore_ascii_case("ALL") {
            return Ok(Rule::ALL.to_vec());
        }
        let upper = sel.to_ascii_uppercase();
        let found: Vec<Rule> = Rule::ALL
            .iter()
            .copied()
            .filter(|r| r.code().starts_with(&upper) || r.name() == sel)
            .collect();
        if found.is_empty() || !upper.starts_with("LS") && found.len() != 1 {
            return Err(UnknownSelector(selector.to_string()));
        }
        Ok(found)
    }

    /// Builds the set the way ruff does: `select` (default: the rules on by default) replaces,
    /// `extend_select` adds, `ignore` removes.
    pub fn from_selectors(
        select: Option<&[String]>,
        extend_select: &[String],
        ignore: &[String],
    ) -> Result<Self, UnknownSelector> {
        let mut set = match select {
            Some(sel) => {
                let mut s = Self::empty();
                for x in sel {
                    for r in Self::matching(x)? {
                        s.enabled[r as usize] = true;
                    }
                }
                s
            }
            None => Self::default(),
        };
        for x in extend_select {
            for r in Self::matching(x)? {
                set.enabled[r as usize] = true;
            }
        }
        for x in ignore {
            for r in Self::matching(x)? {
                set.enabled[r as usize] = false;
            }
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_documents_itself() {
        for rule in Rule::ALL {
            let doc = rule.documentation();
            for section in [
                "## What it does",
                "## Why is this bad?",
                "## Example",
                "## Use instead",
                "## Fix safety",
            ] {
                assert!(doc.contains(section), "{} lacks `{section}`", rule.code());
            }
        }
    }

    #[test]
    fn selectors() {
        let s =
            RuleSet::from_selectors(Some(&["LS1".into()]), &["LS001".into()], &["LS103".into()])
                .unwrap();
        let codes: Vec<_> = s.rules().map(Rule::code).collect();
        assert_eq!(codes, ["LS001", "LS101", "LS102", "LS104"]);
        assert!(RuleSet::matching("E501").is_err());
        assert_eq!(RuleSet::matching("unclosed-figure").unwrap(), [Rule::LS012]);
    }

    #[test]
    fn defaults_leave_out_the_opt_in_rules() {
        let d = RuleSet::default();
        for &rule in Rule::ALL {
            assert_eq!(
                d.contains(rule),
                matches!(rule.default(), Default::On(_)),
                "{}",
                rule.code()
            );
        }
        assert!(!d.contains(Rule::LS101) && d.contains(Rule::LS002));
        let all = RuleSet::from_selectors(Some(&["ALL".into()]), &[], &[]).unwrap();
        assert_eq!(all.rules().count(), Rule::ALL.len());
        let extended = RuleSet::from_selectors(None, &["LS101".into()], &[]).unwrap();
        assert!(extended.contains(Rule::LS101) && extended.contains(Rule::LS001));
    }

    #[test]
    fn rules_that_need_a_name_skip_files_without_it() {
        let all = RuleSet::from_selectors(Some(&["ALL".into()]), &[], &[]).unwrap();
        let plain = all.for_source("for x in xs:\n    total += x\n");
        assert!(!plain.contains(Rule::LS101) && !plain.contains(Rule::LS102));
        assert!(!plain.contains(Rule::LS012));
        assert!(plain.contains(Rule::LS001) && plain.contains(Rule::LS015));
        // An alias still names the function where it is imported.
        let aliased = all
            .for_source("from torch.cuda import empty_cache as ec\nfrom gc import collect as c\n");
        assert!(aliased.contains(Rule::LS101) && aliased.contains(Rule::LS102));
        let figures = all.for_source("fig, ax = plt.subplots()\n");
        assert!(figures.contains(Rule::LS012));
        // A rule left out by the user stays out.
        let without =
            RuleSet::from_selectors(Some(&["ALL".into()]), &[], &["LS101".into()]).unwrap();
        assert!(!without
            .for_source("torch.cuda.empty_cache()")
            .contains(Rule::LS101));
    }
}

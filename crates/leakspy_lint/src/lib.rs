//! Static leak rules for PyTorch training code.
//!
//! `check_source` parses one file with ruff's parser, runs a per-function analysis of which
//! values carry an autograd graph, which containers outlive an iteration and what resets them,
//! and returns the diagnostics of the enabled rules, `# noqa` applied.

pub mod checker;
pub mod diagnostic;
pub mod fix;
pub mod lines;
pub mod noqa;
pub mod notebook;
pub mod output;
pub mod project;
pub mod registry;
mod rules;
pub mod semantic;
pub mod summaries;

use ruff_python_parser::parse_module;
use ruff_source_file::LineIndex;
use ruff_text_size::{Ranged, TextRange, TextSize};

pub use diagnostic::{Applicability, Diagnostic, Edit, Fix};
pub use fix::{apply_fixes, select_fixes, FixedSource};
pub use registry::{Default as RuleDefault, Rule, RuleKind, RuleSet, UnknownSelector};
pub use rules::helpers::{
    RETAINED_AFTER_BACKWARD, RETAINED_UNTIL_FRAMEWORK_BACKWARD, RETAINED_WITHOUT_BACKWARD,
};

/// A syntax error: the file is reported and skipped, the others are still checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    pub message: String,
    pub range: TextRange,
}

/// The outcome of checking one source text.
pub struct CheckedSource {
    pub diagnostics: Vec<Diagnostic>,
    pub syntax_error: Option<SyntaxError>,
    /// The line starts, when the check needed them.
    line_index: Option<LineIndex>,
}

impl CheckedSource {
    /// The line starts of `source`, the text that was checked: the check's own when it built
    /// them, else built now.
    pub fn take_line_index(&mut self, source: &str) -> LineIndex {
        self.line_index
            .take()
            .unwrap_or_else(|| LineIndex::from_source_text(source))
    }
}

/// What a source text is: a Python file, or a notebook's code cells joined into one module
/// (`notebook::Joined::source_kind`), which a kernel runs cell by cell: where each cell ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SourceKind<'a> {
    #[default]
    Python,
    Notebook {
        cell_ends: &'a [TextSize],
    },
}

impl SourceKind<'_> {
    pub fn is_notebook(self) -> bool {
        matches!(self, SourceKind::Notebook { .. })
    }
}

/// Checks one Python source text with the enabled rules.
pub fn check_source(source: &str, rules: &RuleSet) -> CheckedSource {
    check_source_as(source, rules, SourceKind::Python)
}

/// Checks one source text of the given kind with the enabled rules.
pub fn check_source_as<'a>(
    source: &'a str,
    rules: &RuleSet,
    kind: SourceKind<'a>,
) -> CheckedSource {
    check_source_in(source, rules, kind, None).0
}

/// Checks one source text as a file of a project: with what the project index says of other
/// files (`summaries::ExternalFacts`), and returns the file's summary for the index beside the
/// findings. A file whose facts are empty gets the findings `check_source_as` gives.
pub fn check_in_project<'a>(
    source: &'a str,
    rules: &RuleSet,
    kind: SourceKind<'a>,
    external: &summaries::ExternalFacts,
) -> (CheckedSource, summaries::FileSummary) {
    check_source_in(source, rules, kind, Some(external))
}

/// The one check of a source text: alone (`None`: no facts, no summary), or in a project (with
/// its facts, returning its summary).
pub fn check_source_in<'a>(
    source: &'a str,
    rules: &RuleSet,
    kind: SourceKind<'a>,
    project: Option<&summaries::ExternalFacts>,
) -> (CheckedSource, summaries::FileSummary) {
    let parsed = match parse_module(source) {
        Ok(parsed) => parsed,
        Err(err) => {
            return (
                CheckedSource {
                    diagnostics: Vec::new(),
                    syntax_error: Some(SyntaxError {
                        message: err.error.to_string(),
                        range: err.range(),
                    }),
                    line_index: None,
                },
                Default::default(),
            );
        }
    };
    let lines = lines::Lines::new(source);
    let (noqa, called) = scan_tokens(parsed.tokens(), source, &lines);
    // A file exempt from findings (`# leakspy: noqa` alone) still tells the project what its
    // functions do; alone, it needs no walk.
    let exempt = noqa.file_exempt();
    if exempt && project.is_none() {
        return (
            CheckedSource {
                diagnostics: Vec::new(),
                syntax_error: None,
                line_index: lines.into_built(),
            },
            Default::default(),
        );
    }
    let suite = parsed.suite();
    let mut facts = semantic::facts::ModuleFacts::collect(suite);
    let external = project.unwrap_or(&summaries::NO_FACTS);
    if !external.is_empty() {
        facts.adopt(external, suite);
    }
    // Rules that look for one library call skip files that never name it.
    let active = if exempt {
        RuleSet::empty()
    } else {
        rules.for_source(source)
    };
    let mut checker = checker::Checker::new(source, &facts, &lines, &active, suite)
        .with_called_names(called)
        .with_source_kind(kind)
        .with_external(external);
    if project.is_some() {
        checker = checker.summarizing();
    }
    let (mut diagnostics, summary) = checker.check_module_summarized(suite);
    // What a test keeps dies with the test: the leak rules speak of a job's steps.
    let test_module = facts.test_module;
    diagnostics.retain(|d| {
        !exempt
            && rules.contains(d.rule)
            && (!test_module || d.rule.kind() != RuleKind::Leak)
            && !noqa.suppresses(
                lines.index().line_index(d.range.start()).to_zero_indexed(),
                d.rule,
            )
    });
    (
        CheckedSource {
            diagnostics,
            syntax_error: None,
            line_index: lines.into_built(),
        },
        summary,
    )
}

/// One pass over the tokens: `noqa` comments, and every identifier directly followed by `(`
/// that is not being defined (`def f(`, `class C(`), i.e. the names this file calls.
fn scan_tokens<'s>(
    tokens: &ruff_python_ast::token::Tokens,
    source: &'s str,
    lines: &lines::Lines,
) -> (noqa::NoqaMap, rustc_hash::FxHashSet<&'s str>) {
    use ruff_python_ast::token::TokenKind;
    let mut noqa = noqa::NoqaMap::default();
    let mut names = rustc_hash::FxHashSet::default();
    let mut before = TokenKind::Newline;
    let mut last: Option<(TokenKind, ruff_text_size::TextRange)> = None;
    for token in tokens.iter() {
        let kind = token.kind();
        if kind.is_trivia() {
            if kind == TokenKind::Comment {
                noqa.add_comment(&source[token.range()], token.start(), lines);
            }
            continue;
        }
        if let Some((last_kind, range)) = last {
            if last_kind == TokenKind::Name
                && kind == TokenKind::Lpar
                && !matches!(before, TokenKind::Def | TokenKind::Class)
            {
                names.insert(&source[range]);
            }
            before = last_kind;
        }
        last = Some((kind, token.range()));
    }
    (noqa, names)
}

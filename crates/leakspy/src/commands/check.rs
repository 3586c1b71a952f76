//! `leakspy check`: static leak rules over Python sources.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use leakspy_lint::output::{self, FileResult};
use leakspy_lint::summaries::{ExternalFacts, FileSummary};
use leakspy_lint::{
    apply_fixes, check_in_project, check_source_in, Applicability, Rule, RuleSet, SourceKind,
};

use std::sync::Arc;

use leakspy_lint::project::cache::SummaryCache;

use crate::check::project::{CacheAt, Checks};
use crate::check::{config, discover};

/// Files larger than this are skipped: generated code, not training scripts.
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// A notebook's size is mostly its outputs (plots as base64): its limit is higher.
const MAX_NOTEBOOK_BYTES: u64 = 256 * 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
    Sarif,
    Github,
}

#[derive(Args)]
pub struct CheckArgs {
    /// Files or folders to check (default: the current folder).
    pub paths: Vec<PathBuf>,
    /// Rules to run (codes, prefixes such as LS0, names, or ALL); replaces the configured set.
    #[arg(long, value_delimiter = ',', value_name = "RULES")]
    pub select: Option<Vec<String>>,
    /// Rules to add to the selected ones.
    #[arg(long, value_delimiter = ',', value_name = "RULES")]
    pub extend_select: Vec<String>,
    /// Rules to skip.
    #[arg(long, value_delimiter = ',', value_name = "RULES")]
    pub ignore: Vec<String>,
    /// Apply safe fixes.
    #[arg(long)]
    pub fix: bool,
    /// Apply unsafe fixes too (with --fix or --diff), or show them in the output.
    #[arg(long)]
    pub unsafe_fixes: bool,
    /// Show the fixes as a diff without writing them.
    #[arg(long)]
    pub diff: bool,
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output_format: OutputFormat,
    /// Exit 0 even when there are findings.
    #[arg(long)]
    pub exit_zero: bool,
    /// Print a count per rule instead of each finding.
    #[arg(long)]
    pub statistics: bool,
    /// Print findings only, no summary line.
    #[arg(long, short)]
    pub quiet: bool,
    /// Path of a pyproject.toml to read `[tool.leakspy]` from instead of the nearest one.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Do not read or write the cache of file summaries.
    #[arg(long)]
    pub no_cache: bool,
    /// Keep the cache of file summaries in this folder instead of `$XDG_CACHE_HOME/leakspy`
    /// (else `~/.cache/leakspy`).
    #[arg(long, value_name = "DIR", conflicts_with = "no_cache")]
    pub cache_dir: Option<PathBuf>,
}

pub(crate) struct Problem {
    pub path: PathBuf,
    pub reason: String,
    /// A problem that stops the tool from doing its job (exit 2), as opposed to a file that is
    /// deliberately skipped (binary, huge, a symlink loop).
    pub fatal: bool,
}

pub(crate) struct Checked {
    pub result: FileResult,
    /// Fixes applied (or, with --diff, that would be).
    pub applied: usize,
    /// With --diff: the unified diff of what the fixes change.
    pub diff: String,
}

pub(crate) enum Outcome {
    Checked(Box<Checked>),
    Problem(Problem),
}

pub fn run(args: CheckArgs) -> Result<u8> {
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    let loaded = match &args.config {
        Some(file) => {
            let dir = file
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            if !file.is_file() {
                bail!("--config {}: no such file", file.display());
            }
            config::load(dir)?
        }
        None => config::load(&paths[0])?,
    };
    let cfg = loaded.config;
    let select = args.select.as_deref().or(cfg.select.as_deref());
    let mut extend = cfg.extend_select.clone();
    extend.extend(args.extend_select.iter().cloned());
    let mut ignore = cfg.ignore.clone();
    ignore.extend(args.ignore.iter().cloned());
    let rules = RuleSet::from_selectors(select, &extend, &ignore)?;
    let per_file = per_file_rules(&cfg, &rules, loaded.root.as_deref())?;

    let excludes = discover::build_excludes(&cfg.exclude)?;
    let includes = discover::build_includes(&cfg.extend_include)?;
    let min_fix = if args.unsafe_fixes {
        Applicability::Unsafe
    } else {
        Applicability::Safe
    };
    // Every file of each path's project is checked as the walk finds it, then the files whose
    // facts from other files changed again (`check::project`); fixes are made after, with the
    // facts the last check of each file was given.
    let report =
        |path: &Path, module: Option<&str>, facts: &ExternalFacts| -> (Outcome, FileSummary) {
            let rules = per_file.rules_for(path, &rules);
            // A file of a library the analysis models (torch's own tree) is checked alone.
            let project = (!leakspy_lint::project::is_library_source(module)).then_some(facts);
            analyze(path, &rules, None, true, project)
        };
    let summarize = |path: &Path,
                     module: Option<&str>,
                     facts: &ExternalFacts,
                     cache: &SummaryCache|
     -> Arc<FileSummary> { summarize_file(path, module, facts, cache) };
    let cache_at = match (&args.cache_dir, args.no_cache) {
        (_, true) => CacheAt::Nowhere,
        (Some(d), false) => CacheAt::Dir(d.clone()),
        (None, false) => leakspy_lint::project::cache::default_dir()
            .map(CacheAt::Dir)
            .unwrap_or(CacheAt::Nowhere),
    };
    let (reported, skipped) = crate::check::project::check_paths(
        &paths,
        &excludes,
        &includes,
        &cache_at,
        &Checks {
            report: &report,
            summarize: &summarize,
        },
    );
    let fix = (args.fix || args.diff).then_some(min_fix);
    let outcomes: Vec<(PathBuf, Outcome)> = if fix.is_some() {
        use rayon::prelude::*;
        reported
            .into_par_iter()
            .map(|r| {
                let rules = per_file.rules_for(&r.path, &rules);
                let project = (!leakspy_lint::project::is_library_source(r.module.as_deref()))
                    .then_some(&*r.facts);
                let outcome = match r.outcome {
                    Outcome::Checked(_) => analyze(&r.path, &rules, fix, !args.diff, project).0,
                    problem => problem,
                };
                (r.path, outcome)
            })
            .collect()
    } else {
        reported.into_iter().map(|r| (r.path, r.outcome)).collect()
    };
    let mut problems: Vec<Problem> = skipped
        .into_iter()
        .map(|s| Problem {
            fatal: s.reason.starts_with("cannot read"),
            path: s.path,
            reason: s.reason,
        })
        .collect();

    let mut results = Vec::new();
    let mut fixed_total = 0;
    let mut diffs = String::new();
    for (_, outcome) in outcomes {
        match outcome {
            Outcome::Checked(c) => {
                fixed_total += c.applied;
                diffs.push_str(&c.diff);
                results.push(c.result);
            }
            Outcome::Problem(p) => problems.push(p),
        }
    }

    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for p in &problems {
        eprintln!(
            "leakspy: {}: {}: {}",
            if p.fatal { "error" } else { "warning" },
            p.path.display(),
            p.reason
        );
    }
    let findings: usize = results.iter().map(|r| r.diagnostics.len()).sum();
    let syntax_errors = results.iter().filter(|r| r.syntax_error.is_some()).count();
    if args.diff {
        write!(out, "{diffs}")?;
        if !args.quiet {
            eprintln!(
                "Would fix {fixed_total} finding{} ({} remaining would not be fixed).",
                plural(fixed_total),
                findings
            );
        }
    } else if args.statistics {
        write!(
            out,
            "{}",
            statistics(&results, args.output_format == OutputFormat::Json)
        )?;
    } else {
        let show_unsafe_hint = !args.unsafe_fixes;
        let rendered = match args.output_format {
            OutputFormat::Text => output::text::render(&results, true),
            OutputFormat::Json => output::json::render(&results),
            OutputFormat::Sarif => output::sarif::render(&results),
            OutputFormat::Github => output::github::render(&results),
        };
        write!(out, "{rendered}")?;
        if args.output_format == OutputFormat::Text && !args.quiet {
            let safe = count_fixes(&results, Applicability::Safe);
            let unsafe_only = count_fixes(&results, Applicability::Unsafe) - safe;
            if args.fix && fixed_total > 0 {
                writeln!(out, "Fixed {fixed_total} finding{}.", plural(fixed_total))?;
            }
            // "All checks passed" only when every file found was checked: a file skipped or
            // unreadable was not.
            let unchecked = problems.len();
            // A run that failed on a path has said so on stderr: no summary repeats it.
            let failed = problems.iter().any(|p| p.fatal);
            if findings + syntax_errors == 0 && results.is_empty() {
                if failed {
                } else if unchecked == 0 {
                    writeln!(
                        out,
                        "No Python files or notebooks found to check (.py, .pyi, .ipynb; `extend-include` adds others)."
                    )?;
                } else {
                    writeln!(
                        out,
                        "No file checked: {unchecked} could not be (see above)."
                    )?;
                }
            } else if findings + syntax_errors == 0 && unchecked == 0 {
                writeln!(
                    out,
                    "All checks passed! ({} file{} checked)",
                    results.len(),
                    plural(results.len())
                )?;
            } else if findings + syntax_errors == 0 {
                writeln!(
                    out,
                    "No findings in {} file{} checked; {unchecked} not checked (see above).",
                    results.len(),
                    plural(results.len())
                )?;
            } else {
                write!(
                    out,
                    "Found {} finding{} in {} file{} checked",
                    findings + syntax_errors,
                    plural(findings + syntax_errors),
                    results.len(),
                    plural(results.len())
                )?;
                if syntax_errors > 0 {
                    write!(out, " ({syntax_errors} with a syntax error)")?;
                }
                writeln!(out, ".")?;
                if safe > 0 {
                    writeln!(out, "[*] {safe} fixable with `leakspy check --fix`.")?;
                }
                if unsafe_only > 0 && show_unsafe_hint {
                    writeln!(
                        out,
                        "{unsafe_only} more fixable with `--fix --unsafe-fixes` (they change behaviour: review them with `--diff --unsafe-fixes`)."
                    )?;
                }
            }
        }
    }
    out.flush()?;
    if problems.iter().any(|p| p.fatal) {
        return Ok(crate::EXIT_ERROR);
    }
    if args.diff {
        return Ok(if fixed_total > 0 && !args.exit_zero {
            crate::EXIT_FINDINGS
        } else {
            crate::EXIT_CLEAN
        });
    }
    if findings + syntax_errors > 0 && !args.exit_zero {
        return Ok(crate::EXIT_FINDINGS);
    }
    Ok(crate::EXIT_CLEAN)
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn count_fixes(results: &[FileResult], min: Applicability) -> usize {
    results
        .iter()
        .flat_map(|r| &r.diagnostics)
        .filter(|d| d.fix.as_ref().is_some_and(|f| f.applicability >= min))
        .count()
}

/// Checks (and fixes) one file or notebook with the facts the project gives it.
fn analyze(
    path: &Path,
    rules: &RuleSet,
    fix: Option<Applicability>,
    write: bool,
    project: Option<&ExternalFacts>,
) -> (Outcome, FileSummary) {
    if discover::is_notebook(path) {
        match read_source(path, MAX_NOTEBOOK_BYTES) {
            Ok(text) => match crate::check::notebook::check(path, text, rules, fix, write, project)
            {
                Ok((c, summary)) => (Outcome::Checked(Box::new(c)), summary),
                Err(p) => (Outcome::Problem(p), FileSummary::default()),
            },
            Err(p) => (Outcome::Problem(p), FileSummary::default()),
        }
    } else {
        check_file(path, rules, fix, write, project)
    }
}

/// What a file of the project the command does not name tells the others: its summary, from
/// the cache when its text, module and facts are the ones it was made with.
fn summarize_file(
    path: &Path,
    module: Option<&str>,
    facts: &ExternalFacts,
    cache: &SummaryCache,
) -> Arc<FileSummary> {
    if leakspy_lint::project::is_library_source(module) {
        return Arc::default();
    }
    let notebook = discover::is_notebook(path);
    let limit = if notebook {
        MAX_NOTEBOOK_BYTES
    } else {
        MAX_FILE_BYTES
    };
    let Ok(text) = read_source(path, limit) else {
        return Arc::default();
    };
    let key = SummaryCache::key(module, notebook, &text, facts);
    if let Some(s) = cache.get(key) {
        return s;
    }
    let summary = if notebook {
        crate::check::notebook::summary(text, facts).unwrap_or_default()
    } else {
        std::panic::catch_unwind(|| {
            check_in_project(&text, &RuleSet::empty(), SourceKind::Python, facts).1
        })
        .unwrap_or_default()
    };
    let summary = Arc::new(summary);
    cache.put(key, summary.clone());
    summary
}

/// Reads, checks and (when asked) fixes one file, with what the project says of other files;
/// returns the file's summary beside. Fixing loops until no fix applies, at most a few rounds,
/// so fixes that depend on each other converge as in ruff.
fn check_file(
    path: &Path,
    rules: &RuleSet,
    fix: Option<Applicability>,
    write: bool,
    project: Option<&ExternalFacts>,
) -> (Outcome, FileSummary) {
    let source = match read_source(path, MAX_FILE_BYTES) {
        Ok(s) => s,
        Err(p) => return (Outcome::Problem(p), FileSummary::default()),
    };
    // The text is copied only when a fix changes it.
    let checked = std::panic::catch_unwind(|| {
        let mut fixed_text: Option<String> = None;
        let mut applied_total = 0;
        let (mut result, summary) = check_source_in(&source, rules, SourceKind::Python, project);
        if let Some(min) = fix {
            for _ in 0..4 {
                if result.syntax_error.is_some() {
                    break;
                }
                let current = fixed_text.as_deref().unwrap_or(&source);
                let fixed = apply_fixes(current, &result.diagnostics, min);
                if fixed.applied == 0 {
                    break;
                }
                let (again, _) = check_source_in(&fixed.source, rules, SourceKind::Python, project);
                if again.syntax_error.is_some() {
                    // Never write a fix that breaks the file.
                    break;
                }
                applied_total += fixed.applied;
                fixed_text = Some(fixed.source);
                result = again;
            }
        }
        (fixed_text, applied_total, result, summary)
    });
    let (fixed_text, applied, mut result, summary) = match checked {
        Ok(v) => v,
        Err(_) => {
            return (Outcome::Problem(Problem {
                path: path.to_path_buf(),
                reason: "internal error while checking this file (a leakspy bug: please report it with the file)".into(),
                fatal: true,
            }), FileSummary::default());
        }
    };
    if let Some(text) = fixed_text.as_deref().filter(|_| write) {
        if let Err(e) = std::fs::write(path, text) {
            return (
                Outcome::Problem(Problem {
                    path: path.to_path_buf(),
                    reason: format!("cannot write the fixed file: {e}"),
                    fatal: true,
                }),
                summary,
            );
        }
    }
    let display = display_path(path);
    let diff = match (&fixed_text, write) {
        (Some(after), false) => {
            let name = display.display().to_string();
            similar::TextDiff::from_lines(&source, after)
                .unified_diff()
                .header(&name, &name)
                .to_string()
        }
        _ => String::new(),
    };
    // A clean file's text is not needed for the output: drop it now rather than hold every
    // source of a large tree until the end.
    let clean = result.diagnostics.is_empty() && result.syntax_error.is_none() && applied == 0;
    let (current, line_index) = if clean {
        (
            String::new(),
            ruff_source_file::LineIndex::from_source_text(""),
        )
    } else {
        let current = fixed_text.unwrap_or(source);
        let line_index = result.take_line_index(&current);
        (current, line_index)
    };
    (
        Outcome::Checked(Box::new(Checked {
            result: FileResult {
                path: display,
                source: current,
                line_index,
                diagnostics: result.diagnostics,
                syntax_error: result.syntax_error,
                notebook: None,
            },
            applied,
            diff,
        })),
        summary,
    )
}

/// The path as shown: without a leading `./`.
pub(crate) fn display_path(path: &Path) -> PathBuf {
    path.strip_prefix("./").unwrap_or(path).to_path_buf()
}

pub(crate) fn read_source(path: &Path, max_bytes: u64) -> std::result::Result<String, Problem> {
    let problem = |reason: String, fatal: bool| Problem {
        path: path.to_path_buf(),
        reason,
        fatal,
    };
    // One open, and the size from the open handle: the path is looked up once per file.
    let mut file =
        std::fs::File::open(path).map_err(|e| problem(format!("cannot read: {e}"), true))?;
    let meta = file
        .metadata()
        .map_err(|e| problem(format!("cannot read: {e}"), true))?;
    if meta.len() > max_bytes {
        return Err(problem(
            format!(
                "skipped: {} MiB is larger than the {} MiB limit for {}",
                meta.len() / (1024 * 1024),
                max_bytes / (1024 * 1024),
                if discover::is_notebook(path) {
                    "notebooks"
                } else {
                    "source files"
                }
            ),
            false,
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize + 1);
    std::io::Read::read_to_end(&mut file, &mut bytes)
        .map_err(|e| problem(format!("cannot read: {e}"), true))?;
    drop(file);
    if bytes[..bytes.len().min(8192)].contains(&0) {
        return Err(problem(
            "skipped: binary file (contains NUL bytes), not Python source".into(),
            false,
        ));
    }
    match String::from_utf8(bytes) {
        Ok(mut s) => {
            if s.starts_with('\u{feff}') {
                s.drain(..3);
            }
            Ok(s)
        }
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            let line = e.as_bytes()[..at].iter().filter(|b| **b == b'\n').count() + 1;
            Err(problem(
                format!("skipped: not UTF-8 (invalid byte at offset {at}, line {line}); Python 3 sources must be UTF-8 or declare no other encoding"),
                false,
            ))
        }
    }
}

struct PerFile {
    matchers: Vec<(globset::GlobMatcher, Vec<String>)>,
    root: Option<PathBuf>,
}

impl PerFile {
    fn rules_for(&self, path: &Path, base: &RuleSet) -> RuleSet {
        if self.matchers.is_empty() {
            return base.clone();
        }
        let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let rel = self
            .root
            .as_ref()
            .and_then(|r| abs.strip_prefix(r).ok())
            .unwrap_or(path);
        let mut ignored = Vec::new();
        for (m, codes) in &self.matchers {
            if m.is_match(rel) || m.is_match(path) {
                ignored.extend(codes.iter().cloned());
            }
        }
        if ignored.is_empty() {
            return base.clone();
        }
        let keep: Vec<String> = base.rules().map(|r| r.code().to_string()).collect();
        RuleSet::from_selectors(Some(&keep), &[], &ignored).unwrap_or_else(|_| base.clone())
    }
}

fn per_file_rules(cfg: &config::Config, _rules: &RuleSet, root: Option<&Path>) -> Result<PerFile> {
    let mut matchers = Vec::new();
    for (pattern, codes) in &cfg.per_file_ignores {
        for c in codes {
            RuleSet::matching(c).with_context(|| format!("per-file-ignores `{pattern}`"))?;
        }
        let glob = globset::Glob::new(pattern)
            .with_context(|| format!("invalid per-file-ignores pattern `{pattern}`"))?;
        matchers.push((glob.compile_matcher(), codes.clone()));
    }
    Ok(PerFile {
        matchers,
        root: root.map(Path::to_path_buf),
    })
}

fn statistics(results: &[FileResult], json: bool) -> String {
    let mut counts: Vec<(Rule, usize, usize)> = Vec::new();
    for d in results.iter().flat_map(|r| &r.diagnostics) {
        let fixable = usize::from(
            d.fix
                .as_ref()
                .is_some_and(|f| f.applicability == Applicability::Safe),
        );
        match counts.iter_mut().find(|(r, _, _)| *r == d.rule) {
            Some(e) => {
                e.1 += 1;
                e.2 += fixable;
            }
            None => counts.push((d.rule, 1, fixable)),
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    if json {
        let items: Vec<_> = counts
            .iter()
            .map(|(r, n, f)| serde_json::json!({"code": r.code(), "name": r.name(), "count": n, "fixable": f}))
            .collect();
        return serde_json::to_string_pretty(&items).unwrap_or_default() + "\n";
    }
    let mut s = String::new();
    for (r, n, f) in &counts {
        s.push_str(&format!(
            "{n:>5}\t{}\t{}\t{}\n",
            r.code(),
            if *f > 0 { "[*]" } else { "[ ]" },
            r.name()
        ));
    }
    s
}

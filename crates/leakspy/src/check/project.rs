//! `leakspy check` over projects: each path's project root (`leakspy_lint::project::root`),
//! every file of the project checked once as the walk finds it, then the rounds of the project
//! fixed point (`leakspy_lint::project::solve`) that re-check the files whose facts from other
//! files changed. Files the command names are checked with the rules; the rest of their
//! project only tells the others what its functions do (its summary, cached by content hash).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use globset::GlobSet;
use leakspy_lint::project::cache::SummaryCache;
use leakspy_lint::project::{root, solve, IndexedFile};
use leakspy_lint::summaries::{ExternalFacts, FileSummary};

use crate::check::discover::{self, Skipped};
use crate::commands::check::Outcome;

/// How a file of the project is checked: `report` for the files the command names (their
/// findings, with the facts given), `summarize` for the others (only what they tell the
/// project).
pub(crate) struct Checks<'a> {
    #[allow(clippy::type_complexity)]
    pub report: &'a (dyn Fn(&Path, Option<&str>, &ExternalFacts) -> (Outcome, FileSummary) + Sync),
    #[allow(clippy::type_complexity)]
    pub summarize:
        &'a (dyn Fn(&Path, Option<&str>, &ExternalFacts, &SummaryCache) -> Arc<FileSummary> + Sync),
}

/// Where summaries are cached: in a folder (one file per project root in it), or nowhere.
pub(crate) enum CacheAt {
    Dir(PathBuf),
    Nowhere,
}

/// A reported file's outcome, its module, and the facts its check was given.
pub(crate) struct Reported {
    pub path: PathBuf,
    pub module: Option<String>,
    pub outcome: Outcome,
    pub facts: Arc<ExternalFacts>,
}

struct Job {
    /// As the walk gave it (shown in the output for reported files).
    path: PathBuf,
    canonical: PathBuf,
    reported: bool,
    outcome: Mutex<Option<Outcome>>,
    summary: Arc<FileSummary>,
}

/// Checks `paths`, project by project. Returns the outcomes of the files the paths name (in
/// path order, with the facts each was checked with) and what could not be walked.
pub(crate) fn check_paths(
    paths: &[PathBuf],
    excludes: &GlobSet,
    includes: &GlobSet,
    cache: &CacheAt,
    checks: &Checks,
) -> (Vec<Reported>, Vec<Skipped>) {
    let mut groups: BTreeMap<PathBuf, Vec<PathBuf>> = BTreeMap::new();
    for p in paths {
        groups
            .entry(root::find_root(p))
            .or_default()
            .push(p.clone());
    }
    let mut reported = Vec::new();
    let mut skipped = Vec::new();
    for (root, paths) in groups {
        let cache = match cache {
            CacheAt::Dir(d) => SummaryCache::open(d, &root),
            CacheAt::Nowhere => SummaryCache::in_memory(),
        };
        let (r, s) = check_project(&root, &paths, excludes, includes, &cache, checks);
        // A cache that cannot be written costs the next run time, not this one its findings.
        let _ = cache.save();
        reported.extend(r);
        skipped.extend(s);
    }
    reported.sort_by(|a, b| a.path.cmp(&b.path));
    (reported, skipped)
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

fn check_project(
    root: &Path,
    paths: &[PathBuf],
    excludes: &GlobSet,
    includes: &GlobSet,
    cache: &SummaryCache,
    checks: &Checks,
) -> (Vec<Reported>, Vec<Skipped>) {
    let module = |canonical: &Path| root::module_name(root, canonical);
    let whole = paths.iter().all(|p| canonical(p) == root);
    let jobs: Mutex<Vec<Job>> = Mutex::default();
    let none = ExternalFacts::NONE;
    // Each file is checked as the walk finds it: the files named, then the rest of the project.
    let skipped = rayon::scope(|s| {
        let (jobs, none, module) = (&jobs, &none, &module);
        let mut named: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
        let mut skipped = discover::discover(paths, excludes, includes, &mut |path| {
            let canonical = canonical(&path);
            named.insert(canonical.clone());
            s.spawn(move |_| {
                let m = module(&canonical);
                let (outcome, summary) = (checks.report)(&path, m.as_deref(), none);
                jobs.lock().unwrap_or_else(|e| e.into_inner()).push(Job {
                    path,
                    canonical,
                    reported: true,
                    outcome: Mutex::new(Some(outcome)),
                    summary: Arc::new(summary),
                });
            });
        });
        if !whole {
            let rest = discover::discover(&[root.to_path_buf()], excludes, includes, &mut |path| {
                if named.contains(&path) {
                    return;
                }
                s.spawn(move |_| {
                    let m = module(&path);
                    let summary = (checks.summarize)(&path, m.as_deref(), none, cache);
                    jobs.lock().unwrap_or_else(|e| e.into_inner()).push(Job {
                        canonical: path.clone(),
                        path,
                        reported: false,
                        outcome: Mutex::new(None),
                        summary,
                    });
                });
            });
            // The rest of the project is context: what cannot be walked there is not this
            // command's problem.
            drop(rest);
        }
        std::mem::take(&mut skipped)
    });
    let mut jobs = jobs.into_inner().unwrap_or_else(|e| e.into_inner());
    jobs.sort_by(|a, b| a.canonical.cmp(&b.canonical));
    let mut files: Vec<IndexedFile> = jobs
        .iter()
        .map(|j| {
            let shown = j.canonical.strip_prefix(root).unwrap_or(&j.path);
            IndexedFile {
                path: shown.to_string_lossy().into_owned(),
                module: module(&j.canonical),
                is_package: root::is_package_init(&j.canonical),
                summary: j.summary.clone(),
            }
        })
        .collect();
    let modules: Vec<Option<String>> = files.iter().map(|f| f.module.clone()).collect();
    let again = |i: usize, facts: &ExternalFacts| -> Arc<FileSummary> {
        let job = &jobs[i];
        if job.reported {
            let (outcome, summary) = (checks.report)(&job.path, modules[i].as_deref(), facts);
            *job.outcome.lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
            Arc::new(summary)
        } else {
            (checks.summarize)(&job.canonical, modules[i].as_deref(), facts, cache)
        }
    };
    let facts = solve(&mut files, &again);
    let reported = jobs
        .into_iter()
        .zip(facts)
        .zip(modules)
        .filter(|((j, _), _)| j.reported)
        .filter_map(|((j, facts), module)| {
            let outcome = j.outcome.into_inner().unwrap_or_else(|e| e.into_inner())?;
            Some(Reported {
                path: j.path,
                module,
                outcome,
                facts,
            })
        })
        .collect();
    (reported, skipped)
}

//! The project: the first layer of the analysis (project index -> function summaries ->
//! semantic model -> rules). Which folder a checked path belongs to and the module names of its
//! files (`root.rs`), the index of every file's summary (`index.rs`), the fixed point that
//! re-checks the files whose facts from other files changed (below), and the cache of
//! summaries by content hash (`cache.rs`).

pub mod cache;
pub mod index;
pub mod root;

use std::sync::Arc;

use rayon::prelude::*;

use crate::summaries::{ExternalFacts, FileSummary};
pub use index::{IndexedFile, ProjectIndex};

/// Rounds of re-checking at most: each round re-checks the files whose facts changed since
/// their last check (a summary that changed changes the facts of the files using it). Most
/// projects settle in two; a chain of summaries through more files than this is cut.
pub const MAX_ROUNDS: usize = 4;

/// The fixed point over the project. `files` hold the summaries of a first check of every file
/// with no facts from other files (`ExternalFacts::NONE`); `check(i, facts)` checks file `i`
/// again with `facts` and returns its new summary (the caller keeps whatever else the check
/// gives, its findings). Returns the facts each file's last check was given: the findings of
/// that check are the file's findings. The rounds depend on the project's files alone, never on
/// which of them are reported, so a file checked alone inside a project gets the findings it
/// gets when the whole project is checked.
pub fn solve(
    files: &mut [IndexedFile],
    check: &(dyn Fn(usize, &ExternalFacts) -> Arc<FileSummary> + Sync),
) -> Vec<Arc<ExternalFacts>> {
    let none = Arc::new(ExternalFacts::NONE);
    let mut used: Vec<Arc<ExternalFacts>> = vec![none; files.len()];
    for _ in 0..MAX_ROUNDS {
        let facts: Vec<(usize, ExternalFacts)> = {
            let index = ProjectIndex::build(files);
            (0..files.len())
                .into_par_iter()
                .filter_map(|i| {
                    let f = index.facts_for(i);
                    (f != *used[i]).then_some((i, f))
                })
                .collect()
        };
        if facts.is_empty() {
            break;
        }
        let checked: Vec<(usize, Arc<FileSummary>, Arc<ExternalFacts>)> = facts
            .into_par_iter()
            .map(|(i, f)| {
                let f = Arc::new(f);
                (i, check(i, &f), f)
            })
            .collect();
        for (i, summary, f) in checked {
            files[i].summary = summary;
            used[i] = f;
        }
    }
    used
}

/// Is the module part of a library the analysis models itself (torch's, numpy's or
/// matplotlib's own tree)? Its files are checked alone: the index reads the library from its
/// model, not from its sources, so they neither tell nor are told anything.
pub fn is_library_source(module: Option<&str>) -> bool {
    module.is_some_and(|m| {
        crate::summaries::extract::is_modelled_or_standard(m.split('.').next().unwrap_or(m))
    })
}

/// One source text of a project held in memory: where it is and what it is.
pub struct Source<'a> {
    /// The path relative to the root (`utils/metrics.py`).
    pub path: &'a str,
    pub text: &'a str,
    pub kind: crate::SourceKind<'a>,
}

/// Checks the sources of one project held in memory (a test's fixture folder, an editor's
/// buffers): every file with what the others tell it, through the same rounds as `check`.
/// Module names come from the paths, as from a root with no package above it.
pub fn check_sources(sources: &[Source], rules: &crate::RuleSet) -> Vec<crate::CheckedSource> {
    let results: Vec<std::sync::Mutex<Option<crate::CheckedSource>>> =
        sources.iter().map(|_| Default::default()).collect();
    let modules: Vec<Option<String>> = sources
        .iter()
        .map(|s| root::module_name_from_path(std::path::Path::new(s.path)))
        .collect();
    let run = |i: usize, facts: &ExternalFacts| -> Arc<FileSummary> {
        let s = &sources[i];
        let project = (!is_library_source(modules[i].as_deref())).then_some(facts);
        let (checked, summary) = crate::check_source_in(s.text, rules, s.kind, project);
        *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(checked);
        Arc::new(summary)
    };
    let mut files: Vec<IndexedFile> = sources
        .par_iter()
        .enumerate()
        .map(|(i, s)| {
            let path = std::path::Path::new(s.path);
            IndexedFile {
                path: s.path.to_string(),
                module: modules[i].clone(),
                is_package: root::is_package_init(path),
                summary: run(i, &ExternalFacts::NONE),
            }
        })
        .collect();
    solve(&mut files, &run);
    results
        .into_iter()
        .map(|r| {
            r.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every source was checked")
        })
        .collect()
}

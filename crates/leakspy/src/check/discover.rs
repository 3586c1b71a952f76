//! Which files to check: walks folders honouring `.gitignore`, skips virtual environments and
//! `site-packages` unless they are named on the command line, and reports what it cannot walk.
//! A walk finds Python files (`.py`, `.pyi`), Jupyter notebooks (`.ipynb`) and what the
//! configuration's `extend-include` adds.

use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use ignore::WalkBuilder;

/// A path that could not be walked, with the reason.
pub struct Skipped {
    pub path: PathBuf,
    pub reason: String,
}

/// Folder names never entered unless named explicitly.
const SKIP_DIRS: &[&str] = &[
    "site-packages",
    "dist-packages",
    "__pycache__",
    "node_modules",
    ".git",
    ".hg",
    ".tox",
    ".nox",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
];

pub fn build_excludes(patterns: &[String]) -> anyhow::Result<GlobSet> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        b.add(Glob::new(p).map_err(|e| anyhow::anyhow!("invalid exclude pattern `{p}`: {e}"))?);
        // `build` also matches `build/**`, like ruff.
        if !p.contains('*') {
            b.add(
                Glob::new(&format!("**/{p}"))
                    .map_err(|e| anyhow::anyhow!("invalid exclude pattern `{p}`: {e}"))?,
            );
            b.add(
                Glob::new(&format!("**/{p}/**"))
                    .map_err(|e| anyhow::anyhow!("invalid exclude pattern `{p}`: {e}"))?,
            );
        }
    }
    Ok(b.build()?)
}

/// `extend-include`: more files to check in folder walks, matched against the walked path or
/// the file's name.
pub fn build_includes(patterns: &[String]) -> anyhow::Result<GlobSet> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        b.add(
            Glob::new(p)
                .map_err(|e| anyhow::anyhow!("invalid extend-include pattern `{p}`: {e}"))?,
        );
    }
    Ok(b.build()?)
}

/// Whether a path names a Jupyter notebook (read as cells, not as Python text).
pub fn is_notebook(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "ipynb")
}

/// Whether a walk checks this file.
fn is_checked(path: &Path, includes: &GlobSet) -> bool {
    path.extension()
        .is_some_and(|e| e == "py" || e == "pyi" || e == "ipynb")
        || (!includes.is_empty()
            && (includes.is_match(path) || path.file_name().is_some_and(|n| includes.is_match(n))))
}

fn is_virtualenv(dir: &Path) -> bool {
    dir.join("pyvenv.cfg").is_file() || dir.join("conda-meta").is_dir()
}

/// Walks `paths` and hands each file to `on_file` as soon as it is found (so checking starts
/// while the walk goes on), each path once; returns what could not be walked.
pub fn discover(
    paths: &[PathBuf],
    excludes: &GlobSet,
    includes: &GlobSet,
    on_file: &mut dyn FnMut(PathBuf),
) -> Vec<Skipped> {
    let mut seen = std::collections::HashSet::new();
    let mut on_file = |path: PathBuf| {
        if seen.insert(path.clone()) {
            on_file(path);
        }
    };
    let mut skipped = Vec::new();
    for root in paths {
        match std::fs::metadata(root) {
            Err(e) => {
                skipped.push(Skipped {
                    path: root.clone(),
                    reason: format!("cannot read: {e}"),
                });
                continue;
            }
            Ok(meta) if meta.is_file() => {
                // A file named explicitly is checked whatever its extension or location.
                on_file(root.clone());
                continue;
            }
            Ok(_) => {}
        }
        let excludes = excludes.clone();
        let explicit = root.clone();
        let walker = WalkBuilder::new(root)
            .follow_links(true)
            .hidden(false)
            .git_ignore(true)
            .git_global(false)
            .git_exclude(true)
            .require_git(false)
            .filter_entry(move |entry| {
                let path = entry.path();
                if path == explicit {
                    return true;
                }
                if excludes.is_match(path) {
                    return false;
                }
                if entry.file_type().is_some_and(|t| t.is_dir()) {
                    let name = entry.file_name().to_string_lossy();
                    if SKIP_DIRS.contains(&name.as_ref()) || is_virtualenv(path) {
                        return false;
                    }
                }
                true
            })
            .build();
        for entry in walker {
            match entry {
                Ok(entry) => {
                    let is_file = entry.file_type().is_some_and(|t| t.is_file());
                    if is_file && is_checked(entry.path(), includes) {
                        on_file(entry.into_path());
                    }
                }
                Err(err) => {
                    let (path, reason) = describe_walk_error(&err);
                    skipped.push(Skipped {
                        path: path.unwrap_or_else(|| root.clone()),
                        reason,
                    });
                }
            }
        }
    }
    skipped
}

fn describe_walk_error(err: &ignore::Error) -> (Option<PathBuf>, String) {
    match err {
        ignore::Error::WithPath { path, err } => (Some(path.clone()), describe_walk_error(err).1),
        ignore::Error::Loop { ancestor, child } => (
            Some(child.clone()),
            format!(
                "symbolic link loop: it points back to {} (skipped)",
                ancestor.display()
            ),
        ),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => {
            describe_walk_error(err)
        }
        other => (None, other.to_string()),
    }
}

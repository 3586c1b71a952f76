//! The fixes of a plan, made in the scratch copy; the patch they make (a
//! unified diff with `a/` and `b/` paths from the project folder, for
//! `git apply` and `patch -p1`); and `--apply`, which writes the fixed
//! files into the user's project only where they are as `fix` found them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use leakspy_lint::notebook::Notebook;
use leakspy_lint::{apply_fixes, check_source, select_fixes, Applicability, Diagnostic, RuleSet};

use super::plan::Planned;
use super::scratch::Scratch;

/// A file the fixes changed.
pub(super) struct Changed {
    /// The user's file.
    pub user: PathBuf,
    pub original: String,
    pub fixed: String,
    /// The fixes made in it.
    pub applied: Vec<Planned>,
}

/// A planned fix that could not be made, and why.
pub(super) struct Missed {
    pub fix: Planned,
    pub why: String,
}

/// Makes the planned fixes in the scratch copy. `cwd`: the job's folder,
/// which the plan's relative paths are relative to.
pub(super) fn make(
    planned: &[Planned],
    cwd: &str,
    scratch: &Scratch,
) -> Result<(Vec<Changed>, Vec<Missed>)> {
    let mut by_file: BTreeMap<String, Vec<Planned>> = BTreeMap::new();
    for p in planned {
        by_file.entry(p.file.clone()).or_default().push(p.clone());
    }
    // The files fixed, in the scratch copy: each is checked with the others and the modules
    // beside them, as the join checked the user's.
    let copies: Vec<std::path::PathBuf> = by_file
        .keys()
        .filter_map(|f| scratch.map(&scratch.unmap(&leakspy_report::resolve_source(f, cwd))))
        .collect();
    // Paths are told from the job's folder, as the join tells them (module names).
    let job_dir = scratch
        .map(Path::new(cwd))
        .unwrap_or_else(|| scratch.dir().to_path_buf());
    let mut changed = Vec::new();
    let mut missed = Vec::new();
    for (file, wanted) in by_file {
        let user = scratch.unmap(&leakspy_report::resolve_source(&file, cwd));
        let Some(copy) = scratch.map(&user) else {
            missed.extend(wanted.into_iter().map(|fix| Missed {
                fix,
                why: format!("{} is outside the project folder", user.display()),
            }));
            continue;
        };
        let original = std::fs::read_to_string(&copy)
            .with_context(|| format!("cannot read {} in the scratch copy", copy.display()))?;
        let notebook = copy.extension().is_some_and(|e| e == "ipynb");
        let made = if notebook {
            fix_notebook(&original, &wanted)
        } else {
            fix_source(&copy, &original, &wanted, (&copies, &job_dir))
        };
        let (fixed, applied) = match made {
            Ok(v) => v,
            Err(why) => {
                missed.extend(wanted.into_iter().map(|fix| Missed {
                    fix,
                    why: why.clone(),
                }));
                continue;
            }
        };
        for w in &wanted {
            if !applied.contains(w) {
                missed.push(Missed {
                    fix: w.clone(),
                    why: "its edit overlaps another fix's, or the finding is gone".to_string(),
                });
            }
        }
        if applied.is_empty() {
            continue;
        }
        std::fs::write(&copy, &fixed)
            .with_context(|| format!("cannot write {} in the scratch copy", copy.display()))?;
        changed.push(Changed {
            user,
            original,
            fixed,
            applied,
        });
    }
    Ok((changed, missed))
}

/// Adds the files of a later round to those changed so far: a file fixed
/// again keeps the text it had in the user's project.
pub(super) fn merge(all: &mut Vec<Changed>, more: Vec<Changed>) {
    for c in more {
        match all.iter_mut().find(|a| a.user == c.user) {
            Some(a) => {
                a.fixed = c.fixed;
                a.applied.extend(c.applied);
            }
            None => all.push(c),
        }
    }
}

/// The least applicability that lets every wanted fix through (the plan
/// already chose which ones).
fn least(wanted: &[Planned]) -> Applicability {
    if wanted.iter().all(|w| w.safe) {
        Applicability::Safe
    } else {
        Applicability::Unsafe
    }
}

/// The diagnostics of `diagnostics` that `wanted` names (rule and place:
/// `place_of` says a diagnostic's cell, if any, and line), with the plan
/// entry each one is.
fn chosen<'a>(
    diagnostics: &'a [Diagnostic],
    place_of: impl Fn(&Diagnostic) -> (Option<usize>, u64),
    wanted: &[Planned],
) -> Vec<(&'a Diagnostic, Planned)> {
    diagnostics
        .iter()
        .filter(|d| d.fix.is_some())
        .filter_map(|d| {
            let (cell, line) = place_of(d);
            wanted
                .iter()
                .find(|w| w.rule == d.rule.code() && w.cell == cell && w.line == line)
                .map(|w| (d, w.clone()))
        })
        .collect()
}

/// `path`: the file in the scratch copy, checked with the other files fixed (`fixed`) and the
/// modules beside them all, as the join checked the user's (a finding that needs what another
/// module says is found again here: a meter in `utils/` told by `train.py` what it is given).
fn fix_source(
    path: &Path,
    source: &str,
    wanted: &[Planned],
    (fixed, job_dir): (&[std::path::PathBuf], &Path),
) -> Result<(String, Vec<Planned>), String> {
    let mut checked = check_with_beside(path, source, fixed, job_dir);
    if let Some(e) = &checked.syntax_error {
        return Err(format!("the file no longer parses ({})", e.message));
    }
    let index = checked.take_line_index(source);
    let picked = chosen(
        &checked.diagnostics,
        |d| (None, index.line_index(d.range.start()).get() as u64),
        wanted,
    );
    let owned: Vec<Diagnostic> = picked.iter().map(|(d, _)| (*d).clone()).collect();
    let fixed = apply_fixes(source, &owned, least(wanted));
    if check_source(&fixed.source, &RuleSet::default())
        .syntax_error
        .is_some()
    {
        return Err("the fixed file would not parse".to_string());
    }
    // `apply_fixes` skips a fix whose edits overlap another's: the same
    // choice, asked of `select_fixes` on the same findings, says which.
    let (edits, _) = select_fixes(&owned, least(wanted), |_| true);
    let picked_owned: Vec<(&Diagnostic, Planned)> = owned
        .iter()
        .zip(picked.iter().map(|(_, p)| p.clone()))
        .collect();
    Ok((fixed.source, accepted(&picked_owned, &edits)))
}

fn check_with_beside(
    path: &Path,
    source: &str,
    fixed: &[std::path::PathBuf],
    job_dir: &Path,
) -> leakspy_lint::CheckedSource {
    let mut files: Vec<std::path::PathBuf> = fixed.to_vec();
    if !files.iter().any(|f| f == path) {
        files.push(path.to_path_buf());
    }
    // (The job's own folder too: its script imports what is there by name.)
    let mut beside = leakspy_report::modules_beside(
        &files
            .iter()
            .cloned()
            .chain(std::iter::once(job_dir.join("__main__.py")))
            .collect::<Vec<_>>(),
    );
    for f in fixed.iter().filter(|f| f.as_path() != path) {
        if let Ok(text) = std::fs::read_to_string(f) {
            beside.push((f.clone(), text));
        }
    }
    if beside.is_empty() {
        return check_source(source, &RuleSet::default());
    }
    // Relative to the job's folder (`utils/meters.py`), as the join names them.
    let name = |p: &Path| {
        p.strip_prefix(job_dir)
            .ok()
            .filter(|r| !r.as_os_str().is_empty())
            .or_else(|| p.file_name().map(Path::new))
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let own = name(path);
    let names: Vec<String> = beside.iter().map(|(p, _)| name(p)).collect();
    let sources: Vec<leakspy_lint::project::Source> = std::iter::once((own.as_str(), source))
        .chain(
            names
                .iter()
                .zip(&beside)
                .map(|(n, (_, text))| (n.as_str(), text.as_str())),
        )
        .map(|(path, text)| leakspy_lint::project::Source {
            path,
            text,
            kind: leakspy_lint::SourceKind::Python,
        })
        .collect();
    leakspy_lint::project::check_sources(&sources, &RuleSet::default())
        .into_iter()
        .next()
        .unwrap_or_else(|| check_source(source, &RuleSet::default()))
}

fn fix_notebook(text: &str, wanted: &[Planned]) -> Result<(String, Vec<Planned>), String> {
    let notebook = Notebook::parse(text.to_string()).map_err(|e| e.to_string())?;
    let joined = notebook.joined();
    let mut checked = check_source(&joined.checked, &RuleSet::default());
    let index = checked.take_line_index(&joined.display);
    // The plan names a notebook's findings by cell and row, as
    // `leakspy_report::attach_static_findings` does.
    let picked = chosen(
        &checked.diagnostics,
        |d| {
            let (cell, row) = joined
                .index
                .cell_row(index.line_index(d.range.start()).get());
            (Some(cell), row as u64)
        },
        wanted,
    );
    let owned: Vec<Diagnostic> = picked.iter().map(|(d, _)| (*d).clone()).collect();
    let (edits, _) = select_fixes(&owned, least(wanted), |f| joined.allows(f));
    let mut fixed = notebook.clone();
    fixed.apply(&joined, &edits);
    if check_source(&fixed.joined().checked, &RuleSet::default())
        .syntax_error
        .is_some()
    {
        return Err("the fixed notebook's code would not parse".to_string());
    }
    let picked_owned: Vec<(&Diagnostic, Planned)> = owned
        .iter()
        .zip(picked.iter().map(|(_, p)| p.clone()))
        .collect();
    Ok((fixed.to_json(), accepted(&picked_owned, &edits)))
}

/// The plan entries whose fixes `select_fixes` accepted (all of a fix's
/// edits among the accepted ones; it skips a fix that overlaps another).
fn accepted(picked: &[(&Diagnostic, Planned)], edits: &[&leakspy_lint::Edit]) -> Vec<Planned> {
    picked
        .iter()
        .filter(|(d, _)| {
            d.fix.as_ref().is_some_and(|f| {
                f.edits
                    .iter()
                    .all(|e| edits.iter().any(|a| std::ptr::eq(*a, e)))
            })
        })
        .map(|(_, p)| p.clone())
        .collect()
}

/// Where the patch's paths start: the top of the git work tree that holds
/// the project (`git apply` in a repository takes paths from its top, and
/// skips the others), else the project folder.
pub(super) fn patch_base(root: &Path) -> PathBuf {
    root.ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(root)
        .to_path_buf()
}

/// The unified diff of every changed file, paths from `base`.
pub(super) fn unified(changed: &[Changed], base: &Path) -> String {
    let mut out = String::new();
    for c in changed {
        let rel = c.user.strip_prefix(base).unwrap_or(&c.user);
        let rel = rel.display().to_string();
        out.push_str(&format!("diff --git a/{rel} b/{rel}\n"));
        out.push_str(
            &similar::TextDiff::from_lines(&c.original, &c.fixed)
                .unified_diff()
                .header(&format!("a/{rel}"), &format!("b/{rel}"))
                .to_string(),
        );
    }
    out
}

/// Writes the fixed files into the user's project, all or none: when a
/// file changed since `fix` read it (or cannot be read), nothing is written
/// and the reasons are returned, since the patch would no longer be the one
/// proven.
pub(super) fn apply(changed: &[Changed]) -> Result<(), Vec<String>> {
    let stale: Vec<String> = changed
        .iter()
        .filter_map(|c| match std::fs::read_to_string(&c.user) {
            Ok(now) if now == c.original => None,
            Ok(_) => Some(format!(
                "{} changed since `leakspy fix` copied it",
                c.user.display()
            )),
            Err(e) => Some(format!("cannot read {}: {e}", c.user.display())),
        })
        .collect();
    if !stale.is_empty() {
        return Err(stale);
    }
    let mut failed = Vec::new();
    for c in changed {
        if let Err(e) = std::fs::write(&c.user, &c.fixed) {
            failed.push(format!("cannot write {}: {e}", c.user.display()));
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fix_that_needs_a_module_beside_its_file_is_made() {
        // metrics.py alone does not know that `logits` carries a graph:
        // train.py passes it `model(x)`, and model.py says `model` is one.
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../leakspy_report/tests/fixtures/epoch_metrics");
        let dir = tempfile::tempdir().unwrap();
        for name in ["metrics.py", "model.py", "train.py"] {
            std::fs::copy(fixture.join(name), dir.path().join(name)).unwrap();
        }
        let path = dir.path().join("metrics.py");
        let text = std::fs::read_to_string(&path).unwrap();
        let wanted = vec![Planned {
            file: "metrics.py".into(),
            cell: None,
            line: 13,
            rule: "LS002".into(),
            fix: "Store `logits.softmax(dim=-1).detach()`".into(),
            safe: true,
            holder: "EpochCollector.probs (list)".into(),
        }];
        let (fixed, applied) = fix_source(
            &path,
            &text,
            &wanted,
            (std::slice::from_ref(&path), dir.path()),
        )
        .unwrap();
        assert_eq!(applied.len(), 1);
        assert!(
            fixed.contains("self.probs.append(logits.softmax(dim=-1).detach())"),
            "{fixed}"
        );
    }
}

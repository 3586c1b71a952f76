//! Joins what grows at run time with the static rules: `check` runs on the
//! files the probe named, and its findings on the lines named (or about the
//! holder's name) are attached to the runtime finding, with their fixes.
//! The job's own files are checked together, as one project, as `check`
//! checks them. A notebook's code runs in a kernel, where the probe names it by IPython's
//! label (`Cell In[3]`): the notebooks the job's command runs are checked
//! instead, `In[3]` being the third cell a kernel runs from the top.

use std::collections::HashMap;

use leakspy_lint::{
    check_source, Applicability, RuleSet, RETAINED_UNTIL_FRAMEWORK_BACKWARD,
    RETAINED_WITHOUT_BACKWARD,
};

use leakspy_trace::{CheckedFile, StaticRecord};

use crate::census::{GrowthGroup, StaticMatch};

/// Files larger than this are not checked for the join (generated code).
const MAX_FILE: u64 = 4 * 1024 * 1024;

/// Attaches static findings to every group of what grows, and to the leak
/// findings that carry its holder. Files that cannot be read (gone, not
/// UTF-8, too big) are skipped: the runtime finding stands on its own.
///
/// `recorded`: what `check` said of the sources when the run ended (the
/// trace's `static` event). With it, the report shows the findings of the
/// source the run ran, and a note names each file changed since; without it
/// (the end of a run, or a trace from before it was recorded), `check` runs
/// now. Returns what was used, for the end of a run to record.
pub fn attach_static_findings(
    d: &mut crate::Diagnosis,
    recorded: Option<&StaticRecord>,
) -> StaticRecord {
    let mut files: HashMap<String, CheckedFile> = HashMap::new();
    if let Some(r) = recorded {
        for f in &r.files {
            files.insert(f.path.clone(), f.clone());
        }
    }
    let notebooks = notebooks_run(&d.run.command, &d.run.cwd);
    let scripts = files_run(&d.run.command, &d.run.cwd, ".py");
    attach(&mut d.growth, &d.run.cwd, &notebooks, &scripts, &mut files);
    if let Some(top) = d.growth.first() {
        if !top.static_findings.is_empty() {
            let v = serde_json::to_value(&top.static_findings).unwrap_or_default();
            for f in &mut d.findings {
                if f.holder.is_some() {
                    f.static_findings = Some(v.clone());
                }
            }
        }
    }
    let mut used: Vec<CheckedFile> = files.into_values().collect();
    used.sort_by(|a, b| a.path.cmp(&b.path));
    if recorded.is_some() {
        let changed: Vec<&str> = used
            .iter()
            .filter(|f| f.sha256.is_some() && hash_file(&f.path, &d.run.cwd) != f.sha256)
            .map(|f| f.path.as_str())
            .collect();
        if !changed.is_empty() {
            d.notes.push(format!(
                "the source changed since the run: {} — the `check` findings shown are those of \
                 the source the run ran",
                changed.join(", ")
            ));
        }
    }
    StaticRecord {
        t: recorded.map_or(0.0, |r| r.t),
        files: used,
    }
}

/// The notebooks a command runs (`jupyter execute train.ipynb`): its
/// arguments that name `.ipynb` files, as given.
fn notebooks_run(command: &[String], cwd: &str) -> Vec<String> {
    files_run(command, cwd, ".ipynb")
}

/// A command's arguments that name existing files with this extension.
fn files_run(command: &[String], cwd: &str, extension: &str) -> Vec<String> {
    command
        .iter()
        .skip(1)
        .map(|a| a.split_once('=').map_or(a.as_str(), |(_, v)| v))
        .filter(|a| a.ends_with(extension) && crate::paths::resolve(a, cwd).is_file())
        .map(str::to_string)
        .collect()
}

/// `3` of IPython's label `Cell In[3]`.
fn cell_label(file: &str) -> Option<usize> {
    file.strip_prefix("Cell In[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// `cwd`: the job's working directory, which relative paths are relative
/// to; `notebooks`: those the job runs, for code the probe names by cell.
fn attach(
    groups: &mut [GrowthGroup],
    cwd: &str,
    notebooks: &[String],
    scripts: &[String],
    cache: &mut HashMap<String, CheckedFile>,
) {
    let named_by = |g: &GrowthGroup| -> Vec<String> {
        g.created_at
            .iter()
            .map(|c| c.file.clone())
            .chain(
                g.holder
                    .iter()
                    .flat_map(|h| h.all_named())
                    .filter_map(|h| h.file.clone()),
            )
            .collect()
    };
    // Where the job's code is, as far as the run showed it: the files the
    // probe named for any group, and the scripts the command runs.
    let mut job_files: Vec<String> = groups
        .iter()
        .flat_map(named_by)
        .filter(|f| cell_label(f).is_none())
        .collect();
    job_files.extend(scripts.iter().cloned());
    job_files.sort();
    job_files.dedup();
    check_together(&job_files, cwd, cache);
    // Each of them in the record, joined or not: where the run named nothing, `fix` tries the
    // leak findings of the files the job runs.
    for f in job_files.iter().chain(notebooks) {
        if !cache.contains_key(f) {
            let checked = check_file(f, cwd);
            cache.insert(f.clone(), checked);
        }
    }
    for g in groups.iter_mut() {
        let mut files: Vec<String> = Vec::new();
        let mut named = named_by(g);
        if named.is_empty() && g.holder.as_ref().is_some_and(|h| h.is_named()) {
            // A holder named without a line or a file (the probe's look at
            // the lines did not finish in time): the findings about it by
            // name, in the job's files.
            named.clone_from(&job_files);
        }
        for f in named {
            let found = if cell_label(&f).is_some() {
                notebooks.to_vec()
            } else {
                vec![f]
            };
            for f in found {
                if !files.contains(&f) {
                    files.push(f);
                }
            }
        }
        let name = g
            .holder
            .as_ref()
            .map(|h| holder_name(&h.path).to_string())
            .filter(|n| !n.is_empty());
        // Each other holder the probe reached from these objects keeps part
        // of them: the findings about it are this group's too.
        let others: Vec<String> = g
            .holder
            .iter()
            .flat_map(|h| h.also.iter().filter(|a| a.is_named()))
            .map(|a| holder_name(&a.path).to_string())
            .filter(|n| !n.is_empty())
            .collect();
        let mut matched: Vec<StaticMatch> = Vec::new();
        for file in files {
            let all = cache
                .entry(file.clone())
                .or_insert_with(|| check_file(&file, cwd));
            for m in &all.findings {
                let on_line = g.created_at.as_ref().is_some_and(|c| {
                    let cell = cell_label(&c.file)
                        .and_then(|n| all.executed_cells.get(n.wrapping_sub(1)).copied());
                    c.line == m.line
                        && match m.cell {
                            Some(_) => cell.is_some() && m.cell == cell,
                            None => c.file == m.file,
                        }
                });
                let names_holder = name.iter().chain(&others).any(|n| mentions(&m.message, n));
                if (on_line || names_holder) && !matched.contains(m) {
                    matched.push(m.clone());
                }
            }
        }
        matched.sort_by(|a, b| (a.file.as_str(), a.line).cmp(&(b.file.as_str(), b.line)));
        // Both ways. The probe named the holder but not the line: the
        // finding about the holder is on the line that keeps what grows.
        if g.created_at.is_none() && g.holder.as_ref().is_some_and(|h| h.is_named()) {
            if let Some(m) = matched
                .iter()
                .filter(|m| m.cell.is_none())
                .find(|m| name.as_ref().is_some_and(|n| mentions(&m.message, n)))
            {
                g.created_at = Some(crate::census::Location {
                    file: m.file.clone(),
                    line: m.line,
                    function: None,
                    thread: None,
                });
                g.site_from = Some(format!("check {}", m.rule));
            }
        }
        // The probe could not reach a holder: a finding on the line that
        // made the objects says what keeps them.
        if !g.holder.as_ref().is_some_and(|h| h.is_named()) {
            g.static_holder = g.created_at.as_ref().and_then(|c| {
                matched
                    .iter()
                    .filter(|m| m.file == c.file && m.line == c.line)
                    .find_map(|m| kept_by(&m.rule, &m.message))
            });
        }
        // What the probe saw decides what the kept graphs hold: saved bytes
        // growing with them are activations no `.backward()` freed (a
        // framework may call it where the file does not, or not at all).
        if let Some(saved) = g
            .growers
            .iter()
            .find(|gr| gr.key == "graph")
            .and_then(|gr| gr.bytes_slope)
        {
            for m in &mut matched {
                m.message = runtime_retained(&m.message, saved);
            }
        }
        g.static_findings = matched;
    }
}

/// A finding's words about what a kept graph holds, as the run showed it: the
/// file alone cannot tell whether a framework calls `.backward()`, the run can.
fn runtime_retained(message: &str, saved_per_step: f64) -> String {
    // What the run agrees with stays as the file said it. Saved activations
    // that grow are the process's, of every kept graph: they settle what the
    // file could not tell (a framework's backward) but never overrule a
    // `.backward()` the file runs through this value. None growing anywhere
    // means no kept graph holds them.
    let (wrong, seen): (&[&str], String) = if saved_per_step > 0.0 {
        (
            &[RETAINED_UNTIL_FRAMEWORK_BACKWARD],
            format!(
                "with its saved activations: at run time they grew {}/step (no `.backward()` \
                 freed them)",
                leakspy_stats::fmt_bytes(saved_per_step)
            ),
        )
    } else {
        (
            &[RETAINED_WITHOUT_BACKWARD, RETAINED_UNTIL_FRAMEWORK_BACKWARD],
            "its chain of autograd nodes: at run time no saved activations grew \
             (`.backward()` freed them)"
                .to_string(),
        )
    };
    wrong
        .iter()
        .fold(message.to_string(), |m, from| m.replace(from, &seen))
}

/// What a finding says keeps the objects: the container or name its
/// message starts with (`self.hall_of_fame` of "`self.hall_of_fame` keeps a
/// deep copy ..."), or pyplot for a figure never closed.
pub fn kept_by(rule: &str, message: &str) -> Option<String> {
    if rule == "LS012" {
        return Some("pyplot (a figure never closed)".to_string());
    }
    let inner = message.strip_prefix('`')?.split('`').next()?;
    let target: String = inner
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '.')
        .collect();
    let target = target
        .rsplit_once('.')
        .filter(|(_, m)| {
            matches!(
                *m,
                "append" | "extend" | "insert" | "add" | "update" | "setdefault" | "put" | "push"
            )
        })
        .map_or(target.as_str(), |(base, _)| base);
    (!target.is_empty() && target.contains(|c: char| c.is_alphabetic()))
        .then(|| format!("`{target}` (check {rule})"))
}

/// The variable part of a holder path: `losses` of `Trainer.losses`, `total`
/// of `train:total`, `metrics` of `make_logger.<locals>.log.<metrics>`.
fn holder_name(path: &str) -> &str {
    let p = path.trim_end_matches('>');
    let cut = p.rfind(['.', ':', '<']).map(|i| &p[i + 1..]).unwrap_or(p);
    cut.trim_start_matches('<')
}

/// Whether a message names `name` as what its code keeps: in a code span
/// (between backticks), as the span's first name or an attribute
/// (`self.losses`, `total_loss`), a whole word. Not in its prose ("stores a
/// value" names no `value`), nor as an argument (`append(loss)` names no
/// `loss` holder).
fn mentions(message: &str, name: &str) -> bool {
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    message.split('`').skip(1).step_by(2).any(|code| {
        let bytes = code.as_bytes();
        code.match_indices(name).any(|(i, _)| {
            let before = i.checked_sub(1).map(|j| bytes[j]);
            let after = bytes.get(i + name.len()).copied();
            matches!(before, None | Some(b'.')) && !after.is_some_and(is_word)
        })
    })
}

/// `check` on `file` (as shown: relative to `cwd` or absolute), with the
/// file's hash; the matches name it as shown.
/// The job's own Python files (under its working directory, not yet known)
/// checked as one project, as `check` checks a project: a helper in
/// `viz.py` that opens a figure is a leak because `train.py` calls it every
/// step, which `viz.py` alone does not say. Library files and notebooks are
/// checked on their own (`check_file`).
/// The most modules beside a named file taken in for what they say of it.
const MAX_BESIDE: usize = 200;

/// The Python modules in the folders of `files`, but for `files` themselves, with their text
/// (at most [`MAX_BESIDE`] a folder, by name): what those files import by name without an
/// install, since a script's folder is on Python's path. The join checks a job's files with
/// them, and `fix` its scratch copies, so that both see the same findings.
pub fn modules_beside(files: &[std::path::PathBuf]) -> Vec<(std::path::PathBuf, String)> {
    let mut dirs: Vec<&std::path::Path> = files.iter().filter_map(|f| f.parent()).collect();
    dirs.sort();
    dirs.dedup();
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut names: Vec<std::path::PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "py") && p.is_file())
            .collect();
        names.sort();
        for path in names.into_iter().take(MAX_BESIDE) {
            if files.contains(&path) {
                continue;
            }
            if let Ok(text) = std::fs::read_to_string(&path) {
                out.push((path, text));
            }
        }
    }
    out
}

fn check_together(files: &[String], cwd: &str, cache: &mut HashMap<String, CheckedFile>) {
    if cwd.is_empty() {
        return;
    }
    let root = std::path::Path::new(cwd);
    let mut read: Vec<(String, String, CheckedFile, String)> = Vec::new();
    for file in files {
        if cache.contains_key(file) || !file.ends_with(".py") {
            continue;
        }
        let resolved = crate::paths::resolve(file, cwd);
        let Ok(rel) = resolved.strip_prefix(root) else {
            continue;
        };
        let rel = rel.to_string_lossy().into_owned();
        if rel.contains("site-packages") {
            continue;
        }
        let (mut checked_file, Some(text)) = read_source(file, cwd) else {
            continue;
        };
        checked_file.findings.clear();
        read.push((file.clone(), rel, checked_file, text));
    }
    // What the named files import by name without an install: the modules beside them (a
    // script's folder is on Python's path). `model = MLPClassifier()` from `model.py`, which no
    // growth names, is what says `model(x)` carries a graph.
    let named: Vec<std::path::PathBuf> = read.iter().map(|r| root.join(&r.1)).collect();
    let beside: Vec<(String, String)> = modules_beside(&named)
        .into_iter()
        .filter_map(|(path, text)| {
            let rel = path.strip_prefix(root).ok()?.to_string_lossy().into_owned();
            Some((rel, text))
        })
        .collect();
    if read.len() + beside.len() < 2 {
        return; // one file is the same checked alone
    }
    let sources: Vec<leakspy_lint::project::Source> = read
        .iter()
        .map(|(_, rel, _, text)| (rel, text))
        .chain(beside.iter().map(|(rel, text)| (rel, text)))
        .map(|(rel, text)| leakspy_lint::project::Source {
            path: rel,
            text,
            kind: leakspy_lint::SourceKind::Python,
        })
        .collect();
    let results = leakspy_lint::project::check_sources(&sources, &RuleSet::default());
    for ((file, _, mut checked_file, text), mut checked) in read.into_iter().zip(results) {
        checked_file.findings = python_findings(&mut checked, &file, &text);
        cache.insert(file, checked_file);
    }
}

/// The file's record with its hash, and its text when it is one to check.
fn read_source(file: &str, cwd: &str) -> (CheckedFile, Option<String>) {
    let resolved = crate::paths::resolve(file, cwd);
    let path = resolved.as_path();
    let mut checked_file = CheckedFile {
        path: file.to_string(),
        sha256: None,
        findings: Vec::new(),
        executed_cells: Vec::new(),
    };
    if std::fs::metadata(path).map_or(true, |m| !m.is_file() || m.len() > MAX_FILE) {
        return (checked_file, None);
    }
    let Ok(bytes) = std::fs::read(path) else {
        return (checked_file, None);
    };
    checked_file.sha256 = Some(sha256_hex(&bytes));
    (checked_file, String::from_utf8(bytes).ok())
}

fn python_findings(
    checked: &mut leakspy_lint::CheckedSource,
    file: &str,
    source: &str,
) -> Vec<StaticMatch> {
    let index = checked.take_line_index(source);
    checked
        .diagnostics
        .iter()
        .map(|d| {
            let line = index.line_index(d.range.start()).get() as u64;
            static_match(d, file, None, line, d.message.clone())
        })
        .collect()
}

fn check_file(file: &str, cwd: &str) -> CheckedFile {
    let (mut checked_file, source) = read_source(file, cwd);
    let Some(source) = source else {
        return checked_file;
    };
    if file.ends_with(".ipynb") {
        check_notebook(&mut checked_file, source);
        return checked_file;
    }
    let mut checked = check_source(&source, &RuleSet::default());
    checked_file.findings = python_findings(&mut checked, file, &source);
    checked_file
}

/// `check` on a notebook's code cells: each finding by cell and row, and
/// the cells in the order a kernel runs them.
fn check_notebook(checked_file: &mut CheckedFile, text: String) {
    let Ok(nb) = leakspy_lint::notebook::Notebook::parse(text) else {
        return;
    };
    let joined = nb.joined();
    let mut checked = check_source(&joined.checked, &RuleSet::default());
    let index = checked.take_line_index(&joined.display);
    let file = checked_file.path.clone();
    checked_file.findings = checked
        .diagnostics
        .iter()
        .map(|d| {
            let row = index.line_index(d.range.start()).get();
            let (cell, line) = joined.index.cell_row(row);
            let message = joined.index.translate_message(&d.message, cell);
            static_match(d, &file, Some(cell), line as u64, message)
        })
        .collect();
    checked_file.executed_cells = (1..).map_while(|n| nb.executed_cell(n)).collect();
}

fn static_match(
    d: &leakspy_lint::Diagnostic,
    file: &str,
    cell: Option<usize>,
    line: u64,
    message: String,
) -> StaticMatch {
    StaticMatch {
        rule: d.rule.code().to_string(),
        file: file.to_string(),
        cell,
        line,
        message,
        fix: d.fix.as_ref().map(|f| f.message.clone()),
        safe_fix: d
            .fix
            .as_ref()
            .is_some_and(|f| f.applicability == Applicability::Safe),
    }
}

fn hash_file(file: &str, cwd: &str) -> Option<String> {
    std::fs::read(crate::paths::resolve(file, cwd))
        .ok()
        .map(|b| sha256_hex(&b))
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use leakspy_lint::RETAINED_AFTER_BACKWARD;

    #[test]
    fn holder_names() {
        assert_eq!(holder_name("Trainer.losses"), "losses");
        assert_eq!(holder_name("train:total_loss"), "total_loss");
        assert_eq!(holder_name("make_logger.<locals>.log.<metrics>"), "metrics");
        assert_eq!(holder_name("history"), "history");
    }

    #[test]
    fn what_a_finding_says_keeps_the_objects() {
        assert_eq!(
            kept_by(
                "LS015",
                "`self.hall_of_fame` keeps a deep copy of `x` on every call"
            )
            .as_deref(),
            Some("`self.hall_of_fame` (check LS015)")
        );
        assert_eq!(
            kept_by("LS002", "`self.losses.append(loss)` stores a value").as_deref(),
            Some("`self.losses` (check LS002)")
        );
        assert!(kept_by("LS012", "`plt.subplots()` opens")
            .unwrap()
            .starts_with("pyplot"));
        assert_eq!(kept_by("LS102", "no backticks here"), None);
    }

    #[test]
    fn the_run_says_what_kept_graphs_hold() {
        let m = format!(
            "`self.l` holds one graph per step ({RETAINED_UNTIL_FRAMEWORK_BACKWARD}) forever"
        );
        let fixed = runtime_retained(&m, 2048.0);
        assert!(
            fixed.contains("saved activations: at run time they grew 2.00 KiB/step"),
            "{fixed}"
        );
        // Another kept graph's activations do not overrule a backward the
        // file runs through this value.
        let m = format!("`self.l` holds one graph per step ({RETAINED_AFTER_BACKWARD}) forever");
        assert_eq!(runtime_retained(&m, 2048.0), m);
        let m = format!("`self.l` holds one graph ({RETAINED_WITHOUT_BACKWARD})");
        assert!(runtime_retained(&m, 0.0).contains("no saved activations grew"));
        // What the run agrees with stays as it was.
        assert_eq!(runtime_retained(&m, 100.0), m);
    }

    #[test]
    fn a_holder_named_without_a_line_is_joined_by_name_in_the_script_run() {
        // The probe named `Trainer.losses` but not the line (its look at
        // the lines ran out of time): the finding about `self.losses` in the
        // script the command runs is the one that keeps what grows.
        let zoo = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/zoo");
        let mut groups = vec![crate::census::tests::group_of(
            "list",
            "Trainer.losses",
            "type:torch.Tensor",
            1024.0,
        )];
        let command = ["python".to_string(), "loss_list.py".to_string()];
        let scripts = files_run(&command, zoo, ".py");
        assert_eq!(scripts, ["loss_list.py"]);
        attach(&mut groups, zoo, &[], &scripts, &mut HashMap::new());
        let g = &groups[0];
        assert!(
            g.static_findings
                .iter()
                .any(|m| m.rule == "LS002" && m.message.contains("self.losses.append")),
            "{:?}",
            g.static_findings
        );
        assert_eq!(g.site_from.as_deref(), Some("check LS002"));
        // Nothing named and no script: nothing to join.
        let mut groups = vec![crate::census::tests::group_of(
            "list",
            "Trainer.losses",
            "type:torch.Tensor",
            1024.0,
        )];
        attach(&mut groups, zoo, &[], &[], &mut HashMap::new());
        assert!(groups[0].static_findings.is_empty());
    }

    /// A growth group (its holder's kind and path, its series key) whose objects the probe saw
    /// made at (file, line, function).
    fn made_at(
        (kind, path): (&str, &str),
        key: &str,
        (file, line, function): (&str, u64, &str),
    ) -> crate::census::GrowthGroup {
        let mut g = crate::census::tests::group_of(kind, path, key, 0.0);
        g.created_at = Some(crate::census::Location {
            file: file.into(),
            line,
            function: Some(function.into()),
            ..Default::default()
        });
        g
    }

    #[test]
    fn the_other_holders_of_one_series_bring_their_findings() {
        // All graphs, held mostly by `Trainer.losses` and also by
        // `RunningMean.value`, a statistic chained from step to step: the
        // findings on both holders are the group's, and only theirs.
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/growth");
        let file = "two_graph_leaks.py";
        let mut g = crate::census::tests::group_of("attribute", "Trainer.losses", "graph", 0.0);
        let also = crate::census::Holder {
            kind: "attribute".into(),
            path: "RunningMean.value".into(),
            file: Some(file.into()),
            line: Some(22),
            ..Default::default()
        };
        g.holder.as_mut().unwrap().also.push(also.clone());
        let mut groups = vec![g];
        attach(&mut groups, dir, &[], &[], &mut HashMap::new());
        let rules: Vec<(&str, u64)> = groups[0]
            .static_findings
            .iter()
            .map(|m| (m.rule.as_str(), m.line))
            .collect();
        assert_eq!(rules, [("LS001", 27), ("LS002", 43)], "{rules:?}");
        // The statistic's group alone: the list's finding says "a value"
        // in its prose, which names no `value`.
        let mut g = crate::census::tests::group_of("attribute", "RunningMean.value", "graph", 0.0);
        g.holder = Some(also);
        let mut groups = vec![g];
        attach(&mut groups, dir, &[], &[], &mut HashMap::new());
        let rules: Vec<&str> = groups[0]
            .static_findings
            .iter()
            .map(|m| m.rule.as_str())
            .collect();
        assert_eq!(rules, ["LS001"]);
    }

    #[test]
    fn the_jobs_files_are_checked_as_one_project() {
        // The probe names the figure's line in viz.py; viz.py alone does
        // not say that its function runs every step: train.py does.
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/plot_helper");
        let mut groups = vec![made_at(
            (
                "pyplot",
                "matplotlib.pyplot (figure never closed: plt.close(fig))",
            ),
            "figures",
            ("viz.py", 10, "render"),
        )];
        let alone = check_file("viz.py", dir);
        assert!(alone.findings.is_empty(), "{:?}", alone.findings);
        let scripts = files_run(&["python".into(), "train.py".into()], dir, ".py");
        attach(&mut groups, dir, &[], &scripts, &mut HashMap::new());
        assert!(
            groups[0]
                .static_findings
                .iter()
                .any(|m| m.rule == "LS012" && m.line == 10),
            "{:?}",
            groups[0].static_findings
        );
    }

    #[test]
    fn the_modules_beside_the_named_files_are_part_of_the_project() {
        // The probe names metrics.py (the list, the line that fills it)
        // and the command runs train.py; that `model(x)` carries a graph
        // is said by model.py, which nothing names.
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/epoch_metrics");
        let mut groups = vec![made_at(
            ("EpochCollector.probs", "EpochCollector.probs (list)"),
            "graph",
            ("metrics.py", 13, "EpochCollector.add"),
        )];
        let scripts = files_run(&["python".into(), "train.py".into()], dir, ".py");
        attach(&mut groups, dir, &[], &scripts, &mut HashMap::new());
        assert!(
            groups[0]
                .static_findings
                .iter()
                .any(|m| m.rule == "LS002" && m.line == 13),
            "{:?}",
            groups[0].static_findings
        );
    }

    #[test]
    fn whole_words_only() {
        assert!(mentions("`self.losses` grows every step", "losses"));
        assert!(!mentions("`self.losses_2` grows", "losses"));
        assert!(!mentions("glosses", "losses"));
        assert!(!mentions("`self.glosses` grows", "losses"));
        assert!(mentions("`total_loss` adds `loss`", "total_loss"));
        // Prose and arguments name no holder.
        assert!(!mentions("`self.losses.append(x)` stores a value", "value"));
        assert!(!mentions("`self.losses.append(loss)` stores it", "loss"));
    }
}

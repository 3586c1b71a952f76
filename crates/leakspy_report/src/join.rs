//! Joins what grows at run time with the static rules: `check` runs on the
//! files the probe named, and its findings on the lines named (or about the
//! holder's name) are attached to the runtime finding, with their fixes.

use std::collections::HashMap;

use leakspy_lint::{check_source, Applicability, RuleSet};

use crate::census::{GrowthGroup, StaticMatch};

/// Files larger than this are not checked for the join (generated code).
const MAX_FILE: u64 = 4 * 1024 * 1024;

/// Attaches static findings to every group of what grows, and to the leak
/// findings that carry its holder. Files that cannot be read (gone, not
/// UTF-8, too big) are skipped: the runtime finding stands on its own.
pub fn attach_static_findings(d: &mut crate::Diagnosis) {
    attach(&mut d.growth, &d.run.cwd);
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
}

/// `cwd`: the job's working directory, which relative paths are relative to.
fn attach(groups: &mut [GrowthGroup], cwd: &str) {
    let mut cache: HashMap<String, Vec<StaticMatch>> = HashMap::new();
    for g in groups.iter_mut() {
        let mut files: Vec<String> = Vec::new();
        if let Some(c) = &g.created_at {
            files.push(c.file.clone());
        }
        if let Some(f) = g.holder.as_ref().and_then(|h| h.file.clone()) {
            if !files.contains(&f) {
                files.push(f);
            }
        }
        let name = g
            .holder
            .as_ref()
            .map(|h| holder_name(&h.path).to_string())
            .filter(|n| !n.is_empty());
        let mut matched: Vec<StaticMatch> = Vec::new();
        for file in files {
            let all = cache
                .entry(file.clone())
                .or_insert_with(|| check_file(&file, cwd));
            for m in all.iter() {
                let on_line = g
                    .created_at
                    .as_ref()
                    .is_some_and(|c| c.file == m.file && c.line == m.line);
                let names_holder = name.as_ref().is_some_and(|n| mentions(&m.message, n));
                if (on_line || names_holder) && !matched.contains(m) {
                    matched.push(m.clone());
                }
            }
        }
        matched.sort_by(|a, b| (a.file.as_str(), a.line).cmp(&(b.file.as_str(), b.line)));
        g.static_findings = matched;
    }
}

/// The variable part of a holder path: `losses` of `Trainer.losses`, `total`
/// of `train:total`, `metrics` of `make_logger.<locals>.log.<metrics>`.
fn holder_name(path: &str) -> &str {
    let p = path.trim_end_matches('>');
    let cut = p.rfind(['.', ':', '<']).map(|i| &p[i + 1..]).unwrap_or(p);
    cut.trim_start_matches('<')
}

/// Whether a message names `name` as a whole word (in backticks or not).
fn mentions(message: &str, name: &str) -> bool {
    let bytes = message.as_bytes();
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    message.match_indices(name).any(|(i, _)| {
        let before = i.checked_sub(1).map(|j| bytes[j]);
        let after = bytes.get(i + name.len()).copied();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

/// `check` on `file` (as shown: relative to `cwd` or absolute); the
/// matches name it as shown.
fn check_file(file: &str, cwd: &str) -> Vec<StaticMatch> {
    let resolved = crate::paths::resolve(file, cwd);
    let path = resolved.as_path();
    if std::fs::metadata(path).map_or(true, |m| !m.is_file() || m.len() > MAX_FILE) {
        return Vec::new();
    }
    let Ok(source) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let mut checked = check_source(&source, &RuleSet::default());
    let index = checked.take_line_index(&source);
    checked
        .diagnostics
        .iter()
        .map(|d| {
            let line = index.line_index(d.range.start()).get() as u64;
            StaticMatch {
                rule: d.rule.code().to_string(),
                file: file.to_string(),
                line,
                message: d.message.clone(),
                fix: d.fix.as_ref().map(|f| f.message.clone()),
                safe_fix: d
                    .fix
                    .as_ref()
                    .is_some_and(|f| f.applicability == Applicability::Safe),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holder_names() {
        assert_eq!(holder_name("Trainer.losses"), "losses");
        assert_eq!(holder_name("train:total_loss"), "total_loss");
        assert_eq!(holder_name("make_logger.<locals>.log.<metrics>"), "metrics");
        assert_eq!(holder_name("history"), "history");
    }

    #[test]
    fn whole_words_only() {
        assert!(mentions("`self.losses` grows every step", "losses"));
        assert!(!mentions("`self.losses_2` grows", "losses"));
        assert!(!mentions("glosses", "losses"));
    }
}

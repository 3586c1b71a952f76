//! `leakspy check` on real training code nobody here wrote: the 28 PyPI packages of
//! `bench/corpus/packages.txt` and torch's own sources. Every finding at default settings must
//! be one judged true in `bench/corpus/judgements.txt` (by reading the code); a new finding, or
//! one judged false, fails with its location, so precision cannot silently regress.
//!
//! The packages are downloaded once with `pip download --no-deps` into a cache outside the
//! repository (`~/.cache/leakspy-corpus`, or `$LEAKSPY_CORPUS_CACHE`) and reused after.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python() -> PathBuf {
    let py = std::env::var_os("LEAKSPY_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".venv/bin/python"));
    assert!(
        py.is_file(),
        "{} missing: this test needs the project's venv (run scripts/venv.sh)",
        py.display()
    );
    py
}

#[test]
fn every_default_finding_on_the_corpus_is_judged_true() {
    let out = Command::new(python())
        .arg(repo_root().join("bench/corpus/corpus.py"))
        .arg("verify")
        .arg("--leakspy")
        .arg(env!("CARGO_BIN_EXE_leakspy"))
        .current_dir(repo_root())
        .output()
        .expect("run bench/corpus/corpus.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "corpus verification failed ({:?}):\n{stdout}\n{stderr}",
        out.status.code()
    );
    // The summary line says how many findings were checked: the corpus was really run.
    assert!(
        stderr.contains("findings at default settings"),
        "no summary from corpus.py:\n{stderr}"
    );
}

/// The check above really fails on a finding nobody judged, and names it: verification of one
/// package against the judgements with its one true finding left out.
#[test]
fn an_unjudged_finding_fails_with_its_location() {
    let key = "pytorch-forecasting-1.2.0/pytorch_forecasting/models/base_model.py:654 LS002";
    let all = std::fs::read_to_string(repo_root().join("bench/corpus/judgements.txt")).unwrap();
    assert!(
        all.contains(key),
        "{key} is no longer judged: pick another finding"
    );
    let without: String = all
        .lines()
        .filter(|l| !l.starts_with(key))
        .map(|l| format!("{l}\n"))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let judgements = dir.path().join("judgements.txt");
    std::fs::write(&judgements, without).unwrap();
    let out = Command::new(python())
        .arg(repo_root().join("bench/corpus/corpus.py"))
        .args(["verify", "--package", "pytorch-forecasting", "--judgements"])
        .arg(&judgements)
        .arg("--leakspy")
        .arg(env!("CARGO_BIN_EXE_leakspy"))
        .current_dir(repo_root())
        .output()
        .expect("run bench/corpus/corpus.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("not judged:") && stdout.contains(key),
        "the failure should name the finding:\n{stdout}"
    );
}

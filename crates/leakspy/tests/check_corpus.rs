//! `leakspy check` on real training code nobody here wrote: the train part of the PyPI packages
//! of `bench/corpus/packages.txt` (all but the held-out test part listed in
//! `bench/corpus/split.txt`, which is judged once, when rule work is done, and reported apart)
//! and torch's own sources. Every finding at default settings must be one judged true in
//! `bench/corpus/judgements.txt` (by reading the code), or a false alarm judged there and listed
//! in `bench/corpus/known-false.txt` for the analysis to fix; a new finding, or one judged false
//! and not listed, fails with its location, so precision cannot silently regress, and a listed
//! false alarm that is no longer reported fails too, so the list only shrinks.
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
fn every_default_finding_on_the_corpus_train_part_is_judged_true_or_known_false() {
    let out = Command::new(python())
        .arg(repo_root().join("bench/corpus/corpus.py"))
        .args(["verify", "--part", "train"])
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

fn verify_one_package(package: &str, judgements: &str, known_false: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let (j, k) = (
        dir.path().join("judgements.txt"),
        dir.path().join("known-false.txt"),
    );
    std::fs::write(&j, judgements).unwrap();
    std::fs::write(&k, known_false).unwrap();
    let out = Command::new(python())
        .arg(repo_root().join("bench/corpus/corpus.py"))
        .args(["verify", "--package", package, "--judgements"])
        .arg(&j)
        .arg("--known-false")
        .arg(&k)
        .arg("--leakspy")
        .arg(env!("CARGO_BIN_EXE_leakspy"))
        .current_dir(repo_root())
        .output()
        .expect("run bench/corpus/corpus.py");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

/// A finding judged false fails verification unless it is listed as a known false alarm, and a
/// listed one that is no longer reported fails too (with a line to remove): the list of known
/// false alarms can only shrink.
#[test]
fn a_known_false_alarm_passes_until_it_is_fixed_and_then_must_be_removed() {
    let key = "pytorch-forecasting-1.2.0/pytorch_forecasting/models/base_model.py:654 LS002";
    let all = std::fs::read_to_string(repo_root().join("bench/corpus/judgements.txt")).unwrap();
    assert!(
        all.contains(key),
        "{key} is no longer judged: pick another finding"
    );
    // The same finding, judged false for the test's sake.
    let flipped: String = all
        .lines()
        .map(|l| {
            if l.starts_with(key) {
                format!("{key} false (for the test)\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let (code, text) = verify_one_package("pytorch-forecasting", &flipped, "");
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("judged false") && text.contains(key),
        "{text}"
    );

    let (code, text) = verify_one_package("pytorch-forecasting", &flipped, &format!("{key}\n"));
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("1 known false alarms"), "{text}");

    // A false alarm that the analysis no longer reports (a line nothing is found at).
    let gone = "pytorch-forecasting-1.2.0/pytorch_forecasting/models/base_model.py:1 LS002";
    let with_gone = format!("{flipped}{gone} false (for the test)\n");
    let (code, text) = verify_one_package(
        "pytorch-forecasting",
        &with_gone,
        &format!("{key}\n{gone}\n"),
    );
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("no longer reported") && text.contains(gone),
        "{text}"
    );
}

//! `leakspy check --fix` never changes what training computes, and its counts add up.
//!
//! Each program in `tests/fixtures/safe_fixes/` trains a small model with a fixed seed while
//! keeping what it logs with its autograd graph. The test runs it (real torch, the project's
//! venv), applies the safe fixes, runs it again, and asserts that the trained parameters are
//! bitwise identical while the kept graphs and open figures are gone. Every rule that offers a
//! safe fix on the rules' fixtures must be exercised here.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python() -> PathBuf {
    let py = std::env::var_os("LEAKSPY_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".venv/bin/python"));
    assert!(
        py.is_file(),
        "{} missing: this test needs torch (run scripts/venv.sh)",
        py.display()
    );
    py
}

fn leakspy(dir: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_leakspy"));
    cmd.current_dir(dir).env("NO_COLOR", "1");
    cmd
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs the program and returns its closing JSON report.
fn run_program(dir: &Path, file: &str, args: &[&str]) -> Value {
    let out = Command::new(python())
        .arg(file)
        .args(args)
        .current_dir(dir)
        .env("MPLBACKEND", "Agg")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{file} failed:\n{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let stdout = text(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{file}: no report ({e}):\n{stdout}"))
}

/// The findings of `check --select ALL` on one file, as (rule, fix applicability).
fn findings(dir: &Path, file: &str) -> Vec<(String, Option<String>)> {
    let out = leakspy(dir)
        .args(["check", file, "--select", "ALL", "--output-format", "json"])
        .args(["--exit-zero"])
        .output()
        .unwrap();
    let items: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    items
        .iter()
        .map(|i| {
            (
                i["code"].as_str().unwrap_or_default().to_string(),
                i["fix"]["applicability"].as_str().map(str::to_string),
            )
        })
        .collect()
}

fn copy_fixture(dir: &Path, name: &str) {
    let src = repo_root().join("crates/leakspy/tests/fixtures/safe_fixes");
    std::fs::copy(src.join(name), dir.join(name)).unwrap();
}

/// Applies the safe fixes to `file` and checks that training is unchanged and the leak gone.
/// Returns the rules whose safe fixes were applied.
fn fixes_leave_training_unchanged(file: &str, args: &[&str]) -> BTreeSet<String> {
    let dir = tempfile::tempdir().unwrap();
    copy_fixture(dir.path(), file);
    copy_fixture(dir.path(), "fix_report.py");
    let before = run_program(dir.path(), file, args);
    let found = findings(dir.path(), file);
    let safe: BTreeSet<String> = found
        .iter()
        .filter(|(_, fix)| fix.as_deref() == Some("safe"))
        .map(|(rule, _)| rule.clone())
        .collect();
    assert!(!safe.is_empty(), "{file}: no safe fix offered: {found:?}");

    let out = leakspy(dir.path())
        .args(["check", file, "--select", "ALL", "--fix"])
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    let safe_count = found
        .iter()
        .filter(|(_, fix)| fix.as_deref() == Some("safe"))
        .count();
    assert!(
        stdout.contains(&format!("Fixed {safe_count} finding")),
        "{file}: expected {safe_count} safe fixes applied:\n{stdout}"
    );
    // What the safe fixes addressed is no longer found, and nothing new appears.
    let left = findings(dir.path(), file);
    assert_eq!(
        left.len(),
        found.len() - safe_count,
        "{file}: findings after the fix: {left:?}"
    );
    assert!(
        left.iter().all(|(_, fix)| fix.as_deref() != Some("safe")),
        "{file}: a safe fix is still offered after --fix: {left:?}"
    );

    let after = run_program(dir.path(), file, args);
    assert_eq!(
        before["params"], after["params"],
        "{file}: the safe fixes changed what training computed"
    );
    let graphs = |v: &Value| v["graphs"].as_u64().unwrap();
    assert!(
        graphs(&before) >= 50,
        "{file}: the program should keep a graph per step before the fix: {before}"
    );
    assert!(
        graphs(&after) <= 2,
        "{file}: graphs still kept after the fix: {after}"
    );
    assert_eq!(after["figures"], 0, "{file}: figures left open: {after}");
    safe
}

#[test]
fn safe_fixes_leave_the_trained_parameters_bitwise_identical() {
    let mut exercised = fixes_leave_training_unchanged("regression_loop.py", &["3", "20"]);
    exercised.extend(fixes_leave_training_unchanged("agent_history.py", &["120"]));

    // Every rule that offers a safe fix on the rules' own fixtures is exercised above.
    let fixtures = repo_root().join("crates/leakspy_lint/resources/test/fixtures");
    let out = leakspy(&fixtures)
        .args(["check", ".", "--select", "ALL", "--output-format", "json"])
        .args(["--exit-zero"])
        .output()
        .unwrap();
    let items: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let offering: BTreeSet<String> = items
        .iter()
        .filter(|i| i["fix"]["applicability"] == "safe")
        .map(|i| i["code"].as_str().unwrap().to_string())
        .collect();
    let missing: Vec<&String> = offering.difference(&exercised).collect();
    assert!(
        missing.is_empty(),
        "rules with safe fixes not run before and after: {missing:?}"
    );
}

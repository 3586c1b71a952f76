//! `scripts/test.sh`, the project's test command, when tests fail: every
//! stage still runs (pytest after a failing `cargo test`), every failure is
//! listed at the end, the closing count is right and the status is not 0.
//! `cargo` and the venv's Python are stand-ins that print what the real ones
//! print when a test fails, so this takes a second, not the whole suite's time.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/usr/bin/env bash\n{body}")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_failing_test_binary_does_not_stop_the_rest_and_every_failure_is_listed() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    // cargo: fmt and clippy pass; `test` has one failing binary among two
    // and exits 101, as cargo does with --no-fail-fast.
    script(
        &bin.join("cargo"),
        r#"echo "cargo $*" >> "$CALLS"
case "$1" in
  test)
    [[ " $* " == *" --no-fail-fast "* ]] || { echo "no --no-fail-fast" >&2; exit 3; }
    echo "     Running tests/attach.rs (target/debug/deps/attach-0123456789abcdef)"
    echo "test a_leaking_job_is_diagnosed ... FAILED"
    echo "test result: FAILED. 6 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 9.00s"
    echo "     Running tests/zoo.rs (target/debug/deps/zoo-fedcba9876543210)"
    echo "test result: ok. 12 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 90.00s"
    exit 101;;
esac
exit 0
"#,
    );
    script(&bin.join("chromium"), "exit 0\n");
    // The venv's python: torch's folder, and a pytest run with one failure.
    let venv = dir.path().join("venv");
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    script(
        &venv.join("bin/python"),
        r#"echo "python $*" >> "$CALLS"
if [[ "$1" == -m && "$2" == pytest ]]; then
  echo "FAILED python/tests/test_probe.py::test_census - assert 1 == 2"
  echo "1 failed, 119 passed, 2 skipped in 61.20s"
  exit 1
fi
echo /nowhere/torch
"#,
    );
    // scripts/venv.sh reuses a venv whose stamp matches the requirement files.
    let stamp = Command::new("bash")
        .arg("-c")
        .arg("cat scripts/requirements.txt scripts/constraints.txt | cksum | cut -d' ' -f1")
        .current_dir(repo_root())
        .output()
        .unwrap();
    std::fs::write(venv.join(".leakspy-deps"), &stamp.stdout).unwrap();

    let calls = dir.path().join("calls");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(repo_root().join("scripts/test.sh"))
        .env("PATH", path)
        .env("LEAKSPY_VENV", &venv)
        .env("CALLS", &calls)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    // pytest ran although cargo test failed.
    let called = std::fs::read_to_string(&calls).unwrap();
    assert!(called.contains("python -m pytest python/tests"), "{called}");
    let tail: Vec<&str> = stdout.lines().rev().take(4).collect();
    assert_eq!(
        tail,
        [
            "137 passed, 2 failed",
            "failed: cargo test, pytest python/tests bench/tests",
            "FAILED python/tests/test_probe.py::test_census - assert 1 == 2",
            "FAILED attach: a_leaking_job_is_diagnosed",
        ],
        "{stdout}"
    );
}

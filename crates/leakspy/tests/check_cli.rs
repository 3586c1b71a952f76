//! `leakspy check` end to end: the real binary on real files.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

fn leakspy(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("leakspy").unwrap();
    cmd.current_dir(dir).env("NO_COLOR", "1");
    cmd
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A temp folder holding a copy of the bundled leaky example as `train.py`.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::copy(
        repo_root().join("examples/leaky_train.py"),
        dir.path().join("train.py"),
    )
    .unwrap();
    dir
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn text_output_on_the_bundled_example() {
    let dir = project();
    let out = leakspy(dir.path())
        .args(["check", "train.py"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    insta::assert_snapshot!("example_text", stdout(&out));
}

#[test]
fn example_finds_each_seed_leak() {
    let dir = project();
    let codes = |args: &[&str]| -> Vec<String> {
        let out = leakspy(dir.path())
            .args(["check", "train.py", "--output-format", "json"])
            .args(args)
            .output()
            .unwrap();
        let items: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
        items
            .iter()
            .map(|i| i["code"].as_str().unwrap().to_string())
            .collect()
    };
    // One rule per kind of leak in the seeds' reports, at default settings.
    let default = codes(&[]);
    for code in [
        "LS001", "LS002", "LS010", "LS011", "LS012", "LS014", "LS015",
    ] {
        assert!(
            default.iter().any(|c| c == code),
            "{code} not found in {default:?}"
        );
    }
    // Their cargo cult, with the opt-in advice rules.
    let all = codes(&["--select", "ALL"]);
    for code in ["LS101", "LS102"] {
        assert!(all.iter().any(|c| c == code), "{code} not found in {all:?}");
    }
}

/// The counts `--fix` and `--diff` print add up: fixed plus left is what was found, and a fix
/// makes no new finding.
#[test]
fn fix_counts_add_up_and_fixes_make_no_new_findings() {
    let dir = project();
    let findings = |dir: &Path| -> Vec<(String, Option<String>)> {
        let out = leakspy(dir)
            .args(["check", "train.py", "--output-format", "json"])
            .output()
            .unwrap();
        let items: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
        let mut found: Vec<(String, Option<String>)> = items
            .iter()
            .map(|i| {
                (
                    i["code"].as_str().unwrap().to_string(),
                    i["fix"]["applicability"].as_str().map(str::to_string),
                )
            })
            .collect();
        found.sort();
        found
    };
    let number = |text: &str, before: &str| -> usize {
        let at = text
            .find(before)
            .unwrap_or_else(|| panic!("`{before}` in:\n{text}"));
        text[at + before.len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let found = findings(dir.path());
    let k = found.len();
    let safe: Vec<&(String, Option<String>)> = found
        .iter()
        .filter(|(_, f)| f.as_deref() == Some("safe"))
        .collect();
    let fixable: usize = found.iter().filter(|(_, f)| f.is_some()).count();

    let out = leakspy(dir.path())
        .args(["check", "train.py", "--diff", "--unsafe-fixes"])
        .output()
        .unwrap();
    let e = stderr(&out);
    let (would, remaining) = (number(&e, "Would fix "), number(&e, "findings ("));
    assert_eq!((would, would + remaining), (fixable, k), "{e}");

    let out = leakspy(dir.path())
        .args(["check", "train.py", "--fix"])
        .output()
        .unwrap();
    let text = stdout(&out);
    let (fixed, left) = (number(&text, "Fixed "), number(&text, "Found "));
    assert_eq!((fixed, fixed + left), (safe.len(), k), "{text}");
    // What is left is exactly what had no safe fix: nothing new appeared.
    let mut expected: Vec<(String, Option<String>)> = found
        .iter()
        .filter(|(_, f)| f.as_deref() != Some("safe"))
        .cloned()
        .collect();
    expected.sort();
    assert_eq!(findings(dir.path()), expected);
}

#[test]
fn json_uses_ruff_field_names() {
    let dir = project();
    let out = leakspy(dir.path())
        .args([
            "check",
            "train.py",
            "--output-format",
            "json",
            "--select",
            "LS002",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let items: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(!items.is_empty());
    for item in &items {
        for field in [
            "code",
            "name",
            "message",
            "filename",
            "location",
            "end_location",
            "fix",
            "url",
        ] {
            assert!(item.get(field).is_some(), "missing {field} in {item}");
        }
        assert!(item["location"]["row"].as_u64().unwrap() >= 1);
        assert!(item["location"]["column"].as_u64().unwrap() >= 1);
        assert_eq!(item["filename"], "train.py");
    }
    insta::assert_json_snapshot!("example_json_ls002", items);
}

#[test]
fn sarif_is_valid_against_the_2_1_0_schema() {
    let dir = project();
    let out = leakspy(dir.path())
        .args(["check", "train.py", "--output-format", "sarif"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let sarif: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let schema: Value = serde_json::from_str(
        &fs::read_to_string(repo_root().join("crates/leakspy/tests/data/sarif-schema-2.1.0.json"))
            .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::draft4::new(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&sarif)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect();
    assert!(errors.is_empty(), "invalid SARIF:\n{}", errors.join("\n"));
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert!(results.len() >= 9);
    // A result that does not validate would still be useless without a location.
    assert!(results.iter().all(
        |r| r["locations"][0]["physicalLocation"]["region"]["startLine"]
            .as_u64()
            .is_some()
    ));
}

#[test]
fn github_annotations() {
    let dir = project();
    let out = leakspy(dir.path())
        .args([
            "check",
            "train.py",
            "--output-format",
            "github",
            "--select",
            "LS001,LS102",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("example_github", stdout(&out));
}

#[test]
fn fix_applies_safe_fixes_and_keeps_valid_python() {
    let dir = project();
    let before = fs::read_to_string(dir.path().join("train.py")).unwrap();
    let out = leakspy(dir.path())
        .args(["check", "train.py", "--fix"])
        .output()
        .unwrap();
    let after = fs::read_to_string(dir.path().join("train.py")).unwrap();
    assert_ne!(before, after, "{}", stdout(&out));
    assert!(after.contains("self.actor_losses.append(actor_loss.item())"));
    assert!(stdout(&out).contains("Fixed "), "{}", stdout(&out));
    // The LS002 findings are gone after the fix; unsafe ones remain.
    let again = leakspy(dir.path())
        .args([
            "check",
            "train.py",
            "--output-format",
            "json",
            "--select",
            "LS002",
        ])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", stdout(&again));
    let py = repo_root().join(".venv/bin/python");
    if py.exists() {
        let status = std::process::Command::new(py)
            .args(["-m", "py_compile", "train.py"])
            .current_dir(dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "fixed file does not compile");
    }
}

#[test]
fn diff_shows_fixes_without_writing() {
    let dir = project();
    let before = fs::read_to_string(dir.path().join("train.py")).unwrap();
    let out = leakspy(dir.path())
        .args(["check", "train.py", "--diff"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        before,
        fs::read_to_string(dir.path().join("train.py")).unwrap()
    );
    let diff = stdout(&out);
    assert!(
        diff.contains("-                self.actor_losses.append(actor_loss)"),
        "{diff}"
    );
    assert!(
        diff.contains("+                self.actor_losses.append(actor_loss.item())"),
        "{diff}"
    );
    // Unsafe fixes appear only when asked for.
    let unsafe_out = leakspy(dir.path())
        .args(["check", "train.py", "--diff", "--unsafe-fixes"])
        .output()
        .unwrap();
    assert!(stdout(&unsafe_out).lines().count() > diff.lines().count());
}

#[test]
fn selection_and_exit_codes() {
    let dir = project();
    let out = leakspy(dir.path())
        .args([
            "check",
            "train.py",
            "--select",
            "LS1",
            "--ignore",
            "LS101",
            "--output-format",
            "json",
        ])
        .output()
        .unwrap();
    let items: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(items
        .iter()
        .all(|i| i["code"].as_str().unwrap().starts_with("LS1") && i["code"] != "LS101"));
    assert!(items.iter().any(|i| i["code"] == "LS102"));

    let out = leakspy(dir.path())
        .args(["check", "train.py", "--exit-zero"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));

    let out = leakspy(dir.path())
        .args(["check", "train.py", "--select", "E501"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown rule selector `E501`"),
        "{}",
        stderr(&out)
    );

    fs::write(dir.path().join("clean.py"), "x = [i for i in range(3)]\n").unwrap();
    let out = leakspy(dir.path())
        .args(["check", "clean.py"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("All checks passed!"));
}

#[test]
fn statistics() {
    let dir = project();
    let out = leakspy(dir.path())
        .args(["check", "train.py", "--statistics"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("example_statistics", stdout(&out));
}

const NOQA_SOURCE: &str = "import torch.nn.functional as F\n\n\ndef train(model, loader):\n    losses = []\n    for x, y in loader:\n        loss = F.mse_loss(model(x), y)\n        loss.backward()\n        losses.append(loss){}\n    return losses\n";

#[test]
fn noqa_comments() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("", 1),
        ("  # noqa: LS002", 0),
        ("  # noqa: LS001", 1),
        ("  # noqa", 0),
        ("  # NOQA:LS002,LS014", 0),
    ];
    for (comment, want) in cases {
        fs::write(dir.path().join("t.py"), NOQA_SOURCE.replace("{}", comment)).unwrap();
        let out = leakspy(dir.path())
            .args(["check", "t.py"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(want),
            "comment {comment:?}: {}",
            stdout(&out)
        );
    }
    let file_level = format!("# leakspy: noqa\n{}", NOQA_SOURCE.replace("{}", ""));
    fs::write(dir.path().join("t.py"), file_level).unwrap();
    let out = leakspy(dir.path())
        .args(["check", "t.py"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn pyproject_configuration() {
    let dir = project();
    let src = dir.path().join("src");
    fs::create_dir(&src).unwrap();
    fs::rename(dir.path().join("train.py"), src.join("train.py")).unwrap();
    fs::write(
        dir.path().join("pyproject.toml"),
        "[project]\nname = \"demo\"\n\n[tool.leakspy]\nignore = [\"LS1\", \"LS014\"]\nper-file-ignores = { \"src/*.py\" = [\"LS012\"] }\n",
    )
    .unwrap();
    // Run from a subfolder: the nearest pyproject.toml above still applies.
    let out = leakspy(&src)
        .args(["check", "--output-format", "json"])
        .output()
        .unwrap();
    let items: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
    let codes: Vec<&str> = items.iter().map(|i| i["code"].as_str().unwrap()).collect();
    assert!(codes.contains(&"LS002"));
    assert!(
        !codes
            .iter()
            .any(|c| c.starts_with("LS1") || *c == "LS014" || *c == "LS012"),
        "{codes:?}"
    );

    fs::write(
        dir.path().join("pyproject.toml"),
        "[tool.leakspy]\nslect = [\"LS001\"]\n",
    )
    .unwrap();
    let out = leakspy(&src).args(["check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("invalid [tool.leakspy]"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bad_input_is_reported_and_the_rest_checked() {
    let dir = project();
    let p = dir.path();
    fs::write(p.join("broken.py"), "def f(:\n    pass\n").unwrap();
    fs::write(p.join("latin1.py"), b"# caf\xe9\nx = 1\n").unwrap();
    fs::write(p.join("blob.py"), b"\x00\x01\x02binary").unwrap();
    let huge = "x = 1\n".repeat(3_000_000);
    fs::write(p.join("huge.py"), huge).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(".", p.join("loop")).unwrap();
    let out = leakspy(p).args(["check", "."]).output().unwrap();
    let (o, e) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(1), "{o}\n{e}");
    assert!(o.contains("broken.py:1:7: syntax-error"), "{o}");
    assert!(o.contains("train.py:"), "the rest is still checked: {o}");
    assert!(
        e.contains("latin1.py: skipped: not UTF-8 (invalid byte at offset 5, line 1)"),
        "{e}"
    );
    assert!(e.contains("blob.py: skipped: binary file"), "{e}");
    assert!(
        e.contains("huge.py: skipped: 17 MiB is larger than the 16 MiB limit"),
        "{e}"
    );
    assert!(e.contains("symbolic link loop"), "{e}");
    assert!(!e.contains("panicked"), "{e}");

    let out = leakspy(p)
        .args(["check", "does-not-exist.py"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("does-not-exist.py: cannot read"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn discovery_honours_gitignore_and_skips_virtualenvs() {
    let dir = project();
    let p = dir.path();
    let leaky = fs::read_to_string(p.join("train.py")).unwrap();
    for sub in [
        "venv/lib",
        ".venv/lib/python3.11/site-packages/pkg",
        "ignored",
        "kept",
    ] {
        fs::create_dir_all(p.join(sub)).unwrap();
        fs::write(p.join(sub).join("m.py"), &leaky).unwrap();
    }
    fs::write(p.join("venv/pyvenv.cfg"), "home = /usr\n").unwrap();
    fs::write(p.join(".gitignore"), "ignored/\n").unwrap();
    let out = leakspy(p)
        .args(["check", "--output-format", "json"])
        .output()
        .unwrap();
    let items: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
    let mut files: Vec<&str> = items
        .iter()
        .map(|i| i["filename"].as_str().unwrap())
        .collect();
    files.sort();
    files.dedup();
    assert_eq!(files, ["kept/m.py", "train.py"]);
    // Named explicitly, a virtual environment's file is checked.
    let out = leakspy(p)
        .args(["check", "venv/lib/m.py"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn rule_documentation() {
    let dir = tempfile::tempdir().unwrap();
    let out = leakspy(dir.path())
        .args(["rule", "LS001"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!("rule_ls001", stdout(&out));
    let out = leakspy(dir.path())
        .args(["rule", "--all"])
        .output()
        .unwrap();
    let all = stdout(&out);
    for code in ["LS001", "LS008", "LS015", "LS101", "LS104"] {
        assert!(all.contains(&format!("({code})")), "{code}");
    }
    assert!(!all.contains("PLACEHOLDER"));
    let out = leakspy(dir.path())
        .args(["rule", "LS999"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unknown rule `LS999`"));
}

/// The Python sources of the installed torch package: about 2,500 files nobody here wrote.
fn torch_sources() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("LEAKSPY_TORCH_DIR") {
        return Some(PathBuf::from(dir));
    }
    let py = repo_root().join(".venv/bin/python");
    let out = std::process::Command::new(py)
        .args([
            "-c",
            "import os, torch; print(os.path.dirname(torch.__file__))",
        ])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

#[test]
fn checks_the_torch_package_without_panic_or_syntax_error() {
    let Some(torch) = torch_sources() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must provide torch (scripts/venv.sh)"
        );
        eprintln!("skipped: no torch installation found (run scripts/venv.sh)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = leakspy(dir.path())
        .arg("check")
        .arg(&torch)
        .args(["--statistics", "--output-format", "json"])
        .output()
        .unwrap();
    let e = stderr(&out);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "exit {:?}: {e}",
        out.status.code()
    );
    assert!(
        !e.contains("internal error") && !e.contains("panicked"),
        "{e}"
    );
    // No syntax error: check again listing them.
    let out = leakspy(dir.path())
        .arg("check")
        .arg(&torch)
        .args(["--output-format", "json", "--exit-zero"])
        .output()
        .unwrap();
    let items: Vec<Value> = serde_json::from_str(&stdout(&out)).unwrap();
    let syntax: Vec<&Value> = items
        .iter()
        .filter(|i| i["code"] == "syntax-error")
        .collect();
    assert!(syntax.is_empty(), "syntax errors reported: {syntax:?}");
    let files = walk_count(&torch);
    assert!(
        files > 2000,
        "expected the whole torch package, found {files} files"
    );
}

fn walk_count(dir: &Path) -> usize {
    let mut n = 0;
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            n += walk_count(&p);
        } else if p.extension().is_some_and(|e| e == "py") {
            n += 1;
        }
    }
    n
}

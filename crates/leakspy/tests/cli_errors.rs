//! Every command's errors as a user meets them, with the real binary: one
//! message on stderr that says what happened and what to do, exit status 2,
//! no success line beside it, and nothing left behind (no empty trace
//! folder, no half-written file). Messages are snapshots.

use std::path::{Path, PathBuf};
use std::process::Command;

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn leakspy(dir: &Path, args: &[&str]) -> Out {
    let o = Command::new(assert_cmd::cargo::cargo_bin("leakspy"))
        .current_dir(dir)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    Out {
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// A tool error: exit 2, nothing on stdout, one `leakspy: error:` line.
fn error_of(dir: &Path, args: &[&str]) -> String {
    let o = leakspy(dir, args);
    assert_eq!(o.code, Some(2), "{args:?}: {}{}", o.stdout, o.stderr);
    assert_eq!(o.stdout, "", "{args:?}: an error run prints nothing else");
    assert_eq!(
        o.stderr.matches("leakspy: error:").count(),
        1,
        "{args:?}: one message\n{}",
        o.stderr
    );
    o.stderr
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../leakspy_report/tests/fixtures")
}

/// A temp folder with copies of the named report fixtures.
fn with_fixtures(names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for n in names {
        std::fs::copy(fixtures().join(n), dir.path().join(n)).unwrap();
    }
    dir
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn check_of_a_missing_path_claims_no_success() {
    let dir = tempfile::tempdir().unwrap();
    insta::assert_snapshot!(error_of(dir.path(), &["check", "nonexistent"]), @"leakspy: error: nonexistent: cannot read: No such file or directory (os error 2)
");
    // A good file beside it is still checked and reported, but no "All
    // checks passed!" is said of a run that failed.
    std::fs::write(dir.path().join("ok.py"), "x = 1\n").unwrap();
    let o = leakspy(dir.path(), &["check", "ok.py", "nonexistent"]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(!o.stdout.contains("passed"), "{}", o.stdout);
}

#[test]
fn check_configuration_errors() {
    let dir = tempfile::tempdir().unwrap();
    insta::assert_snapshot!(error_of(dir.path(), &["check", "--config", "nope.toml"]), @"leakspy: error: --config nope.toml: no such file
");
    insta::assert_snapshot!(error_of(dir.path(), &["check", "--select", "LS9999"]), @"leakspy: error: unknown rule selector `LS9999`: expected a code like LS001, a prefix like LS0 or LS1, a rule name, or ALL
");
    std::fs::write(
        dir.path().join("pyproject.toml"),
        "[tool.leakspy]\nselect = 3\n",
    )
    .unwrap();
    let e = error_of(dir.path(), &["check", "."]);
    assert!(
        e.contains("invalid [tool.leakspy] in") && e.contains("in `select`"),
        "{e}"
    );
}

#[test]
fn rule_that_does_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    insta::assert_snapshot!(error_of(dir.path(), &["rule", "LS999"]), @"leakspy: error: unknown rule `LS999`: expected a code such as LS001 (see `leakspy rule --all`)
");
}

#[test]
fn report_of_what_is_not_a_trace() {
    let dir = with_fixtures(&["leak_steps.jsonl", "fixed.jsonl"]);
    let d = dir.path();
    insta::assert_snapshot!(error_of(d, &["report", "missing.jsonl"]), @"leakspy: error: cannot read trace file missing.jsonl: No such file or directory (os error 2)
");
    std::fs::create_dir(d.join("folder")).unwrap();
    insta::assert_snapshot!(error_of(d, &["report", "folder"]), @"leakspy: error: cannot read trace file folder: Is a directory (os error 21)
");
    std::fs::write(d.join("empty.jsonl"), "").unwrap();
    insta::assert_snapshot!(error_of(d, &["report", "empty.jsonl"]), @"leakspy: error: empty.jsonl: no trace header: the file is empty (the run may have failed before it started)
");
    // A header line cut short (a copy of a trace still being written, a
    // full disk): said to be truncated, not "expected a header".
    let full = std::fs::read(d.join("leak_steps.jsonl")).unwrap();
    std::fs::write(d.join("cut.jsonl"), &full[..80]).unwrap();
    insta::assert_snapshot!(error_of(d, &["report", "cut.jsonl"]), @"leakspy: error: cut.jsonl: the trace header (line 1) is truncated after 80 bytes: the file was cut while it was written or copied, and a trace without its header cannot be read (copy the whole file, or record the run again)
");
    std::fs::write(d.join("elf.jsonl"), b"\x7fELF\x02\x01\x01\0\0\0\0").unwrap();
    insta::assert_snapshot!(error_of(d, &["report", "elf.jsonl"]), @r#"leakspy: error: elf.jsonl: line 1: expected a leakspy trace header (a JSON object with "kind":"header","format":"leakspy-trace"), found binary data, not text
"#);
    std::fs::write(d.join("other.json"), "{\n  \"name\": \"x\"\n}\n").unwrap();
    insta::assert_snapshot!(error_of(d, &["report", "other.json"]), @"leakspy: error: other.json is one JSON document, not a leakspy trace (a trace is JSON Lines: a header line, then one event per line, as `leakspy run` writes it)
");
}

#[test]
fn report_of_a_report_says_it_is_one_and_where_traces_are() {
    let dir = with_fixtures(&["leak_steps.jsonl", "fixed.jsonl"]);
    let d = dir.path();
    // The three JSON files leakspy writes, each given back to `report`.
    let write = |args: &[&str], to: &str| {
        let o = leakspy(d, args);
        assert!(matches!(o.code, Some(0 | 1)), "{}", o.stderr);
        std::fs::write(d.join(to), o.stdout).unwrap();
    };
    write(
        &["report", "leak_steps.jsonl", "--format", "json"],
        "diagnosis.json",
    );
    write(
        &[
            "diff",
            "leak_steps.jsonl",
            "fixed.jsonl",
            "--format",
            "json",
        ],
        "diff.json",
    );
    write(
        &[
            "report",
            "leak_steps.jsonl",
            "fixed.jsonl",
            "--format",
            "json",
        ],
        "ranks.json",
    );
    insta::assert_snapshot!(error_of(d, &["report", "diagnosis.json"]), @"leakspy: error: diagnosis.json is a leakspy report (a diagnosis, as `--report-json` or `--format json` writes it), not a trace: it already holds its result. Give the trace it came from: the .jsonl file `leakspy run` wrote (leakspy-runs/*.jsonl unless --trace named another)
");
    for (file, kind) in [
        ("diff.json", "a comparison"),
        ("ranks.json", "a report of several traces"),
    ] {
        let e = error_of(d, &["report", file]);
        assert!(e.contains(&format!("is a leakspy report ({kind},")), "{e}");
        let e = error_of(d, &["diff", file, "leak_steps.jsonl"]);
        assert!(e.contains("is a leakspy report"), "{e}");
    }
}

#[test]
fn report_output_goes_into_a_new_folder_or_fails_saying_where() {
    let dir = with_fixtures(&["leak_steps.jsonl"]);
    let d = dir.path();
    let o = leakspy(
        d,
        &[
            "report",
            "leak_steps.jsonl",
            "--format",
            "html",
            "-o",
            "out/r.html",
        ],
    );
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(d.join("out/r.html").is_file());
    std::fs::write(d.join("file"), "").unwrap();
    insta::assert_snapshot!(error_of(d, &["report", "leak_steps.jsonl", "-o", "file/r.txt"]), @"leakspy: error: cannot write the report to file/r.txt: Not a directory (os error 20)
");
}

#[test]
fn diff_names_the_missing_file_once() {
    let dir = with_fixtures(&["leak_steps.jsonl"]);
    let e = error_of(
        dir.path(),
        &["diff", "nonexistent.jsonl", "leak_steps.jsonl"],
    );
    insta::assert_snapshot!(e, @"leakspy: error: cannot read trace file nonexistent.jsonl: No such file or directory (os error 2)
");
    let e = error_of(dir.path(), &["diff", "leak_steps.jsonl", "after.jsonl"]);
    assert_eq!(e.matches("No such file").count(), 1, "{e}");
    assert!(e.contains("after.jsonl"), "{e}");
}

#[test]
fn diff_of_one_run_with_itself_says_so() {
    let dir = with_fixtures(&["leak_steps.jsonl"]);
    let d = dir.path();
    let o = leakspy(d, &["diff", "leak_steps.jsonl", "leak_steps.jsonl"]);
    assert_eq!(o.code, Some(1), "nothing is proven: {}", o.stderr);
    insta::assert_snapshot!(o.stdout.lines().next().unwrap(), @"leakspy diff: SAME RUN: both traces are the same run (`python train.py --epochs 3`, pid 4242 on trainbox), so nothing was compared: record the job again after the fix and compare that trace with this one");
    // A copy taken while the run was still writing (a prefix) is the same run.
    let full = std::fs::read_to_string(d.join("leak_steps.jsonl")).unwrap();
    let half: String = full
        .lines()
        .take(full.lines().count() / 2)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(d.join("copy.jsonl"), half).unwrap();
    let o = leakspy(
        d,
        &["diff", "copy.jsonl", "leak_steps.jsonl", "--format", "json"],
    );
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["verdict"], "same-run", "{v}");
    // Another run of the same job is compared as usual (report_cli.rs,
    // diff_not_fixed).
}

#[test]
fn run_of_a_missing_command_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    insta::assert_snapshot!(error_of(d, &["run", "--", "nonexistent_cmd_xyz"]), @"leakspy: error: command not found: `nonexistent_cmd_xyz` (is it installed and on PATH?)
");
    // Nor the folders made for a trace named inside new ones.
    error_of(
        d,
        &["run", "--trace", "a/b/t.jsonl", "--", "nonexistent_cmd_xyz"],
    );
    assert!(entries(d).is_empty(), "{:?}", entries(d));
    // A folder that was there stays.
    std::fs::create_dir(d.join("mine")).unwrap();
    error_of(
        d,
        &[
            "run",
            "--trace",
            "mine/t.jsonl",
            "--",
            "nonexistent_cmd_xyz",
        ],
    );
    assert_eq!(entries(d), ["mine"]);
    assert!(entries(&d.join("mine")).is_empty());
}

#[test]
fn run_argument_errors_come_before_the_job_starts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("folder")).unwrap();
    // The job would leave this file: it must not run.
    let job = ["--", "sh", "-c", "touch ran"];
    let cases: [(&[&str], &str); 5] = [
        (&["--interval", "0"], "--interval must be between"),
        (
            &["--probe-budget", "2"],
            "--probe-budget must be a fraction",
        ),
        (&["--trace", "folder"], "the trace path folder is a folder"),
        (
            &["--report-html", "folder"],
            "--report-html folder is a folder; give a file name",
        ),
        (
            &["--report-json", "folder"],
            "--report-json folder is a folder; give a file name",
        ),
    ];
    for (opts, said) in cases {
        let args: Vec<&str> = ["run"].iter().chain(opts).chain(&job).copied().collect();
        let e = error_of(d, &args);
        assert!(e.contains(said), "{args:?}: {e}");
        assert!(!d.join("ran").exists(), "{args:?}: the job ran");
    }
    assert_eq!(entries(d), ["folder"], "nothing left behind");
    let e = error_of(d, &["run", "--step-regex", "(", "--", "true"]);
    assert!(
        e.starts_with("leakspy: error: --step-regex is not a valid regular expression"),
        "{e}"
    );
}

#[test]
fn run_writes_a_report_into_a_new_folder() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let o = leakspy(
        d,
        &[
            "run",
            "-q",
            "--trace",
            "t.jsonl",
            "--report-html",
            "reports/r.html",
            "--",
            "true",
        ],
    );
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(d.join("reports/r.html").is_file(), "{}", o.stderr);
}

#[test]
fn attach_errors_leave_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    insta::assert_snapshot!(error_of(d, &["attach", "999999999"]), @"leakspy: error: no process with pid 999999999
");
    assert!(entries(d).is_empty(), "{:?}", entries(d));
}

#[test]
fn a_mistyped_command_is_told_the_command_meant() {
    let dir = tempfile::tempdir().unwrap();
    for (typed, meant) in [
        ("rnu", "run"),
        ("chekc", "check"),
        ("dif", "diff"),
        ("reprot", "report"),
    ] {
        let o = leakspy(dir.path(), &[typed]);
        assert_eq!(o.code, Some(2), "{typed}: {}", o.stderr);
        assert!(
            o.stderr
                .contains(&format!("a similar subcommand exists: '{meant}'")),
            "{typed}: {}",
            o.stderr
        );
    }
    let o = leakspy(dir.path(), &["xyz"]);
    assert!(!o.stderr.contains("similar"), "{}", o.stderr);
}

/// `leakspy check . | head -1`: the reader closes the pipe after one line; that is no error of
/// the user's to report, and the status is ripgrep's (0).
#[test]
fn a_closed_pipe_stops_check_quietly() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let leak = "import torch\n\n\ndef train(model, loader, opt):\n    losses = []\n    \
                for x, y in loader:\n        loss = model(x).sum()\n        \
                losses.append(loss)\n        loss.backward()\n        opt.step()\n";
    // Far more than a pipe's buffer (64 KiB): the writer meets the closed end.
    for i in 0..400 {
        std::fs::write(dir.path().join(format!("train_{i}.py")), leak).unwrap();
    }
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("leakspy"))
        .current_dir(dir.path())
        .args(["check", "."])
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("LS002"), "{first}");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("error"), "{stderr}");
}

/// Output written after the reader has gone (`leakspy rule --all | head -0`): no panic, no
/// error message, status 0, for each command that prints its answer whole.
#[test]
fn output_to_a_closed_pipe_is_no_error() {
    let dir = tempfile::tempdir().unwrap();
    for args in [&["rule", "--all"][..], &["rule", "LS002"][..]] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader); // every write now fails with EPIPE
        let out = Command::new(assert_cmd::cargo::cargo_bin("leakspy"))
            .current_dir(dir.path())
            .args(args)
            .stdout(writer)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert_eq!(stderr, "", "{args:?}");
    }
}

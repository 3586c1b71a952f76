//! `leakspy run` when things go wrong: the child is killed, the command does
//! not exist, leakspy is interrupted, the trace cannot be written.

mod run_support;

use std::process::Command;

use run_support::{alive, kill, leakspy, run_workload, start_background, workload};

#[test]
fn child_killed_by_sigkill_leaves_a_readable_trace_and_exits_137() {
    let dir = tempfile::tempdir().unwrap();
    let (child, trace, report, pid) = start_background(dir.path(), "idle", "60");
    kill(pid, libc::SIGKILL);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(137), "{stderr}");
    let t = leakspy_trace::read_trace(&trace).unwrap();
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    let exit = t.exit().expect("exit event");
    assert_eq!((exit.signal, exit.status), (Some(9), 137));
    assert!(
        t.notes()
            .any(|n| n.message.starts_with("killed by SIGKILL")),
        "{:?}",
        t.notes().collect::<Vec<_>>()
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    assert_eq!(r["killed"], true, "{r}");
    assert_eq!(r["exit"]["signal"], 9);
    assert!(stderr.contains("SIGKILL"), "{stderr}");
}

#[test]
fn sigint_to_leakspy_stops_the_child_and_still_writes_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let (child, trace, report, pid) = start_background(dir.path(), "idle", "60");
    let leakspy_pid = child.id();
    kill(leakspy_pid, libc::SIGINT);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Python's KeyboardInterrupt ends the process by SIGINT: 128 + 2.
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(!alive(pid), "the child outlived leakspy");
    let t = leakspy_trace::read_trace(&trace).unwrap();
    assert_eq!(t.exit().unwrap().signal, Some(libc::SIGINT));
    assert!(t
        .notes()
        .any(|n| n.message.contains("leakspy was interrupted")));
    assert!(report.exists(), "no report after Ctrl-C\n{stderr}");
    assert!(stderr.contains("trace: "), "{stderr}");
}

#[test]
fn ctrl_c_at_a_terminal_interrupts_the_child_once_and_the_report_is_written() {
    // script(1) runs leakspy on a pseudo-terminal; writing ^C to it makes the
    // kernel send SIGINT to the foreground process group (leakspy and Python),
    // as a person pressing Ctrl-C does. leakspy must not forward it again.
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    let report = dir.path().join("r.json");
    let inner = format!(
        "{} run --trace {} --report-json {} -- python3 {} idle 60",
        leakspy().display(),
        trace.display(),
        report.display(),
        workload().display()
    );
    let mut child = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("script(1) from util-linux");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        assert!(
            std::time::Instant::now() < deadline,
            "the child was never sampled"
        );
        // Sampled, and past Python's start-up (its probe said hello): ^C
        // during `site` is a fatal start-up error, not an interrupt.
        let ready = leakspy_trace::read_trace(&trace).is_ok_and(|t| {
            let seen = t
                .samples()
                .filter(|s| s.procs.iter().any(|p| p.name.starts_with("python")))
                .count();
            seen >= 5 && t.probes().next().is_some()
        });
        if ready {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.stdin.as_mut().unwrap().write_all(b"\x03").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(130), "{text}");
    assert_eq!(
        text.matches("KeyboardInterrupt").count(),
        1,
        "one interrupt, not two: {text}"
    );
    let t = leakspy_trace::read_trace(&trace).unwrap();
    assert_eq!(t.exit().unwrap().status, 130);
    assert!(report.exists(), "{text}");
}

#[test]
fn sigterm_to_leakspy_is_forwarded() {
    let dir = tempfile::tempdir().unwrap();
    let (child, trace, _report, pid) = start_background(dir.path(), "idle", "60");
    kill(child.id(), libc::SIGTERM);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(128 + libc::SIGTERM));
    assert!(!alive(pid));
    let t = leakspy_trace::read_trace(&trace).unwrap();
    assert_eq!(t.exit().unwrap().signal, Some(libc::SIGTERM));
}

#[test]
fn command_that_does_not_exist_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    let out = Command::new(leakspy())
        .args(["run", "--trace"])
        .arg(&trace)
        .args(["--", "leakspy-no-such-command-xyz", "--flag"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "leakspy: error: command not found: `leakspy-no-such-command-xyz` (is it installed and on PATH?)"
    );
    assert!(!trace.exists(), "an empty trace was left behind");
}

#[test]
fn unwritable_trace_is_an_error_before_the_child_starts() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "not a folder").unwrap();
    let marker = dir.path().join("child-ran");
    let out = Command::new(leakspy())
        .args(["run", "--trace"])
        .arg(file.join("trace.jsonl"))
        .args(["--", "python3", "-c"])
        .arg(format!("open({:?}, 'w')", marker.display().to_string()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot create the folder") && stderr.contains("a-file"),
        "{stderr}"
    );
    assert!(stderr.contains("--trace FILE"), "says what to do: {stderr}");
    assert!(
        !marker.exists(),
        "the child ran although its trace could not be written"
    );
}

#[test]
fn trace_path_that_is_a_folder_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(leakspy())
        .args(["run", "--trace"])
        .arg(dir.path())
        .args(["--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is a folder"), "{stderr}");
}

#[test]
fn child_exit_code_passes_through() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    let out = Command::new(leakspy())
        .args(["run", "--fail-on-leak", "--trace"])
        .arg(&trace)
        .args(["--", "python3", "-c", "import sys; sys.exit(3)"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let t = leakspy_trace::read_trace(&trace).unwrap();
    let exit = t.exit().unwrap();
    assert_eq!((exit.code, exit.signal, exit.status), (Some(3), None, 3));
}

#[test]
fn step_regex_passes_stdout_through_unchanged_and_records_steps() {
    let dir = tempfile::tempdir().unwrap();
    let f = run_workload(
        dir.path(),
        &["--step-regex", r"^step (\d+) "],
        "idle",
        &["1"],
    );
    assert_eq!(f.code, Some(0), "{}", f.stderr);
    let lines: Vec<&str> = f.stdout.lines().collect();
    assert!(lines.len() >= 5, "{}", f.stdout);
    for (i, line) in lines.iter().enumerate() {
        assert!(
            line.starts_with(&format!("step {i} loss ")),
            "line {i}: {line:?}"
        );
    }
    let steps: Vec<u64> = f.trace.steps().map(|s| s.step).collect();
    assert_eq!(steps, (0..lines.len() as u64).collect::<Vec<_>>());
    assert!(f
        .trace
        .steps()
        .all(|s| s.source == leakspy_trace::StepSource::Regex));
}

#[test]
fn without_step_regex_the_child_inherits_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let f = run_workload(dir.path(), &[], "idle", &["0.3"]);
    assert!(f.stdout.starts_with("step 0 loss 1.0000\n"), "{}", f.stdout);
    assert_eq!(f.trace.step_count(), 0);
}

#[test]
fn default_trace_goes_to_a_dated_file_in_leakspy_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(leakspy())
        .current_dir(dir.path())
        .args(["run", "-q", "--", "python3"])
        .arg(workload())
        .args(["idle", "0.2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let files: Vec<String> = std::fs::read_dir(dir.path().join("leakspy-runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let name = &files[0];
    // 20260121-093000-workload.jsonl
    assert!(
        name.ends_with("-workload.jsonl") && name.len() == 30,
        "{name}"
    );
    assert!(name[..8].chars().all(|c| c.is_ascii_digit()), "{name}");
    assert!(
        stderr.contains(&format!("trace: leakspy-runs/{name}")),
        "{stderr}"
    );
}

#[test]
fn plain_status_lines_when_stderr_is_not_a_terminal_and_none_when_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let run = |quiet: bool| {
        let mut cmd = Command::new(leakspy());
        cmd.arg("run")
            .arg("--trace")
            .arg(dir.path().join("t.jsonl"));
        cmd.args(["--status-interval", "0.2"]);
        if quiet {
            cmd.arg("--quiet");
        }
        let out = cmd
            .args(["--", "python3"])
            .arg(workload())
            .args(["idle", "1.5"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let stderr = run(false);
    let status: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("leakspy 0:0"))
        .collect();
    assert!(status.len() >= 2, "{stderr}");
    assert!(status.iter().all(|l| l.contains(" | RSS ")), "{stderr}");
    assert!(
        !stderr.contains('\r') && !stderr.contains('\x1b'),
        "{stderr:?}"
    );
    let quiet = run(true);
    assert!(!quiet.contains(" | RSS "), "{quiet}");
    assert!(
        quiet.contains("trace: "),
        "the diagnosis is still printed: {quiet}"
    );
}

#[test]
fn status_line_is_redrawn_in_place_on_a_terminal() {
    // script(1) gives leakspy a pseudo-terminal as stderr.
    let dir = tempfile::tempdir().unwrap();
    let inner = format!(
        "{} run --trace {} -- python3 {} idle 1.5",
        leakspy().display(),
        dir.path().join("t.jsonl").display(),
        workload().display()
    );
    let out = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .output()
        .expect("script(1) from util-linux");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let redraws = text.matches("\r\x1b[Kleakspy 0:0").count();
    assert!(redraws >= 2, "{text:?}");
    // The line is cleared before the diagnosis is printed.
    assert!(text.contains("\r\x1b[Kleakspy: "), "{text:?}");
}

#[test]
fn bad_arguments_are_tool_errors() {
    for args in [
        vec!["run", "--interval", "0", "--", "true"],
        vec!["run", "--step-regex", "step (", "--", "true"],
        vec!["run"],
        // A mistyped option is named as one, not run as a command `-o`.
        vec!["run", "-o", "x.jsonl", "--", "true"],
    ] {
        let out = Command::new(leakspy()).args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(!stderr.contains("command not found"), "{args:?}: {stderr}");
    }
}

#[test]
fn gpu_is_sampled_or_its_absence_is_a_note_never_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let f = run_workload(dir.path(), &[], "idle", &["1.5"]);
    assert_eq!(f.code, Some(0), "{}", f.stderr);
    let noted = f.trace.notes().any(|n| {
        n.message
            .starts_with("no NVIDIA GPU/driver: GPU memory not sampled")
    });
    let sampled = f.trace.gpu().count() > 0;
    assert!(
        noted != sampled,
        "exactly one of a GPU note ({noted}) or GPU samples ({sampled})"
    );
    if sampled {
        let g = f.trace.gpu().next().unwrap();
        assert!(g.devices.iter().all(|d| d.total > 0 && d.used <= d.total));
    }
}

/// The first thing a new user may meet: the job cannot even start (here a
/// module its Python lacks). The job's own traceback reaches the terminal as
/// it wrote it, and leakspy says plainly that the job failed, with its last
/// stderr lines, instead of an "inconclusive" diagnosis of two samples.
#[test]
fn a_job_that_fails_at_once_is_said_to_have_failed_with_its_last_stderr_lines() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("train.py");
    std::fs::write(
        &script,
        "import sys\nprint('loading', file=sys.stderr)\nimport leakspy_no_such_module_xyz\n",
    )
    .unwrap();
    let out = Command::new(leakspy())
        .current_dir(dir.path())
        .args(["run", "-q", "--trace", "t.jsonl", "--report-json", "r.json"])
        .args(["--", "python3", "train.py"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "the job's own status: {stderr}");
    // Python's output first, untouched, as the job wrote it.
    assert!(
        stderr.starts_with("loading\nTraceback (most recent call last):\n"),
        "{stderr}"
    );
    let said = stderr
        .split_once("leakspy: the job failed: `python3 train.py` exited with code 1 after ")
        .unwrap_or_else(|| panic!("no failure message: {stderr}"))
        .1;
    // Python's start-up alone can take seconds on a loaded machine: enough
    // samples for a diagnosis, which then follows the failure.
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap();
    let too_short = report["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == report["headline"])
        .is_none_or(|s| s["shape"] == "too-short");
    assert_eq!(
        said.contains("too soon to measure its memory"),
        too_short,
        "{said}"
    );
    assert_eq!(
        stderr.contains("\n  run: python3 train.py"),
        !too_short,
        "the diagnosis only when there is one: {stderr}"
    );
    assert!(
        said.contains(
            "Its last lines on stderr:\n    loading\n    Traceback (most recent call last):\n"
        ),
        "{said}"
    );
    assert!(
        said.contains("    ModuleNotFoundError: No module named 'leakspy_no_such_module_xyz'\n"),
        "{said}"
    );
    assert!(
        said.contains("`python3` has no module `leakspy_no_such_module_xyz`: run the job with the Python of its environment"),
        "{said}"
    );
    assert!(stderr.contains("trace: t.jsonl"), "{stderr}");
}

/// A job that fails once it has run long enough to be measured is said to
/// have failed, and gets its diagnosis as usual.
#[test]
fn a_job_that_fails_after_running_is_diagnosed() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(leakspy())
        .current_dir(dir.path())
        .args(["run", "-q", "--trace", "t.jsonl", "--", "python3", "-c"])
        .arg("import sys, time\nkept = []\nt0 = time.monotonic()\nwhile time.monotonic() - t0 < 5:\n    kept.append(b'x' * 65536)\n    time.sleep(0.01)\nsys.exit(3)\n")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("leakspy: the job failed: `python3 -c ")
            && stderr.contains("exited with code 3 after "),
        "{stderr}"
    );
    assert!(!stderr.contains("too soon"), "{stderr}");
    assert!(
        stderr.contains("\n  run: python3 -c "),
        "the diagnosis: {stderr}"
    );
}

/// The job's stderr goes through leakspy's relay byte for byte: carriage
/// returns, colours and bytes that are not UTF-8 arrive as written.
#[test]
fn the_jobs_stderr_reaches_the_user_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let written: &[u8] =
        b" 10%\r 90%\r\x1b[31mred\x1b[0m\n\xff\xfe not utf-8\nno newline at the end";
    let code = format!(
        "import sys; sys.stderr.buffer.write(bytes({:?})); sys.stderr.flush()",
        written.to_vec()
    );
    let out = Command::new(leakspy())
        .current_dir(dir.path())
        .args([
            "run", "-q", "--trace", "t.jsonl", "--", "python3", "-c", &code,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.starts_with(written),
        "{:?}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// At a terminal the job still sees a terminal on its stderr (colours and
/// progress bars stay as they would be without leakspy).
#[test]
fn at_a_terminal_the_job_still_has_a_terminal_for_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let inner = format!(
        "{} run -q --trace {} -- python3 -c 'import sys; print(\"stderr is a tty:\", sys.stderr.isatty(), file=sys.stderr); sys.exit(5)'",
        leakspy().display(),
        dir.path().join("t.jsonl").display(),
    );
    let out = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .output()
        .expect("script(1) from util-linux");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(5), "{text}");
    assert_eq!(
        text.matches("stderr is a tty: True").count(),
        2,
        "live, then in the tail: {text}"
    );
}

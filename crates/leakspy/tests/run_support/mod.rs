//! Helpers shared by the `leakspy run` integration tests: they run the real
//! binary on the real Python programs of tests/fixtures/run/workload.py.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn leakspy() -> PathBuf {
    assert_cmd::cargo::cargo_bin("leakspy")
}

pub fn workload() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run/workload.py")
}

pub const MIB: f64 = 1048576.0;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The project's venv python, with torch (scripts/venv.sh makes it; the
/// test command runs that first and sets LEAKSPY_PYTHON).
pub fn torch_python() -> PathBuf {
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

pub struct Finished {
    pub output: Output,
    pub report: serde_json::Value,
    pub trace: leakspy_trace::Trace,
    pub stderr: String,
    pub stdout: String,
    pub code: Option<i32>,
}

/// `leakspy run -q --trace T --report-json R [extra] -- python3 workload.py MODE ARGS...`
pub fn run_workload(dir: &Path, extra: &[&str], mode: &str, args: &[&str]) -> Finished {
    let trace = dir.join(format!("{mode}.jsonl"));
    let report = dir.join(format!("{mode}.json"));
    let output = Command::new(leakspy())
        .arg("run")
        .arg("--quiet")
        .arg("--trace")
        .arg(&trace)
        .arg("--report-json")
        .arg(&report)
        .args(extra)
        .arg("--")
        .arg("python3")
        .arg(workload())
        .arg(mode)
        .args(args)
        .output()
        .expect("leakspy runs");
    finished(output, &trace, &report)
}

/// `leakspy run -q --trace T --report-json R -- <torch python> PROGRAM ARGS...` at its
/// defaults, in `dir` (trace and report there); `setup` adds what the program needs (its
/// environment, its folder). The report must be the one verdict `report` and `diff` give.
pub fn run_program(
    dir: &Path,
    program: &Path,
    args: &[&str],
    setup: impl FnOnce(&mut Command),
) -> Finished {
    let trace = dir.join("t.jsonl");
    let report = dir.join("r.json");
    let mut cmd = Command::new(leakspy());
    cmd.args(["run", "--quiet", "--trace"])
        .arg(&trace)
        .arg("--report-json")
        .arg(&report)
        .arg("--")
        .arg(torch_python())
        .arg(program)
        .args(args);
    setup(&mut cmd);
    let output = cmd.output().expect("leakspy runs");
    finished(output, &trace, &report)
}

pub fn finished(output: Output, trace: &Path, report: &Path) -> Finished {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let report_text = std::fs::read_to_string(report).unwrap_or_else(|e| {
        panic!(
            "no JSON report {}: {e}\nstderr:\n{stderr}",
            report.display()
        )
    });
    let report_json: serde_json::Value =
        serde_json::from_str(&report_text).expect("report is JSON");
    assert_one_verdict(trace, report_json["verdict"].as_str().unwrap_or_default());
    Finished {
        report: report_json,
        trace: leakspy_trace::read_trace(trace).expect("trace reads"),
        code: output.status.code(),
        output,
        stderr,
        stdout,
    }
}

/// Starts leakspy in the background on a long workload, and waits until its
/// trace shows the Python child sampled and past its start-up: its probe has
/// said hello, so `site` is imported (a signal during `site` is a fatal
/// start-up error, not what the tests send it for). A bounded wait, not a
/// timing assertion.
// The child is handed to the caller, which waits for it.
#[allow(clippy::zombie_processes)]
pub fn start_background(dir: &Path, mode: &str, seconds: &str) -> (Child, PathBuf, PathBuf, u32) {
    let trace = dir.join(format!("{mode}.jsonl"));
    let report = dir.join(format!("{mode}.json"));
    // The probe's folder in the test's own: a test that kills leakspy with
    // SIGKILL leaves it behind, and the test's folder goes with the test.
    let mut child = Command::new(leakspy())
        .env("TMPDIR", dir)
        .arg("run")
        .arg("--quiet")
        .arg("--trace")
        .arg(&trace)
        .arg("--report-json")
        .arg(&report)
        .arg("--")
        .arg("python3")
        .arg(workload())
        .arg(mode)
        .arg(seconds)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("leakspy starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child was never sampled past its start-up");
        }
        if let Ok(t) = leakspy_trace::read_trace(&trace) {
            let python_seen = t
                .samples()
                .any(|s| s.procs.iter().any(|p| p.name.starts_with("python")));
            let pid = t.header.pid.expect("header has the child's pid");
            let started = t
                .probes()
                .any(|p| p.get("pid").and_then(serde_json::Value::as_u64) == Some(u64::from(pid)));
            if python_seen && started && t.sample_count() >= 5 {
                return (child, trace, report, pid);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn kill(pid: u32, sig: i32) {
    // SAFETY: plain kill(2).
    let rc = unsafe { libc::kill(pid as i32, sig) };
    assert_eq!(rc, 0, "kill({pid}, {sig})");
}

pub fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(pid as i32, 0) == 0 }
}

pub fn verdict(f: &Finished) -> &str {
    f.report["verdict"].as_str().expect("verdict is a string")
}

/// One answer: the verdict `run` wrote is what `report` says of the trace in
/// text, JSON and HTML, and what `diff` says of it as either side.
pub fn assert_one_verdict(trace: &Path, verdict: &str) {
    let out = |args: &[&std::ffi::OsStr]| {
        let o = Command::new(leakspy())
            .args(args)
            .output()
            .expect("leakspy runs");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let t = trace.as_os_str();
    let json: serde_json::Value = serde_json::from_str(&out(&[
        "report".as_ref(),
        t,
        "--format".as_ref(),
        "json".as_ref(),
    ]))
    .expect("report --format json");
    assert_eq!(
        json["verdict"], verdict,
        "report --format json on {trace:?}"
    );
    let tag = match verdict {
        "leak" => "LEAK",
        "no-leak" => "NO LEAK",
        _ => "INCONCLUSIVE",
    };
    let text = out(&["report".as_ref(), t]);
    assert!(
        text.starts_with(&format!("leakspy: {tag}: ")),
        "report on {trace:?} (run said {verdict}):\n{text}"
    );
    let html = out(&["report".as_ref(), t, "--format".as_ref(), "html".as_ref()]);
    assert!(
        html.contains(&format!("<span class=\"badge\">{tag}</span>")),
        "the HTML badge of {trace:?} is not {tag}"
    );
    let other = repo_root().join("crates/leakspy_report/tests/fixtures/fixed.jsonl");
    for (args, side) in [
        ([t, other.as_os_str()], "before"),
        ([other.as_os_str(), t], "after"),
    ] {
        let mut full: Vec<&std::ffi::OsStr> = vec!["diff".as_ref()];
        full.extend(args);
        full.extend::<[&std::ffi::OsStr; 2]>(["--format".as_ref(), "json".as_ref()]);
        let diff: serde_json::Value =
            serde_json::from_str(&out(&full)).expect("diff --format json");
        assert_eq!(
            diff[side]["verdict"], verdict,
            "diff with {trace:?} as {side}: {diff}"
        );
    }
}

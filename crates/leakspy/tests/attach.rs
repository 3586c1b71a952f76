//! `leakspy attach PID` through the real binary, on real running jobs: a
//! leaky and a healthy torch trainer (tests/fixtures/attach), plain Python
//! loops and a non-Python program. The job must be diagnosed as `leakspy
//! run` would, and left running, unharmed, with nothing of leakspy's in
//! its output; it then ends normally when asked.

mod run_support;

use run_support::{repo_root, torch_python};

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn leakspy() -> PathBuf {
    assert_cmd::cargo::cargo_bin("leakspy")
}

fn trainer() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/attach/train_forever.py")
}

/// Two torch jobs and their monitors on a 2-core machine starve each other.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// A job started by the test, killed if the test fails before it ends.
struct Job {
    child: Child,
    stop: PathBuf,
    /// What the job printed up to "ready".
    head: String,
}

impl Job {
    /// Starts `program args...` with `STOP_FILE` as its last argument and
    /// waits for its `ready` line.
    fn start(dir: &Path, program: &Path, args: &[&str]) -> Job {
        let stop = dir.join("stop");
        let mut child = Command::new(program)
            .args(args)
            .arg(&stop)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the job starts");
        let mut head = String::new();
        let mut reader = BufReader::new(child.stdout.as_mut().unwrap());
        reader.read_line(&mut head).unwrap();
        let mut job = Job { child, stop, head };
        if job.head != "ready\n" {
            let (_, out, err) = job.end();
            panic!("the job did not get ready: {out:?} {err}");
        }
        job
    }

    fn torch(dir: &Path, mode: &str) -> Job {
        Job::start(dir, &torch_python(), &[trainer().to_str().unwrap(), mode])
    }

    /// A plain Python loop (no torch: quick to start).
    fn plain(dir: &Path) -> Job {
        let script = dir.join("loop.py");
        std::fs::write(&script, PLAIN_LOOP).unwrap();
        Job::start(dir, &torch_python(), &[script.to_str().unwrap()])
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Asks the job to end (its stop file) and returns its exit code and
    /// whole output.
    fn end(&mut self) -> (Option<i32>, String, String) {
        std::fs::write(&self.stop, "").unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut out = self.head.clone();
        let mut err = String::new();
        if let Some(mut o) = self.child.stdout.take() {
            o.read_to_string(&mut out).unwrap();
        }
        if let Some(mut e) = self.child.stderr.take() {
            e.read_to_string(&mut err).unwrap();
        }
        (self.child.wait().unwrap().code(), out, err)
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const PLAIN_LOOP: &str = r#"
import os, sys, time
stop = sys.argv[1]
history = []
print("ready", flush=True)
while not os.path.exists(stop):
    history.append([0.0] * 50)
    time.sleep(0.005)
print("done", flush=True)
"#;

struct Attached {
    output: Output,
    stderr: String,
    trace: leakspy_trace::Trace,
    report: Value,
}

fn attach(dir: &Path, pid: u32, extra: &[&str]) -> Attached {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let trace = dir.join(format!("attach-{n}.jsonl"));
    let report = dir.join(format!("attach-{n}.json"));
    let output = Command::new(leakspy())
        .arg("attach")
        .arg(pid.to_string())
        .arg("--trace")
        .arg(&trace)
        .arg("--report-json")
        .arg(&report)
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let text = std::fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("no report ({e}); leakspy said:\n{stderr}"));
    let report: Value = serde_json::from_str(&text).unwrap();
    run_support::assert_one_verdict(&trace, report["verdict"].as_str().unwrap_or_default());
    Attached {
        trace: leakspy_trace::read_trace(&trace).expect("the trace reads"),
        report,
        output,
        stderr,
    }
}

/// Whether this machine can put the probe in: leakspy's own ptrace call on
/// x86-64, gdb elsewhere.
fn injection_possible() -> Result<(), String> {
    if cfg!(target_arch = "x86_64") {
        return Ok(());
    }
    match Command::new("gdb").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(()),
        _ => Err("gdb is not installed (needed to put the probe in on this architecture)".into()),
    }
}

fn holders(report: &Value) -> Vec<String> {
    report["growth"]
        .as_array()
        .map(|g| {
            g.iter()
                .filter_map(|g| g["holder"]["path"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_leaking_job_is_diagnosed_without_a_restart_and_left_running() {
    let _turn = turn();
    let dir = tempfile::tempdir().unwrap();
    let mut job = Job::torch(dir.path(), "leak");
    // Hours in, in real life: here a couple of seconds past its start.
    std::thread::sleep(Duration::from_secs(2));
    // At the defaults: the live fit sees the growth within seconds of the
    // probe's first steps, and asks it to find what grows.
    let a = attach(dir.path(), job.pid(), &["--duration", "40", "-q"]);
    assert_eq!(a.output.status.code(), Some(0), "{}", a.stderr);
    assert!(
        job.alive(),
        "the job died under leakspy attach\n{}",
        a.stderr
    );
    assert_eq!(a.report["verdict"], "leak", "{}", a.stderr);

    let header = a.trace.header.attach.as_ref().expect("an attach header");
    assert_eq!(header.pid, job.pid());
    assert_eq!(a.trace.header.pid, Some(job.pid()));
    assert!(
        header
            .cmdline
            .iter()
            .any(|c| c.ends_with("train_forever.py")),
        "{header:?}"
    );
    assert_eq!(header.python.as_deref(), Some("3.11"));
    let detach = a.trace.detach().expect("a detach event");
    assert_eq!((detach.reason.as_str(), detach.alive), ("duration", true));
    assert!(
        a.trace.exit().is_none(),
        "an attached job has no exit event"
    );
    assert!(
        a.report["exit"]["message"]
            .as_str()
            .unwrap()
            .contains("detached after --duration"),
        "{}",
        a.report["exit"]
    );

    match injection_possible() {
        Ok(()) => {
            let probes: Vec<_> = a.trace.probes().collect();
            assert_eq!(probes.len(), 1, "{probes:?}\n{}", a.stderr);
            assert_eq!(probes[0]["attached"], true);
            assert_eq!(probes[0]["pid"], job.pid());
            // torch.optim was imported long before the probe came in.
            let steps = a.report["probe"]["optimizer_steps"].as_u64().unwrap();
            assert!(steps >= 50, "{steps} optimizer steps\n{}", a.stderr);
            assert!(
                holders(&a.report).iter().any(|h| h == "Trainer.losses"),
                "{:?}\n{}",
                holders(&a.report),
                a.stderr
            );
            assert!(a.stderr.contains("held by Trainer.losses"), "{}", a.stderr);
            // Before leaving, leakspy had the probe take a last look.
            assert!(
                a.trace
                    .census()
                    .any(|c| c.look.as_deref() == Some("detach")),
                "{}",
                a.stderr
            );
        }
        Err(why) => eprintln!("probe checks skipped: {why}"),
    }

    // Still training after leakspy left; ends as it would have.
    std::thread::sleep(Duration::from_millis(500));
    assert!(job.alive());
    let (code, out, err) = job.end();
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.starts_with("ready\ndone "), "{out:?}");
    assert_eq!(out.lines().count(), 2, "{out:?}");
    assert_eq!(err, "", "the job's stderr");
}

#[test]
fn a_healthy_job_is_no_leak_and_a_second_attach_finds_the_first_probe_gone() {
    let _turn = turn();
    let dir = tempfile::tempdir().unwrap();
    let mut job = Job::torch(dir.path(), "healthy");
    // A first, short visit: steps only.
    let first = attach(
        dir.path(),
        job.pid(),
        &["--duration", "3", "--no-census", "-q"],
    );
    assert_eq!(first.output.status.code(), Some(0), "{}", first.stderr);
    assert!(job.alive());
    let second = attach(
        dir.path(),
        job.pid(),
        &["--duration", "15", "-q", "--interval", "0.1"],
    );
    assert_eq!(second.output.status.code(), Some(0), "{}", second.stderr);
    assert_ne!(second.report["verdict"], "leak", "{}", second.stderr);
    // Nothing blamed in a healthy job.
    assert!(holders(&second.report).is_empty(), "{}", second.stderr);
    if injection_possible().is_ok() {
        // The first probe switched itself off when its monitor hung up, or
        // the second could not have started.
        for a in [&first, &second] {
            assert_eq!(a.trace.probes().count(), 1, "{}", a.stderr);
            assert!(
                a.report["probe"]["optimizer_steps"].as_u64().unwrap() > 10,
                "{}",
                a.stderr
            );
        }
        // At 1 % a healthy job pays for its first census after 10 s of its
        // time: one at most, with the last look when leakspy leaves.
        assert!(second.trace.census().count() <= 3, "{}", second.stderr);
    }
    assert!(job.alive());
    let (code, out, err) = job.end();
    assert_eq!((code, err.as_str()), (Some(0), ""), "{out}");
    assert_eq!(out.lines().count(), 2, "{out:?}");
}

/// Starts `leakspy attach PID` in the background and waits until it samples.
// The child is handed to the caller, which waits for it.
#[allow(clippy::zombie_processes)]
fn attach_in_background(dir: &Path, pid: u32, extra: &[&str]) -> (Child, PathBuf, PathBuf) {
    let trace = dir.join("bg.jsonl");
    let report = dir.join("bg.json");
    let mut child = Command::new(leakspy())
        .args(["attach", &pid.to_string(), "-q", "--trace"])
        .arg(&trace)
        .arg("--report-json")
        .arg(&report)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("leakspy never sampled the job");
        }
        if let Ok(t) = leakspy_trace::read_trace(&trace) {
            if t.sample_count() >= 5 {
                return (child, trace, report);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn kill(pid: u32, sig: i32) {
    // SAFETY: plain kill(2).
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
}

#[test]
fn ctrl_c_or_sigterm_to_leakspy_stops_the_recording_not_the_job() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let dir = tempfile::tempdir().unwrap();
        let mut job = Job::plain(dir.path());
        let (child, trace, report) = attach_in_background(dir.path(), job.pid(), &[]);
        kill(child.id(), sig);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert!(job.alive(), "signal {sig} reached the job");
        let t = leakspy_trace::read_trace(&trace).unwrap();
        let d = t.detach().expect("a detach event");
        assert_eq!((d.reason.as_str(), d.alive), ("interrupted", true));
        assert!(report.exists(), "{stderr}");
        let (code, out, err) = job.end();
        assert_eq!(
            (code, out.as_str(), err.as_str()),
            (Some(0), "ready\ndone\n", "")
        );
    }
}

#[test]
fn the_job_ending_ends_the_recording() {
    let dir = tempfile::tempdir().unwrap();
    let mut job = Job::plain(dir.path());
    let (child, trace, _) = attach_in_background(dir.path(), job.pid(), &[]);
    let (code, _, _) = job.end();
    assert_eq!(code, Some(0));
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let t = leakspy_trace::read_trace(&trace).unwrap();
    let d = t.detach().expect("a detach event");
    assert_eq!((d.reason.as_str(), d.alive), ("ended", false));
    assert!(
        stderr.contains("which ended during the recording"),
        "{stderr}"
    );
}

#[test]
fn a_program_that_is_not_python_is_recorded_from_proc_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let mut sleep = Command::new("sleep").arg("60").spawn().unwrap();
    let a = attach(dir.path(), sleep.id(), &["--duration", "1.5", "-q"]);
    let _ = sleep.kill();
    let _ = sleep.wait();
    assert_eq!(a.output.status.code(), Some(0), "{}", a.stderr);
    assert!(a.trace.sample_count() >= 5, "{}", a.stderr);
    let notes = a.report["notes"].as_array().unwrap();
    assert!(
        notes
            .iter()
            .any(|n| n.as_str().unwrap().starts_with(
                "probe not injected: the process is not Python; memory from /proc only"
            )),
        "{notes:?}"
    );
}

#[test]
fn forcing_gdb_injects_or_refuses_safely_and_the_job_survives() {
    if Command::new("gdb").arg("--version").output().is_err() {
        eprintln!("skipped: gdb is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A job that sleeps in a system call most of the time: the case a failed
    // gdb call breaks (the interrupted call returns errno 514).
    let mut job = Job::plain(dir.path());
    let a = attach(
        dir.path(),
        job.pid(),
        &["--duration", "2", "-q", "--inject-with", "gdb"],
    );
    assert_eq!(a.output.status.code(), Some(0), "{}", a.stderr);
    let injected = a.trace.probes().count() == 1;
    if !injected {
        let notes: Vec<_> = a.trace.notes().map(|n| n.message.clone()).collect();
        assert!(
            notes.iter().any(|n| n.starts_with("probe not injected:")),
            "{notes:?}"
        );
        eprintln!("gdb refused: {notes:?}");
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(job.alive());
    let (code, out, err) = job.end();
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (Some(0), "ready\ndone\n", "")
    );
}

/// The first lines leakspy prints, with the run's own numbers taken out.
fn redact(text: &str, pid: u32) -> String {
    let mut s = text.replace(&pid.to_string(), "[PID]");
    for p in [torch_python(), trainer(), repo_root()] {
        if let Ok(c) = p.canonicalize() {
            s = s.replace(&c.display().to_string(), "[PATH]");
        }
        s = s.replace(&p.display().to_string(), "[PATH]");
    }
    s
}

#[test]
fn the_start_lines() {
    let dir = tempfile::tempdir().unwrap();
    let mut job = Job::plain(dir.path());
    let a = attach(dir.path(), job.pid(), &["--duration", "1"]);
    assert_eq!(a.output.status.code(), Some(0), "{}", a.stderr);
    let start: Vec<&str> = a.stderr.lines().take(2).collect();
    let start =
        redact(&start.join("\n"), job.pid()).replace(&dir.path().display().to_string(), "[DIR]");
    insta::assert_snapshot!(start);
    let (code, _, _) = job.end();
    assert_eq!(code, Some(0));
}

fn attach_error(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(leakspy())
        .arg("attach")
        .args(args)
        .output()
        .unwrap();
    assert!(out.stdout.is_empty());
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn pids_that_cannot_be_attached_are_tool_errors() {
    // pid_max is at most 2^22: no such process.
    let (code, err) = attach_error(&["4194321", "--duration", "1"]);
    assert_eq!(code, Some(2));
    insta::assert_snapshot!("no_such_process", err);

    // leakspy itself (the shell's pid, which exec makes leakspy's).
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "exec {} attach $$ --duration 1",
            leakspy().display()
        ))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is this leakspy process itself"), "{err}");

    // A zombie: a child of this test, ended and not yet collected.
    let mut z = Command::new("true").spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let (code, err) = attach_error(&[&z.id().to_string()]);
    let zombie_pid = z.id();
    z.wait().unwrap();
    assert_eq!(code, Some(2));
    let err = err
        .replace(&zombie_pid.to_string(), "[PID]")
        .replace(&std::process::id().to_string(), "[PARENT]");
    insta::assert_snapshot!("zombie", err);

    // A thread id of a process (this test's own threads).
    let me = std::process::id();
    let tid = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|t| *t != me);
    if let Some(tid) = tid {
        let (code, err) = attach_error(&[&tid.to_string()]);
        assert_eq!(code, Some(2));
        assert!(
            err.contains(&format!("is a thread of process {me}")),
            "{err}"
        );
    }

    // Arguments.
    let (code, err) = attach_error(&["abc"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, err) = attach_error(&["1", "--duration", "0"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("--duration must be a positive number"),
        "{err}"
    );
}

/// Runs leakspy as the `nobody` user against this (root) test's job.
fn as_nobody(dir: &Path, args: &[&str]) -> Option<Output> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    Command::new("setpriv")
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .arg(leakspy())
        .arg("attach")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()
}

#[test]
fn another_users_job_is_refused_with_how_to_allow_it_but_proc_only_works() {
    let dir = tempfile::tempdir().unwrap();
    let mut job = Job::plain(dir.path());
    let out_dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        out_dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let pid = job.pid().to_string();
    let Some(refused) = as_nobody(out_dir.path(), &[&pid, "--duration", "1"]) else {
        eprintln!("skipped: needs root (to run leakspy as another user) and setpriv");
        return;
    };
    let err = String::from_utf8_lossy(&refused.stderr).replace(&pid, "[PID]");
    assert_eq!(refused.status.code(), Some(2), "{err}");
    insta::assert_snapshot!("not_permitted", err);

    let proc_only = as_nobody(
        out_dir.path(),
        &[
            &pid,
            "--duration",
            "1.5",
            "--no-probe",
            "-q",
            "--trace",
            "t.jsonl",
        ],
    )
    .unwrap();
    let err = String::from_utf8_lossy(&proc_only.stderr);
    assert_eq!(proc_only.status.code(), Some(0), "{err}");
    let t = leakspy_trace::read_trace(out_dir.path().join("t.jsonl")).unwrap();
    assert!(t.sample_count() >= 5, "{err}");
    assert_eq!(t.probes().count(), 0);
    let (code, out, _) = job.end();
    assert_eq!((code, out.as_str()), (Some(0), "ready\ndone\n"));
}

#[test]
fn root_attaches_to_another_users_job_and_hands_it_the_probe() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let python = Path::new("/usr/bin/python3");
    if !root || !python.exists() || Command::new("setpriv").arg("--help").output().is_err() {
        eprintln!("skipped: needs root, setpriv and /usr/bin/python3");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The job's user must reach its script and write its stop file.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let script = dir.path().join("loop.py");
    std::fs::write(&script, PLAIN_LOOP).unwrap();
    let mut job = Job::start(
        dir.path(),
        Path::new("setpriv"),
        &[
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            python.to_str().unwrap(),
            script.to_str().unwrap(),
        ],
    );
    let a = attach(dir.path(), job.pid(), &["--duration", "2", "-q"]);
    assert_eq!(a.output.status.code(), Some(0), "{}", a.stderr);
    if injection_possible().is_ok() {
        let probes: Vec<_> = a.trace.probes().collect();
        assert_eq!(probes.len(), 1, "{}", a.stderr);
        assert_eq!(probes[0]["attached"], true);
    }
    let (code, out, err) = job.end();
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (Some(0), "ready\ndone\n", "")
    );
}

#[test]
fn attaching_again_and_again_gets_a_fresh_probe_each_time() {
    // A job that never steps, with the census off: its probe sends nothing
    // after the hello, so it learns that its monitor left only when the
    // next attach asks.
    let dir = tempfile::tempdir().unwrap();
    let mut job = Job::plain(dir.path());
    for round in 0..3 {
        let a = attach(
            dir.path(),
            job.pid(),
            &["--duration", "0.5", "--no-census", "-q"],
        );
        assert_eq!(a.output.status.code(), Some(0), "{}", a.stderr);
        if injection_possible().is_ok() {
            assert_eq!(a.trace.probes().count(), 1, "round {round}: {}", a.stderr);
        }
    }
    let (code, out, err) = job.end();
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (Some(0), "ready\ndone\n", "")
    );
}

//! Faults around a real job: leakspy itself killed mid-run, a disk that fills
//! up under the trace, a job that forks and execs programs that are not
//! Python, and `check` on a repository of 10,000 files. In every case the
//! user's job runs to its own end, unharmed, and leakspy says what happened.

mod run_support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use run_support::{alive, kill, leakspy, start_background};

fn wait_gone(pid: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        // A zombie still answers kill(0): it counts as gone once reaped by
        // init, which happens at once for an orphan.
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

#[test]
fn leakspy_killed_mid_run_leaves_a_readable_trace_and_the_job_running() {
    let dir = tempfile::tempdir().unwrap();
    let (mut leakspy_proc, trace, _, child) = start_background(dir.path(), "stepleak", "6");
    kill(leakspy_proc.id(), libc::SIGKILL);
    let _ = leakspy_proc.wait();
    // The job was not killed with its monitor: it goes on to its own end.
    std::thread::sleep(Duration::from_millis(500));
    assert!(alive(child), "the job died with leakspy");
    assert!(
        wait_gone(child, Duration::from_secs(30)),
        "the job never finished"
    );
    // What was written is readable, and `report` diagnoses it.
    let t = leakspy_trace::read_trace(&trace).expect("the trace reads after SIGKILL");
    assert!(t.sample_count() >= 5);
    assert!(t.exit().is_none(), "no exit event: leakspy died first");
    let out = Command::new(leakspy())
        .args(["report", "--format", "json"])
        .arg(&trace)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["verdict"].is_string());
}

/// The job's stderr goes through a relay: when leakspy is killed, the relay
/// lives on and the job goes on writing to its stderr (a broken stderr would
/// end a Python job at its next warning or log line).
#[test]
fn leakspy_killed_mid_run_leaves_the_jobs_stderr_working() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("stderr.log");
    let marker = dir.path().join("done");
    // Counted, not timed: a loaded machine only makes it slower.
    let program = format!(
        "import sys, time\nfor i in range(200):\n    print('tick', i, file=sys.stderr, flush=True)\n    time.sleep(0.02)\nopen({:?}, 'w').write('ok')\n",
        marker.display().to_string()
    );
    // SIGKILL leaves the probe's folder behind: in the test's, which goes with the test.
    let mut leakspy_proc = Command::new(leakspy())
        .env("TMPDIR", dir.path())
        .args(["run", "-q", "--trace"])
        .arg(dir.path().join("t.jsonl"))
        .args(["--", "python3", "-c", &program])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&log_path)
        .unwrap()
        .contains("tick 5\n")
    {
        assert!(Instant::now() < deadline, "the job never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    kill(leakspy_proc.id(), libc::SIGKILL);
    let _ = leakspy_proc.wait();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !marker.exists() {
        assert!(
            Instant::now() < deadline,
            "the job did not finish after leakspy was killed: {}",
            std::fs::read_to_string(&log_path).unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Every line, also those written after leakspy died, reached the log.
    let log = std::fs::read_to_string(&log_path).unwrap();
    let ticks: Vec<&str> = log.lines().filter(|l| l.starts_with("tick ")).collect();
    assert_eq!(ticks.len(), 200, "{log}");
    assert_eq!(ticks[199], "tick 199");
}

/// A tiny tmpfs (root only; skipped with a reason elsewhere), unmounted on drop.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(dir: &Path, options: &str) -> Option<SmallDisk> {
        let at = dir.join("disk");
        std::fs::create_dir(&at).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(&at)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(SmallDisk(at))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_disk_that_fills_up_during_the_run_is_an_error_and_the_job_is_not_harmed() {
    let dir = tempfile::tempdir().unwrap();
    let Some(disk) = SmallDisk::mount(dir.path(), "size=24k") else {
        eprintln!("skipped: cannot mount a small tmpfs here (needs root)");
        return;
    };
    let marker = dir.path().join("done");
    // 200 samples per second fill 24 KiB within a second or two; the job
    // runs for three.
    let out = Command::new(leakspy())
        .args(["run", "-q", "--interval", "0.005", "--trace"])
        .arg(disk.0.join("t.jsonl"))
        .args(["--", "python3", "-c"])
        .arg(format!(
            "import time\nfor i in range(30):\n    print('step', i, flush=True)\n    time.sleep(0.1)\nopen({:?}, 'w').write('ok')",
            marker.display().to_string()
        ))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        std::fs::read_to_string(&marker).ok().as_deref(),
        Some("ok"),
        "the job did not finish: {stderr}"
    );
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("step ")).count(),
        30,
        "the job's output was touched: {stdout}"
    );
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the trace is incomplete") && stderr.contains("No space left"),
        "{stderr}"
    );
    // What fitted on the disk still reads.
    let t = leakspy_trace::read_trace(disk.0.join("t.jsonl")).expect("the part written reads");
    assert!(t.sample_count() > 0);
}

#[test]
fn a_read_only_trace_folder_is_an_error_and_the_job_does_not_start() {
    // A read-only mount: root's permission bypass does not apply, so this
    // holds in CI, which runs as root.
    let dir = tempfile::tempdir().unwrap();
    let Some(disk) = SmallDisk::mount(dir.path(), "ro,size=64k") else {
        eprintln!("skipped: cannot mount a read-only tmpfs here (needs root)");
        return;
    };
    let marker = dir.path().join("ran");
    let out = Command::new(leakspy())
        .args(["run", "-q", "--trace"])
        .arg(disk.0.join("t.jsonl"))
        .args(["--", "python3", "-c"])
        .arg(format!("open({:?}, 'w')", marker.display().to_string()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("Read-only file system"), "{stderr}");
    assert!(
        !marker.exists(),
        "the job started although nothing could be recorded"
    );
}

#[test]
fn a_full_disk_before_the_start_is_an_error_and_the_job_does_not_start() {
    // /dev/full accepts the open and fails every write: the header cannot
    // be written, so the job must not start unrecorded.
    if !Path::new("/dev/full").exists() {
        eprintln!("skipped: /dev/full is missing");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let out = Command::new(leakspy())
        .args(["run", "-q", "--trace", "/dev/full", "--", "python3", "-c"])
        .arg(format!("open({:?}, 'w')", marker.display().to_string()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    assert!(
        !marker.exists(),
        "the job started although nothing could be recorded"
    );
}

#[test]
fn a_job_that_forks_and_execs_other_programs_is_recorded_whole() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    let program = r#"
import os, subprocess, sys, time
# A shell pipeline, a forked child that execs /bin/sleep, and a fork that
# stays Python: the probe follows Python only, the monitor follows all.
subprocess.run(["sh", "-c", "echo from-sh | cat"], check=True)
pid = os.fork()
if pid == 0:
    # Long enough for two of the monitor's tree discoveries (one a second
    # when idle, slower on a loaded machine), so it cannot be missed.
    os.execv("/bin/sleep", ["sleep", "6"])
kid = os.fork()
if kid == 0:
    time.sleep(0.5)
    os._exit(7)
_, st = os.waitpid(kid, 0)
assert os.WEXITSTATUS(st) == 7
os.waitpid(pid, 0)
print("parent done", flush=True)
"#;
    let out = Command::new(leakspy())
        .args(["run", "-q", "--interval", "0.02", "--trace"])
        .arg(&trace)
        .args(["--", "python3", "-c", program])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stdout, "from-sh\nparent done\n", "{stderr}");
    let t = leakspy_trace::read_trace(&trace).unwrap();
    let names: std::collections::BTreeSet<String> = t
        .samples()
        .flat_map(|s| s.procs.iter().map(|p| p.name.clone()))
        .collect();
    assert!(names.iter().any(|n| n == "sleep"), "{names:?}");
    assert_eq!(t.exit().and_then(|e| e.code), Some(0));
}

#[test]
fn check_on_ten_thousand_files() {
    let dir = tempfile::tempdir().unwrap();
    let leaky = "import torch\n\ndef train(model, opt, data):\n    losses = []\n    for x, y in data:\n        loss = ((model(x) - y) ** 2).mean()\n        opt.zero_grad()\n        loss.backward()\n        opt.step()\n        losses.append(loss)\n    return losses\n";
    let clean = "def add(a, b):\n    return a + b\n";
    for pkg in 0..100 {
        let d = dir.path().join(format!("pkg{pkg:03}"));
        std::fs::create_dir(&d).unwrap();
        for f in 0..100 {
            let body = if f == 0 { leaky } else { clean };
            std::fs::write(d.join(format!("m{f:03}.py")), body).unwrap();
        }
    }
    let out = Command::new(leakspy())
        .args(["check", "--output-format", "json", "."])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let findings: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let files: std::collections::BTreeSet<&str> = findings
        .iter()
        .map(|f| f["filename"].as_str().unwrap())
        .collect();
    assert_eq!(files.len(), 100, "one leaky file per package");
    assert!(findings
        .iter()
        .all(|f| f["filename"].as_str().unwrap().ends_with("m000.py")));
    assert!(findings.iter().any(|f| f["code"] == "LS002"));
}

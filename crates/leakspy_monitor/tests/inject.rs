//! `leakspy attach`'s injection into real running interpreters: every
//! CPython 3.8-3.13 found on the machine, sleeping (the main thread inside
//! a system call that must restart), busy (inside bytecode) and in one long
//! sleep. The probe must say hello over the socket, and the job must go on
//! untouched: same output, no error, a normal exit when asked.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use leakspy_monitor::{
    inject, inspect, Inbound, InjectError, InjectMethod, Loader, ProbeConfig, ProbeServer, Python,
};

/// Interpreters to try: pyenv's, the system's, and LEAKSPY_PYTHON.
fn pythons() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = ["3.8.18", "3.9.18", "3.10.13", "3.11.7", "3.12.1", "3.13.0"]
        .iter()
        .map(|v| PathBuf::from(format!("/root/.pyenv/versions/{v}/bin/python3")))
        .chain([PathBuf::from("/usr/bin/python3")])
        .chain(std::env::var_os("LEAKSPY_PYTHON").map(PathBuf::from))
        .filter(|p| p.is_file())
        .collect();
    out.dedup();
    out
}

/// A job that loops until a file appears, then says goodbye and exits 0.
const JOB: &str = r#"
import os, sys, time
stop, mode = sys.argv[1], sys.argv[2]
print("ready", flush=True)
n = 0
while not os.path.exists(stop):
    if mode == "sleep":
        time.sleep(0.01)
    elif mode == "long":
        time.sleep(3)
    else:
        n = sum(i * i for i in range(2000))
print("bye", flush=True)
"#;

/// Kills the job if the test fails halfway.
struct Job {
    child: Child,
    stop: PathBuf,
}

impl Job {
    fn start(python: &Path, dir: &Path, mode: &str) -> Job {
        let stop = dir.join(format!("stop-{mode}"));
        let mut child = Command::new(python)
            .args(["-c", JOB])
            .arg(&stop)
            .arg(mode)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "ready\n");
        Job { child, stop }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Asks the job to end and returns (status code, rest of stdout, stderr).
    fn finish(mut self) -> (Option<i32>, String, String) {
        std::fs::write(&self.stop, "").unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the job did not end when asked");
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut out = String::new();
        let mut err = String::new();
        use std::io::Read;
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let code = self.child.wait().unwrap().code();
        (code, out, err)
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn hello_from(rx: &Receiver<Inbound>, pid: u32, within: Duration) -> Option<serde_json::Value> {
    let deadline = Instant::now() + within;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(Inbound::Probe(m)) if m.message["kind"] == "hello" => {
                if m.message["pid"] == pid {
                    return Some(serde_json::Value::Object(m.message));
                }
            }
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

fn attach_and_detach(python: &Path, mode: &str, method: InjectMethod) {
    let dir = tempfile::tempdir().unwrap();
    let job = Job::start(python, dir.path(), mode);
    let info = inspect(job.pid()).unwrap();
    let Python::CPython {
        version: Some(version),
        ..
    } = info.python
    else {
        panic!("{}: {:?}", python.display(), info.python);
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let server = ProbeServer::start(
        ProbeConfig {
            budget: 0.01,
            census: false,
        },
        Instant::now(),
        tx,
    )
    .unwrap();
    let loader = Loader {
        dir: server.dir().to_path_buf(),
        socket: server.socket().to_path_buf(),
        budget: 0.01,
        census: false,
    };
    let injected = inject(&info, &loader, method, Duration::from_secs(20));
    let injected = match injected {
        Err(InjectError::Gdb(why)) if method == InjectMethod::Gdb => {
            // This gdb refuses safely (gdb 13 on a CPU with AMX): the job
            // must still be untouched.
            eprintln!("gdb refused, as it must here: {why}");
            drop(server);
            let (code, out, err) = job.finish();
            assert_eq!((code, out.as_str(), err.as_str()), (Some(0), "bye\n", ""));
            return;
        }
        other => other.unwrap_or_else(|e| panic!("{} {mode}: {e}", python.display())),
    };
    assert_eq!(
        injected.python.as_deref(),
        Some(format!("{}.{}", version.0, version.1).as_str())
    );
    // A long sleep runs the loader when it ends.
    let wait = if mode == "long" { 10 } else { 5 };
    let hello = hello_from(&rx, job.pid(), Duration::from_secs(wait))
        .unwrap_or_else(|| panic!("{} {mode}: no hello from the probe", python.display()));
    assert_eq!(hello["attached"], true, "{hello}");
    assert_eq!(hello["forked"], false, "{hello}");
    // Detach: hang up, remove the folder; the job goes on.
    server.close_connections();
    drop(server);
    std::thread::sleep(Duration::from_millis(300));
    let (code, out, err) = job.finish();
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (Some(0), "bye\n", ""),
        "{} {mode}: the job must end as it would have",
        python.display()
    );
}

#[test]
#[cfg(target_arch = "x86_64")]
fn ptrace_injection_into_every_cpython_here() {
    let all = pythons();
    assert!(!all.is_empty(), "no CPython found");
    for py in &all {
        for mode in ["sleep", "busy"] {
            attach_and_detach(py, mode, InjectMethod::Ptrace);
        }
    }
}

#[test]
#[cfg(target_arch = "x86_64")]
fn a_long_sleep_restarts_and_the_probe_starts_after_it() {
    let py = pythons().into_iter().next().expect("a CPython");
    attach_and_detach(&py, "long", InjectMethod::Ptrace);
}

#[test]
fn gdb_injection_or_a_safe_refusal() {
    if !Path::new("/usr/bin/gdb").exists() && Command::new("gdb").arg("--version").output().is_err()
    {
        eprintln!("skipped: gdb is not installed");
        return;
    }
    let py = pythons().into_iter().next().expect("a CPython");
    attach_and_detach(&py, "sleep", InjectMethod::Gdb);
}

#[test]
fn a_program_that_is_not_python_is_said_so() {
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let info = inspect(child.id()).unwrap();
    let loader = Loader {
        dir: "/nonexistent".into(),
        socket: "/nonexistent/probe.sock".into(),
        budget: 0.01,
        census: true,
    };
    let err = inject(&info, &loader, InjectMethod::Auto, Duration::from_secs(5)).unwrap_err();
    let _ = child.kill();
    let _ = child.wait();
    assert!(matches!(err, InjectError::NotPython), "{err}");
}

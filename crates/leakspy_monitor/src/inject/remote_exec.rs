//! CPython 3.14 and later: `sys.remote_exec(pid, file)` (PEP 768), run by a
//! helper interpreter of the same version. The interpreter's own protocol:
//! the helper writes the file's path into the target's memory and the
//! target runs it at its next safe point. No thread is stopped.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::maps::file_name;
use super::InjectError;
use crate::attach::ProcessInfo;

const CALL: &str = "import sys; sys.remote_exec(int(sys.argv[1]), sys.argv[2])";
const VERSION: &str = "import sys; print('%d.%d' % sys.version_info[:2])";

pub fn inject(
    process: &ProcessInfo,
    version: Option<(u32, u32)>,
    script: &Path,
    timeout: Duration,
) -> Result<(), InjectError> {
    let (major, minor) = version.ok_or_else(|| {
        InjectError::Unknown("its version is needed to pick a helper for sys.remote_exec".into())
    })?;
    if (major, minor) < (3, 14) {
        return Err(InjectError::RemoteExec(format!(
            "Python {major}.{minor} has no sys.remote_exec (3.14 or later has)"
        )));
    }
    let want = format!("{major}.{minor}");
    let helper = find_helper(process, &want).ok_or_else(|| InjectError::NoHelper(want.clone()))?;
    let mut cmd = Command::new(&helper);
    cmd.args(["-I", "-c", CALL])
        .arg(process.pid.to_string())
        .arg(script);
    match run_bounded(&mut cmd, timeout)? {
        None => Err(InjectError::Timeout {
            what: "sys.remote_exec",
            secs: timeout.as_secs(),
        }),
        Some((true, _, _)) => Ok(()),
        Some((false, _, stderr)) => {
            let last = stderr
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no message")
                .trim()
                .to_string();
            if last.contains("PermissionError") || last.contains("Operation not permitted") {
                Err(InjectError::NotPermitted(last))
            } else {
                Err(InjectError::RemoteExec(last))
            }
        }
    }
}

/// An interpreter of version `want` to run the call: the job's own
/// executable when it is a python, else `pythonX.Y` on PATH.
fn find_helper(process: &ProcessInfo, want: &str) -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if process
        .exe
        .as_deref()
        .is_some_and(|e| file_name(e).starts_with("python"))
    {
        // The link works across mount namespaces, where the path may not.
        candidates.push(PathBuf::from(format!("/proc/{}/exe", process.pid)));
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(
            std::env::split_paths(&path)
                .map(|d| d.join(format!("python{want}")))
                .filter(|p| p.is_file()),
        );
    }
    candidates.into_iter().find(|c| {
        let mut cmd = Command::new(c);
        cmd.args(["-I", "-c", VERSION]);
        matches!(
            run_bounded(&mut cmd, Duration::from_secs(10)),
            Ok(Some((true, out, _))) if out.trim() == want
        )
    })
}

/// Runs `cmd` for at most `timeout`: `(success, stdout, stderr)`, or
/// `None` when it had to be killed.
fn run_bounded(
    cmd: &mut Command,
    timeout: Duration,
) -> std::io::Result<Option<(bool, String, String)>> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let pipe = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut r) = r {
                let _ = r.read_to_string(&mut s);
            }
            s
        })
    };
    let out = pipe(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err = pipe(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let (stdout, stderr) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    Ok(status.map(|s| (s.success(), stdout, stderr)))
}

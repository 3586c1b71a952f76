//! The child process: spawning it, forwarding signals to it, and turning its
//! wait status into the shell-style status leakspy exits with.

use std::io::ErrorKind;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use signal_hook::consts::{SIGHUP, SIGINT, SIGKILL, SIGTERM};
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::iterator::{Handle, SignalsInfo};
use signal_hook::low_level::siginfo::Cause;

use crate::MonitorError;

/// Starts `command` (argv). With `pipe_stdout` the child's stdout is a pipe
/// for the step reader, and `PYTHONUNBUFFERED=1` is set (unless the user set
/// it) so that Python writes its step lines as they happen, not in 8 KiB blocks.
/// `stderr`, when given, replaces the inherited one; `cwd`, when given, is
/// the child's working directory (else leakspy's).
pub fn spawn(
    command: &[String],
    pipe_stdout: bool,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    stderr: Option<Stdio>,
    cwd: Option<&std::path::Path>,
) -> Result<Child, MonitorError> {
    let (program, args) = command.split_first().ok_or(MonitorError::NoCommand)?;
    let mut cmd = Command::new(program);
    cmd.args(args);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    if let Some(e) = stderr {
        cmd.stderr(e);
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    if pipe_stdout {
        cmd.stdout(Stdio::piped());
        if std::env::var_os("PYTHONUNBUFFERED").is_none() {
            cmd.env("PYTHONUNBUFFERED", "1");
        }
    }
    cmd.spawn().map_err(|source| match source.kind() {
        ErrorKind::NotFound => MonitorError::NotFound {
            program: program.clone(),
        },
        _ => MonitorError::Spawn {
            program: program.clone(),
            source,
        },
    })
}

/// How the child ended, shell style.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildExit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// `code`, or 128 + `signal`.
    pub status: i32,
}

impl From<ExitStatus> for ChildExit {
    fn from(s: ExitStatus) -> Self {
        let code = s.code();
        let signal = s.signal();
        let status = match (code, signal) {
            (Some(c), _) => c,
            (None, Some(sig)) => 128 + sig,
            // Stopped/continued states are not returned by wait without WUNTRACED.
            (None, None) => 1,
        };
        ChildExit {
            code,
            signal,
            status,
        }
    }
}

/// The name of a signal ("SIGKILL"), or its number when unknown.
pub fn signal_name(sig: i32) -> String {
    signal_hook::low_level::signal_name(sig)
        .map(str::to_string)
        .unwrap_or_else(|| format!("signal {sig}"))
}

/// Forwards SIGINT, SIGTERM and SIGHUP received by leakspy to the child.
///
/// A SIGINT typed at the terminal (sent by the kernel to the whole foreground
/// process group) has already reached the child, which shares leakspy's
/// process group: forwarding it would deliver it twice and interrupt Python's
/// KeyboardInterrupt handling. Signals sent by a process (`kill`) reach only
/// leakspy, and are forwarded. A third interrupt kills the child.
pub struct SignalForwarder {
    handle: Handle,
    thread: Option<JoinHandle<()>>,
    child: Arc<AtomicI32>,
    pending: Arc<AtomicI32>,
    received: Arc<AtomicUsize>,
}

impl SignalForwarder {
    /// Installs the handlers. Call before spawning, so that no signal falls
    /// into the gap; signals received before `set_child` are delivered then.
    pub fn install() -> Result<Self, MonitorError> {
        let mut signals = SignalsInfo::<WithOrigin>::new([SIGINT, SIGTERM, SIGHUP])
            .map_err(MonitorError::Signals)?;
        let handle = signals.handle();
        let child = Arc::new(AtomicI32::new(0));
        let pending = Arc::new(AtomicI32::new(0));
        let received = Arc::new(AtomicUsize::new(0));
        let (c, p, r) = (child.clone(), pending.clone(), received.clone());
        let thread = std::thread::Builder::new()
            .name("leakspy-signals".into())
            .spawn(move || {
                for origin in signals.forever() {
                    let n = r.fetch_add(1, Ordering::SeqCst) + 1;
                    let from_terminal = matches!(origin.cause, Cause::Kernel);
                    let sig = if n >= 3 { SIGKILL } else { origin.signal };
                    if from_terminal && sig != SIGKILL {
                        continue;
                    }
                    let pid = c.load(Ordering::SeqCst);
                    if pid > 0 {
                        // SAFETY: kill(2) with a pid we spawned and have not reaped yet
                        // (set_child(0) is called before reaping).
                        unsafe {
                            libc::kill(pid, sig);
                        }
                    } else {
                        p.store(sig, Ordering::SeqCst);
                    }
                }
            })
            .map_err(MonitorError::Signals)?;
        Ok(SignalForwarder {
            handle,
            thread: Some(thread),
            child,
            pending,
            received,
        })
    }

    /// Starts forwarding to `pid` (0: stop forwarding, before the child is reaped
    /// so that a recycled pid is never signalled).
    pub fn set_child(&self, pid: u32) {
        let pid = i32::try_from(pid).unwrap_or(0);
        self.child.store(pid, Ordering::SeqCst);
        let sig = self.pending.swap(0, Ordering::SeqCst);
        if pid > 0 && sig > 0 {
            // SAFETY: as above, a live child of ours.
            unsafe {
                libc::kill(pid, sig);
            }
        }
    }

    /// How many SIGINT/SIGTERM/SIGHUP leakspy has received.
    pub fn received(&self) -> usize {
        self.received.load(Ordering::SeqCst)
    }
}

impl Drop for SignalForwarder {
    fn drop(&mut self) {
        self.child.store(0, Ordering::SeqCst);
        self.handle.close();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit_of(cmd: &str) -> ChildExit {
        let status = Command::new("sh").arg("-c").arg(cmd).status().unwrap();
        ChildExit::from(status)
    }

    #[test]
    fn exit_codes_pass_through() {
        assert_eq!(
            exit_of("exit 3"),
            ChildExit {
                code: Some(3),
                signal: None,
                status: 3
            }
        );
    }

    #[test]
    fn killed_by_signal_is_128_plus_n() {
        let e = exit_of("kill -KILL $$");
        assert_eq!(e.signal, Some(9));
        assert_eq!(e.status, 137);
        assert_eq!(signal_name(9), "SIGKILL");
    }

    #[test]
    fn missing_program_is_not_found() {
        let err = spawn(
            &["leakspy-no-such-program-xyz".to_string()],
            false,
            &[],
            None,
            None,
        )
        .unwrap_err();
        assert!(matches!(err, MonitorError::NotFound { .. }), "{err}");
        assert!(err
            .to_string()
            .contains("command not found: `leakspy-no-such-program-xyz`"));
    }
}

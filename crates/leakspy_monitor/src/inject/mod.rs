//! Puts the in-process probe into a CPython that is already running
//! (`leakspy attach`), without a restart.
//!
//! Every method hands the interpreter the same few lines of Python (a
//! "loader") and lets the interpreter run them itself at a safe point
//! between two bytecodes, in its main thread, holding the GIL:
//!
//! - CPython 3.14+: `sys.remote_exec(pid, file)` from a helper interpreter
//!   of the same version (PEP 768, the interpreter's own protocol);
//! - 3.8-3.13 on x86-64: leakspy's own ptrace call of
//!   `Py_AddPendingCall(PyRun_SimpleString, text)` (`ptrace.rs`);
//! - 3.8-3.13 elsewhere: the same call made by gdb (`gdb.rs`).
//!
//! Nothing runs Python code from inside a stopped thread: stopped anywhere
//! (inside malloc, halfway through a dict update), the interpreter is not
//! in a state to run code, which is how the classic
//! `PyGILState_Ensure(); PyRun_SimpleString()` injection crashes jobs. A
//! pending call is what a signal handler uses to run Python code later.

#[cfg(target_arch = "x86_64")]
mod ptrace;

mod gdb;
pub mod maps;
mod remote_exec;

use std::path::PathBuf;
use std::time::Duration;

use crate::attach::{ProcessInfo, Python};

/// The loader's file in the probe's folder (`sys.remote_exec` takes a file).
const LOADER_FILE: &str = "leakspy_attach.py";

/// How the probe is put into the process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum InjectMethod {
    /// `sys.remote_exec` on 3.14+, else ptrace on x86-64, else gdb.
    #[default]
    Auto,
    Ptrace,
    Gdb,
    RemoteExec,
}

impl std::str::FromStr for InjectMethod {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(InjectMethod::Auto),
            "ptrace" => Ok(InjectMethod::Ptrace),
            "gdb" => Ok(InjectMethod::Gdb),
            "remote-exec" => Ok(InjectMethod::RemoteExec),
            _ => Err(format!(
                "unknown injection method `{s}` (auto, ptrace, gdb, remote-exec)"
            )),
        }
    }
}

/// The probe's settings for a process that did not inherit them.
#[derive(Debug, Clone, PartialEq)]
pub struct Loader {
    /// The probe's folder (the package, the socket).
    pub dir: PathBuf,
    pub socket: PathBuf,
    pub budget: f64,
    pub census: bool,
}

/// A Python string literal (JSON's escapes are a subset of Python's).
fn py_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "''".into())
}

impl Loader {
    /// The loader proper, run in a namespace of its own so that it binds
    /// nothing in the job's `__main__`. The probe's folder is on `sys.path`
    /// for the import only; a later attach finds the package already
    /// imported and points it at its own folder. Nothing happens once the
    /// socket is gone (a pending call that ran after leakspy left).
    pub fn source(&self) -> String {
        let dir = py_str(&self.dir.to_string_lossy());
        let sock = py_str(&self.socket.to_string_lossy());
        let budget = if self.budget.is_finite() {
            format!("{:?}", self.budget)
        } else {
            "0.01".into()
        };
        let census = if self.census { "True" } else { "False" };
        format!(
            "import os, sys
d = {dir}
sock = {sock}
if os.path.exists(sock):
    pkg = os.path.join(d, 'leakspy')
    m = sys.modules.get('leakspy')
    if m is None:
        sys.path.insert(0, d)
        try:
            import leakspy
        finally:
            try:
                sys.path.remove(d)
            except ValueError:
                pass
    else:
        p = getattr(m, '__path__', None)
        if isinstance(p, list) and pkg not in p:
            p.insert(0, pkg)
    from leakspy import _attach
    _attach.start(sock, {budget}, {census})
"
        )
    }

    /// What the interpreter is given to run: the loader in a fresh
    /// namespace, which never raises into the job. A Ctrl-C that lands
    /// while it runs is handed back to the job's main thread.
    pub fn statement(&self) -> String {
        format!(
            "try:\n __import__('builtins').exec({}, {{'__name__': '__leakspy_attach__'}})\nexcept KeyboardInterrupt:\n __import__('_thread').interrupt_main()\nexcept BaseException:\n pass\n",
            py_str(&self.source())
        )
    }

    /// Hands the probe's settings to a process that starts the probe itself (a notebook
    /// kernel watching its own cells, `leakspy.watch()`): no injection, no right to trace
    /// it. They are written to `path` as one JSON object (`socket`, `dir`, `budget`,
    /// `census`), renamed into place so that a reader never sees half of it.
    pub fn hand_off(&self, path: &std::path::Path) -> std::io::Result<()> {
        let text = serde_json::json!({
            "socket": self.socket.to_string_lossy(),
            "dir": self.dir.to_string_lossy(),
            "budget": if self.budget.is_finite() { self.budget } else { 0.01 },
            "census": self.census,
        })
        .to_string();
        let mut partial = path.as_os_str().to_owned();
        partial.push(".partial");
        std::fs::write(&partial, text)?;
        std::fs::rename(&partial, path)
    }

    /// Writes [`Self::statement`] to the probe's folder, for methods that take a file.
    fn write_file(&self) -> std::io::Result<PathBuf> {
        let path = self.dir.join(LOADER_FILE);
        std::fs::write(&path, self.statement())?;
        Ok(path)
    }
}

/// How the probe went in.
#[derive(Debug, Clone, PartialEq)]
pub struct Injected {
    /// `ptrace`, `gdb` or `sys.remote_exec`.
    pub method: &'static str,
    /// `3.11`, when known.
    pub python: Option<String>,
}

/// Why the probe was not put in. The monitor goes on from /proc alone.
#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    #[error("the process is not Python")]
    NotPython,
    #[error("{0} is not supported (CPython 3.8 or later is)")]
    Unsupported(String),
    #[error("cannot tell which Python the process runs: {0}")]
    Unknown(String),
    #[error("the process is stopped (SIGSTOP or a debugger); resume it with `kill -CONT {0}` and attach again")]
    Stopped(u32),
    #[error("the process is already traced by pid {0} (a debugger or strace); detach it first")]
    AlreadyTraced(u32),
    #[error("gdb not found; install gdb (it is needed for Python {0} on this architecture)")]
    GdbMissing(String),
    #[error("{0}")]
    Gdb(String),
    #[error("no Python {0} interpreter found to run `sys.remote_exec`; put python{0} on PATH")]
    NoHelper(String),
    #[error("sys.remote_exec failed: {0}")]
    RemoteExec(String),
    #[error("not permitted to trace the process: {0}")]
    NotPermitted(String),
    #[error("the process ended during the injection")]
    Ended,
    #[error("{what} did not finish within {secs} s")]
    Timeout { what: &'static str, secs: u64 },
    #[error("{0}")]
    Failed(String),
    #[error("cannot write the loader: {0}")]
    Io(#[from] std::io::Error),
}

/// Puts the probe into `process`: schedules the loader to run in its main
/// thread. Returns once it is scheduled; the probe connects to the socket
/// when the main thread next runs Python code.
pub fn inject(
    process: &ProcessInfo,
    loader: &Loader,
    method: InjectMethod,
    timeout: Duration,
) -> Result<Injected, InjectError> {
    let (version, library) = match &process.python {
        Python::CPython { version, library } => (*version, library),
        Python::No => return Err(InjectError::NotPython),
        Python::Unsupported(what) => return Err(InjectError::Unsupported(what.clone())),
        Python::Unknown(why) => return Err(InjectError::Unknown(why.clone())),
    };
    if let Some((3, minor)) = version.filter(|v| *v < (3, 8)) {
        return Err(InjectError::Unsupported(format!("Python 3.{minor}")));
    }
    if let Some(t) = process.tracer {
        return Err(InjectError::AlreadyTraced(t));
    }
    if process.stopped {
        return Err(InjectError::Stopped(process.pid));
    }
    let python = version.map(|(a, b)| format!("{a}.{b}"));
    let done = |method| Injected {
        method,
        python: python.clone(),
    };
    let modern = version.is_some_and(|v| v >= (3, 14));
    match method {
        InjectMethod::RemoteExec => {
            remote_exec::inject(process, version, &loader.write_file()?, timeout)?;
            Ok(done("sys.remote_exec"))
        }
        InjectMethod::Gdb => {
            gdb::inject(process.pid, library, &loader.statement(), timeout)?;
            Ok(done("gdb"))
        }
        InjectMethod::Ptrace => {
            native(process.pid, library, &loader.statement())?;
            Ok(done("ptrace"))
        }
        InjectMethod::Auto if modern => {
            match remote_exec::inject(process, version, &loader.write_file()?, timeout) {
                Ok(()) => Ok(done("sys.remote_exec")),
                // No helper interpreter: the pending call works on 3.14 too.
                Err(InjectError::NoHelper(v)) if cfg!(target_arch = "x86_64") => {
                    native(process.pid, library, &loader.statement())
                        .map(|()| done("ptrace"))
                        .map_err(|e| match e {
                            InjectError::Failed(m) => InjectError::Failed(format!(
                                "{m} (and no python{v} for sys.remote_exec)"
                            )),
                            other => other,
                        })
                }
                Err(e) => Err(e),
            }
        }
        InjectMethod::Auto if cfg!(target_arch = "x86_64") => {
            native(process.pid, library, &loader.statement())?;
            Ok(done("ptrace"))
        }
        InjectMethod::Auto => {
            gdb::inject(process.pid, library, &loader.statement(), timeout)?;
            Ok(done("gdb"))
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn native(pid: u32, library: &maps::MappedFile, statement: &str) -> Result<(), InjectError> {
    ptrace::inject(pid, library, statement)
}

#[cfg(not(target_arch = "x86_64"))]
fn native(_pid: u32, _library: &maps::MappedFile, _statement: &str) -> Result<(), InjectError> {
    Err(InjectError::Failed(
        "leakspy's own ptrace injection is x86-64 only; use gdb".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loader() -> Loader {
        Loader {
            dir: "/tmp/leakspy-probe-x\"y".into(),
            socket: "/tmp/leakspy-probe-x\"y/probe.sock".into(),
            budget: 0.25,
            census: false,
        }
    }

    #[test]
    fn the_statement_is_one_python_statement_that_binds_nothing() {
        let s = loader().statement();
        assert!(s.starts_with("try:\n __import__('builtins').exec("), "{s}");
        assert!(s.ends_with("except BaseException:\n pass\n"), "{s}");
        let src = loader().source();
        assert!(src.contains(r#"d = "/tmp/leakspy-probe-x\"y""#), "{src}");
        assert!(src.contains("_attach.start(sock, 0.25, False)"), "{src}");
    }

    #[test]
    fn hand_off_writes_the_settings_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("handoff.json");
        loader().hand_off(&path).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["socket"], "/tmp/leakspy-probe-x\"y/probe.sock");
        assert_eq!(v["budget"], 0.25);
        assert_eq!(v["census"], false);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn methods_parse() {
        assert_eq!("gdb".parse::<InjectMethod>(), Ok(InjectMethod::Gdb));
        assert_eq!(
            "remote-exec".parse::<InjectMethod>(),
            Ok(InjectMethod::RemoteExec)
        );
        assert!("lldb".parse::<InjectMethod>().is_err());
    }
}

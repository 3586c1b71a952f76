//! `leakspy attach PID`: the process to join. That it exists, is a running
//! program and not leakspy itself; whether leakspy may trace it; which
//! CPython it runs; and, while recording, whether it is still the same
//! process (a pid is reused once its process is reaped).

use std::io::ErrorKind;
use std::time::Duration;

use crate::inject::maps::{
    file_name, mapped_files, py_version_constant, python_version_in_name, read_mapped, MappedFile,
    Symbols,
};
use crate::inject::InjectMethod;

/// `PF_KTHREAD` in the flags of /proc/PID/stat.
const PF_KTHREAD: u64 = 0x0020_0000;
/// Bit of `CAP_SYS_PTRACE` in `CapEff`.
const CAP_SYS_PTRACE: u32 = 19;

/// Why leakspy will not attach.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("no process with pid {0}")]
    NoSuchProcess(u32),
    #[error("process {pid} has already ended: it is a zombie, waiting for its parent (pid {ppid}) to collect its exit status")]
    Zombie { pid: u32, ppid: u32 },
    #[error("pid {0} is this leakspy process itself")]
    Itself(u32),
    #[error(
        "pid {pid} is a thread of process {tgid}: give the process id (`leakspy attach {tgid}`)"
    )]
    Thread { pid: u32, tgid: u32 },
    #[error("pid {0} is a kernel thread, not a program")]
    KernelThread(u32),
    #[error("cannot read /proc/{pid}/{file}: {source}")]
    Proc {
        pid: u32,
        file: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("not permitted to trace process {pid}: {why}")]
    NotPermitted { pid: u32, why: String },
}

/// The process as /proc shows it when leakspy attaches.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessInfo {
    pub pid: u32,
    pub ppid: u32,
    pub cmdline: Vec<String>,
    /// `/proc/PID/exe` (unreadable for another user's process without privileges).
    pub exe: Option<String>,
    pub uid: u32,
    pub gid: u32,
    /// Field 22 of /proc/PID/stat (clock ticks after boot): with the pid, it
    /// names this process and no later one that reuses the pid.
    pub start_ticks: u64,
    /// Unix time of the start, seconds.
    pub started_at: Option<f64>,
    /// Stopped (SIGSTOP, or by a debugger).
    pub stopped: bool,
    /// The pid of a tracer already attached (a debugger, strace).
    pub tracer: Option<u32>,
    pub python: Python,
}

/// Which interpreter the process runs, as far as its mappings tell.
#[derive(Debug, Clone, PartialEq)]
pub enum Python {
    /// CPython, whose C API `library` exports (libpython, or the executable
    /// itself when it is linked statically).
    CPython {
        version: Option<(u32, u32)>,
        library: MappedFile,
    },
    /// Python, but not one the probe can enter (what it is).
    Unsupported(String),
    /// The mappings could not be read (why).
    Unknown(String),
    /// Not a Python process.
    No,
}

impl Python {
    /// `3.11`, for CPython of a known version.
    pub fn version_text(&self) -> Option<String> {
        match self {
            Python::CPython {
                version: Some((a, b)),
                ..
            } => Some(format!("{a}.{b}")),
            _ => None,
        }
    }
}

/// What an attached recording needs besides the process.
#[derive(Debug, Clone)]
pub struct AttachConfig {
    pub process: ProcessInfo,
    /// Stop recording after this long (None: until interrupted or the job ends).
    pub duration: Option<Duration>,
    /// How to put the probe in.
    pub method: InjectMethod,
    /// Longest wait for an injection (gdb, the helper of `sys.remote_exec`).
    pub inject_timeout: Duration,
    /// The process starts the probe itself: its settings are written to this file instead
    /// of an injection (`Loader::hand_off`).
    pub handoff: Option<std::path::PathBuf>,
}

impl AttachConfig {
    pub fn new(process: ProcessInfo) -> Self {
        AttachConfig {
            process,
            duration: None,
            method: InjectMethod::Auto,
            inject_timeout: Duration::from_secs(20),
            handoff: None,
        }
    }
}

/// Fields of /proc/PID/stat that matter here.
struct Stat {
    state: char,
    ppid: u32,
    flags: u64,
    start_ticks: u64,
}

fn read_stat(pid: u32) -> std::io::Result<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_stat(&text)
        .ok_or_else(|| std::io::Error::new(ErrorKind::InvalidData, "unexpected format"))
}

fn parse_stat(text: &str) -> Option<Stat> {
    // The command name (field 2) may hold spaces and parentheses: fields
    // are counted after its last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        flags: f.get(6)?.parse().ok()?,
        start_ticks: f.get(19)?.parse().ok()?,
    })
}

/// A field of /proc/PID/status (`Uid`, `Tgid`...): its first number.
fn status_field(text: &str, name: &str) -> Option<u32> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

fn proc_err(pid: u32, file: &'static str, e: std::io::Error) -> AttachError {
    if e.kind() == ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) {
        AttachError::NoSuchProcess(pid)
    } else {
        AttachError::Proc {
            pid,
            file,
            source: e,
        }
    }
}

/// Looks the process up and refuses what cannot be attached to: no such
/// pid, a zombie, leakspy itself, a thread id, a kernel thread.
pub fn inspect(pid: u32) -> Result<ProcessInfo, AttachError> {
    if pid == 0 {
        return Err(AttachError::NoSuchProcess(0));
    }
    if pid == std::process::id() {
        return Err(AttachError::Itself(pid));
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| proc_err(pid, "status", e))?;
    let stat = read_stat(pid).map_err(|e| proc_err(pid, "stat", e))?;
    if let Some(tgid) = status_field(&status, "Tgid").filter(|t| *t != pid) {
        if tgid == std::process::id() {
            return Err(AttachError::Itself(pid));
        }
        return Err(AttachError::Thread { pid, tgid });
    }
    if matches!(stat.state, 'Z' | 'X' | 'x') {
        return Err(AttachError::Zombie {
            pid,
            ppid: stat.ppid,
        });
    }
    if stat.flags & PF_KTHREAD != 0 {
        return Err(AttachError::KernelThread(pid));
    }
    let read_cmdline = || -> Vec<String> {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| {
                b.split(|c| *c == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut cmdline = read_cmdline();
    // Empty for a moment while the process execs (its new arguments are not
    // on its stack yet).
    for _ in 0..20 {
        if !cmdline.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
        cmdline = read_cmdline();
    }
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned());
    let python = detect_python(pid, exe.as_deref());
    Ok(ProcessInfo {
        pid,
        ppid: stat.ppid,
        cmdline,
        exe,
        uid: status_field(&status, "Uid").unwrap_or(u32::MAX),
        gid: status_field(&status, "Gid").unwrap_or(u32::MAX),
        start_ticks: stat.start_ticks,
        started_at: started_at(stat.start_ticks),
        stopped: matches!(stat.state, 'T' | 't'),
        tracer: status_field(&status, "TracerPid").filter(|t| *t != 0),
        python,
    })
}

/// Whether the process is still the one inspected and has not ended.
pub fn still_running(p: &ProcessInfo) -> bool {
    match read_stat(p.pid) {
        Ok(s) => s.start_ticks == p.start_ticks && !matches!(s.state, 'Z' | 'X' | 'x'),
        Err(_) => false,
    }
}

/// Unix time of a start given in clock ticks after boot.
fn started_at(ticks: u64) -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let btime: f64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| btime + ticks as f64 / hz as f64)
}

fn detect_python(pid: u32, exe: Option<&str>) -> Python {
    let files = match mapped_files(pid) {
        Ok(f) => f,
        Err(e) => return Python::Unknown(format!("cannot read /proc/{pid}/maps: {e}")),
    };
    if let Some(lib) = files
        .iter()
        .find(|m| file_name(&m.path).starts_with("libpython3"))
    {
        return Python::CPython {
            version: python_version_in_name(file_name(&lib.path)),
            library: lib.clone(),
        };
    }
    if files
        .iter()
        .any(|m| file_name(&m.path).starts_with("libpypy"))
    {
        return Python::Unsupported("PyPy".into());
    }
    if let Some(lib) = files
        .iter()
        .find(|m| file_name(&m.path).starts_with("libpython2"))
    {
        return Python::Unsupported(format!("Python 2 ({})", file_name(&lib.path)));
    }
    // A statically linked interpreter: the executable exports the C API.
    let Some(exe_map) = exe.and_then(|e| files.iter().find(|m| m.path == e)) else {
        return Python::No;
    };
    let data = match read_mapped(pid, exe_map) {
        Ok(d) => d,
        Err(e) => return Python::Unknown(e),
    };
    let exports = Symbols::parse(
        &data,
        exe_map.start,
        &["Py_AddPendingCall", "Py_Initialize"],
    )
    .map(|s| s.address("Py_AddPendingCall").is_some() && s.address("Py_Initialize").is_some())
    .unwrap_or(false);
    if !exports {
        return Python::No;
    }
    let version =
        python_version_in_name(file_name(&exe_map.path)).or_else(|| py_version_constant(&data));
    if version.is_some_and(|(major, _)| major != 3) {
        return Python::Unsupported("Python 2".into());
    }
    Python::CPython {
        version,
        library: exe_map.clone(),
    }
}

/// Whether leakspy may trace the process (ptrace, /proc/PID/mem): the
/// kernel's own answer, with how to get permission when it says no.
pub fn check_trace_permission(p: &ProcessInfo) -> Result<(), AttachError> {
    // Opening /proc/PID/mem makes the kernel run the same check as
    // ptrace(PTRACE_ATTACH) (credentials, dumpability, Yama, LSMs), and
    // opening it changes nothing in the process.
    match std::fs::File::open(format!("/proc/{}/mem", p.pid)) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Err(AttachError::NoSuchProcess(p.pid)),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)) => {
            Err(AttachError::NotPermitted {
                pid: p.pid,
                why: denial_reason(p),
            })
        }
        Err(e) => Err(AttachError::Proc {
            pid: p.pid,
            file: "mem",
            source: e,
        }),
    }
}

/// Why the kernel refuses, in the order it checks, and what allows it.
fn denial_reason(p: &ProcessInfo) -> String {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let privileged = has_cap_sys_ptrace();
    if p.uid != me && !privileged {
        let login = login_name(p.uid).unwrap_or_else(|| format!("#{}", p.uid));
        return format!(
            "it runs as {} and leakspy as {}; run leakspy as the same user \
             (`sudo -u {login} leakspy attach {}`) or as root",
            user_name(p.uid),
            user_name(me),
            p.pid
        );
    }
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    match scope {
        Some(1) if !privileged => format!(
            "kernel.yama.ptrace_scope is 1 (a process may only trace its own descendants); \
             allow it until reboot with `sudo sysctl kernel.yama.ptrace_scope=0`, or run leakspy \
             as root (or give it the capability: `sudo setcap cap_sys_ptrace+ep {}`)",
            std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "$(command -v leakspy)".into())
        ),
        Some(2) if !privileged => "kernel.yama.ptrace_scope is 2 (only root may trace); run \
             leakspy as root, or `sudo sysctl kernel.yama.ptrace_scope=0`"
            .to_string(),
        Some(3) => {
            "kernel.yama.ptrace_scope is 3: tracing is disabled until the next reboot".to_string()
        }
        _ if !privileged && me != 0 => "the kernel refused (the process may have made itself \
             non-dumpable, or run a setuid program); run leakspy as root"
            .to_string(),
        _ => "the kernel refused even with privileges (in a container, start it with \
             `--cap-add=SYS_PTRACE`; a security module such as AppArmor or SELinux may also \
             forbid ptrace)"
            .to_string(),
    }
}

fn has_cap_sys_ptrace() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_SYS_PTRACE) != 0)
}

/// The login name of `uid` in /etc/passwd.
fn login_name(uid: u32) -> Option<String> {
    std::fs::read_to_string("/etc/passwd").ok().and_then(|t| {
        t.lines().find_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let id: u32 = f.nth(1)?.parse().ok()?;
            (id == uid).then(|| name.to_string())
        })
    })
}

/// `alice (uid 1000)`, or `uid 1000` when /etc/passwd does not say.
fn user_name(uid: u32) -> String {
    match login_name(uid) {
        Some(n) => format!("{n} (uid {uid})"),
        None => format!("uid {uid}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_after_a_tricky_command_name() {
        let line = "4242 (a) b (c)) S 4200 4242 4242 0 -1 4194560 100 0 0 0 5 1 0 0 20 0 1 0 987654 12345 100 18446744073709551615";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.state, 'S');
        assert_eq!(s.ppid, 4200);
        assert_eq!(s.flags, 4194560);
        assert_eq!(s.start_ticks, 987654);
    }

    #[test]
    fn leakspy_itself_and_missing_pids_are_refused() {
        let me = std::process::id();
        assert!(matches!(inspect(me), Err(AttachError::Itself(_))));
        assert!(matches!(inspect(0), Err(AttachError::NoSuchProcess(0))));
        // pid_max is at most 2^22: this pid cannot exist.
        assert!(matches!(
            inspect(4_194_304 + 17),
            Err(AttachError::NoSuchProcess(_))
        ));
    }

    #[test]
    fn a_running_program_is_inspected_and_its_end_seen() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let info = inspect(pid).unwrap();
        assert_eq!(info.cmdline, ["sleep", "30"]);
        assert_eq!(info.ppid, std::process::id());
        assert_eq!(info.python, Python::No);
        assert!(still_running(&info));
        check_trace_permission(&info).unwrap();
        child.kill().unwrap();
        // Unreaped: a zombie is refused and counts as ended.
        std::thread::sleep(Duration::from_millis(100));
        assert!(!still_running(&info));
        assert!(matches!(inspect(pid), Err(AttachError::Zombie { .. })));
        child.wait().unwrap();
        assert!(!still_running(&info));
    }
}

//! The child's stderr, passed on to leakspy's stderr byte for byte as it
//! comes, with a copy of its end kept: a job that fails before it could be
//! measured is reported with the lines that say why.
//!
//! The copying is done by a relay process (leakspy's own binary, started
//! with [`RELAY_ARG`]), not by a thread of leakspy: if leakspy is killed the
//! relay lives on, and the job can still write to its stderr until it ends.
//! The relay ignores the signals a terminal or a `kill` sends (the job gets
//! them from leakspy) and ends when the job's side is closed by every
//! process that holds it. When leakspy's stderr is a terminal, the job's
//! stderr is a pseudo-terminal in raw mode, of the terminal's size: the job
//! sees a terminal as it would without leakspy (colours, progress bars) and
//! its bytes reach the terminal unchanged.

use std::io::{IsTerminal, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The first argument that makes leakspy's binary run [`relay_main`].
pub const RELAY_ARG: &str = "__leakspy-stderr-relay";

/// Bytes of the end of the job's stderr kept for the report.
const KEEP_BYTES: usize = 16 * 1024;

/// Set by SIGUSR1 ([`StderrTee::mute`]): from then on the relay passes
/// nothing on to the user, and leakspy still keeps the end.
static MUTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_mute(_: libc::c_int) {
    MUTED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// The relay's loop: copies its stdin to its stderr (the user's terminal or
/// log) and to its stdout (leakspy, which keeps the end). A failing output
/// is dropped, never the input: the job must not block or see an error.
/// Returns the exit status.
pub fn relay_main() -> i32 {
    // SAFETY: setting a signal's disposition to SIG_IGN has no preconditions;
    // the SIGUSR1 handler only stores to an atomic, which is signal-safe.
    unsafe {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            libc::signal(sig, libc::SIG_IGN);
        }
        libc::signal(
            libc::SIGUSR1,
            on_mute as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
    let mut buf = vec![0u8; 64 * 1024];
    let (mut to_user, mut to_leakspy) = (true, true);
    loop {
        // SAFETY: reads into a buffer we own, of its length.
        let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            // EIO: every holder of a pseudo-terminal's other side closed it.
            return 0;
        }
        if n == 0 {
            return 0;
        }
        let bytes = &buf[..n as usize];
        let muted = MUTED.load(std::sync::atomic::Ordering::SeqCst);
        to_user = to_user && (muted || write_all(2, bytes));
        to_leakspy = to_leakspy && write_all(1, bytes);
    }
}

fn write_all(fd: i32, mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        // SAFETY: writes from a slice we borrow, of its length.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        bytes = &bytes[n as usize..];
    }
    true
}

/// The relay of one run: what the job's stderr is, and the end it wrote.
pub struct StderrTee {
    tail: Arc<Mutex<Vec<u8>>>,
    reader: JoinHandle<()>,
    relay_pid: u32,
    /// Cleared before the relay is reaped: its pid is then no longer ours.
    relay_alive: Arc<std::sync::atomic::AtomicBool>,
}

/// Stops the relay passing the job's stderr on to the user (the end is still
/// kept): what a job prints while leakspy stops it (a notebook kernel's
/// teardown: dead-kernel and socket tracebacks) is not the user's news.
#[derive(Debug, Clone)]
pub struct StderrMute {
    relay_pid: u32,
    relay_alive: Arc<std::sync::atomic::AtomicBool>,
}

impl StderrMute {
    pub fn mute(&self) {
        if !self.relay_alive.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        if let Ok(pid) = i32::try_from(self.relay_pid) {
            if pid > 0 {
                // SAFETY: kill(2) on the relay we started and have not
                // reaped (the flag is cleared before it is).
                unsafe {
                    libc::kill(pid, libc::SIGUSR1);
                }
            }
        }
    }
}

impl StderrTee {
    /// Starts the relay (`program` with [`RELAY_ARG`]) and returns what to
    /// give the job as its stderr.
    pub fn start(program: &Path) -> std::io::Result<(StderrTee, Stdio)> {
        let (ours, theirs) = if std::io::stderr().is_terminal() {
            pseudo_terminal()?
        } else {
            let (r, w) = std::io::pipe()?;
            (OwnedFd::from(r), OwnedFd::from(w))
        };
        let mut relay = Command::new(program)
            .arg(RELAY_ARG)
            .stdin(Stdio::from(ours))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let relay_pid = relay.id();
        let relay_alive = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let alive = Arc::clone(&relay_alive);
        let mut copy = relay.stdout.take().expect("the relay's stdout is piped");
        let tail = Arc::new(Mutex::new(Vec::with_capacity(KEEP_BYTES)));
        let kept = Arc::clone(&tail);
        let reader = std::thread::Builder::new()
            .name("stderr tail".into())
            .spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n) = copy.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let mut t = kept.lock().unwrap_or_else(|e| e.into_inner());
                    t.extend_from_slice(&buf[..n]);
                    if t.len() > 2 * KEEP_BYTES {
                        let cut = t.len() - KEEP_BYTES;
                        t.drain(..cut);
                    }
                }
                // The relay has seen its end: reap it.
                alive.store(false, std::sync::atomic::Ordering::SeqCst);
                let _ = relay.wait();
            })?;
        Ok((
            StderrTee {
                tail,
                reader,
                relay_pid,
                relay_alive,
            },
            Stdio::from(theirs),
        ))
    }

    pub fn muter(&self) -> StderrMute {
        StderrMute {
            relay_pid: self.relay_pid,
            relay_alive: Arc::clone(&self.relay_alive),
        }
    }

    /// The last `max` lines the job wrote on stderr, once they have arrived
    /// (waiting at most `wait`: a process the job left behind may hold its
    /// stderr open). Terminal control sequences are taken out; a line
    /// redrawn with `\r` (a progress bar) counts as its last state.
    pub fn last_lines(self, max: usize, wait: Duration) -> Vec<String> {
        let deadline = Instant::now() + wait;
        while !self.reader.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let bytes = self.tail.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if self.reader.is_finished() {
            let _ = self.reader.join();
        }
        last_lines(&bytes, max)
    }
}

/// The last `max` non-blank lines of `bytes`, as text without control
/// sequences, each at most 300 characters.
pub fn last_lines(bytes: &[u8], max: usize) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    let mut lines: Vec<String> = text
        .split('\n')
        .map(|l| {
            let shown = l.rsplit('\r').find(|p| !p.trim().is_empty()).unwrap_or("");
            let clean = strip_controls(shown);
            let clean = clean.trim_end();
            if clean.chars().count() > 300 {
                let cut: String = clean.chars().take(300).collect();
                format!("{cut}...")
            } else {
                clean.to_string()
            }
        })
        .filter(|l| !l.trim().is_empty())
        .collect();
    let from = lines.len().saturating_sub(max);
    lines.drain(..from);
    lines
}

/// `s` without ANSI escape sequences and other control characters (tabs
/// become spaces).
fn strip_controls(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => {
                // CSI: ESC [ params final-byte; other escapes: ESC and one char.
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for c in chars.by_ref() {
                        if ('\x40'..='\x7e').contains(&c) {
                            break;
                        }
                    }
                } else {
                    chars.next();
                }
            }
            '\t' => out.push(' '),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// A pseudo-terminal in raw mode with the size of leakspy's terminal:
/// (leakspy's side, the job's side), both close-on-exec.
fn pseudo_terminal() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let err = std::io::Error::last_os_error;
    // SAFETY: plain libc calls on descriptors this function owns; every
    // returned descriptor is checked, then owned by an OwnedFd.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        if master < 0 {
            return Err(err());
        }
        let master = OwnedFd::from_raw_fd(master);
        if libc::grantpt(master.as_raw_fd()) != 0 || libc::unlockpt(master.as_raw_fd()) != 0 {
            return Err(err());
        }
        let mut name = [0 as libc::c_char; 128];
        if libc::ptsname_r(master.as_raw_fd(), name.as_mut_ptr(), name.len()) != 0 {
            return Err(err());
        }
        let slave = libc::open(
            name.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        if slave < 0 {
            return Err(err());
        }
        let slave = OwnedFd::from_raw_fd(slave);
        // Raw: no newline translation, so the bytes pass unchanged.
        let mut tio: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(slave.as_raw_fd(), &mut tio) == 0 {
            libc::cfmakeraw(&mut tio);
            libc::tcsetattr(slave.as_raw_fd(), libc::TCSANOW, &tio);
        }
        let mut size: libc::winsize = std::mem::zeroed();
        if libc::ioctl(2, libc::TIOCGWINSZ, &mut size) == 0 {
            libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &size);
        }
        Ok((master, slave))
    }
}

#[cfg(test)]
mod tests {
    use super::last_lines;

    #[test]
    fn the_end_of_stderr_as_lines() {
        let text = b"warming up\n\x1b[31mTraceback (most recent call last):\x1b[0m\n  File \"t.py\", line 1\n\nModuleNotFoundError: No module named 'torch'\n";
        assert_eq!(
            last_lines(text, 3),
            vec![
                "Traceback (most recent call last):",
                "  File \"t.py\", line 1",
                "ModuleNotFoundError: No module named 'torch'",
            ]
        );
        // A progress bar redrawn with \r shows its last state.
        assert_eq!(last_lines(b" 10%\r 50%\r 90%\n", 5), vec![" 90%"]);
        assert!(last_lines(b"", 5).is_empty());
        let long = "x".repeat(1000);
        assert_eq!(last_lines(long.as_bytes(), 1)[0].len(), 303);
    }
}

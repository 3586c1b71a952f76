//! The channel to the in-process probe: lays the embedded Python package out
//! in a private 0700 folder, tells the child where it is (`PYTHONPATH` with a
//! bootstrap `sitecustomize`), and receives the probe's JSON lines on a Unix
//! stream socket in that folder, one connection per process (forked workers
//! connect on their own). The monitor writes back on the same connection
//! (a burst, a last look: [`ProbeServer::send_to`]), without ever waiting.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

include!(concat!(env!("OUT_DIR"), "/probe_files.rs"));

/// Where the bootstrap lives in the package; it is also written as the
/// folder's top-level `sitecustomize.py`.
const BOOTSTRAP: &str = "leakspy/_bootstrap/sitecustomize.py";

/// Longest message taken from the probe. A census is a few tens of KiB; a
/// longer line is a broken or hostile writer and is skipped, not buffered.
const MAX_MESSAGE: u64 = 8 * 1024 * 1024;

/// Most processes served at once (a fork bomb must not become a thread bomb).
const MAX_CONNECTIONS: usize = 256;

/// The share of the job's time the probe's work may take unless told
/// otherwise (`--probe-budget`): 1 %.
pub const DEFAULT_PROBE_BUDGET: f64 = 0.01;

/// Probe settings passed to the child.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeConfig {
    /// Fraction of wall time the census may take (0.01 = 1 %).
    pub budget: f64,
    /// Object census and suspects; steps only when false.
    pub census: bool,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            budget: DEFAULT_PROBE_BUDGET,
            census: true,
        }
    }
}

/// One JSON object from the probe, stamped with its time of arrival.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeMessage {
    pub t: f64,
    pub message: Map<String, Value>,
}

/// What the monitor's inbox carries: step lines of the child's stdout and
/// probe messages, in arrival order.
#[derive(Debug, Clone, PartialEq)]
pub enum Inbound {
    Stdout(crate::StepMark),
    Probe(ProbeMessage),
}

impl From<crate::StepMark> for Inbound {
    fn from(m: crate::StepMark) -> Self {
        Inbound::Stdout(m)
    }
}

/// Counters shared with the connection threads.
#[derive(Debug, Default)]
struct Shared {
    stop: AtomicBool,
    active: AtomicUsize,
    connections: AtomicUsize,
    refused: AtomicUsize,
    malformed: AtomicUsize,
    /// A second handle on each open connection, to hang up on an attached
    /// job that goes on running (its connections never close by themselves),
    /// and to write to the probe.
    open: Mutex<HashMap<usize, UnixStream>>,
    /// The connection of each process that said hello.
    by_pid: Mutex<HashMap<u32, usize>>,
}

pub struct ProbeServer {
    dir: tempfile::TempDir,
    socket: PathBuf,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
    config: ProbeConfig,
}

impl ProbeServer {
    /// Writes the package, binds the socket and starts accepting.
    pub fn start(
        config: ProbeConfig,
        start: Instant,
        tx: Sender<Inbound>,
    ) -> std::io::Result<ProbeServer> {
        let dir = tempfile::Builder::new()
            .prefix("leakspy-probe-")
            .tempdir_in(short_temp_dir())?;
        // tempfile makes it 0700 already; say it, since the socket's safety
        // rests on it (no other user may connect or swap the package).
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
        write_package(dir.path())?;
        let socket = dir.path().join("probe.sock");
        let listener = UnixListener::bind(&socket)?;
        let shared = Arc::new(Shared::default());
        let accept = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("leakspy-probe".into())
                .spawn(move || accept_loop(listener, shared, start, tx))?
        };
        Ok(ProbeServer {
            dir,
            socket,
            shared,
            accept: Some(accept),
            config,
        })
    }

    /// Environment for the child: the package first on `PYTHONPATH`, before
    /// `pythonpath` (the child's own, else leakspy's).
    pub fn env(&self, pythonpath: Option<&std::ffi::OsStr>) -> Vec<(OsString, OsString)> {
        let dir = self.dir.path().as_os_str().to_os_string();
        let mut path = dir.clone();
        let old = pythonpath
            .map(std::ffi::OsStr::to_os_string)
            .or_else(|| std::env::var_os("PYTHONPATH"));
        if let Some(old) = old.filter(|p| !p.is_empty()) {
            path.push(":");
            path.push(old);
        }
        let mut env = vec![
            ("PYTHONPATH".into(), path),
            ("LEAKSPY_PROBE_DIR".into(), dir),
            ("LEAKSPY_PROBE_SOCKET".into(), self.socket.clone().into()),
            (
                "LEAKSPY_PROBE_BUDGET".into(),
                format!("{}", self.config.budget).into(),
            ),
            (
                "LEAKSPY_PROBE_CENSUS".into(),
                if self.config.census { "1" } else { "0" }.into(),
            ),
        ];
        // The package the child imports is this binary's copy, beside no
        // binary: its own calls of one (`assert_no_leak`'s verdict) take this
        // one, of the same version, unless the user named another.
        if std::env::var_os("LEAKSPY_BIN").is_none() {
            if let Ok(exe) = std::env::current_exe() {
                env.push(("LEAKSPY_BIN".into(), exe.into_os_string()));
            }
        }
        env
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The Unix socket the probe connects to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The probe's settings.
    pub fn config(&self) -> &ProbeConfig {
        &self.config
    }

    /// Hangs up on every process still connected. A probe whose connection
    /// is gone switches itself off at its next message: how an attached
    /// job, which keeps running, gets rid of it.
    pub fn close_connections(&self) {
        if let Ok(open) = self.shared.open.lock() {
            for s in open.values() {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        }
    }

    /// Hands the folder, the package and the socket to another user (root
    /// attaching to a job of that user, which must read the package and
    /// connect to the socket). That user can then only change what its own
    /// process runs.
    pub fn give_to(&self, uid: u32, gid: u32) -> std::io::Result<()> {
        fn walk(p: &Path, uid: u32, gid: u32) -> std::io::Result<()> {
            std::os::unix::fs::lchown(p, Some(uid), Some(gid))?;
            if p.is_dir() {
                for e in std::fs::read_dir(p)? {
                    walk(&e?.path(), uid, gid)?;
                }
            }
            Ok(())
        }
        walk(self.dir.path(), uid, gid)
    }

    /// Writes one message to the probe of process `pid`, if it is
    /// connected, without waiting: a probe that does not read (a socket
    /// buffer full) loses it. Returns whether it went out.
    pub fn send_to(&self, pid: u32, message: &Value) -> bool {
        let Some(id) = self
            .shared
            .by_pid
            .lock()
            .ok()
            .and_then(|m| m.get(&pid).copied())
        else {
            return false;
        };
        let Ok(open) = self.shared.open.lock() else {
            return false;
        };
        let Some(stream) = open.get(&id) else {
            return false;
        };
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        send_now(stream, &line)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::Relaxed)
    }

    /// Lines that were not JSON objects with a `kind`, or too long.
    pub fn malformed(&self) -> usize {
        self.shared.malformed.load(Ordering::Relaxed)
    }

    /// Connections refused past [`MAX_CONNECTIONS`].
    pub fn refused(&self) -> usize {
        self.shared.refused.load(Ordering::Relaxed)
    }

    /// Waits until every connection is closed (the processes ended and their
    /// last messages were read), at most until `deadline`. A grandchild that
    /// outlives the child must not hang leakspy.
    pub fn wait_idle(&self, deadline: Instant) {
        while self.shared.active.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Stops accepting; the folder is removed when `self` drops.
    pub fn shutdown(mut self) {
        self.stop_accepting();
    }

    fn stop_accepting(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        // Wake the blocking accept with a connection of our own.
        let _ = UnixStream::connect(&self.socket);
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

impl Drop for ProbeServer {
    fn drop(&mut self) {
        self.stop_accepting();
    }
}

/// A folder whose socket paths fit `sun_path` (108 bytes): `$TMPDIR` when
/// short enough, else /tmp.
fn short_temp_dir() -> PathBuf {
    let tmp = std::env::temp_dir();
    if tmp.as_os_str().len() <= 60 {
        tmp
    } else {
        PathBuf::from("/tmp")
    }
}

fn write_package(dir: &Path) -> std::io::Result<()> {
    for (rel, contents) in PROBE_FILES {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, contents)?;
        if *rel == BOOTSTRAP {
            std::fs::write(dir.join("sitecustomize.py"), contents)?;
        }
    }
    Ok(())
}

fn accept_loop(listener: UnixListener, shared: Arc<Shared>, start: Instant, tx: Sender<Inbound>) {
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        let Ok(stream) = stream else { continue };
        if shared.active.load(Ordering::Acquire) >= MAX_CONNECTIONS {
            shared.refused.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        shared.active.fetch_add(1, Ordering::AcqRel);
        let id = shared.connections.fetch_add(1, Ordering::Relaxed);
        if let (Ok(other), Ok(mut open)) = (stream.try_clone(), shared.open.lock()) {
            open.insert(id, other);
        }
        let conn_shared = Arc::clone(&shared);
        let tx = tx.clone();
        let spawned = std::thread::Builder::new()
            .name("leakspy-probe-conn".into())
            .spawn(move || {
                read_messages(stream, id, &conn_shared, start, &tx);
                if let Ok(mut open) = conn_shared.open.lock() {
                    open.remove(&id);
                }
                if let Ok(mut by_pid) = conn_shared.by_pid.lock() {
                    by_pid.retain(|_, c| *c != id);
                }
                conn_shared.active.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            shared.active.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Writes all of `line` at once or nothing that matters: the socket is
/// never waited for (a message the probe's buffer cannot take is lost).
fn send_now(stream: &UnixStream, line: &[u8]) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: send(2) on a descriptor we own, from a buffer we own.
    let n = unsafe {
        libc::send(
            stream.as_raw_fd(),
            line.as_ptr().cast(),
            line.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    usize::try_from(n).is_ok_and(|n| n == line.len())
}

/// Reads one process's messages until it closes the connection.
fn read_messages(
    stream: UnixStream,
    id: usize,
    shared: &Shared,
    start: Instant,
    tx: &Sender<Inbound>,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = match (&mut reader).take(MAX_MESSAGE).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if line.last() != Some(&b'\n') {
            if n as u64 >= MAX_MESSAGE {
                // Too long: skip the rest of that line.
                shared.malformed.fetch_add(1, Ordering::Relaxed);
                if skip_line(&mut reader).is_err() {
                    return;
                }
                continue;
            }
            // EOF in the middle of a line: the process died mid-write.
            if !line.is_empty() {
                shared.malformed.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        match parse(&line) {
            Some(message) => {
                if message.get("kind").and_then(Value::as_str) == Some("hello") {
                    if let (Some(pid), Ok(mut by_pid)) = (
                        message
                            .get("pid")
                            .and_then(Value::as_u64)
                            .and_then(|p| u32::try_from(p).ok()),
                        shared.by_pid.lock(),
                    ) {
                        by_pid.insert(pid, id);
                    }
                }
                let t = start.elapsed().as_secs_f64();
                if tx
                    .send(Inbound::Probe(ProbeMessage { t, message }))
                    .is_err()
                {
                    return;
                }
            }
            None => {
                shared.malformed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

fn skip_line(reader: &mut impl BufRead) -> std::io::Result<()> {
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if let Some(i) = buf.iter().position(|&b| b == b'\n') {
            reader.consume(i + 1);
            return Ok(());
        }
        let n = buf.len();
        reader.consume(n);
    }
}

/// A JSON object with a string `kind`, or nothing.
fn parse(line: &[u8]) -> Option<Map<String, Value>> {
    match serde_json::from_slice::<Value>(line).ok()? {
        Value::Object(m) if m.get("kind").is_some_and(Value::is_string) => Some(m),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn package_is_embedded_with_its_bootstrap() {
        assert!(PROBE_FILES.iter().any(|(p, _)| *p == BOOTSTRAP));
        assert!(PROBE_FILES.iter().any(|(p, _)| *p == "leakspy/__init__.py"));
    }

    #[test]
    fn messages_arrive_and_bad_lines_are_counted_not_fatal() {
        let (tx, rx) = std::sync::mpsc::channel();
        let server = ProbeServer::start(ProbeConfig::default(), Instant::now(), tx).unwrap();
        let mode = std::fs::metadata(server.dir())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        assert!(server.dir().join("sitecustomize.py").is_file());
        let mut s = UnixStream::connect(&server.socket).unwrap();
        s.write_all(b"{\"kind\":\"hello\",\"pid\":7}\nnot json\n[1]\n{\"no_kind\":1}\n\xff\xfe\n")
            .unwrap();
        s.write_all(b"{\"kind\":\"step\",\"step\":3,\"source\":\"optimizer\"}\n{\"kind\":\"cut")
            .unwrap();
        drop(s);
        let got: Vec<_> = (0..2)
            .map(|_| match rx.recv_timeout(Duration::from_secs(5)).unwrap() {
                Inbound::Probe(m) => m.message["kind"].as_str().unwrap().to_string(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(got, ["hello", "step"]);
        server.wait_idle(Instant::now() + Duration::from_secs(5));
        assert_eq!(server.malformed(), 5);
        assert_eq!(server.connections(), 1);
        let dir = server.dir().to_path_buf();
        server.shutdown();
        assert!(!dir.exists());
    }
}

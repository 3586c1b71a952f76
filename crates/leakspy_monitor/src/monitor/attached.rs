//! The monitor attached to a job it did not start (`leakspy attach`): the
//! same sampling loop as a spawned child, with a different beginning (the
//! probe injected instead of inherited) and end (leakspy detaches and the
//! job goes on; its exit status, if it ends, belongs to its parent).

use std::time::Instant;

use leakspy_trace::{AttachInfo, Detach, Event, NoteLevel};

use super::Monitor;
use crate::attach::{still_running, AttachConfig};
use crate::inject::{inject, Injected, Loader};
use crate::live::LiveStatus;
use crate::MonitorError;

/// Why an attached recording stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DetachReason {
    /// `--duration` elapsed.
    Duration,
    /// leakspy received SIGINT, SIGTERM or SIGHUP (never passed on to the job).
    Interrupted,
    /// The job ended.
    Ended,
    /// The process watching itself (`leakspy.watch()`, `--probe-handoff`) asked leakspy to
    /// stop: the watched code ended.
    Watched,
}

impl DetachReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DetachReason::Duration => "duration",
            DetachReason::Interrupted => "interrupted",
            DetachReason::Ended => "ended",
            DetachReason::Watched => "watched",
        }
    }
}

/// Attach-mode state of a [`Monitor`].
pub(super) struct Attached {
    pub(super) config: AttachConfig,
    /// When `--duration` is up.
    pub(super) deadline: Option<Instant>,
    pub(super) injected: Option<Injected>,
    pub(super) stop: Option<DetachReason>,
}

impl Attached {
    pub(super) fn new(config: &AttachConfig, start: Instant) -> Self {
        Attached {
            deadline: config.duration.map(|d| start + d),
            config: config.clone(),
            injected: None,
            stop: None,
        }
    }
}

/// What an attached recording tells its caller.
#[derive(Debug, Clone)]
pub struct AttachOutcome {
    pub detach: Detach,
    /// Interrupts (SIGINT/SIGTERM/SIGHUP) leakspy received.
    pub interrupted: usize,
    pub trace_path: std::path::PathBuf,
    pub samples: u64,
    /// First failure to write the trace, if any.
    pub write_error: Option<String>,
    /// Notes written to the trace.
    pub notes: Vec<String>,
    /// How the probe was put in (None: it was not).
    pub injected: Option<Injected>,
    /// Processes whose probe reported.
    pub probe_processes: usize,
}

/// The header's account of the process.
pub(super) fn header_info(a: &AttachConfig) -> AttachInfo {
    let p = &a.process;
    AttachInfo {
        pid: p.pid,
        cmdline: p.cmdline.clone(),
        exe: p.exe.clone(),
        process_started_at: p.started_at,
        python: p.python.version_text(),
    }
}

impl Monitor {
    /// Puts the probe into the attached job (at the start, once the header
    /// is written). A probe that cannot go in is a note, never an error.
    pub(super) fn inject_probe(&mut self) {
        let (Some(a), Some(server)) = (self.attached.as_ref(), self.probe.as_ref()) else {
            return;
        };
        let process = a.config.process.clone();
        let (method, timeout) = (a.config.method, a.config.inject_timeout);
        let mut notes = Vec::new();
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if process.uid != me && me == 0 {
            if let Err(e) = server.give_to(process.uid, process.gid) {
                notes.push((
                    NoteLevel::Warn,
                    format!("cannot hand the probe's folder to uid {}: {e}", process.uid),
                ));
            }
        }
        let loader = Loader {
            dir: server.dir().to_path_buf(),
            socket: server.socket().to_path_buf(),
            budget: server.config().budget,
            census: server.config().census,
        };
        let result = match &a.config.handoff {
            Some(path) => loader
                .hand_off(path)
                .map(|()| Injected {
                    method: "the process itself (in-process hand-off)",
                    python: process.python.version_text(),
                })
                .map_err(|e| {
                    crate::InjectError::Failed(format!(
                        "cannot hand its settings over ({}): {e}",
                        path.display()
                    ))
                }),
            None => inject(&process, &loader, method, timeout),
        };
        match &result {
            Ok(i) => notes.push((
                NoteLevel::Info,
                format!(
                    "probe injected into pid {} ({}through {})",
                    process.pid,
                    i.python
                        .as_ref()
                        .map(|v| format!("Python {v}, "))
                        .unwrap_or_default(),
                    i.method
                ),
            )),
            Err(e) => notes.push((
                NoteLevel::Warn,
                format!("probe not injected: {e}; memory from /proc only"),
            )),
        }
        for (level, n) in notes {
            self.note(level, n);
        }
        if let (Ok(i), Some(a)) = (result, self.attached.as_mut()) {
            a.injected = Some(i);
        }
    }

    /// The notes written so far (after `start`: what became of the probe).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Whether an attached recording is to stop now (and why, kept).
    pub(super) fn attached_should_stop(&mut self) -> bool {
        let interrupted = self.forwarder.received() > 0;
        let Some(a) = self.attached.as_mut() else {
            return false;
        };
        a.stop = if interrupted && a.config.handoff.is_some() {
            Some(DetachReason::Watched)
        } else if interrupted {
            Some(DetachReason::Interrupted)
        } else if !still_running(&a.config.process) {
            Some(DetachReason::Ended)
        } else if a.deadline.is_some_and(|d| Instant::now() >= d) {
            Some(DetachReason::Duration)
        } else {
            None
        };
        a.stop.is_some()
    }

    /// The end of `--duration`, when it comes before `deadline`.
    pub(super) fn attached_deadline(&self, deadline: Instant) -> Instant {
        match self.attached.as_ref().and_then(|a| a.deadline) {
            Some(end) => deadline.min(end.max(Instant::now())),
            None => deadline,
        }
    }

    /// Records an attached job until `--duration`, an interrupt or its end;
    /// then hangs up on the probe (which switches itself off) and leaves
    /// the job running. `on_status` is called after every sample.
    pub fn run_attached(
        mut self,
        mut on_status: impl FnMut(&LiveStatus),
    ) -> Result<AttachOutcome, MonitorError> {
        if self.attached.is_none() {
            return Err(MonitorError::Wait(std::io::Error::other(
                "run_attached needs a monitor started with MonitorConfig::attach",
            )));
        }
        self.record(&mut on_status);
        if self
            .attached
            .as_ref()
            .is_some_and(|a| a.stop != Some(DetachReason::Ended))
        {
            // The job goes on: what the probe can still learn, it learns now.
            self.last_look(super::LAST_LOOK_WAIT);
        }
        let (reason, pid, injected) = {
            let a = self.attached.as_ref().expect("attached");
            (
                a.stop.unwrap_or(DetachReason::Ended),
                a.config.process.pid,
                a.injected.clone(),
            )
        };
        self.drain_inbox();
        let t = self.t();
        self.live.set_elapsed(t);
        let started = !self.probe_pids.is_empty();
        if injected.is_some() && !started {
            self.note_at(
                t,
                NoteLevel::Warn,
                format!(
                    "the probe was scheduled in pid {pid} but never started: its main thread ran \
                     no Python code while leakspy watched (a long C call or sleep); memory from \
                     /proc only"
                ),
            );
        }
        let interrupted = self.forwarder.received();
        let alive = still_running(&self.attached.as_ref().expect("attached").config.process);
        let message = match reason {
            DetachReason::Duration => "recording stopped after --duration; the job goes on".into(),
            DetachReason::Watched => {
                format!("the watched code ended (pid {pid} asked leakspy to stop); it goes on")
            }
            DetachReason::Interrupted => format!(
                "leakspy was interrupted ({interrupted} signal(s), not passed on); the job goes on"
            ),
            DetachReason::Ended => format!("the job (pid {pid}) ended while attached"),
        };
        self.note_at(t, NoteLevel::Info, message);
        let detach = Detach {
            t,
            reason: reason.as_str().to_string(),
            alive: alive && reason != DetachReason::Ended,
        };
        self.emit(&Event::Detach(detach.clone()));
        if let Err(e) = self.writer.sync() {
            self.write_error.get_or_insert_with(|| e.to_string());
        }
        Ok(AttachOutcome {
            detach,
            interrupted,
            trace_path: self.writer.path().to_path_buf(),
            samples: self.samples,
            write_error: self.write_error.take(),
            notes: std::mem::take(&mut self.notes),
            injected,
            probe_processes: self.probe_pids.len(),
        })
    }
}

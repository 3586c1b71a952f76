//! One run of the job for `leakspy fix`, under `run`'s monitor (the same
//! sampling, probe and live fit), stopped by leakspy at its bound: a number
//! of steps, a duration, or, by default, once the live fit calls it a leak
//! and the probe has named who holds what grows.
//!
//! leakspy stops the job as Ctrl-C would (SIGINT to the command: Python
//! raises KeyboardInterrupt, runs its `atexit` handlers and the probe takes
//! its last look), then SIGTERM and SIGKILL if it does not end.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use leakspy_monitor::{LiveStatus, Monitor, MonitorError, RunOutcome};

use crate::commands::run::{create_trace, StatusDisplay};

/// Seconds the default recording goes on after the probe named a holder:
/// its burst goes on to trace the lines that made what grows and to name
/// the other holders (`docs/probe.md`, "Bursts": 20 s at most).
const SETTLE_S: f64 = 12.0;
/// Seconds a suspected leak may go without a holder before the default
/// recording ends anyway (the probe cannot name one: memory outside Python
/// objects, or no census).
const NO_HOLDER_S: f64 = 40.0;
/// Grace after SIGINT before SIGTERM, and after SIGTERM before SIGKILL.
const GRACE_INT_S: f64 = 20.0;
const GRACE_TERM_S: f64 = 10.0;
/// A job that still steps after a SIGINT lost it (a finalizer or a thread
/// caught the KeyboardInterrupt): it is sent again, as a user presses
/// Ctrl-C twice, at most [`MAX_INTS`] times in all. Step counts arrive in
/// batches, late on a busy machine, so the steps counted this long after
/// the signal are the baseline, and only steps beyond it, this long again
/// later, show the job going on (a job running its cleanup is left to it).
const REPEAT_INT_S: f64 = 3.0;
const MAX_INTS: u8 = 3;

/// When leakspy stops the job.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Bound {
    /// Once the live fit calls it a leak and the probe has named a holder
    /// (and [`SETTLE_S`] more), at most `max_s` seconds.
    Verdict { max_s: f64 },
    /// After this many steps (the most one process of the job reported),
    /// at most `max_s` seconds.
    Steps { steps: u64, max_s: f64 },
    /// After this many seconds.
    Duration(f64),
}

/// What one run came to.
pub(super) struct Recorded {
    pub outcome: RunOutcome,
    /// Why leakspy stopped the job (None: it ended by itself).
    pub stopped: Option<String>,
    pub trace: PathBuf,
}

/// How to run the job.
pub(super) struct Job<'a> {
    pub command: &'a [String],
    /// Its working directory (None: leakspy's).
    pub cwd: Option<&'a Path>,
    pub env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    pub trace: &'a Path,
    /// Ask the probe for a burst at this many steps (where the first run
    /// had one).
    pub burst_at_steps: Option<u64>,
}

/// The monitor's settings, shared by both runs.
pub(super) struct Watch {
    pub interval: f64,
    pub probe_budget: f64,
    pub quiet: bool,
    pub status_interval: f64,
}

/// Runs the job until it ends or reaches `bound`.
pub(super) fn record(job: &Job<'_>, bound: Bound, watch: &Watch) -> Result<Recorded> {
    let (writer, made) = create_trace(job.trace)?;
    let mut config = leakspy_monitor::MonitorConfig::new(job.command.to_vec());
    config.interval = Duration::from_secs_f64(watch.interval);
    config.stderr_relay = std::env::current_exe().ok();
    config.probe = Some(leakspy_monitor::ProbeConfig {
        budget: watch.probe_budget,
        census: true,
    });
    config.cwd = job.cwd.map(Path::to_path_buf);
    config.env.clone_from(&job.env);
    // leakspy says when it stops the job; the job's traceback of the
    // KeyboardInterrupt would only repeat it (`_probe._quiet_interrupts`).
    config
        .env
        .push(("LEAKSPY_QUIET_INTERRUPT".into(), "1".into()));
    config.burst_at_steps = job.burst_at_steps;
    let monitor = match Monitor::start(config, writer) {
        Ok(m) => m,
        Err(e) => {
            if matches!(
                e,
                MonitorError::NotFound { .. } | MonitorError::Spawn { .. }
            ) {
                made.discard(job.trace);
            }
            return Err(e.into());
        }
    };
    let pid = i32::try_from(monitor.child_pid()).unwrap_or(0);
    let plain_every = Duration::from_secs_f64(watch.status_interval.clamp(0.01, 86_400.0));
    let mut display = StatusDisplay::new(watch.quiet, plain_every);
    let mut stopper = Stopper::new(bound, monitor.stderr_mute());
    let outcome = monitor.run(|st| {
        display.update(st);
        stopper.on_status(st, pid);
    })?;
    display.finish();
    Ok(Recorded {
        outcome,
        stopped: stopper.reason,
        trace: job.trace.to_path_buf(),
    })
}

/// Decides when the bound is reached and stops the job, harder if it
/// lingers.
/// The last SIGINT sent.
#[derive(Clone, Copy)]
struct Interrupt {
    at: f64,
    /// The steps counted [`REPEAT_INT_S`] after it, and when.
    base: Option<(f64, u64)>,
    /// How many were sent.
    sent: u8,
}

struct Stopper {
    bound: Bound,
    /// What the job prints while it stops (a notebook kernel's teardown
    /// tracebacks) is kept for the report, not shown.
    mute: Option<leakspy_monitor::StderrMute>,
    holder_at: Option<f64>,
    suspected_at: Option<f64>,
    sent: Option<(f64, i32)>,
    last_int: Option<Interrupt>,
    reason: Option<String>,
}

impl Stopper {
    fn new(bound: Bound, mute: Option<leakspy_monitor::StderrMute>) -> Self {
        Stopper {
            bound,
            mute,
            holder_at: None,
            suspected_at: None,
            sent: None,
            last_int: None,
            reason: None,
        }
    }

    fn on_status(&mut self, st: &LiveStatus, pid: i32) {
        if pid <= 0 {
            return;
        }
        if let Some((at, sig)) = self.sent {
            if let (Some(int), libc::SIGINT) = (self.last_int, sig) {
                match int.base {
                    None if st.elapsed - int.at >= REPEAT_INT_S => {
                        self.last_int = Some(Interrupt {
                            base: Some((st.elapsed, st.tree_steps)),
                            ..int
                        });
                    }
                    Some((base_at, steps))
                        if int.sent < MAX_INTS
                            && st.elapsed - base_at >= REPEAT_INT_S
                            && st.tree_steps > steps =>
                    {
                        eprintln!(
                            "leakspy fix: the job went on stepping after SIGINT ({} more steps in {:.0} s): sending it again",
                            st.tree_steps - steps,
                            st.elapsed - base_at
                        );
                        // SAFETY: as below.
                        unsafe {
                            libc::kill(pid, libc::SIGINT);
                        }
                        self.last_int = Some(Interrupt {
                            at: st.elapsed,
                            base: None,
                            sent: int.sent + 1,
                        });
                        return;
                    }
                    _ => {}
                }
            }
            let next = match sig {
                libc::SIGINT if st.elapsed - at >= GRACE_INT_S => libc::SIGTERM,
                libc::SIGTERM if st.elapsed - at >= GRACE_TERM_S => libc::SIGKILL,
                _ => return,
            };
            // SAFETY: kill(2) on our child, which the monitor has not
            // reaped yet (it calls back only while the child runs).
            unsafe {
                libc::kill(pid, next);
            }
            self.sent = Some((st.elapsed, next));
            return;
        }
        let Some(reason) = self.due(st) else {
            return;
        };
        // Before the job's own words about the interrupt (a traceback).
        let clear = if std::io::stderr().is_terminal() {
            "\r\x1b[K"
        } else {
            ""
        };
        let quiet = if self.mute.is_some() {
            " (what it prints while it stops is not shown)"
        } else {
            ""
        };
        eprintln!(
            "{clear}leakspy fix: stopping the job (SIGINT) after {} steps, {:.1} s: {reason}{quiet}",
            st.tree_steps, st.elapsed
        );
        if let Some(m) = &self.mute {
            m.mute();
        }
        self.reason = Some(reason);
        // SAFETY: as above.
        unsafe {
            libc::kill(pid, libc::SIGINT);
        }
        self.sent = Some((st.elapsed, libc::SIGINT));
        self.last_int = Some(Interrupt {
            at: st.elapsed,
            base: None,
            sent: 1,
        });
    }

    /// Why to stop now, if it is time.
    fn due(&mut self, st: &LiveStatus) -> Option<String> {
        match self.bound {
            Bound::Steps { steps, max_s } => {
                if st.tree_steps >= steps {
                    Some(format!("{steps} steps done"))
                } else if st.elapsed >= max_s {
                    Some(format!(
                        "{max_s:.0} s, the most it may take, with {} of {steps} steps done",
                        st.tree_steps
                    ))
                } else {
                    None
                }
            }
            Bound::Duration(d) => (st.elapsed >= d).then(|| format!("{d:.0} s done")),
            Bound::Verdict { max_s } => {
                if st.suspected.is_some() {
                    self.suspected_at.get_or_insert(st.elapsed);
                    if st.holder.is_some() {
                        self.holder_at.get_or_insert(st.elapsed);
                    }
                } else {
                    self.suspected_at = None;
                }
                let since = |t: Option<f64>| t.map_or(0.0, |t| st.elapsed - t);
                // The fixed run goes on for as many steps and is judged
                // against this one's rate: a rate still moving is no
                // yardstick (`SeriesAnalysis::settled`).
                let settled = st.suspected.as_ref().is_some_and(|l| l.settled);
                if st.elapsed >= max_s {
                    Some(if st.suspected.is_some() && !settled {
                        format!("{max_s:.0} s, the most the first run may take (the leak's rate was still moving)")
                    } else {
                        format!("{max_s:.0} s, the most the first run may take")
                    })
                } else if !settled {
                    None
                } else if self.holder_at.is_some() {
                    (since(self.holder_at) >= SETTLE_S)
                        .then(|| "the leak, its rate and who holds it are known".to_string())
                } else {
                    (since(self.suspected_at) >= NO_HOLDER_S)
                        .then(|| format!("a leak, but no holder named in {NO_HOLDER_S:.0} s"))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(elapsed: f64, steps: u64, suspected: bool, holder: bool) -> LiveStatus {
        LiveStatus {
            elapsed,
            tree_steps: steps,
            suspected: suspected.then_some(leakspy_monitor::LiveLeak {
                slope: 1024.0,
                per: "step",
                since: 1.0,
                settled: true,
            }),
            holder: holder.then(|| "Trainer.losses (list)".to_string()),
            ..LiveStatus::default()
        }
    }

    #[test]
    fn the_default_bound_waits_for_the_holder_then_settles() {
        let mut s = Stopper::new(Bound::Verdict { max_s: 180.0 }, None);
        assert_eq!(s.due(&status(5.0, 10, false, false)), None);
        assert_eq!(s.due(&status(10.0, 50, true, false)), None);
        assert_eq!(s.due(&status(12.0, 60, true, true)), None);
        assert_eq!(s.due(&status(20.0, 90, true, true)), None);
        assert!(s.due(&status(24.5, 110, true, true)).is_some());
        // Never past the limit, leak or not.
        let mut s = Stopper::new(Bound::Verdict { max_s: 180.0 }, None);
        assert!(s.due(&status(180.0, 900, false, false)).is_some());
        // A leak whose holder the probe cannot name.
        let mut s = Stopper::new(Bound::Verdict { max_s: 180.0 }, None);
        assert_eq!(s.due(&status(10.0, 50, true, false)), None);
        assert!(s.due(&status(50.5, 250, true, false)).is_some());
    }

    #[test]
    fn the_default_bound_waits_for_the_leaks_rate_to_settle() {
        let moving = |elapsed: f64, steps: u64| {
            let mut st = status(elapsed, steps, true, true);
            if let Some(l) = st.suspected.as_mut() {
                l.settled = false;
            }
            st
        };
        let mut s = Stopper::new(Bound::Verdict { max_s: 180.0 }, None);
        assert_eq!(s.due(&moving(10.0, 50)), None);
        // Holder known long enough, but the rate still drifts.
        assert_eq!(s.due(&moving(40.0, 300)), None);
        // Settled: the holder has been known for long enough already.
        assert!(s
            .due(&status(41.0, 310, true, true))
            .unwrap()
            .contains("rate"));
        // Never past the limit, and it says why the rate is not known.
        let mut s = Stopper::new(Bound::Verdict { max_s: 180.0 }, None);
        assert_eq!(s.due(&moving(10.0, 50)), None);
        assert!(s.due(&moving(180.0, 900)).unwrap().contains("still moving"));
        // No holder: the same wait for the rate.
        let mut s = Stopper::new(Bound::Verdict { max_s: 180.0 }, None);
        let mut st = moving(10.0, 50);
        st.holder = None;
        assert_eq!(s.due(&st), None);
        st.elapsed = 60.0;
        assert_eq!(s.due(&st), None);
        assert!(s.due(&status(61.0, 300, true, false)).is_some());
    }

    #[test]
    fn a_lost_interrupt_is_sent_again_while_the_job_steps_on() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("ints");
        let ready = dir.path().join("ready");
        // A job that catches every SIGINT and goes on; it says when its trap
        // is set (a signal before that would end it, on a slow machine).
        let mut cmd = std::process::Command::new("bash");
        cmd.arg("-c")
            .arg(format!(
                "trap 'echo int >> {}' INT; touch {}; while true; do sleep 0.05; done",
                log.display(),
                ready.display()
            ))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        // A shell cannot trap a signal ignored when it starts, and a test run from a script's
        // background job (`cargo test` under `cmd &`) inherits SIGINT ignored: the job gets it
        // back at its default, as a job started from a terminal has it.
        // SAFETY: signal(2) is async-signal-safe, and nothing else runs in the forked child.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            });
        }
        // Killed however the test ends, so that no loop outlives it.
        struct Job(std::process::Child);
        impl Drop for Job {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let mut job = Job(cmd.spawn().unwrap());
        let child = &mut job.0;
        let pid = child.id() as i32;
        let t0 = std::time::Instant::now();
        while !ready.exists() && t0.elapsed().as_secs() < 60 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(ready.exists(), "the job never started");
        // The count once it reaches `n` (the trap runs when bash gets to it,
        // late on a loaded machine), or what it is after 10 s; then a moment
        // more, so that an extra signal would show.
        let ints = |n: usize| {
            let count = || {
                std::fs::read_to_string(&log)
                    .unwrap_or_default()
                    .lines()
                    .count()
            };
            let t0 = std::time::Instant::now();
            while count() < n && t0.elapsed().as_secs() < 10 {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            std::thread::sleep(std::time::Duration::from_millis(300));
            count()
        };
        let mut s = Stopper::new(
            Bound::Steps {
                steps: 10,
                max_s: 60.0,
            },
            None,
        );
        s.on_status(&status(1.0, 10, false, false), pid);
        assert_eq!(ints(1), 1);
        // Steps counted late (done before the signal): the baseline.
        s.on_status(&status(2.0, 30, false, false), pid);
        s.on_status(&status(4.5, 40, false, false), pid);
        assert_eq!(ints(1), 1);
        // Still stepping well after it: lost, sent again.
        s.on_status(&status(7.0, 45, false, false), pid);
        s.on_status(&status(7.6, 60, false, false), pid);
        assert_eq!(ints(2), 2);
        // Steps that were counted late again, then none (it is shutting
        // down): left to finish.
        s.on_status(&status(10.7, 64, false, false), pid);
        s.on_status(&status(14.0, 64, false, false), pid);
        assert_eq!(ints(2), 2);
        // Then the grace runs out: SIGTERM, which the trap does not catch.
        s.on_status(&status(21.5, 40, false, false), pid);
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGTERM)
        );
    }

    #[test]
    fn steps_and_durations() {
        let mut s = Stopper::new(
            Bound::Steps {
                steps: 100,
                max_s: 60.0,
            },
            None,
        );
        assert_eq!(s.due(&status(5.0, 99, false, false)), None);
        assert_eq!(
            s.due(&status(6.0, 100, false, false)).as_deref(),
            Some("100 steps done")
        );
        assert!(s
            .due(&status(60.0, 40, false, false))
            .unwrap()
            .contains("40 of 100"));
        let mut s = Stopper::new(Bound::Duration(30.0), None);
        assert_eq!(s.due(&status(29.0, 0, true, true)), None);
        assert!(s.due(&status(30.0, 0, false, false)).is_some());
    }
}

//! The run loop: spawn the child, sample its tree on a jittered clock, stream
//! events to the trace, keep live figures, and record how the child ended.
//! Attached to a running job instead (`attached.rs`), the same loop.

mod attached;

pub use attached::{AttachOutcome, DetachReason};

use std::io::Write;
use std::path::PathBuf;
use std::process::Child;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use leakspy_trace::{
    CgroupSample, Event, Exit, Header, Note, NoteLevel, Sample, Step, StepSource, TraceWriter,
};
use regex::Regex;

use crate::cgroup::CgroupSampler;
use crate::child::{signal_name, spawn, ChildExit, SignalForwarder};
use crate::gpu::GpuSampler;
use crate::growing::Growing;
use crate::jitter::{seed_from_env, Jitter};
use crate::live::{LiveEstimator, LiveStatus};
use crate::probe::{Inbound, ProbeConfig, ProbeMessage, ProbeServer};
use crate::proc::{mem_available, ProcSampler};
use crate::relay::StderrTee;
use crate::steps::{spawn_reader, StepMark, StepMatcher};
use crate::MonitorError;

/// How long to wait, after the child ended, for the last lines of its stdout.
const STDOUT_DRAIN: Duration = Duration::from_secs(2);
/// While the live fit suspects a leak and no holder is named, the probe is
/// asked again this often (it keeps its own cooldown and limit).
const BURST_AGAIN_S: f64 = 60.0;
/// Interval between smaps_rollup reads while the tree has several processes:
/// its memory is then fitted on PSS (`Sample::tree_memory`), which needs
/// points as a fit of RSS does; never more often than 20 times what the
/// reads took (a tree of large processes costs the kernel milliseconds per
/// GiB), so the reads stay within 5 % of one core.
const TREE_ROLLUP_EVERY_S: f64 = 0.5;
const ROLLUP_COST_FACTOR: f64 = 20.0;
/// How long a detaching `leakspy attach` waits for the probe's last look.
const LAST_LOOK_WAIT: Duration = Duration::from_secs(10);

pub struct MonitorConfig {
    /// argv of the child.
    pub command: Vec<String>,
    /// Mean interval between samples.
    pub interval: Duration,
    /// Relative jitter of the interval (0.2: ±20 %).
    pub jitter: f64,
    /// Interval between smaps_rollup reads (PSS/USS).
    pub rollup_every: Duration,
    /// Interval between GPU samples.
    pub gpu_every: Duration,
    /// Interval between re-discoveries of the process tree.
    pub tree_every: Duration,
    /// Interval between reads of MemAvailable and the cgroup (samples in
    /// between repeat the last values): /proc/meminfo costs the kernel a walk
    /// over block devices and hugepage pools, too much for 10 Hz.
    pub system_every: Duration,
    /// Pipe the child's stdout and mark a step for each matching line.
    pub step_regex: Option<Regex>,
    /// Where the piped stdout is re-emitted (leakspy's stdout), with `step_regex`.
    pub stdout_sink: Option<Box<dyn Write + Send>>,
    /// Try NVML at all.
    pub gpu: bool,
    /// Inject the in-process probe into Python children.
    pub probe: Option<ProbeConfig>,
    /// leakspy's own binary, to relay the child's stderr through
    /// (`relay.rs`): the child's last stderr lines are then in
    /// [`RunOutcome::stderr_tail`]. None: the child inherits stderr.
    pub stderr_relay: Option<PathBuf>,
    pub seed: u64,
    /// Watch this running process instead of spawning `command` (which is
    /// then its command line, for the header).
    pub attach: Option<crate::AttachConfig>,
    /// The child's working directory (None: leakspy's own). `leakspy fix`
    /// runs the fixed copy of a project in its scratch folder.
    pub cwd: Option<PathBuf>,
    /// Variables set for the child on top of leakspy's environment.
    pub env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    /// Ask the probe for a burst once the job has done this many steps
    /// (the tree's `tree_steps`), whatever the live fit says: `leakspy fix`
    /// looks at the fixed run where the first run's burst looked, so that
    /// "gone" is something the probe saw.
    pub burst_at_steps: Option<u64>,
}

impl MonitorConfig {
    pub fn new(command: Vec<String>) -> Self {
        MonitorConfig {
            command,
            interval: Duration::from_millis(100),
            jitter: 0.2,
            rollup_every: Duration::from_secs(5),
            gpu_every: Duration::from_secs(1),
            tree_every: Duration::from_millis(250),
            system_every: Duration::from_secs(1),
            step_regex: None,
            stdout_sink: None,
            gpu: true,
            probe: Some(ProbeConfig::default()),
            stderr_relay: None,
            seed: seed_from_env(),
            attach: None,
            cwd: None,
            env: Vec::new(),
            burst_at_steps: None,
        }
    }

    /// A monitor of a process that is already running (`leakspy attach`).
    pub fn attach(attach: crate::AttachConfig) -> Self {
        let mut c = MonitorConfig::new(attach.process.cmdline.clone());
        c.attach = Some(attach);
        c
    }
}

/// What a finished run tells its caller.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub exit: Exit,
    /// Interrupts (SIGINT/SIGTERM/SIGHUP) leakspy received during the run.
    pub interrupted: usize,
    pub trace_path: PathBuf,
    pub samples: u64,
    /// First failure to write the trace, if any (the run went on regardless).
    pub write_error: Option<String>,
    /// Notes written to the trace (also useful to print).
    pub notes: Vec<String>,
    /// The child's last lines on stderr; None when it was not relayed
    /// (no `stderr_relay`, or the relay could not start).
    pub stderr_tail: Option<Vec<String>>,
}

/// Lines of the child's stderr kept for [`RunOutcome::stderr_tail`].
const STDERR_TAIL_LINES: usize = 12;

pub struct Monitor {
    config: MonitorConfig,
    writer: TraceWriter,
    start: Instant,
    /// None when attached to a process leakspy did not start.
    child: Option<Child>,
    attached: Option<attached::Attached>,
    pid: u32,
    forwarder: SignalForwarder,
    procs: ProcSampler,
    cgroup: Option<CgroupSampler>,
    oom_kill_start: Option<u64>,
    gpu: Option<GpuSampler>,
    inbox: Option<Receiver<Inbound>>,
    reader: Option<JoinHandle<()>>,
    probe: Option<ProbeServer>,
    probe_pids: Vec<u32>,
    /// Whose private memory grows lately: they, and the process that steps,
    /// get a burst.
    growing: Growing,
    stderr_tee: Option<StderrTee>,
    live: LiveEstimator,
    jitter: Jitter,
    samples: u64,
    next_rollup: f64,
    /// Processes in the tree at the last smaps_rollup read.
    rolled_up_procs: usize,
    next_gpu: f64,
    next_system: f64,
    system: (Option<u64>, Option<CgroupSample>),
    write_error: Option<String>,
    notes: Vec<String>,
    rollup_noted: bool,
    /// When the probe was last asked for a burst (the live fit's suspicion).
    burst_asked: Option<f64>,
    /// The last burst's words and the processes it went to: one whose memory
    /// starts to grow later in the round (a worker too young to tell when it
    /// was asked) gets it then.
    burst_round: (serde_json::Value, Vec<u32>),
    /// The burst asked for at `burst_at_steps` was sent.
    scheduled_burst_sent: bool,
    /// The process whose steps the live figures follow: the first to report
    /// one (the child, unless only its descendants train).
    step_lead: Option<u32>,
    /// Processes that answered a last look.
    looked: Vec<u32>,
    /// Probe events that did not read as their kind.
    malformed_events: usize,
}

impl Monitor {
    /// Spawns the child and writes the trace header. The writer is created by
    /// the caller, so an unwritable trace is reported before anything starts.
    pub fn start(mut config: MonitorConfig, writer: TraceWriter) -> Result<Self, MonitorError> {
        let forwarder = SignalForwarder::install()?;
        let start = Instant::now();
        let started_at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let pipe = config.step_regex.is_some();
        let (tx, inbox) = std::sync::mpsc::channel::<Inbound>();
        // The probe is a help, never a condition: a folder or socket that
        // cannot be made leaves a note and a run without it.
        let mut early_notes = Vec::new();
        let probe = match config.probe.clone() {
            Some(pc) => match ProbeServer::start(pc, start, tx.clone()) {
                Ok(p) => Some(p),
                Err(e) => {
                    early_notes.push(format!(
                        "in-process probe not started (cannot prepare its folder or socket: {e}): memory is sampled from /proc only"
                    ));
                    None
                }
            },
            None => None,
        };
        let mut stderr_tee = None;
        let (mut child, pid) = match &config.attach {
            // Nothing to spawn, and leakspy's signals stay its own: the
            // forwarder only counts them, no child is ever set.
            Some(a) => (None, a.process.pid),
            None => {
                let pythonpath = config
                    .env
                    .iter()
                    .find(|(k, _)| k == "PYTHONPATH")
                    .map(|(_, v)| v.as_os_str());
                let mut env = config.env.clone();
                env.extend(
                    probe
                        .as_ref()
                        .map(|p| p.env(pythonpath))
                        .unwrap_or_default(),
                );
                // Without a relay the child's stderr is inherited, as it
                // would be: nothing lost but the tail in the outcome.
                let relay = config.stderr_relay.as_deref().and_then(|program| {
                    StderrTee::start(program)
                        .map_err(|e| {
                            early_notes.push(format!(
                                "the job's stderr is not relayed ({e}): its last lines are not kept"
                            ))
                        })
                        .ok()
                });
                let (tee, stderr) = relay.unzip();
                let child = spawn(&config.command, pipe, &env, stderr, config.cwd.as_deref())?;
                stderr_tee = tee;
                let pid = child.id();
                forwarder.set_child(pid);
                (Some(child), pid)
            }
        };

        let stdout = child.as_mut().and_then(|c| c.stdout.take());
        let reader = match (config.step_regex.take(), stdout) {
            (Some(re), Some(out)) => {
                let sink = config
                    .stdout_sink
                    .take()
                    .unwrap_or_else(|| Box::new(std::io::stdout()));
                let h = spawn_reader(out, StepMatcher::new(re), start, sink, tx.clone()).map_err(
                    |source| MonitorError::Spawn {
                        program: "stdout reader thread".into(),
                        source,
                    },
                )?;
                Some(h)
            }
            _ => None,
        };
        drop(tx);

        let interval = config.interval.max(Duration::from_millis(1));
        let tree_calls = (config.tree_every.as_secs_f64() / interval.as_secs_f64()).round() as u64;
        let cgroup = CgroupSampler::for_pid(pid);
        let oom_kill_start = cgroup.as_ref().and_then(|c| c.sample()).map(|s| s.oom_kill);
        let jitter = Jitter::new(interval, config.jitter, config.seed);

        let mut header = Header::new(
            config.command.clone(),
            Some(pid),
            started_at,
            interval.as_secs_f64(),
        );
        // The job's own working directory: relative source paths are its.
        header.cwd = match (&config.attach, &config.cwd) {
            (Some(_), _) => std::fs::read_link(format!("/proc/{pid}/cwd")),
            (None, Some(dir)) => std::path::absolute(dir),
            (None, None) => std::env::current_dir(),
        }
        .map(|p| p.display().to_string())
        .unwrap_or_default();
        header.hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        header.attach = config.attach.as_ref().map(attached::header_info);

        let mut m = Monitor {
            writer,
            start,
            child,
            attached: config
                .attach
                .as_ref()
                .map(|a| attached::Attached::new(a, start)),
            pid,
            forwarder,
            procs: ProcSampler::new(pid, tree_calls),
            cgroup,
            oom_kill_start,
            gpu: None,
            inbox: Some(inbox),
            reader,
            probe,
            probe_pids: Vec::new(),
            growing: Growing::default(),
            stderr_tee,
            live: LiveEstimator::default(),
            jitter,
            samples: 0,
            next_rollup: 0.0,
            rolled_up_procs: 0,
            next_gpu: 0.0,
            next_system: 0.0,
            system: (None, None),
            write_error: None,
            notes: Vec::new(),
            rollup_noted: false,
            burst_asked: None,
            burst_round: (serde_json::Value::Null, Vec::new()),
            scheduled_burst_sent: false,
            step_lead: None,
            looked: Vec::new(),
            malformed_events: 0,
            config,
        };
        // A header that cannot be written means no trace at all: stop the
        // child rather than run it unrecorded.
        if let Err(e) = m.writer.write_header(&header) {
            if let Some(c) = m.child.as_mut() {
                let _ = c.kill();
                let _ = c.wait();
            }
            return Err(e.into());
        }
        for n in early_notes {
            m.note(NoteLevel::Warn, n);
        }
        if m.cgroup.is_none() {
            m.note(
                NoteLevel::Info,
                "cgroup memory figures not readable: OOM kills cannot be confirmed, time to OOM uses MemAvailable only".into(),
            );
        }
        if m.config.gpu {
            match GpuSampler::init() {
                Ok(g) => m.gpu = Some(g),
                Err(msg) => m.note(NoteLevel::Info, msg),
            }
        }
        m.inject_probe();
        Ok(m)
    }

    pub fn child_pid(&self) -> u32 {
        self.pid
    }

    /// What stops the job's stderr reaching the user, where it is relayed.
    pub fn stderr_mute(&self) -> Option<crate::relay::StderrMute> {
        self.stderr_tee.as_ref().map(StderrTee::muter)
    }

    pub fn status(&self) -> &LiveStatus {
        self.live.status()
    }

    fn t(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    fn emit(&mut self, event: &Event) {
        if let Err(e) = self.writer.write(event) {
            // Keep monitoring (the child must not suffer from a full disk);
            // the caller reports the first failure at the end.
            self.write_error.get_or_insert_with(|| e.to_string());
        }
    }

    fn note(&mut self, level: NoteLevel, message: String) {
        let t = self.t();
        self.note_at(t, level, message);
    }

    fn note_at(&mut self, t: f64, level: NoteLevel, message: String) {
        self.notes.push(message.clone());
        self.emit(&Event::Note(Note { t, level, message }));
    }

    /// Takes one sample of everything due now.
    fn sample(&mut self) {
        let t = self.t();
        // A process new to the tree is read at once: a forked worker's
        // private memory is counted from its first moments (copy-on-read).
        let rollup = t >= self.next_rollup || self.procs.pids().len() > self.rolled_up_procs;
        let (procs, total) = self.procs.sample(rollup);
        if rollup {
            let every = self.config.rollup_every.as_secs_f64();
            let every = if procs.len() > 1 {
                (ROLLUP_COST_FACTOR * self.procs.rollup_seconds())
                    .clamp(TREE_ROLLUP_EVERY_S, every.max(TREE_ROLLUP_EVERY_S))
            } else {
                every
            };
            self.next_rollup = t + every;
            self.rolled_up_procs = procs.len();
        }
        if rollup && self.procs.rollup_denied() && !self.rollup_noted {
            self.rollup_noted = true;
            self.note(
                NoteLevel::Warn,
                "smaps_rollup not readable for some processes: PSS/USS missing for them".into(),
            );
        }
        if procs.is_empty() {
            return;
        }
        if t >= self.next_system {
            self.next_system = t + self.config.system_every.as_secs_f64();
            self.system = (
                mem_available(),
                self.cgroup.as_ref().and_then(|c| c.sample()),
            );
        }
        let sample = Sample {
            t,
            procs,
            total,
            mem_available: self.system.0,
            cgroup: self.system.1,
        };
        self.live.set_pss_unreadable(self.procs.rollup_denied());
        self.live.on_sample(&sample);
        self.growing.on_sample(&sample);
        self.emit(&Event::Sample(sample));
        self.samples += 1;
        self.ask_for_burst(t);
        self.ask_for_scheduled_burst(t);
        if t >= self.next_gpu {
            self.next_gpu = t + self.config.gpu_every.as_secs_f64();
            if let Some(gpu) = &self.gpu {
                let g = gpu.sample(t, self.procs.pids());
                let used = g
                    .devices
                    .iter()
                    .flat_map(|d| &d.procs)
                    .map(|p| p.used)
                    .sum();
                self.live.on_gpu(used);
                self.emit(&Event::Gpu(g));
            }
        }
    }

    fn record_step(&mut self, mark: StepMark) {
        self.live.on_step(mark.t, mark.step);
        self.live.on_tree_step(mark.step);
        self.emit(&Event::Step(Step {
            t: mark.t,
            step: mark.step,
            source: StepSource::Regex,
            pid: None,
        }));
    }

    fn receive(&mut self, inbound: Inbound) {
        match inbound {
            Inbound::Stdout(mark) => self.record_step(mark),
            Inbound::Probe(msg) => self.record_probe(msg),
        }
    }

    /// Turns one probe message into trace events. The probe's own fields are
    /// kept (raw kinds), with the monitor's clock as `t`.
    fn record_probe(&mut self, msg: ProbeMessage) {
        let ProbeMessage { t, mut message } = msg;
        let pid = message
            .get("pid")
            .and_then(serde_json::Value::as_u64)
            .and_then(|p| u32::try_from(p).ok());
        let kind = message
            .remove("kind")
            .and_then(|k| k.as_str().map(str::to_string))
            .unwrap_or_default();
        message.insert("t".into(), t.into());
        match kind.as_str() {
            "hello" => {
                if let Some(pid) = pid {
                    if !self.probe_pids.contains(&pid) {
                        self.probe_pids.push(pid);
                    }
                    if let Some(rank) = message.get("rank").and_then(serde_json::Value::as_i64) {
                        self.live.on_rank(pid, rank);
                    }
                }
                self.emit(&Event::Probe(message));
            }
            "step" => {
                let Some(step) = message.get("step").and_then(serde_json::Value::as_u64) else {
                    return;
                };
                let source = match message.get("source").and_then(serde_json::Value::as_str) {
                    Some("optimizer") => StepSource::Optimizer,
                    Some("manual") => StepSource::Manual,
                    _ => StepSource::Other,
                };
                // The live rate and fit follow one process: the child
                // itself, or where it never steps (`jupyter execute`,
                // torchrun), the first of its descendants that does (the
                // kernel, a rank). The others' steps are in the trace for
                // the report to sort out.
                let lead = *self.step_lead.get_or_insert(pid.unwrap_or(self.pid));
                if pid == Some(lead) {
                    self.live.on_step(t, step);
                }
                self.live.on_tree_step(step);
                self.emit(&Event::Step(Step {
                    t,
                    step,
                    source,
                    pid,
                }));
            }
            "census" => match typed::<leakspy_trace::Census>(message) {
                Some(c) => {
                    if pid == Some(self.pid) || self.step_lead == pid {
                        self.live.on_bounded(&c.bounded);
                    }
                    self.emit(&Event::Census(c))
                }
                None => self.malformed_probe("census"),
            },
            "suspect" => match typed::<leakspy_trace::Suspect>(message) {
                Some(s) => {
                    if let Some(h) = s.holder.as_ref().filter(|h| h.is_named()) {
                        self.live.on_holder(holder_words(h));
                    }
                    self.emit(&Event::Suspect(s));
                }
                None => self.malformed_probe("suspect"),
            },
            "looked" => {
                if let Some(pid) = pid {
                    self.looked.push(pid);
                }
            }
            "cost" => match typed(message) {
                Some(c) => self.emit(&Event::Cost(c)),
                None => self.malformed_probe("cost"),
            },
            "note" => {
                let level = match message.get("level").and_then(serde_json::Value::as_str) {
                    Some("warn") => NoteLevel::Warn,
                    _ => NoteLevel::Info,
                };
                let text = message
                    .get("message")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default();
                let who = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
                self.note_at(t, level, format!("probe{who}: {text}"));
            }
            _ => {}
        }
    }

    /// A probe message of a known kind that does not read as one: counted
    /// with the malformed lines, never fatal.
    fn malformed_probe(&mut self, kind: &str) {
        self.malformed_events += 1;
        if self.malformed_events == 1 {
            let t = self.t();
            self.note_at(
                t,
                NoteLevel::Warn,
                format!("a probe {kind} message with fields of the wrong type was skipped"),
            );
        }
    }

    /// The live fit suspects a leak: the probe is asked to find out what
    /// grows (a burst of censuses), once, and again every
    /// [`BURST_AGAIN_S`] while no holder is named.
    fn ask_for_burst(&mut self, t: f64) {
        self.burst_latecomers(t);
        let Some(leak) = self.live.suspected().or(self.live.rising()) else {
            return;
        };
        let due = match self.burst_asked {
            None => true,
            Some(at) => self.live.status().holder.is_none() && t - at >= BURST_AGAIN_S,
        };
        let Some(probe) = self.probe.as_ref().filter(|_| due) else {
            return;
        };
        let rate = format!(
            "{}{}/{}",
            if leak.slope >= 0.0 { "+" } else { "" },
            leakspy_stats::fmt_bytes(leak.slope),
            leak.per
        );
        let reason = format!("the monitor's live fit: memory grows {rate}");
        let leak_since = leak.since;
        let msg = serde_json::json!({"kind": "burst", "reason": reason});
        let to: Vec<u32> = self
            .probe_pids
            .iter()
            .copied()
            .filter(|&pid| self.bursts_for(pid) && probe.send_to(pid, &msg))
            .collect();
        let sent = to.len();
        self.burst_round = (msg, to);
        self.burst_asked = Some(t);
        if sent > 0 {
            self.note_at(
                t,
                NoteLevel::Info,
                format!(
                    "live fit: memory grows {rate} since {leak_since:.1} s; the probe was asked to find what grows"
                ),
            );
        }
    }

    /// While a burst round lasts, a process it did not go to whose private
    /// memory has started to grow since gets it too.
    fn burst_latecomers(&mut self, t: f64) {
        if !self.burst_asked.is_some_and(|at| t - at < BURST_AGAIN_S) {
            return;
        }
        let Some(probe) = self.probe.as_ref() else {
            return;
        };
        let (msg, sent) = &mut self.burst_round;
        for &pid in &self.probe_pids {
            if !sent.contains(&pid) && self.growing.grows(pid) && probe.send_to(pid, msg) {
                sent.push(pid);
            }
        }
    }

    /// Whether a burst goes to `pid`: the job's own process and the one that
    /// steps, and any other whose private memory grows (`growing`: a census in a
    /// flat forked worker would copy the pages it shares with its parent).
    fn bursts_for(&self, pid: u32) -> bool {
        pid == self.pid || Some(pid) == self.step_lead || self.growing.grows(pid)
    }

    /// The burst the caller asked for at a number of steps
    /// ([`MonitorConfig::burst_at_steps`]), once.
    fn ask_for_scheduled_burst(&mut self, t: f64) {
        let Some(at) = self.config.burst_at_steps else {
            return;
        };
        if self.scheduled_burst_sent || self.live.status().tree_steps < at {
            return;
        }
        let Some(probe) = self.probe.as_ref() else {
            return;
        };
        let msg = serde_json::json!({
            "kind": "burst",
            "reason": format!("asked for at step {at}, where the run it is compared with had one")
        });
        let sent = self
            .probe_pids
            .iter()
            .filter(|&&pid| self.bursts_for(pid) && probe.send_to(pid, &msg))
            .count();
        if sent > 0 {
            self.scheduled_burst_sent = true;
            self.note_at(
                t,
                NoteLevel::Info,
                format!("the probe was asked for a burst at step {at}, as the compared run had"),
            );
        }
    }

    /// Asks every probe for a last look (a census, and holders for what
    /// rose at its last two comparisons) and records what comes back, for
    /// at most `wait`: the end of an attached recording, while the job
    /// still runs.
    fn last_look(&mut self, wait: Duration) {
        // (A probe without a census has nothing to look with.)
        let Some(probe) = self.probe.as_ref().filter(|p| p.config().census) else {
            return;
        };
        let msg = serde_json::json!({"kind": "look"});
        let asked: Vec<u32> = self
            .probe_pids
            .iter()
            .copied()
            .filter(|&pid| probe.send_to(pid, &msg))
            .collect();
        if asked.is_empty() {
            return;
        }
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline && !asked.iter().all(|p| self.looked.contains(p)) {
            let next = (Instant::now() + Duration::from_millis(100)).min(deadline);
            self.wait_until(next);
            if !self.attached.as_ref().is_some_and(still_alive) {
                break;
            }
            self.sample();
        }
    }

    /// Sleeps until `deadline`, recording step marks and probe messages as
    /// they arrive.
    fn wait_until(&mut self, deadline: Instant) {
        loop {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            let Some(rx) = &self.inbox else {
                std::thread::sleep(deadline - now);
                return;
            };
            match rx.recv_timeout(deadline - now) {
                Ok(inbound) => self.receive(inbound),
                Err(RecvTimeoutError::Timeout) => return,
                Err(RecvTimeoutError::Disconnected) => {
                    self.inbox = None;
                }
            }
        }
    }

    /// The sampling loop, for a spawned child and an attached job alike:
    /// until the child ends, or the attached recording is to stop.
    fn record(&mut self, on_status: &mut impl FnMut(&LiveStatus)) {
        self.sample();
        on_status(self.live.status());
        loop {
            let next = Instant::now() + self.jitter.next_interval();
            let deadline = self.attached_deadline(next);
            self.wait_until(deadline);
            let done = if self.attached.is_some() {
                self.attached_should_stop()
            } else {
                exited_without_reaping(self.pid)
            };
            if done {
                break;
            }
            self.sample();
            on_status(self.live.status());
        }
    }

    /// Runs until the child ends. `on_status` is called after every sample.
    pub fn run(
        mut self,
        mut on_status: impl FnMut(&LiveStatus),
    ) -> Result<RunOutcome, MonitorError> {
        let Some(mut child) = self.child.take() else {
            return Err(MonitorError::Wait(std::io::Error::other(
                "an attached monitor ends with run_attached",
            )));
        };
        self.record(&mut on_status);
        // Stop forwarding before reaping: once reaped, the pid may be reused.
        self.forwarder.set_child(0);
        let status = child.wait().map_err(MonitorError::Wait)?;
        let exit = ChildExit::from(status);
        self.drain_inbox();
        let t = self.t();
        self.live.set_elapsed(t);

        let oom_now = self
            .cgroup
            .as_ref()
            .and_then(|c| c.sample())
            .map(|s| s.oom_kill);
        let oom_killed = matches!((self.oom_kill_start, oom_now), (Some(a), Some(b)) if b > a)
            && exit.signal == Some(libc::SIGKILL);
        if let Some(sig) = exit.signal {
            let name = signal_name(sig);
            let message = if oom_killed {
                format!(
                    "killed by {name} from the OOM killer (cgroup oom_kill counter rose from {} to {})",
                    self.oom_kill_start.unwrap_or(0),
                    oom_now.unwrap_or(0)
                )
            } else if sig == libc::SIGKILL && oom_now.is_none() {
                format!("killed by {name} (possibly the OOM killer; its cgroup counter is not readable)")
            } else if sig == libc::SIGKILL {
                format!("killed by {name} (not by the OOM killer: the cgroup oom_kill counter did not change)")
            } else {
                format!("killed by {name}")
            };
            self.note_at(t, NoteLevel::Warn, message);
        }
        let interrupted = self.forwarder.received();
        if interrupted > 0 {
            self.note_at(
                t,
                NoteLevel::Info,
                format!("leakspy was interrupted ({interrupted} signal(s)); the child was stopped"),
            );
        }
        let exit = Exit {
            t,
            code: exit.code,
            signal: exit.signal,
            status: exit.status,
            oom_killed,
        };
        self.emit(&Event::Exit(exit));
        if let Err(e) = self.writer.sync() {
            self.write_error.get_or_insert_with(|| e.to_string());
        }
        let stderr_tail = self
            .stderr_tee
            .take()
            .map(|t| t.last_lines(STDERR_TAIL_LINES, STDOUT_DRAIN));
        Ok(RunOutcome {
            stderr_tail,
            exit,
            interrupted,
            trace_path: self.writer.path().to_path_buf(),
            samples: self.samples,
            write_error: self.write_error.take(),
            notes: std::mem::take(&mut self.notes),
        })
    }

    /// Records the step lines the child printed and the probe messages it
    /// sent just before it ended. A grandchild holding the pipe or a probe
    /// connection open must not hang leakspy: bounded wait.
    fn drain_inbox(&mut self) {
        let deadline = Instant::now() + STDOUT_DRAIN;
        if let Some(p) = &self.probe {
            if self.attached.is_some() {
                // The job goes on: its connections would never close. The
                // probe switches itself off at its next message.
                p.close_connections();
            } else {
                p.wait_idle(deadline);
            }
        }
        // The accept thread holds a sender: stop it so that the inbox can
        // disconnect once the readers are done.
        let probe = self.probe.take();
        let (connections, malformed, refused) = probe
            .as_ref()
            .map(|p| (p.connections(), p.malformed(), p.refused()))
            .unwrap_or_default();
        if let Some(p) = probe {
            p.shutdown();
        }
        while let Some(rx) = &self.inbox {
            let now = Instant::now();
            if now >= deadline {
                // Take what already arrived, then stop waiting.
                while let Ok(inbound) = self.inbox.as_ref().unwrap().try_recv() {
                    self.receive(inbound);
                }
                break;
            }
            match rx.recv_timeout(deadline - now) {
                Ok(inbound) => self.receive(inbound),
                Err(_) => self.inbox = None,
            }
        }
        if self.inbox.is_none() {
            if let Some(h) = self.reader.take() {
                let _ = h.join();
            }
        }
        if malformed > 0 {
            self.note(
                NoteLevel::Warn,
                format!("{malformed} malformed probe message(s) skipped"),
            );
        }
        if refused > 0 {
            self.note(
                NoteLevel::Warn,
                format!("{refused} probe connection(s) refused: too many processes at once"),
            );
        }
        if self.config.probe.is_some() && connections == 0 && self.attached.is_none() {
            if let Some(why) = probe_absent_reason(&self.config.command) {
                self.note(NoteLevel::Info, why);
            }
        }
    }
}

/// Why a command that the probe did not report from could not load it,
/// when the command says so; `None` for commands that are not Python (no
/// note: they are measured from /proc as usual).
pub fn probe_absent_reason(command: &[String]) -> Option<String> {
    let program = command.first()?;
    let name = std::path::Path::new(program).file_name()?.to_string_lossy();
    if !name.starts_with("python") {
        return None;
    }
    let mut flags = String::new();
    for arg in &command[1..] {
        if arg == "--" || !arg.starts_with('-') || arg.starts_with("--") {
            break;
        }
        // Options with a value end the flag group: `-c CODE`, `-m MOD`, `-W x`, `-X x`.
        let group = &arg[1..];
        for (i, c) in group.char_indices() {
            if matches!(c, 'I' | 'E' | 'S') && !flags.contains(c) {
                flags.push(c);
            }
            if matches!(c, 'c' | 'm' | 'W' | 'X' | 'Q') {
                let _ = i;
                break;
            }
        }
        if group.contains(['c', 'm']) {
            break;
        }
    }
    Some(if flags.is_empty() {
        "the in-process probe did not report: no census, holders or optimizer steps (the interpreter may not import `site`, or it ended before the probe started)".to_string()
    } else {
        let list: Vec<String> = flags.chars().map(|c| format!("-{c}")).collect();
        format!(
            "the in-process probe is off: Python was run with {} (which skips `sitecustomize` or PYTHONPATH); memory is measured from /proc only, with no census, holders or optimizer steps",
            list.join(" ")
        )
    })
}

/// A probe message as its typed event (`None`: not one).
fn typed<T: serde::de::DeserializeOwned>(
    message: serde_json::Map<String, serde_json::Value>,
) -> Option<T> {
    serde_json::from_value(serde_json::Value::Object(message)).ok()
}

/// A holder the probe named, in a few words for the status line.
fn holder_words(h: &leakspy_trace::Holder) -> String {
    let lead = match h.container.as_deref() {
        Some(c) if !c.is_empty() && h.kind != "pyplot" => format!("{} ({c})", h.path),
        _ => h.path.clone(),
    };
    // The others the same objects reached are in the report: the line says
    // there are some.
    match h.also.iter().filter(|a| a.is_named()).count() {
        0 => lead,
        1 => format!("{lead} and 1 more"),
        n => format!("{lead} and {n} more"),
    }
}

fn still_alive(a: &attached::Attached) -> bool {
    crate::attach::still_running(&a.config.process)
}

/// Whether the child has ended, leaving it unreaped (so its pid stays ours).
fn exited_without_reaping(pid: u32) -> bool {
    // SAFETY: waitid writes only into the zeroed siginfo we own.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let rc = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        // rc < 0: not our child any more (already reaped): treat as ended.
        rc < 0 || info.si_pid() != 0
    }
}

#[cfg(test)]
mod tests {
    use super::{holder_words, probe_absent_reason};

    #[test]
    fn the_live_line_counts_the_other_holders() {
        let h: leakspy_trace::Holder = serde_json::from_str(
            r#"{"kind":"attribute","path":"T.losses","container":"list",
                "also":[{"kind":"attribute","path":"N.M2"},{"kind":"attribute","path":"T.total"}]}"#,
        )
        .unwrap();
        assert_eq!(holder_words(&h), "T.losses (list) and 2 more");
    }

    fn v(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn python_flags_that_skip_the_probe_are_named() {
        let r = probe_absent_reason(&v(&["python3", "-I", "t.py"])).unwrap();
        assert!(r.contains("with -I "), "{r}");
        let r = probe_absent_reason(&v(&["/usr/bin/python3.11", "-uES", "t.py"])).unwrap();
        assert!(r.contains("-E -S"), "{r}");
        // Flags of the script, not of Python.
        let r = probe_absent_reason(&v(&["python", "t.py", "-I"])).unwrap();
        assert!(r.contains("did not report"), "{r}");
        let r = probe_absent_reason(&v(&["python", "-c", "x", "-S"])).unwrap();
        assert!(r.contains("did not report"), "{r}");
        assert_eq!(probe_absent_reason(&v(&["sh", "-c", "true"])), None);
    }
}

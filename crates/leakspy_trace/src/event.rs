//! Event types of trace format v1. All sizes are bytes; `t` is seconds since
//! the start of the run. Optional fields default when absent so that traces
//! written by other producers (the probe, older writers) still read.

use serde::{Deserialize, Serialize};

/// Value of the header's `format` field.
pub const FORMAT_NAME: &str = "leakspy-trace";
/// The trace format version this crate writes and the newest it reads.
pub const FORMAT_VERSION: u32 = 1;

/// One line of a trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Event {
    Header(Header),
    Sample(Sample),
    Gpu(GpuSample),
    Step(Step),
    /// A process where the in-process probe started (its `hello`): pid,
    /// Python version, rank. Kept raw (without `kind`) like the other probe
    /// events, so the probe can add fields without a format change.
    Probe(serde_json::Map<String, serde_json::Value>),
    /// Object census of one process at a step boundary (the probe).
    Census(crate::Census),
    /// Something the probe saw grow, with its holder and creation site.
    Suspect(crate::Suspect),
    /// The probe's own accounting in one process: the seconds its work took
    /// on the job's threads (`probe_s`) against the seconds since it started
    /// (`wall_s`), after each census and at exit.
    Cost(crate::Cost),
    Note(Note),
    Exit(Exit),
    /// `leakspy attach` stopped recording a job that it did not start.
    Detach(Detach),
    /// What `check` said of the sources the probe named, when the run ended.
    Static(crate::StaticRecord),
}

impl Event {
    /// Seconds since start, for every kind (raw kinds read their `t` field).
    pub fn t(&self) -> f64 {
        match self {
            Event::Header(h) => h.t,
            Event::Sample(s) => s.t,
            Event::Gpu(g) => g.t,
            Event::Step(s) => s.t,
            Event::Probe(m) => m
                .get("t")
                .and_then(serde_json::Value::as_f64)
                .unwrap_or(0.0),
            Event::Census(c) => c.t,
            Event::Suspect(s) => s.t,
            Event::Cost(c) => c.t,
            Event::Note(n) => n.t,
            Event::Exit(e) => e.t,
            Event::Detach(d) => d.t,
            Event::Static(s) => s.t,
        }
    }

    /// The `kind` string of this event as written in the trace.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Header(_) => "header",
            Event::Sample(_) => "sample",
            Event::Gpu(_) => "gpu",
            Event::Step(_) => "step",
            Event::Probe(_) => "probe",
            Event::Census(_) => "census",
            Event::Suspect(_) => "suspect",
            Event::Cost(_) => "cost",
            Event::Note(_) => "note",
            Event::Exit(_) => "exit",
            Event::Detach(_) => "detach",
            Event::Static(_) => "static",
        }
    }

    /// Whether `kind` is a kind this version of the format knows.
    pub fn is_known_kind(kind: &str) -> bool {
        matches!(
            kind,
            "header"
                | "sample"
                | "gpu"
                | "step"
                | "probe"
                | "census"
                | "suspect"
                | "cost"
                | "note"
                | "exit"
                | "detach"
                | "static"
        )
    }
}

/// First line of every trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Always [`FORMAT_NAME`].
    pub format: String,
    pub version: u32,
    #[serde(default)]
    pub leakspy_version: String,
    #[serde(default)]
    pub t: f64,
    /// Unix time (seconds) when the run started.
    #[serde(default)]
    pub started_at: f64,
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub cwd: String,
    #[serde(default)]
    pub hostname: String,
    /// Pid of the child (the root of the sampled process tree).
    #[serde(default)]
    pub pid: Option<u32>,
    /// Nominal interval between samples (the real one is jittered).
    #[serde(default)]
    pub sample_interval_s: f64,
    /// Set when `leakspy attach` recorded a process that was already running
    /// (`command` is then its command line and `pid` its pid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach: Option<AttachInfo>,
}

/// The process `leakspy attach` joined, as /proc showed it then.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttachInfo {
    pub pid: u32,
    /// `/proc/PID/cmdline`.
    #[serde(default)]
    pub cmdline: Vec<String>,
    /// `/proc/PID/exe`, when readable.
    #[serde(default)]
    pub exe: Option<String>,
    /// Unix time (seconds) when the process started.
    #[serde(default)]
    pub process_started_at: Option<f64>,
    /// `major.minor` of the process's CPython, when it is one.
    #[serde(default)]
    pub python: Option<String>,
}

/// The end of an attached recording. The job's own exit status is not
/// visible to a process that is not its parent, so there is no `exit` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Detach {
    pub t: f64,
    /// `duration` (`--duration` elapsed), `interrupted` (leakspy got
    /// SIGINT/SIGTERM/SIGHUP) or `ended` (the job ended); other values may
    /// come from newer writers.
    pub reason: String,
    /// Whether the job was still running when recording stopped.
    #[serde(default)]
    pub alive: bool,
}

impl Header {
    /// A v1 header with the fixed fields filled in.
    pub fn new(command: Vec<String>, pid: Option<u32>, started_at: f64, interval: f64) -> Self {
        Header {
            format: FORMAT_NAME.to_string(),
            version: FORMAT_VERSION,
            leakspy_version: env!("CARGO_PKG_VERSION").to_string(),
            t: 0.0,
            started_at,
            command,
            cwd: String::new(),
            hostname: String::new(),
            pid,
            sample_interval_s: interval,
            attach: None,
        }
    }
}

/// Memory of the sampled process tree at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub t: f64,
    #[serde(default)]
    pub procs: Vec<ProcSample>,
    pub total: MemTotals,
    /// `MemAvailable` of /proc/meminfo.
    #[serde(default)]
    pub mem_available: Option<u64>,
    /// The child's cgroup (v2), when readable.
    #[serde(default)]
    pub cgroup: Option<CgroupSample>,
}

/// The tree's memory as leakspy fits it, sample after sample: RSS while
/// one process has run; once several have, PSS (each shared page split
/// among the processes that map it), so the pages a forked worker shares
/// with its parent count once and the copies made of them count as they
/// happen; file pages count whole ([`MemTotals::tree_pss`]). PSS is read every few samples; in between, a sample of the same
/// processes is its RSS less the part of it the last read found shared.
/// With smaps_rollup denied (`pss_unreadable`), summed RSS is all there is.
#[derive(Debug, Clone, Default)]
pub struct TreeMemory {
    pss_unreadable: bool,
    several: bool,
    /// The pids of the last sample with PSS, and its RSS less its PSS.
    gap: Option<(Vec<u32>, i64)>,
}

impl TreeMemory {
    /// `several`: judge on PSS from the first sample (a trace known to
    /// have had several processes), not only once they appear.
    pub fn new(pss_unreadable: bool, several: bool) -> Self {
        TreeMemory {
            pss_unreadable,
            several,
            gap: None,
        }
    }

    pub fn set_pss_unreadable(&mut self, unreadable: bool) {
        self.pss_unreadable = unreadable;
    }

    /// The tree's memory at this sample; `None` when it cannot be told
    /// (PSS not read, and the processes changed since it was).
    pub fn observe(&mut self, s: &Sample) -> Option<u64> {
        self.several |= s.procs.len() > 1;
        let pids = || s.procs.iter().map(|p| p.pid).collect::<Vec<u32>>();
        if let Some(pss) = s.total.tree_pss() {
            self.gap = Some((pids(), s.total.rss as i64 - pss as i64));
        }
        if !self.several || self.pss_unreadable {
            return Some(s.total.rss);
        }
        if let Some(pss) = s.total.tree_pss() {
            return Some(pss);
        }
        match &self.gap {
            Some((seen, gap)) if *seen == pids() => Some((s.total.rss as i64 - gap).max(0) as u64),
            _ => None,
        }
    }
}

/// One process of the tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcSample {
    pub pid: u32,
    #[serde(default)]
    pub ppid: u32,
    #[serde(default)]
    pub name: String,
    pub rss: u64,
    #[serde(default)]
    pub anon: u64,
    #[serde(default)]
    pub swap: u64,
    /// From smaps_rollup, which is read rarely: null in most samples.
    #[serde(default)]
    pub pss: Option<u64>,
    #[serde(default)]
    pub uss: Option<u64>,
    /// `Pss_File` of smaps_rollup and `RssFile` of status, read with `pss`
    /// (null otherwise, and in traces written before them): the share of
    /// file pages moves whenever any process on the machine maps or unmaps
    /// the same files (another torch job starting), so the tree's memory
    /// counts its file pages whole instead (`TreeMemory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pss_file: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_file: Option<u64>,
    /// CPU seconds (user and system) the process has used since it started,
    /// from `/proc/PID/stat`: what a step costs whatever else the machine runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_s: Option<f64>,
}

/// Sums over the processes of a sample. `pss`/`uss` are present only when
/// they were read for every process of that sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MemTotals {
    pub rss: u64,
    #[serde(default)]
    pub anon: u64,
    #[serde(default)]
    pub swap: u64,
    #[serde(default)]
    pub pss: Option<u64>,
    #[serde(default)]
    pub uss: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pss_file: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_file: Option<u64>,
}

impl MemTotals {
    /// The tree's proportional memory as leakspy fits it: PSS with the file
    /// pages counted whole in each process (`Pss - Pss_File + RssFile`).
    /// Anonymous and shared-memory pages stay split among the processes
    /// that map them, which are this tree's own (a forked worker and its
    /// parent); file pages (libtorch's code, a memory-mapped data set) are
    /// also mapped by processes outside the tree, whose coming and going
    /// would otherwise move this tree's figure by hundreds of MiB. Plain
    /// PSS where the file figures were not read.
    pub fn tree_pss(&self) -> Option<u64> {
        let pss = self.pss?;
        Some(match (self.pss_file, self.rss_file) {
            (Some(pf), Some(rf)) => (pss + rf).saturating_sub(pf),
            _ => pss,
        })
    }
}

/// cgroup v2 memory figures of the child's cgroup.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CgroupSample {
    /// `memory.max`; null when "max" (no limit).
    #[serde(default)]
    pub limit: Option<u64>,
    /// `memory.current`.
    pub usage: u64,
    /// `oom_kill` counter of `memory.events`.
    #[serde(default)]
    pub oom_kill: u64,
}

/// GPU memory of every visible device at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    pub t: f64,
    #[serde(default)]
    pub devices: Vec<GpuDevice>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuDevice {
    pub index: u32,
    #[serde(default)]
    pub name: String,
    pub used: u64,
    pub total: u64,
    /// Processes of the sampled tree that use this device.
    #[serde(default)]
    pub procs: Vec<GpuProc>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GpuProc {
    pub pid: u32,
    pub used: u64,
}

/// A unit of work done (a training step).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub t: f64,
    pub step: u64,
    #[serde(default)]
    pub source: StepSource,
    #[serde(default)]
    pub pid: Option<u32>,
}

/// Where a step marker came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepSource {
    /// An optimizer post-hook of the in-process probe.
    Optimizer,
    /// `leakspy.step()` called by the user.
    #[default]
    Manual,
    /// A line of the child's stdout that matched `--step-regex`.
    Regex,
    /// A source this version does not know.
    #[serde(other)]
    Other,
}

/// Something the reader of a report should know (a sampler that could not run, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Note {
    pub t: f64,
    #[serde(default)]
    pub level: NoteLevel,
    pub message: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NoteLevel {
    #[default]
    Info,
    Warn,
    #[serde(other)]
    Other,
}

/// How the child ended. Absent from a trace whose monitor died too.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Exit {
    pub t: f64,
    /// Exit code when the child exited normally.
    #[serde(default)]
    pub code: Option<i32>,
    /// Signal number when a signal killed the child.
    #[serde(default)]
    pub signal: Option<i32>,
    /// Shell-style status: `code`, or 128 + `signal`.
    pub status: i32,
    /// Whether the cgroup's oom_kill counter rose during the run.
    #[serde(default)]
    pub oom_killed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(rss: u64, pss: Option<(u64, u64, u64)>) -> Sample {
        let proc = |pid| ProcSample {
            pid,
            ppid: 1,
            name: "python".into(),
            rss: rss / 2,
            anon: 0,
            swap: 0,
            pss: None,
            uss: None,
            pss_file: None,
            rss_file: None,
            cpu_s: None,
        };
        Sample {
            t: 0.0,
            procs: vec![proc(10), proc(11)],
            total: MemTotals {
                rss,
                pss: pss.map(|p| p.0),
                pss_file: pss.map(|p| p.1),
                rss_file: pss.map(|p| p.2),
                ..Default::default()
            },
            mem_available: None,
            cgroup: None,
        }
    }

    #[test]
    fn file_pages_count_whole_and_the_gap_carries_to_unread_samples() {
        let mut tree = TreeMemory::new(false, true);
        // PSS 700 of which 100 is the file pages' share; the tree maps 300
        // of file pages: 900 counted, 100 of RSS 1000 shared within it.
        assert_eq!(
            tree.observe(&sample(1000, Some((700, 100, 300)))),
            Some(900)
        );
        assert_eq!(tree.observe(&sample(1050, None)), Some(950));
        // Without the file figures (an older trace, an older kernel): PSS.
        let mut old = TreeMemory::new(false, true);
        assert_eq!(old.observe(&sample(1000, Some((700, 0, 0)))), Some(700));
        let plain = MemTotals {
            pss: Some(700),
            ..Default::default()
        };
        assert_eq!(plain.tree_pss(), Some(700));
    }
}

//! The diagnosis: what every renderer shows and `--report-json` writes.

use leakspy_stats::{Shape, Verdict};
use serde::Serialize;

/// Knobs of [`crate::diagnose`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiagnoseOptions {
    /// Confidence level of the slope intervals.
    pub confidence: f64,
    /// Fit per step when the trace has at least this many step events.
    pub min_steps: usize,
    /// Processes analysed on their own (the biggest by peak RSS).
    pub max_processes: usize,
    /// Smallest growth over the analysed span that can be a leak, in bytes.
    pub min_growth_bytes: u64,
    /// Same, relative to the memory level (0.02 = 2 %).
    pub min_growth_rel: f64,
}

impl Default for DiagnoseOptions {
    fn default() -> Self {
        DiagnoseOptions {
            confidence: 0.95,
            min_steps: 20,
            max_processes: 3,
            min_growth_bytes: 4 * 1024 * 1024,
            min_growth_rel: 0.02,
        }
    }
}

/// What the x axis of the fits counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    /// Training steps (enough step events were recorded).
    Step,
    /// Seconds since the start.
    Second,
}

impl Basis {
    /// `"step"` or `"s"`, as written after a slash.
    pub fn unit(self) -> &'static str {
        match self {
            Basis::Step => "step",
            Basis::Second => "s",
        }
    }
}

/// A fitted growth rate with its interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Growth {
    /// Bytes per unit.
    pub slope: f64,
    pub lo: f64,
    pub hi: f64,
    /// `"bytes/step"` or `"bytes/s"`.
    pub unit: String,
    pub confidence: f64,
    pub r2: f64,
    /// Window minima fitted.
    pub n: usize,
}

impl Growth {
    /// A fitted trend of bytes per `unit` (`step`, `s`).
    pub fn of_bytes(t: &leakspy_stats::Trend, unit: &str) -> Self {
        Growth {
            slope: t.slope,
            lo: t.lo,
            hi: t.hi,
            unit: format!("bytes/{unit}"),
            confidence: t.confidence,
            r2: t.r2,
            n: t.n,
        }
    }
}

/// The fitted line, for drawing: `y = intercept + slope * x` over `x_start..x_end`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Fit {
    pub x_start: f64,
    pub x_end: f64,
    pub intercept: f64,
    pub slope: f64,
}

/// One analysed memory series (total RSS, anon, a process, a GPU).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeriesReport {
    /// Stable key: `total.rss`, `total.anon`, `proc.<pid>.rss`, `gpu.<index>.used`.
    pub key: String,
    /// What it is, in words.
    pub what: String,
    pub verdict: Verdict,
    pub shape: Shape,
    pub shape_text: String,
    pub basis: Basis,
    pub per_step: Option<Growth>,
    pub per_second: Option<Growth>,
    /// The fit the verdict rests on (in `basis` units).
    pub fit: Option<Fit>,
    /// End of the trimmed warm-up (in `basis` units).
    pub warmup_end: Option<f64>,
    /// Rise during the warm-up, bytes.
    pub warmup_rise: f64,
    /// Where it went flat (in `basis` units).
    pub flat_since: Option<f64>,
    /// Fitted growth over the analysed span, bytes.
    pub growth: f64,
    /// Growth needed to call a leak, bytes.
    pub threshold: f64,
    /// First, peak and last sample, bytes.
    pub first: f64,
    pub peak: f64,
    pub last: f64,
    pub evidence: Vec<String>,
    /// Set when the diagnosis found this series leaking although its own
    /// fit is not a leak: what made it one (`the probe's census`, `the OOM
    /// kill`). Renderers show the diagnosis's verdict with this, never a
    /// contradiction.
    pub leak_by: Option<String>,
    /// Set when the diagnosis found this series no leak although its own fit
    /// is one: its verdict with what explains the growth (`a bounded buffer
    /// filling`). Renderers show the diagnosis's verdict with this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explained: Option<Explained>,
}

/// Growth explained by something that stops (a bounded buffer filling).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explained {
    pub verdict: Verdict,
    pub by: String,
}

impl SeriesReport {
    /// The verdict the diagnosis reached on this series.
    pub fn diagnosed(&self) -> Verdict {
        if self.leak_by.is_some() {
            Verdict::Leak
        } else if let Some(e) = &self.explained {
            e.verdict
        } else {
            self.verdict
        }
    }
}

/// Something that leaks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// What grows.
    pub what: String,
    /// Key of the series in `Diagnosis::series`.
    pub series: String,
    pub per_step: Option<Growth>,
    pub per_second: Option<Growth>,
    pub evidence: Vec<String>,
    /// Who holds it (owner path); filled by the in-process probe.
    pub holder: Option<serde_json::Value>,
    /// Where it is made (file:line); filled by the probe and `check`.
    pub location: Option<serde_json::Value>,
    /// What grows inside the process with it (the probe), in one line.
    pub grows: Option<String>,
    /// Findings of `check` on the lines the probe named.
    pub static_findings: Option<serde_json::Value>,
}

impl Finding {
    /// A leak of one memory series, told by `evidence`; the probe and
    /// `check` fill in the rest.
    pub fn of_series(r: &SeriesReport, evidence: Vec<String>) -> Self {
        Finding {
            what: r.what.clone(),
            series: r.key.clone(),
            per_step: r.per_step.clone(),
            per_second: r.per_second.clone(),
            evidence,
            holder: None,
            location: None,
            grows: None,
            static_findings: None,
        }
    }
}

/// A mechanism that makes memory grow without a Python object growing in
/// the process that pays for it (processes piling up, copy-on-read, the
/// allocator holding freed memory, CUDA's caching allocator), told by what
/// was measured, with its fix and how far it can go.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mechanism {
    pub kind: MechanismKind,
    /// One line.
    pub summary: String,
    pub evidence: Vec<String>,
    /// What to change.
    pub fix: Option<String>,
    /// The most it can add, bytes, when it is bounded.
    pub bound: Option<f64>,
    /// The processes it concerns.
    pub pids: Vec<u32>,
    /// Where it starts in the job's code, when the probe saw it (the line
    /// that started the piled-up processes).
    pub location: Option<leakspy_trace::Location>,
}

/// What the mechanisms section is about, for its heading.
pub(crate) fn mechanisms_topic(mechanisms: &[Mechanism]) -> &'static str {
    if mechanisms
        .iter()
        .any(|m| m.kind == MechanismKind::BoundedFill)
    {
        "bounded buffers, processes, allocators"
    } else {
        "processes, allocators"
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MechanismKind {
    ProcessesPileUp,
    CopyOnRead,
    /// glibc's malloc keeping freed memory (arenas, fragmentation).
    Allocator,
    /// torch's CUDA caching allocator: reserved grows, allocated does not.
    CudaCachingAllocator,
    /// A bounded container (`deque(maxlen=...)`) filling: it stops when full.
    BoundedFill,
}

/// How the run ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExitInfo {
    /// True when the trace has an exit event.
    pub recorded: bool,
    pub code: Option<i32>,
    pub signal: Option<i32>,
    pub status: Option<i32>,
    pub oom_killed: bool,
    /// The child was killed by a signal, or the trace was cut.
    pub killed: bool,
    /// One line for people.
    pub message: String,
}

/// Steps per second over the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThroughputReport {
    pub start_rate: f64,
    pub end_rate: f64,
    /// `(end - start) / start`.
    pub change: f64,
    pub falling: bool,
    /// Fitted change of steps/s per second, with its interval.
    pub slope: f64,
    pub lo: f64,
    pub hi: f64,
    /// Seconds where the fitted rates start and end.
    pub t_start: f64,
    pub t_end: f64,
}

/// What the in-process probe did during the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProbeInfo {
    /// Processes where the probe started (pids).
    pub processes: Vec<u32>,
    pub censuses: usize,
    pub suspects: usize,
    /// Step events counted by the optimizer hook.
    pub optimizer_steps: usize,
    /// The probe's own accounting, from its last `cost` event in each
    /// process; `None` when no process reported one.
    pub cost: Option<ProbeCost>,
}

/// What the probe's work took from the job, by its own clock.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeCost {
    /// Seconds of probe work on the job's threads, all processes together.
    pub probe_s: f64,
    /// The largest share of one process's own time (probe seconds over the
    /// process's seconds without them): the slowdown the probe caused there.
    pub share: f64,
    /// The census budget the probe ran with (a share of the job's time).
    pub budget: Option<f64>,
    /// Censuses the probe took, all processes together (its own count: the
    /// reader thins census events of long traces).
    pub censuses: u64,
    /// `probe_s` by kind of work (`census`, `holders`, `sites`, `after`:
    /// what the steps after a census lost, `messages`, `steps`: the step
    /// hook, `last_look`), all processes together.
    pub parts: std::collections::BTreeMap<String, f64>,
    /// Bursts the monitor asked for (memory grew as a leak does), and the
    /// probe work done during them (part of `probe_s`).
    pub bursts: u64,
    pub burst_s: f64,
    /// The share of the job's time a burst may take.
    pub burst_budget: Option<f64>,
}

impl ProbeCost {
    /// One sentence for the reports.
    pub fn describe(&self) -> String {
        let censuses = self.censuses;
        let budget = self
            .budget
            .map(|b| format!(" (budget {})", fmt_percent(b)))
            .unwrap_or_default();
        let mut s = format!(
            "{censuses} census{}, {:.2} s of probe work on the job's threads: {} of the job's own time{budget}",
            if censuses == 1 { "" } else { "es" },
            self.probe_s,
            fmt_percent(self.share),
        );
        if self.bursts > 0 {
            s.push_str(&format!(
                "; {:.2} s of it in {} burst{} after memory grew like a leak (up to {} while it lasts)",
                self.burst_s,
                self.bursts,
                if self.bursts == 1 { "" } else { "s" },
                fmt_percent(self.burst_budget.unwrap_or(0.0))
            ));
        }
        s
    }

    /// What each kind of work cost, largest first ("census 0.41 s, holder
    /// search 0.12 s, ...").
    pub fn parts_text(&self) -> Option<String> {
        let mut parts: Vec<(&str, f64)> = self
            .parts
            .iter()
            .filter(|(_, v)| **v >= 0.0005)
            .map(|(k, v)| (part_name(k), *v))
            .collect();
        if parts.is_empty() {
            return None;
        }
        parts.sort_by(|a, b| b.1.total_cmp(&a.1));
        Some(
            parts
                .iter()
                .map(|(k, v)| format!("{k} {v:.2} s"))
                .collect::<Vec<_>>()
                .join(", "),
        )
    }
}

fn part_name(k: &str) -> &str {
    match k {
        "census" => "censuses",
        "holders" => "holder searches",
        "sites" => "creation sites",
        "after" => "steps slowed after censuses",
        "messages" => "step messages",
        "steps" => "step hook",
        "last_look" => "last look",
        other => other,
    }
}

fn fmt_percent(x: f64) -> String {
    let p = x * 100.0;
    if p < 10.0 {
        format!("{p:.2} %")
    } else {
        format!("{p:.0} %")
    }
}

/// Facts about the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunInfo {
    pub command: Vec<String>,
    /// The job's working directory: source paths are shown relative to it.
    pub cwd: String,
    pub duration_s: f64,
    pub samples: usize,
    pub steps: usize,
    pub sample_interval_s: f64,
    pub processes: usize,
    pub peak_rss: u64,
    pub last_rss: u64,
    pub trace_warnings: Vec<String>,
}

/// leakspy's answer for a trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnosis {
    /// `"leak"`, `"no-leak"` or `"inconclusive"`.
    pub verdict: Verdict,
    /// The verdict in one sentence.
    pub summary: String,
    /// Whether the fits are per step or per second.
    pub basis: Basis,
    /// Key of the series the headline growth comes from.
    pub headline: String,
    /// Headline growth per step (null without step events).
    pub growth_per_step: Option<Growth>,
    /// Headline growth per second.
    pub growth_per_second: Option<Growth>,
    pub findings: Vec<Finding>,
    /// What grows inside the processes (the in-process probe's censuses),
    /// grouped by holder, most telling first.
    pub growth: Vec<crate::census::GrowthGroup>,
    /// What the in-process probe did.
    pub probe: ProbeInfo,
    /// What is not a leak and why, and what the reader should know.
    pub notes: Vec<String>,
    /// Shortcut for `exit.killed`.
    pub killed: bool,
    pub exit: ExitInfo,
    pub throughput: Option<ThroughputReport>,
    pub run: RunInfo,
    pub series: Vec<SeriesReport>,
    /// Each rank of a torchrun/DDP job fitted on its own (empty without ranks).
    pub ranks: Vec<crate::ranks::RankRow>,
    /// A leak whose holder the probe could not name: why, and what to do.
    pub no_holder: Option<String>,
    /// What makes memory grow outside Python objects, by its evidence.
    pub mechanisms: Vec<Mechanism>,
    /// What the probe saw grow under a no-leak verdict: too little for
    /// memory to grow with it (said in `notes`, not in `growth`). `diff`
    /// must not call such a holder gone.
    #[serde(skip)]
    pub quiet: Vec<crate::census::GrowthGroup>,
    /// The census counts that rose over the run, first look to last, by
    /// series key (`type:builtins.list`: (23840, 34251)), whether or not a
    /// fit calls it growth: `diff` calls a holder gone only where what it
    /// held was counted and did not rise.
    #[serde(skip)]
    pub risen: std::collections::BTreeMap<String, (f64, f64)>,
    /// glibc malloc's memory in use, fitted over the probe's censuses: what `diff` compares
    /// when the run after grows in memory the allocator keeps free.
    #[serde(skip)]
    pub in_use: Option<InUse>,
}

/// The memory glibc's malloc holds allocated in one process (`mallinfo2`: `uordblks` and
/// `hblkhd`), fitted over the census readings of it.
#[derive(Debug, Clone, PartialEq)]
pub struct InUse {
    pub pid: u32,
    pub growth: Growth,
    /// Census readings fitted.
    pub points: usize,
    /// The readings: (step, or seconds since the start; bytes).
    pub readings: Vec<(f64, f64)>,
    /// The fitted line's value at x = 0, bytes.
    pub intercept: f64,
}

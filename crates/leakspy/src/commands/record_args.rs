//! The options `run` and `attach` share: where the recording goes, how often
//! it samples, what the probe may do, and what is reported at the end.

use std::path::PathBuf;

use clap::Args;

#[derive(Args)]
pub struct RecordArgs {
    /// Trace file to write [default: leakspy-runs/<YYYYmmdd-HHMMSS>-<command>.jsonl].
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Mean seconds between memory samples (jittered ±20 %).
    #[arg(long, value_name = "SECS", default_value_t = 0.1)]
    pub interval: f64,
    /// No status line (the diagnosis is still printed).
    #[arg(long, short)]
    pub quiet: bool,
    /// Also write the diagnosis as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub report_json: Option<PathBuf>,
    /// Also write a self-contained HTML report to FILE.
    #[arg(long, value_name = "FILE")]
    pub report_html: Option<PathBuf>,
    /// Exit 1 when a leak is found, for CI (`run`: when the command itself exited 0).
    #[arg(long)]
    pub fail_on_leak: bool,
    /// Leave the in-process probe out (memory from /proc only; for `attach`,
    /// no permission to trace the job is needed then).
    #[arg(long)]
    pub no_probe: bool,
    /// Fraction of the job's time the probe's work may use (a short burst
    /// takes more when memory grows as a leak does: docs/probe.md).
    #[arg(long, value_name = "FRACTION", default_value_t = leakspy_monitor::DEFAULT_PROBE_BUDGET)]
    pub probe_budget: f64,
    /// Steps only from the probe: no object census, holders or creation sites.
    #[arg(long)]
    pub no_census: bool,
    /// Seconds between status lines when stderr is not a terminal (logs).
    #[arg(long, value_name = "SECS", default_value_t = 10.0, hide = true)]
    pub status_interval: f64,
}

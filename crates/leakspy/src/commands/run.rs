//! `leakspy run [OPTIONS] -- CMD [ARGS...]`: run a command under the monitor,
//! show a live status line, and end with a diagnosis.

mod status;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use leakspy_monitor::{LiveStatus, Monitor, MonitorConfig, MonitorError, RunOutcome};
use leakspy_report::{diagnose, render_html, render_json, render_text, DiagnoseOptions};
use leakspy_trace::TraceWriter;

use crate::{EXIT_ERROR, EXIT_FINDINGS};

/// Folder of the default trace files, relative to the working directory.
const RUNS_DIR: &str = "leakspy-runs";
/// Terminal redraws are capped at this rate: faster is flicker, not information.
const REDRAW_EVERY: Duration = Duration::from_millis(250);

#[derive(Args)]
#[command(
    override_usage = "leakspy run [OPTIONS] -- CMD [ARGS...]",
    after_help = "Exit status: the command's own status (128+N when signal N killed it; \
137 after an OOM kill); 1 with --fail-on-leak when a leak is found and the command exited 0; \
2 when leakspy itself fails (command not found, trace not writable)."
)]
pub struct RunArgs {
    #[command(flatten)]
    pub record: super::record_args::RecordArgs,
    /// Mark a step for every line of the command's stdout that matches REGEX
    /// (its first capture group, when a number, is the step number). The
    /// command's stdout is then piped through leakspy, unchanged.
    #[arg(long, value_name = "REGEX")]
    pub step_regex: Option<String>,
    /// Serve OpenMetrics for Prometheus at http://ADDR/metrics while the job
    /// runs (memory per process, growth per step, verdict). ADDR is HOST:PORT
    /// or PORT; without a value, 127.0.0.1:9464. Loopback unless you name
    /// another address.
    #[arg(
        long,
        value_name = "ADDR",
        num_args = 0..=1,
        default_missing_value = leakspy_monitor::DEFAULT_METRICS_ADDR,
        require_equals = false
    )]
    pub prometheus: Option<String>,
    /// The command to run and its arguments (after `--`).
    // No allow_hyphen_values: a mistyped option before the command must be
    // an option error, not a command named `-o`. After the first word,
    // trailing_var_arg passes the command's own options through.
    #[arg(value_name = "CMD", required = true, trailing_var_arg = true)]
    pub command: Vec<String>,
}

pub fn run(args: RunArgs) -> anyhow::Result<u8> {
    check_interval(args.record.interval)?;
    check_probe_budget(args.record.probe_budget)?;
    check_report_paths(&args.record)?;
    let step_regex = args
        .step_regex
        .as_deref()
        .map(regex::Regex::new)
        .transpose()
        .context("--step-regex is not a valid regular expression")?;

    // Bound before the job starts: a port in use is an error, not a job
    // that runs unwatched.
    let metrics = args
        .prometheus
        .as_deref()
        .map(|a| {
            let addr = leakspy_monitor::parse_metrics_addr(a)?;
            leakspy_monitor::MetricsServer::bind(
                addr,
                leakspy_monitor::MetricsLabels {
                    command: args.command.join(" "),
                    host: hostname(),
                    version: env!("CARGO_PKG_VERSION").to_string(),
                },
            )
        })
        .transpose()?;
    if let Some(m) = &metrics {
        if !args.record.quiet {
            eprintln!("leakspy: metrics at http://{}/metrics", m.local_addr());
        }
    }

    let trace_path = match &args.record.trace {
        Some(p) => p.clone(),
        None => default_trace_path(&args.command)?,
    };
    // The trace must be writable before the child starts: a run that cannot
    // be recorded is a run wasted.
    let (writer, made) = create_trace(&trace_path)?;

    let mut config = MonitorConfig::new(args.command.clone());
    config.interval = Duration::from_secs_f64(args.record.interval);
    config.step_regex = step_regex;
    // The job's stderr goes through a relay (a copy of this binary) that
    // keeps its last lines: a job that fails at once is reported with why.
    config.stderr_relay = std::env::current_exe().ok();
    config.probe = (!args.record.no_probe).then_some(leakspy_monitor::ProbeConfig {
        budget: args.record.probe_budget,
        census: !args.record.no_census,
    });
    let monitor = match Monitor::start(config, writer) {
        Ok(m) => m,
        Err(e) => {
            // Nothing was recorded; do not leave an empty trace (or its
            // new folder) behind.
            if matches!(
                e,
                MonitorError::NotFound { .. } | MonitorError::Spawn { .. }
            ) {
                made.discard(&trace_path);
            }
            return Err(e.into());
        }
    };

    let plain_every = Duration::from_secs_f64(args.record.status_interval.clamp(0.01, 86_400.0));
    let mut display = StatusDisplay::new(args.record.quiet, plain_every);
    let mut last = None;
    let outcome = monitor.run(|st| {
        display.update(st);
        if let Some(m) = &metrics {
            m.update(st, None);
            last = Some(st.clone());
        }
    })?;
    display.finish();
    let (code, verdict) = finish(&args, &outcome)?;
    if let (Some(m), Some(st), Some(v)) = (&metrics, &last, verdict) {
        m.update(st, Some(v.as_str()));
    }
    Ok(code)
}

/// `--interval`, for `run` and `attach`.
pub(crate) fn check_interval(interval: f64) -> anyhow::Result<()> {
    if !(interval.is_finite() && (0.001..=3600.0).contains(&interval)) {
        bail!("--interval must be between 0.001 and 3600 seconds, got {interval}");
    }
    Ok(())
}

/// `--report-json` and `--report-html`, for `run` and `attach`: a folder
/// there is a mistake to stop at before the job starts, not after it ends.
pub(crate) fn check_report_paths(record: &super::record_args::RecordArgs) -> anyhow::Result<()> {
    for (option, path) in [
        ("--report-json", &record.report_json),
        ("--report-html", &record.report_html),
    ] {
        if let Some(p) = path.as_ref().filter(|p| p.is_dir()) {
            bail!("{option} {} is a folder; give a file name", p.display());
        }
    }
    Ok(())
}

/// `--probe-budget`, for `run` and `attach`.
pub(crate) fn check_probe_budget(budget: f64) -> anyhow::Result<()> {
    if !(budget.is_finite() && budget > 0.0 && budget <= 0.5) {
        bail!("--probe-budget must be a fraction above 0 and at most 0.5, got {budget}");
    }
    Ok(())
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// Diagnosis, reports and the exit status once the child has ended.
/// Returns the exit status and, when the trace could be diagnosed, the verdict.
fn finish(
    args: &RunArgs,
    outcome: &RunOutcome,
) -> anyhow::Result<(u8, Option<leakspy_stats::Verdict>)> {
    let child_status = u8::try_from(outcome.exit.status.clamp(0, 255)).unwrap_or(EXIT_ERROR);
    // Interrupted by the user: not a failure of the job.
    let failure = (child_status != 0 && outcome.interrupted == 0).then(|| JobFailure {
        command: &args.command,
        exit: &outcome.exit,
        stderr_tail: outcome.stderr_tail.as_deref(),
    });
    let reported = report_trace(
        &outcome.trace_path,
        outcome.write_error.as_deref(),
        args.record.report_json.as_deref(),
        args.record.report_html.as_deref(),
        failure,
    );
    let Some(verdict) = reported.verdict else {
        return Ok((
            if child_status == 0 {
                EXIT_ERROR
            } else {
                child_status
            },
            None,
        ));
    };
    let leak = matches!(verdict, leakspy_stats::Verdict::Leak);
    let code = if child_status != 0 {
        child_status
    } else if reported.tool_failed {
        EXIT_ERROR
    } else if args.record.fail_on_leak && leak {
        EXIT_FINDINGS
    } else {
        0
    };
    Ok((code, Some(verdict)))
}

/// What reporting a recorded trace came to (failures were said on stderr).
pub(crate) struct Reported {
    /// None when the trace could not be read back.
    pub verdict: Option<leakspy_stats::Verdict>,
    /// The trace is incomplete, or a report could not be written.
    pub tool_failed: bool,
}

/// A job that exited with an error status, and what it said last.
pub(crate) struct JobFailure<'a> {
    pub command: &'a [String],
    pub exit: &'a leakspy_trace::Exit,
    /// None when its stderr was not relayed (then it went straight to ours).
    pub stderr_tail: Option<&'a [String]>,
}

impl JobFailure<'_> {
    /// That the job failed, how, and its last stderr lines; `too_soon`
    /// (the samples recorded) when it failed before its memory could be
    /// measured, and the diagnosis is left out.
    pub(crate) fn describe(&self, how: &str, too_soon: Option<usize>) -> String {
        let soon = match too_soon {
            Some(n) => format!(
                ", too soon to measure its memory ({n} sample{})",
                if n == 1 { "" } else { "s" }
            ),
            None => String::new(),
        };
        let mut out = format!(
            "leakspy: the job failed: `{}` {how} after {:.1} s{soon}.\n",
            self.command.join(" "),
            self.exit.t,
        );
        let tail = self.stderr_tail.unwrap_or_default();
        match self.stderr_tail {
            Some([]) => out.push_str("  It wrote nothing on stderr.\n"),
            Some(lines) => {
                out.push_str("  Its last lines on stderr:\n");
                for line in lines {
                    out.push_str(&format!("    {line}\n"));
                }
            }
            None => {}
        }
        if let Some(module) = tail.iter().rev().find_map(|l| missing_module(l)) {
            out.push_str(&format!(
                "  `{}` has no module `{module}`: run the job with the Python of its environment \
                 (`leakspy run -- .venv/bin/python ...`, or activate that environment first).\n",
                self.command.first().map_or("python", String::as_str)
            ));
        }
        out
    }
}

/// `torch` from `ModuleNotFoundError: No module named 'torch'`.
fn missing_module(line: &str) -> Option<&str> {
    let rest = line
        .trim()
        .strip_prefix("ModuleNotFoundError: No module named ")?;
    Some(rest.trim_matches(['\'', '"']))
}

/// The end of `run` and `attach`: reads the trace back, prints the
/// diagnosis on stderr, writes the JSON and HTML reports asked for. A job
/// that failed is said to have failed, with its last stderr lines, before
/// the diagnosis, or instead of it when it failed too soon to have one.
pub(crate) fn report_trace(
    trace_path: &Path,
    write_error: Option<&str>,
    report_json: Option<&Path>,
    report_html: Option<&Path>,
    failure: Option<JobFailure<'_>>,
) -> Reported {
    let mut stderr = std::io::stderr().lock();
    let mut tool_failed = false;
    if let Some(err) = write_error {
        let _ = writeln!(stderr, "leakspy: error: the trace is incomplete: {err}");
        tool_failed = true;
    }
    let trace = match super::traces::read(trace_path) {
        Ok(t) => t,
        Err(e) => {
            let _ = writeln!(stderr, "leakspy: error: cannot read back the trace: {e:#}");
            return Reported {
                verdict: None,
                tool_failed: true,
            };
        }
    };
    let mut diagnosis = diagnose(&trace, &DiagnoseOptions::default());
    join_static(&mut diagnosis, &trace, trace_path);
    let too_short = diagnosis
        .series
        .iter()
        .find(|s| s.key == diagnosis.headline)
        .is_none_or(|s| s.shape == leakspy_stats::Shape::TooShort);
    if let Some(f) = &failure {
        let too_soon = too_short.then(|| trace.sample_count());
        let _ = write!(stderr, "{}", f.describe(&diagnosis.exit.message, too_soon));
    }
    if failure.is_none() || !too_short {
        let _ = write!(stderr, "{}", render_text(&diagnosis, &trace));
    }
    let _ = writeln!(stderr, "trace: {}", trace_path.display());
    // A report that cannot be written is a tool error, but the other report is still tried.
    // The trace is kept, so the report can be made again from it.
    let mut write_report = |path: &Path, format: &str, content: String| match super::write_output(
        path,
        content.as_bytes(),
    ) {
        Ok(()) => {
            let _ = writeln!(stderr, "report: {}", path.display());
        }
        Err(e) => {
            let _ = writeln!(
                stderr,
                "leakspy: error: cannot write {}: {e} (the trace is kept: \
                     `leakspy report {} --format {format} -o FILE` writes the report)",
                path.display(),
                trace_path.display()
            );
            tool_failed = true;
        }
    };
    if let Some(path) = report_json {
        write_report(path, "json", render_json(&diagnosis));
    }
    if let Some(path) = report_html {
        write_report(path, "html", render_html(&diagnosis, &trace));
    }
    Reported {
        verdict: Some(diagnosis.verdict),
        tool_failed,
    }
}

/// Joins `check`'s findings to the diagnosis of a trace just recorded (or
/// those it recorded already), and records them in the trace when it has
/// none yet.
/// Returns what `check` said of the files the job ran.
pub(crate) fn join_static(
    diagnosis: &mut leakspy_report::Diagnosis,
    trace: &leakspy_trace::Trace,
    trace_path: &Path,
) -> leakspy_trace::StaticRecord {
    let joined = leakspy_report::attach_static_findings(diagnosis, trace.static_record());
    if trace.static_record().is_none() && !joined.files.is_empty() {
        // What `check` said of the sources the run ran, so that a later
        // `report` shows it even after they are fixed. A trace that cannot
        // take it still reports: `check` then runs on the source of the day.
        let record = leakspy_trace::StaticRecord {
            t: trace.duration(),
            ..joined.clone()
        };
        let _ = leakspy_trace::TraceWriter::append(trace_path)
            .and_then(|mut w| w.write(&leakspy_trace::Event::Static(record)));
    }
    joined
}

/// What [`create_trace`] made, to take back when nothing gets recorded.
pub(crate) struct MadeTrace {
    /// The outermost folder that did not exist before.
    first_new_dir: Option<PathBuf>,
}

impl MadeTrace {
    /// Removes the trace file and the folders made for it (those still empty).
    pub(crate) fn discard(self, path: &Path) {
        let _ = std::fs::remove_file(path);
        let Some(top) = self.first_new_dir else {
            return;
        };
        for dir in path.ancestors().skip(1) {
            if std::fs::remove_dir(dir).is_err() || dir == top {
                break;
            }
        }
    }
}

/// Creates the trace file (and its folder), failing with what to do.
pub(crate) fn create_trace(path: &Path) -> anyhow::Result<(TraceWriter, MadeTrace)> {
    let first_new_dir = path
        .ancestors()
        .skip(1)
        .filter(|d| !d.as_os_str().is_empty())
        .take_while(|d| !d.exists())
        .last()
        .map(Path::to_path_buf);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| {
            format!(
                "cannot create the folder {} for the trace file (choose a writable path with --trace FILE)",
                dir.display()
            )
        })?;
    }
    if path.is_dir() {
        bail!(
            "the trace path {} is a folder; give a file name with --trace FILE",
            path.display()
        );
    }
    let made = MadeTrace { first_new_dir };
    match TraceWriter::create(path) {
        Ok(w) => Ok((w, made)),
        Err(e) => {
            made.discard(path);
            Err(e.into())
        }
    }
}

/// `leakspy-runs/20260121-093000-train.jsonl`, never overwriting an existing trace.
pub(crate) fn default_trace_path(command: &[String]) -> anyhow::Result<PathBuf> {
    let stamp = local_timestamp();
    let name = command_name(command);
    let dir = Path::new(RUNS_DIR);
    let mut path = dir.join(format!("{stamp}-{name}.jsonl"));
    let mut n = 2;
    while path.exists() {
        path = dir.join(format!("{stamp}-{name}-{n}.jsonl"));
        n += 1;
    }
    Ok(path)
}

/// The command's name for file names: the script for `python script.py`.
fn command_name(command: &[String]) -> String {
    let stem = |s: &str| {
        Path::new(s)
            .file_stem()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let program = command.first().map(|p| stem(p)).unwrap_or_default();
    let mut name = program.clone();
    if program.starts_with("python") {
        if let Some(script) = command.iter().skip(1).find(|a| !a.starts_with('-')) {
            name = stem(script);
        }
    }
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    if clean.is_empty() {
        "run".into()
    } else {
        clean
    }
}

/// YYYYmmdd-HHMMSS in local time.
fn local_timestamp() -> String {
    // SAFETY: time(2) and localtime_r(3) with pointers to locals.
    unsafe {
        let now = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&now, &mut tm).is_null() {
            return format!("{now}");
        }
        format!(
            "{:04}{:02}{:02}-{:02}{:02}{:02}",
            tm.tm_year + 1900,
            tm.tm_mon + 1,
            tm.tm_mday,
            tm.tm_hour,
            tm.tm_min,
            tm.tm_sec
        )
    }
}

/// Where the status goes: a redrawn line on a terminal, periodic plain lines
/// otherwise (logs), nothing with --quiet.
pub(crate) struct StatusDisplay {
    mode: Mode,
    plain_every: Duration,
    last: Option<Instant>,
    drawn: bool,
}

#[derive(PartialEq)]
enum Mode {
    Terminal,
    Plain,
    Quiet,
}

impl StatusDisplay {
    pub(crate) fn new(quiet: bool, plain_every: Duration) -> Self {
        let mode = if quiet {
            Mode::Quiet
        } else if std::io::stderr().is_terminal() {
            Mode::Terminal
        } else {
            Mode::Plain
        };
        StatusDisplay {
            mode,
            plain_every,
            last: None,
            drawn: false,
        }
    }

    pub(crate) fn update(&mut self, st: &LiveStatus) {
        let every = match self.mode {
            Mode::Quiet => return,
            Mode::Terminal => REDRAW_EVERY,
            Mode::Plain => self.plain_every,
        };
        let now = Instant::now();
        if self.mode == Mode::Plain && self.last.is_none() {
            // The first plain line after one interval, not at t=0 (it would say nothing).
            self.last = Some(now);
            return;
        }
        if self.last.is_some_and(|l| now.duration_since(l) < every) {
            return;
        }
        self.last = Some(now);
        let line = status::line(st);
        let mut err = std::io::stderr().lock();
        let _ = match self.mode {
            Mode::Terminal => write!(err, "\r\x1b[K{line}"),
            _ => writeln!(err, "{line}"),
        };
        let _ = err.flush();
        self.drawn = true;
    }

    pub(crate) fn finish(&mut self) {
        if self.mode == Mode::Terminal && self.drawn {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_names_for_trace_files() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            command_name(&v(&["python", "-u", "scripts/train.py", "--lr", "1"])),
            "train"
        );
        assert_eq!(command_name(&v(&["/usr/bin/python3.11", "x.py"])), "x");
        assert_eq!(
            command_name(&v(&["torchrun", "--nproc", "2", "t.py"])),
            "torchrun"
        );
        assert_eq!(command_name(&v(&["./my job"])), "my_job");
        assert_eq!(command_name(&v(&["python"])), "python");
    }

    #[test]
    fn timestamp_shape() {
        let s = local_timestamp();
        assert_eq!(s.len(), 15, "{s}");
        assert_eq!(&s[8..9], "-");
    }
}

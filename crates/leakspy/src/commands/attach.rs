//! `leakspy attach PID`: record a job that is already running, with the
//! in-process probe put in without a restart, and end with the same
//! diagnosis as `leakspy run`. The job is never stopped or signalled:
//! Ctrl-C stops the recording, and leakspy detaches.

use std::time::Duration;

use anyhow::bail;
use clap::Args;
use leakspy_monitor::{
    AttachConfig, AttachError, InjectMethod, Monitor, MonitorConfig, ProbeConfig, Python,
};

use super::run::{
    check_interval, check_probe_budget, check_report_paths, create_trace, default_trace_path,
    report_trace, StatusDisplay,
};
use crate::{EXIT_ERROR, EXIT_FINDINGS};

#[derive(Args)]
#[command(
    after_help = "Recording stops at --duration, at Ctrl-C or SIGTERM to leakspy (never \
passed on to the job), or when the job ends; leakspy then detaches and the job goes on.\n\n\
Exit status: 0 when recorded and diagnosed (whatever the job does); 1 with --fail-on-leak when \
a leak is found; 2 when leakspy fails (no such process, a zombie, leakspy itself, not permitted \
to trace it, trace not writable)."
)]
pub struct AttachArgs {
    /// Process id of the running job (its main process).
    #[arg(value_name = "PID")]
    pub pid: u32,
    /// Stop recording after SECS [default: until Ctrl-C or the job ends].
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    #[command(flatten)]
    pub record: super::record_args::RecordArgs,
    /// How to put the probe in: auto, ptrace, gdb or remote-exec.
    #[arg(long, value_name = "METHOD", default_value = "auto", hide = true)]
    pub inject_with: InjectMethod,
    /// Longest wait for gdb or the helper of `sys.remote_exec`.
    #[arg(long, value_name = "SECS", default_value_t = 20.0, hide = true)]
    pub inject_timeout: f64,
    /// The process starts the probe itself (`leakspy.watch()` in a notebook kernel): write
    /// the probe's settings to FILE instead of injecting it; no right to trace is needed.
    #[arg(long, value_name = "FILE", hide = true)]
    pub probe_handoff: Option<std::path::PathBuf>,
}

pub fn run(args: AttachArgs) -> anyhow::Result<u8> {
    check_interval(args.record.interval)?;
    check_probe_budget(args.record.probe_budget)?;
    check_report_paths(&args.record)?;
    if let Some(d) = args.duration {
        if !(d.is_finite() && d > 0.0 && d <= 1e9) {
            bail!("--duration must be a positive number of seconds, got {d}");
        }
    }
    if !(args.inject_timeout.is_finite() && args.inject_timeout > 0.0) {
        bail!("--inject-timeout must be a positive number of seconds");
    }
    let process = leakspy_monitor::inspect(args.pid)?;
    // Unknown: its mappings were unreadable, most likely for want of the
    // same permission.
    let python = matches!(process.python, Python::CPython { .. } | Python::Unknown(_));
    // Tracing is needed only to put the probe in; /proc figures of another
    // user's process stay readable without it (all but PSS/USS).
    if !args.record.no_probe && python && args.probe_handoff.is_none() {
        if let Err(e) = leakspy_monitor::check_trace_permission(&process) {
            if let AttachError::NotPermitted { .. } = e {
                bail!(
                    "{e}. (Without tracing it, `--no-probe` records its memory from /proc only.)"
                );
            }
            return Err(e.into());
        }
    }

    let trace_path = match &args.record.trace {
        Some(p) => p.clone(),
        None => default_trace_path(&process.cmdline)?,
    };
    let (writer, made) = create_trace(&trace_path)?;

    let mut attach = AttachConfig::new(process.clone());
    attach.duration = args.duration.map(Duration::from_secs_f64);
    attach.method = args.inject_with;
    attach.inject_timeout = Duration::from_secs_f64(args.inject_timeout.min(3600.0));
    attach.handoff = args.probe_handoff.clone();
    let mut config = MonitorConfig::attach(attach);
    config.interval = Duration::from_secs_f64(args.record.interval);
    config.probe = (!args.record.no_probe).then_some(ProbeConfig {
        budget: args.record.probe_budget,
        census: !args.record.no_census,
    });
    let monitor = match Monitor::start(config, writer) {
        Ok(m) => m,
        Err(e) => {
            made.discard(&trace_path);
            return Err(anyhow::Error::new(e).context("cannot start recording"));
        }
    };

    if !args.record.quiet {
        let cmd = if process.cmdline.is_empty() {
            "?".to_string()
        } else {
            process.cmdline.join(" ")
        };
        let python = process
            .python
            .version_text()
            .map(|v| format!(", Python {v}"))
            .unwrap_or_default();
        let until = match args.duration {
            Some(d) => format!("for {d} s or "),
            None => String::new(),
        };
        eprintln!(
            "leakspy: attached to pid {} ({cmd}{python}); recording {until}until Ctrl-C or its end (the job goes on)",
            process.pid
        );
        for n in monitor.notes().iter().filter(|n| n.contains("probe")) {
            eprintln!("leakspy: {n}");
        }
    }

    let plain_every = Duration::from_secs_f64(args.record.status_interval.clamp(0.01, 86_400.0));
    let mut display = StatusDisplay::new(args.record.quiet, plain_every);
    let outcome = monitor.run_attached(|st| display.update(st))?;
    display.finish();

    let reported = report_trace(
        &outcome.trace_path,
        outcome.write_error.as_deref(),
        args.record.report_json.as_deref(),
        args.record.report_html.as_deref(),
        None,
    );
    let Some(verdict) = reported.verdict else {
        return Ok(EXIT_ERROR);
    };
    Ok(if reported.tool_failed {
        EXIT_ERROR
    } else if args.record.fail_on_leak && matches!(verdict, leakspy_stats::Verdict::Leak) {
        EXIT_FINDINGS
    } else {
        0
    })
}

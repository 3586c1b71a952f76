//! `leakspy report TRACE`: renders a saved trace again (also one cut short
//! by a kill: the reader skips a torn last line).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use leakspy_report::{
    diagnose, merge_rank_rows, rank_rows, render_html, render_json, render_ranks_html,
    render_ranks_json, render_ranks_text, render_text, DiagnoseOptions, Diagnosis,
};
use leakspy_stats::Verdict;

use crate::{EXIT_CLEAN, EXIT_FINDINGS};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// Plain text for a terminal.
    Text,
    /// The diagnosis as JSON (the same as `run --report-json`).
    Json,
    /// One self-contained HTML file with charts.
    Html,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Exit status: 0; 1 with --fail-on-leak when the verdict is \"leak\"; \
2 tool error (unreadable trace, no header). With several traces: 1 with --fail-on-leak when \
any of them leaks."
)]
pub struct ReportArgs {
    /// Trace file written by `leakspy run` (JSON Lines). Several traces (one
    /// per node or rank of a distributed job) give one table of every rank
    /// side by side.
    #[arg(value_name = "TRACE", required = true, num_args = 1..)]
    pub traces: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    pub format: ReportFormat,
    /// Write the report to FILE instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Exit with status 1 when the verdict is "leak" (for CI).
    #[arg(long)]
    pub fail_on_leak: bool,
}

pub fn run(args: ReportArgs) -> Result<u8> {
    let opts = DiagnoseOptions::default();
    let mut read = Vec::with_capacity(args.traces.len());
    for path in &args.traces {
        // The reader's errors name the file.
        let trace = super::traces::read(path)?;
        let mut diagnosis = diagnose(&trace, &opts);
        leakspy_report::attach_static_findings(&mut diagnosis, trace.static_record());
        read.push((path.display().to_string(), trace, diagnosis));
    }
    let leak = read.iter().any(|(_, _, d)| d.verdict == Verdict::Leak);
    let rendered = if let [(_, trace, diagnosis)] = read.as_slice() {
        match args.format {
            ReportFormat::Text => render_text(diagnosis, trace),
            ReportFormat::Json => render_json(diagnosis),
            ReportFormat::Html => render_html(diagnosis, trace),
        }
    } else {
        let rows = merge_rank_rows(
            read.iter()
                .flat_map(|(name, trace, d)| rank_rows(trace, d, name, &opts)),
        );
        let traces: Vec<(String, Diagnosis)> =
            read.into_iter().map(|(name, _, d)| (name, d)).collect();
        match args.format {
            ReportFormat::Text => render_ranks_text(&traces, &rows),
            ReportFormat::Json => render_ranks_json(&traces, &rows),
            ReportFormat::Html => render_ranks_html(&traces, &rows),
        }
    };
    match &args.output {
        Some(path) => {
            super::write_output(path, rendered.as_bytes())
                .with_context(|| format!("cannot write the report to {}", path.display()))?;
            eprintln!("leakspy: wrote {}", path.display());
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(rendered.as_bytes())
                .and_then(|()| stdout.flush())
                .context("cannot write the report to standard output")?;
        }
    }
    Ok(if args.fail_on_leak && leak {
        EXIT_FINDINGS
    } else {
        EXIT_CLEAN
    })
}

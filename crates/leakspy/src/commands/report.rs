//! `leakspy report TRACE`: renders a saved trace again (also one cut short
//! by a kill: the reader skips a torn last line).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use leakspy_report::{diagnose, render_html, render_json, render_text, DiagnoseOptions};
use leakspy_stats::Verdict;
use leakspy_trace::read_trace;

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
2 tool error (unreadable trace, no header)."
)]
pub struct ReportArgs {
    /// Trace file written by `leakspy run` (JSON Lines).
    pub trace: PathBuf,
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
    let trace = read_trace(&args.trace)?;
    let mut diagnosis = diagnose(&trace, &DiagnoseOptions::default());
    leakspy_report::attach_static_findings(&mut diagnosis);
    let rendered = match args.format {
        ReportFormat::Text => render_text(&diagnosis, &trace),
        ReportFormat::Json => render_json(&diagnosis),
        ReportFormat::Html => render_html(&diagnosis, &trace),
    };
    match &args.output {
        Some(path) => {
            std::fs::write(path, rendered.as_bytes())
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
    Ok(if args.fail_on_leak && diagnosis.verdict == Verdict::Leak {
        EXIT_FINDINGS
    } else {
        EXIT_CLEAN
    })
}

//! `leakspy diff BEFORE AFTER`: did the fix work? Growth per step (or per
//! second) with intervals for both traces, their ratio, and a verdict.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use leakspy_report::{compare, diagnose, render_diff_json, render_diff_text, DiagnoseOptions};

use crate::{EXIT_CLEAN, EXIT_FINDINGS};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiffFormat {
    /// Both sides in columns, for a terminal.
    Text,
    /// The comparison as JSON.
    Json,
}

#[derive(Debug, Args)]
#[command(after_help = "Exit status: 0 fixed, improved, or no leak in either; \
1 not fixed, worse, inconclusive, or both traces of the same run (nothing proven); \
2 tool error.")]
pub struct DiffArgs {
    /// Trace of the run before the fix.
    pub before: PathBuf,
    /// Trace of the run after the fix.
    pub after: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = DiffFormat::Text)]
    pub format: DiffFormat,
}

pub fn run(args: DiffArgs) -> Result<u8> {
    let before = super::traces::read(&args.before)?;
    let after = super::traces::read(&args.after)?;
    let opts = DiagnoseOptions::default();
    let comparison = compare(
        &diagnose(&before, &opts),
        &args.before.display().to_string(),
        &diagnose(&after, &opts),
        &args.after.display().to_string(),
    );
    let comparison = if before.is_same_run(&after) {
        let h = &before.header;
        comparison.of_one_run(&format!(
            "`{}`, pid {}{}",
            h.command.join(" "),
            h.pid.map_or_else(|| "?".to_string(), |p| p.to_string()),
            if h.hostname.is_empty() {
                String::new()
            } else {
                format!(" on {}", h.hostname)
            }
        ))
    } else {
        comparison
    };
    let text = match args.format {
        DiffFormat::Text => render_diff_text(&comparison),
        DiffFormat::Json => render_diff_json(&comparison),
    };
    crate::write_stdout(&text)?;
    Ok(if comparison.verdict.passes() {
        EXIT_CLEAN
    } else {
        EXIT_FINDINGS
    })
}

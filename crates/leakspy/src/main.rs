//! The `leakspy` command line. This crate is the only one that prints or exits;
//! the libraries return values and typed errors.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

// `check` allocates and frees many small AST nodes and keys; glibc's malloc spent a fifth of
// its time there. mimalloc is what fast Rust linters ship with for the same reason.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod check;
mod commands;

/// Exit status when the command found nothing (no findings, no leak).
pub const EXIT_CLEAN: u8 = 0;
/// Exit status when the command found something (findings, a leak with `--fail-on-leak`).
pub const EXIT_FINDINGS: u8 = 1;
/// Exit status for a tool error (bad arguments, unreadable input, internal failure).
pub const EXIT_ERROR: u8 = 2;

#[derive(Parser)]
#[command(
    name = "leakspy",
    version,
    about = "Find, explain, fix and prove memory leaks in Python ML training jobs",
    after_help = "Exit status: 0 clean, 1 findings or leak, 2 tool error."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check Python sources for leak patterns (rules LS001-LS104).
    Check(commands::check::CheckArgs),
    /// Print the documentation of a rule.
    Rule(commands::rule::RuleArgs),
    /// Run a command, record its memory, and diagnose leaks.
    Run(commands::run::RunArgs),
    /// Record a job that is already running (by pid), and diagnose leaks.
    Attach(commands::attach::AttachArgs),
    /// Render a saved trace again (text, json or html).
    Report(commands::report::ReportArgs),
    /// Compare two traces: did the fix work?
    Diff(commands::diff::DiffArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let code = if err.use_stderr() {
                EXIT_ERROR
            } else {
                EXIT_CLEAN
            };
            let _ = err.print();
            return ExitCode::from(code);
        }
    };
    let result = match cli.command {
        Command::Check(args) => commands::check::run(args),
        Command::Rule(args) => commands::rule::run(args),
        Command::Run(args) => commands::run::run(args),
        Command::Attach(args) => commands::attach::run(args),
        Command::Report(args) => commands::report::run(args),
        Command::Diff(args) => commands::diff::run(args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("leakspy: error: {err:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

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
    /// Run a leaking job, fix it in a scratch copy, and prove the fix.
    Fix(commands::fix::FixArgs),
}

fn main() -> ExitCode {
    // `run` relays its job's stderr through a copy of this binary.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == leakspy_monitor::RELAY_ARG)
    {
        return ExitCode::from(u8::try_from(leakspy_monitor::relay_main()).unwrap_or(1));
    }
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == leakspy_report::JUDGE_SERIES_ARG)
    {
        return match commands::judge_series::run() {
            Ok(code) => ExitCode::from(code),
            Err(err) => {
                eprintln!("leakspy: error: {}", error_message(&err));
                ExitCode::from(EXIT_ERROR)
            }
        };
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(mut err) => {
            suggest_subcommand(&mut err);
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
        Command::Fix(args) => commands::fix::run(args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        // `leakspy check . | head`: the reader has what it wanted; as ripgrep does, stop
        // quietly rather than report the closed pipe as an error.
        Err(err) if broken_pipe(&err) => ExitCode::from(EXIT_CLEAN),
        Err(err) => {
            eprintln!("leakspy: error: {}", error_message(&err));
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// clap suggests by Jaro similarity, which ranks `rule` above `run` for
/// `rnu`; typos are mostly swapped, missing or doubled letters, which the
/// optimal-string-alignment distance counts one each.
fn suggest_subcommand(err: &mut clap::Error) {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    use clap::CommandFactory;
    if err.kind() != ErrorKind::InvalidSubcommand {
        return;
    }
    let Some(ContextValue::String(typed)) = err.get(ContextKind::InvalidSubcommand).cloned() else {
        return;
    };
    let best = Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .map(|name| (strsim::osa_distance(&typed, &name), name))
        .filter(|(d, name)| *d <= 2 && *d < name.len())
        .min();
    if let Some((_, name)) = best {
        err.insert(
            ContextKind::SuggestedSubcommand,
            ContextValue::Strings(vec![name]),
        );
    }
}

/// Writes a command's output to stdout. `print!` panics when the reader has gone (`leakspy
/// rule --all | head`); an error here is the closed pipe `main` stops quietly for.
pub(crate) fn write_stdout(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

fn broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// One message for an error and its causes. The libraries' messages already
/// quote their cause ("cannot read trace file X: No such file or directory"),
/// so a cause is added only when the text so far does not say it yet: each
/// fact once.
fn error_message(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let part = cause.to_string();
        if part.is_empty() || text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::error_message;

    #[test]
    fn each_cause_is_said_once() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let quoted = anyhow::Error::new(leakspy_trace::TraceError::Read {
            path: "/x.jsonl".into(),
            source: io,
        });
        let msg = error_message(&quoted);
        assert_eq!(msg.matches("not found").count(), 1, "{msg}");
        assert!(msg.contains("/x.jsonl"), "{msg}");
        // A context that does not quote its cause still shows it.
        let wrapped = anyhow::anyhow!("disk full").context("cannot write the report to r.html");
        assert_eq!(
            error_message(&wrapped),
            "cannot write the report to r.html: disk full"
        );
    }
}

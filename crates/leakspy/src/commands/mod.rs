//! One file per subcommand.
pub mod attach;
pub mod check;
pub mod diff;
pub mod record_args;
pub mod report;
pub mod rule;
pub mod run;

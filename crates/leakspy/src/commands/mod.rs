//! One file per subcommand.
pub mod attach;
pub mod check;
pub mod diff;
pub mod report;
pub mod rule;
pub mod run;

//! One file per subcommand.
pub mod check;
pub mod rule;
pub mod run;

//! One file per subcommand.
pub mod attach;
pub mod check;
pub mod diff;
pub mod fix;
pub mod judge_series;
pub mod record_args;
pub mod report;
pub mod rule;
pub mod run;
pub mod traces;

/// Writes a report file, making its folder first when there is none (as the
/// trace's is made).
pub(crate) fn write_output(path: &std::path::Path, contents: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty() && !d.exists())
    {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, contents)
}

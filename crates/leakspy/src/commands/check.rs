use clap::Args;

#[derive(Args)]
pub struct CheckArgs {
    /// Files or folders to check (default: the current folder).
    pub paths: Vec<std::path::PathBuf>,
}

pub fn run(_args: CheckArgs) -> anyhow::Result<u8> {
    Ok(crate::EXIT_CLEAN)
}

use clap::Args;

#[derive(Args)]
pub struct RuleArgs {
    /// Rule code, e.g. LS001.
    pub code: Option<String>,
}

pub fn run(_args: RuleArgs) -> anyhow::Result<u8> {
    Ok(crate::EXIT_CLEAN)
}

use std::path::PathBuf;

/// Errors that stop a run before or while it starts. Sampler failures during
/// a run are never errors: they become `note` events.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    #[error("no command given: expected `leakspy run [OPTIONS] -- CMD [ARGS...]`")]
    NoCommand,
    #[error("command not found: `{program}` (is it installed and on PATH?)")]
    NotFound { program: String },
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot install signal handlers: {0}")]
    Signals(#[source] std::io::Error),
    #[error("cannot wait for the child: {0}")]
    Wait(#[source] std::io::Error),
    #[error(transparent)]
    Trace(#[from] leakspy_trace::TraceError),
    #[error("trace file {path}: {message}")]
    TracePath { path: PathBuf, message: String },
    #[error("--prometheus {addr}: {message}")]
    Metrics { addr: String, message: String },
}

use std::path::PathBuf;

/// Errors of the trace reader and writer. Messages say what was expected,
/// what was found, and what to do.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error(
        "cannot create trace file {path}: {source} (choose a writable path with --trace FILE)"
    )]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write to trace file {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read trace file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{origin}: no trace header: the file is empty (the run may have failed before it started)"
    )]
    Empty { origin: String },
    #[error("{origin}: line {line}: expected a leakspy trace header (a JSON object with \"kind\":\"header\",\"format\":\"leakspy-trace\"), found {found}")]
    MissingHeader {
        origin: String,
        line: usize,
        found: String,
    },
    #[error("{origin}: trace format version {found} is not supported (this leakspy reads version {supported}); upgrade leakspy")]
    UnsupportedVersion {
        origin: String,
        found: u64,
        supported: u32,
    },
    #[error("cannot encode event: {0}")]
    Encode(#[from] serde_json::Error),
}

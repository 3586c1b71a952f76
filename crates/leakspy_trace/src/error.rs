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
    #[error("{origin}: the trace header (line {line}) is truncated after {bytes} bytes: the file was cut while it was written or copied, and a trace without its header cannot be read (copy the whole file, or record the run again)")]
    TruncatedHeader {
        origin: String,
        line: usize,
        bytes: usize,
    },
    /// One JSON document over several lines (a report, a config), not JSON Lines.
    #[error("{origin} is one JSON document, not a leakspy trace (a trace is JSON Lines: a header line, then one event per line, as `leakspy run` writes it)")]
    JsonDocument {
        origin: String,
        /// The document's top-level keys (empty when it is not an object), so
        /// a caller can say what it is.
        keys: Vec<String>,
    },
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

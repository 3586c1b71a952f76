//! Reading a trace named on the command line (`report`, `diff`, and the
//! read-back at the end of `run` and `attach`), with errors that say what the
//! file is when it is not a trace.

use std::path::Path;

use anyhow::{anyhow, Result};
use leakspy_trace::{read_trace, Trace, TraceError};

/// Reads the trace at `path`. A JSON report given where a trace is wanted is
/// named as such, with where the traces are.
pub fn read(path: &Path) -> Result<Trace> {
    read_trace(path).map_err(|e| match e {
        TraceError::JsonDocument { origin, keys } => match leakspy_report::report_kind(&keys) {
            Some(kind) => anyhow!(
                "{origin} is a leakspy report ({kind}, as `--report-json` or `--format json` \
                 writes it), not a trace: it already holds its result. Give the trace it came \
                 from: the .jsonl file `leakspy run` wrote (leakspy-runs/*.jsonl unless \
                 --trace named another)"
            ),
            None => TraceError::JsonDocument { origin, keys }.into(),
        },
        other => other.into(),
    })
}

//! What `check` said of the job's sources when the run ended: the findings
//! joined to what grew, and each file's hash. Written once at the end of a
//! run (`static` event), so that `report` shows what was true of the run
//! even after the source was fixed, and can say that it changed since.

use serde::{Deserialize, Serialize};

/// A finding of `check` on a file the probe named.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaticMatch {
    pub rule: String,
    /// As the report shows it: relative to the job's folder, or absolute.
    pub file: String,
    pub line: u64,
    pub message: String,
    /// What `--fix` (or `--unsafe-fixes`) would do.
    #[serde(default)]
    pub fix: Option<String>,
    #[serde(default)]
    pub safe_fix: bool,
}

/// One source file as `check` read it at the end of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckedFile {
    /// As the report shows it: relative to the job's folder, or absolute.
    pub path: String,
    /// SHA-256 of the file's bytes, lowercase hex; `None` when it could not be read.
    #[serde(default)]
    pub sha256: Option<String>,
    /// Every finding of `check` (default rules) in the file then.
    #[serde(default)]
    pub findings: Vec<StaticMatch>,
}

/// The `static` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StaticRecord {
    pub t: f64,
    #[serde(default)]
    pub files: Vec<CheckedFile>,
}

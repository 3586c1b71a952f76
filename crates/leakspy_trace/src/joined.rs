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
    /// In a notebook, the cell (numbered from 1 among all its cells, as
    /// Jupyter shows them); `line` is then a row of that cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell: Option<usize>,
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
    /// A notebook's cells in the order a kernel runs them from the top (its
    /// code cells that are not blank): IPython's `Cell In[n]` is the n-th.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub executed_cells: Vec<usize>,
}

impl StaticMatch {
    /// `train.py:41`, or `train.ipynb:cell 4:line 7` in a notebook (as
    /// `check` says it).
    pub fn location(&self) -> String {
        match self.cell {
            Some(c) => format!("{}:cell {c}:line {}", self.file, self.line),
            None => format!("{}:{}", self.file, self.line),
        }
    }
}

/// The `static` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StaticRecord {
    pub t: f64,
    #[serde(default)]
    pub files: Vec<CheckedFile>,
}

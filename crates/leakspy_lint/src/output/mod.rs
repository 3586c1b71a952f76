//! Renderers for `leakspy check` results, one file per format. They return strings; the CLI
//! prints them.

pub mod github;
pub mod json;
pub mod sarif;
pub mod text;

use std::path::PathBuf;

use ruff_source_file::{LineIndex, OneIndexed};
use ruff_text_size::TextSize;

use crate::diagnostic::Diagnostic;
use crate::SyntaxError;

/// One checked file, with what the renderers need to turn offsets into rows and columns.
pub struct FileResult {
    pub path: PathBuf,
    pub source: String,
    pub line_index: LineIndex,
    pub diagnostics: Vec<Diagnostic>,
    pub syntax_error: Option<SyntaxError>,
    /// When fixes were asked for: the source before them and how many were applied.
    pub fix_log: Option<(String, usize)>,
}

/// A 1-based row and column (columns count characters, as ruff's JSON does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Location {
    pub row: usize,
    pub column: usize,
}

impl FileResult {
    pub fn location(&self, offset: TextSize) -> Location {
        let lc = self.line_index.line_column(offset, &self.source);
        Location {
            row: lc.line.get(),
            column: lc.column.get(),
        }
    }

    /// The text of a 1-based row, without its line ending.
    pub fn line_text(&self, row: usize) -> &str {
        let Some(line) = OneIndexed::new(row) else {
            return "";
        };
        if row > self.line_index.line_count() {
            return "";
        }
        let range = self.line_index.line_range(line, &self.source);
        self.source[range].trim_end_matches(['\n', '\r'])
    }

    pub fn display_path(&self) -> String {
        self.path.display().to_string()
    }
}

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
use crate::notebook::NotebookIndex;
use crate::SyntaxError;

/// One checked file, with what the renderers need to turn offsets into rows and columns.
pub struct FileResult {
    pub path: PathBuf,
    pub source: String,
    pub line_index: LineIndex,
    pub diagnostics: Vec<Diagnostic>,
    pub syntax_error: Option<SyntaxError>,
    /// For a notebook (`source` is its code cells joined): where each cell starts, so that
    /// positions are reported as a cell and a row in it.
    pub notebook: Option<NotebookIndex>,
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

    /// A position as reported: in a notebook, the cell (1-based, among all its cells) and the
    /// location in that cell; else no cell and the location in the file.
    pub fn cell_location(&self, offset: TextSize) -> (Option<usize>, Location) {
        let loc = self.location(offset);
        match &self.notebook {
            None => (None, loc),
            Some(index) => {
                let (cell, row) = index.cell_row(loc.row);
                (
                    Some(cell),
                    Location {
                        row,
                        column: loc.column,
                    },
                )
            }
        }
    }

    /// The rows of the file (of the joined module, for a notebook) a code frame around `row`
    /// may show: a notebook's frame stays inside the cell.
    pub fn frame_rows(&self, row: usize) -> (usize, usize) {
        match &self.notebook {
            None => (1, self.line_index.line_count()),
            Some(index) => {
                let (first, last) = index.cell_rows(row);
                (first, last.min(self.line_index.line_count()))
            }
        }
    }

    /// The row number shown for a row of the file: in a notebook, the row in its cell.
    pub fn shown_row(&self, row: usize) -> usize {
        match &self.notebook {
            None => row,
            Some(index) => index.cell_row(row).1,
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

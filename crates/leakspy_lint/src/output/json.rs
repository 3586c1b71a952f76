//! JSON: an array of objects with ruff's field names.

use serde::Serialize;

use crate::diagnostic::Applicability;
use crate::output::{FileResult, Location};

#[derive(Serialize)]
struct JsonEdit {
    content: String,
    location: Location,
    end_location: Location,
}

#[derive(Serialize)]
struct JsonFix {
    applicability: Applicability,
    message: String,
    edits: Vec<JsonEdit>,
}

#[derive(Serialize)]
struct JsonDiagnostic {
    code: String,
    name: String,
    message: String,
    filename: String,
    location: Location,
    end_location: Location,
    fix: Option<JsonFix>,
    url: Option<String>,
    noqa_row: Option<usize>,
    /// In a notebook, the cell (1-based among all cells, as ruff reports it); the locations
    /// are then rows in that cell.
    #[serde(skip_serializing_if = "Option::is_none")]
    cell: Option<usize>,
}

pub fn render(files: &[FileResult]) -> String {
    let mut items = Vec::new();
    for file in files {
        let filename = file.display_path();
        if let Some(err) = &file.syntax_error {
            let (cell, location) = file.cell_location(err.range.start());
            items.push(JsonDiagnostic {
                code: "syntax-error".to_string(),
                name: "syntax-error".to_string(),
                message: err.message.clone(),
                filename: filename.clone(),
                location,
                end_location: file.cell_location(err.range.end()).1,
                fix: None,
                url: None,
                noqa_row: None,
                cell,
            });
        }
        for d in &file.diagnostics {
            let (cell, location) = file.cell_location(d.range.start());
            items.push(JsonDiagnostic {
                code: d.rule.code().to_string(),
                name: d.rule.name().to_string(),
                message: d.message.clone(),
                filename: filename.clone(),
                location,
                end_location: file.cell_location(d.range.end()).1,
                fix: d.fix.as_ref().map(|f| JsonFix {
                    applicability: f.applicability,
                    message: f.message.clone(),
                    edits: f
                        .edits
                        .iter()
                        .map(|e| JsonEdit {
                            content: e.content.clone(),
                            location: file.cell_location(e.range.start()).1,
                            end_location: file.cell_location(e.range.end()).1,
                        })
                        .collect(),
                }),
                url: Some(d.rule.url()),
                noqa_row: Some(location.row),
                cell,
            });
        }
    }
    let mut s = serde_json::to_string_pretty(&items).expect("diagnostics serialize");
    s.push('\n');
    s
}

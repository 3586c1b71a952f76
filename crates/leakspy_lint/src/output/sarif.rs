//! SARIF 2.1.0, for GitHub code scanning and other SARIF consumers.

use serde_json::{json, Value};

use crate::output::FileResult;
use crate::registry::{Rule, RuleKind};

fn rule_descriptor(rule: Rule) -> Value {
    let doc = rule.documentation();
    let short = doc
        .split("## What it does")
        .nth(1)
        .and_then(|rest| rest.split("##").next())
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    json!({
        "id": rule.code(),
        "name": rule.name(),
        "shortDescription": { "text": short },
        "fullDescription": { "text": doc },
        "help": { "text": doc, "markdown": doc },
        "helpUri": rule.url(),
        "defaultConfiguration": { "level": level(rule) },
        "properties": { "tags": [match rule.kind() { RuleKind::Leak => "leak", RuleKind::Advice => "advice" }] }
    })
}

fn level(rule: Rule) -> &'static str {
    match rule.kind() {
        RuleKind::Leak => "error",
        RuleKind::Advice => "warning",
    }
}

/// Paths become relative URIs with forward slashes, as SARIF viewers expect.
fn uri(file: &FileResult) -> String {
    let p = file.display_path().replace('\\', "/");
    p.strip_prefix("./").unwrap_or(&p).to_string()
}

/// In a notebook the region's lines are those of a cell, named in the result's properties.
fn with_cell(cell: Option<usize>, mut result: Value) -> Value {
    if let Some(cell) = cell {
        result["properties"] = json!({ "cell": cell });
    }
    result
}

pub fn render(files: &[FileResult]) -> String {
    let mut results = Vec::new();
    for file in files {
        let uri = uri(file);
        if let Some(err) = &file.syntax_error {
            let (cell, start) = file.cell_location(err.range.start());
            results.push(with_cell(
                cell,
                json!({
                    "ruleId": "syntax-error",
                    "level": "error",
                    "message": { "text": err.message },
                    "locations": [{ "physicalLocation": {
                        "artifactLocation": { "uri": uri },
                        "region": { "startLine": start.row, "startColumn": start.column }
                    }}]
                }),
            ));
        }
        for d in &file.diagnostics {
            let (cell, start) = file.cell_location(d.range.start());
            let end = file.cell_location(d.range.end()).1;
            results.push(with_cell(
                cell,
                json!({
                    "ruleId": d.rule.code(),
                    "ruleIndex": Rule::ALL.iter().position(|r| *r == d.rule),
                    "level": level(d.rule),
                    "message": { "text": d.message },
                    "locations": [{ "physicalLocation": {
                        "artifactLocation": { "uri": uri },
                        "region": {
                            "startLine": start.row,
                            "startColumn": start.column,
                            "endLine": end.row,
                            "endColumn": end.column
                        }
                    }}]
                }),
            ));
        }
    }
    let sarif = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "leakspy",
                "informationUri": "https://github.com/leakspy/leakspy",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": Rule::ALL.iter().map(|r| rule_descriptor(*r)).collect::<Vec<_>>()
            }},
            "results": results
        }]
    });
    let mut s = serde_json::to_string_pretty(&sarif).expect("sarif serializes");
    s.push('\n');
    s
}

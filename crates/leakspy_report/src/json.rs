//! JSON renderer: the diagnosis as written by `--report-json` and
//! `leakspy report --format json`.

use crate::diff::Comparison;
use crate::model::Diagnosis;

/// The diagnosis as pretty-printed JSON, ending with a newline.
pub fn render_json(diagnosis: &Diagnosis) -> String {
    // Serializing plain data with string keys cannot fail; non-finite floats
    // become null.
    let mut s = serde_json::to_string_pretty(diagnosis)
        .unwrap_or_else(|e| format!("{{\"error\":{}}}", serde_json::Value::String(e.to_string())));
    s.push('\n');
    s
}

/// A `leakspy diff` comparison as pretty-printed JSON, ending with a newline.
pub fn render_diff_json(comparison: &Comparison) -> String {
    let mut s = serde_json::to_string_pretty(comparison)
        .unwrap_or_else(|e| format!("{{\"error\":{}}}", serde_json::Value::String(e.to_string())));
    s.push('\n');
    s
}

/// Several traces as JSON: each diagnosis under its trace name, and the ranks
/// of all of them in one list.
pub fn render_ranks_json(traces: &[(String, Diagnosis)], rows: &[crate::ranks::RankRow]) -> String {
    #[derive(serde::Serialize)]
    struct Entry<'a> {
        trace: &'a str,
        diagnosis: &'a Diagnosis,
    }
    #[derive(serde::Serialize)]
    struct Many<'a> {
        traces: Vec<Entry<'a>>,
        ranks: &'a [crate::ranks::RankRow],
    }
    let many = Many {
        traces: traces
            .iter()
            .map(|(t, d)| Entry {
                trace: t,
                diagnosis: d,
            })
            .collect(),
        ranks: rows,
    };
    let mut s = serde_json::to_string_pretty(&many)
        .unwrap_or_else(|e| format!("{{\"error\":{}}}", serde_json::Value::String(e.to_string())));
    s.push('\n');
    s
}

/// What a JSON document written by these renderers is, told by its top-level
/// keys: `"a diagnosis"` (`--report-json`, `report --format json`), `"a
/// comparison"` (`diff --format json`), `"a report of several traces"`.
/// `None` for any other document.
pub fn report_kind(keys: &[String]) -> Option<&'static str> {
    let has = |k: &str| keys.iter().any(|x| x == k);
    if has("verdict") && has("summary") && has("series") {
        Some("a diagnosis")
    } else if has("verdict") && has("before") && has("after") {
        Some("a comparison")
    } else if has("traces") && has("ranks") {
        Some("a report of several traces")
    } else {
        None
    }
}

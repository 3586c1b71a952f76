//! leakspy's diagnosis of a trace — does memory leak, by how much per step,
//! with what evidence — and its renderers: terminal text, JSON, and one
//! self-contained HTML file with inline SVG charts. No I/O, no printing.

mod chart;
mod diagnose;
mod diff;
mod extract;
mod html;
mod json;
mod model;
mod text;

pub use diagnose::diagnose;
pub use diff::{compare, Comparison, DiffSide, DiffVerdict};
pub use html::render_html;
pub use json::{render_diff_json, render_json};
pub use model::{
    Basis, DiagnoseOptions, Diagnosis, ExitInfo, Finding, Fit, Growth, RunInfo, SeriesReport,
    ThroughputReport,
};
pub use text::{render_diff_text, render_text};

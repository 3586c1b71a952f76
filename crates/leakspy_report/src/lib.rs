//! leakspy's diagnosis of a trace — does memory leak, by how much per step,
//! with what evidence — and its renderers: terminal text, JSON, and one
//! self-contained HTML file with inline SVG charts. No printing; the only
//! I/O is [`attach_static_findings`], which reads the source files the probe
//! named (the caller decides whether to).

mod allocator;
mod attached;
mod census;
mod chart;
mod diagnose;
mod diff;
mod extract;
mod html;
mod join;
mod json;
mod model;
mod paths;
mod processes;
mod ranks;
mod text;

pub use census::{Grower, GrowthGroup, Holder, Location, StaticMatch};
pub use diagnose::diagnose;
pub use diff::{compare, Comparison, DiffSide, DiffVerdict};
pub use html::{render_html, render_ranks_html};
pub use join::attach_static_findings;
pub use json::{render_diff_json, render_json, render_ranks_json, report_kind};
pub use model::{
    Basis, DiagnoseOptions, Diagnosis, ExitInfo, Finding, Fit, Growth, Mechanism, MechanismKind,
    ProbeInfo, RunInfo, SeriesReport, ThroughputReport,
};
pub use ranks::{merge_rank_rows, rank_rows, RankRow};
pub use text::{render_diff_text, render_ranks_text, render_text};

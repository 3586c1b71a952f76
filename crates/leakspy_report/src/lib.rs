//! leakspy's diagnosis of a trace — does memory leak, by how much per step,
//! with what evidence — and its renderers: terminal text, JSON, and one
//! self-contained HTML file with inline SVG charts. No printing; the only
//! I/O is [`attach_static_findings`], which reads the source files the probe
//! named (the caller decides whether to).

mod allocator;
mod attached;
mod bounded;
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
mod proof;
mod proof_html;
mod ranks;
mod text;

pub use census::{
    judge_exact, Describe, Grower, GrowthGroup, Holder, Location, StaticMatch, JUDGE_SERIES_ARG,
};
pub use diagnose::{diagnose, fmt_rate as fmt_growth};
pub use diff::{compare, holder_name, Comparison, DiffSide, DiffVerdict, HolderChange};
pub use html::{render_html, render_ranks_html};
pub use join::{attach_static_findings, kept_by, modules_beside};
pub use json::{render_diff_json, render_json, render_ranks_json, report_kind};
pub use model::{
    Basis, DiagnoseOptions, Diagnosis, ExitInfo, Finding, Fit, Growth, InUse, Mechanism,
    MechanismKind, ProbeInfo, RunInfo, SeriesReport, ThroughputReport,
};
pub use paths::resolve as resolve_source;
pub use proof::{burst_step, prove, steps_done, FixProof, FixVerdict, Leg, Work};
pub use proof_html::render_fix_html;
pub use ranks::{merge_rank_rows, rank_rows, RankRow};
pub use text::{
    render_diff_text, render_fix_ranks_text, render_proof_text, render_ranks_text, render_text,
};

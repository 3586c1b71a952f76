//! Terminal renderer: verdict line, growth with intervals in human units,
//! findings with their evidence, notes.

use std::fmt::Write;

use leakspy_stats::{fmt_bytes, fmt_value, ValueUnit, Verdict};
use leakspy_trace::Trace;

use crate::census::Describe;
use crate::diagnose::{fmt_rate, fmt_rate_value};
use crate::diff::{Comparison, DiffSide};
use crate::model::{Diagnosis, Growth};
use crate::proof::{FixProof, FixVerdict, Work};
use crate::ranks::RankRow;

/// The diagnosis for a terminal (plain text, no colour codes).
pub fn render_text(d: &Diagnosis, trace: &Trace) -> String {
    let mut out = String::new();
    let tag = match d.verdict {
        Verdict::Leak => "LEAK",
        Verdict::NoLeak => "NO LEAK",
        Verdict::Inconclusive => "INCONCLUSIVE",
    };
    let _ = writeln!(out, "leakspy: {tag}: {}", strip_verdict(&d.summary));
    let cmd = shell_words(&trace.header.command);
    let _ = writeln!(
        out,
        "  run: {} | {:.1} s | {} samples | {} steps | peak RSS {} | {}",
        if cmd.is_empty() {
            "(unknown command)".to_string()
        } else {
            cmd
        },
        d.run.duration_s,
        d.run.samples,
        d.run.steps,
        fmt_bytes(d.run.peak_rss as f64),
        d.exit.message
    );
    if let Some(g) = &d.growth_per_step {
        let _ = writeln!(out, "  growth per step:   {}", growth_line(g));
    }
    if let Some(g) = &d.growth_per_second {
        let _ = writeln!(out, "  growth per second: {}", growth_line(g));
    }
    if let Some(t) = &d.throughput {
        let _ = writeln!(
            out,
            "  throughput: {} -> {} ({:+.0}%){}",
            fmt_value(t.start_rate, ValueUnit::StepsPerSecond),
            fmt_value(t.end_rate, ValueUnit::StepsPerSecond),
            t.change * 100.0,
            if t.falling { ", falling" } else { "" }
        );
    }
    if let Some(c) = &d.probe.cost {
        let _ = writeln!(out, "  probe: {}", c.describe());
        if let Some(parts) = c.parts_text() {
            let _ = writeln!(out, "  probe work: {parts}");
        }
    }
    if !d.findings.is_empty() {
        let _ = writeln!(out, "findings:");
        for (i, f) in d.findings.iter().enumerate() {
            let rate = f
                .per_step
                .as_ref()
                .or(f.per_second.as_ref())
                .map(fmt_rate)
                .unwrap_or_default();
            let _ = writeln!(out, "  {}. {} grows {rate}", i + 1, f.what);
            for e in &f.evidence {
                let _ = writeln!(out, "     - {e}");
            }
        }
    } else if let Some(s) = d.series.iter().find(|s| s.key == d.headline) {
        let _ = writeln!(out, "evidence ({}):", s.what);
        for e in &s.evidence {
            let _ = writeln!(out, "  - {e}");
        }
    }
    render_mechanisms(&mut out, d);
    render_growth(&mut out, d);
    if !d.ranks.is_empty() {
        let _ = writeln!(out, "ranks (each fitted on its own RSS and steps):");
        rank_table(&mut out, &d.ranks, false);
    }
    if !d.notes.is_empty() {
        let _ = writeln!(out, "notes:");
        for n in &d.notes {
            let _ = writeln!(out, "  - {n}");
        }
    }
    sanitize(&out)
}

/// What makes memory grow outside Python objects (processes, the
/// allocators), each with what was measured, how far it goes and its fix.
fn render_mechanisms(out: &mut String, d: &Diagnosis) {
    if d.mechanisms.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "how memory grows ({}):",
        crate::model::mechanisms_topic(&d.mechanisms)
    );
    for (i, m) in d.mechanisms.iter().enumerate() {
        let _ = writeln!(out, "  {}. {}", i + 1, m.summary);
        for e in &m.evidence {
            let _ = writeln!(out, "     - {e}");
        }
        if let Some(b) = m.bound {
            let _ = writeln!(out, "     bound: at most {} in all", fmt_bytes(b));
        }
        if let Some(f) = &m.fix {
            let _ = writeln!(out, "     fix: {f}");
        }
    }
}

/// What grows inside the processes, by holder: at most a few groups, each
/// with its series, creation site and the static findings on its lines.
fn render_growth(out: &mut String, d: &Diagnosis) {
    if d.growth.is_empty() {
        if let Some(why) = &d.no_holder {
            let _ = writeln!(out, "what grows (in-process probe):");
            let _ = writeln!(out, "  holder not found: {why}");
        }
        return;
    }
    let several = d.growth.iter().any(|g| g.pid != d.growth[0].pid);
    // (A group in another process than the job's own says which.)
    let _ = writeln!(out, "what grows (in-process probe):");
    if let Some(why) = &d.no_holder {
        let _ = writeln!(out, "  no holder named: {why}");
    }
    for (i, g) in d.growth.iter().take(MAX_GROUPS).enumerate() {
        let pid = match &g.process {
            Some(p) => format!(" in {p}"),
            None if several => format!(" [pid {}]", g.pid),
            None => String::new(),
        };
        match &g.holder {
            Some(h) if h.is_named() => {
                let lib = if h.library {
                    " (a library's own object)"
                } else {
                    ""
                };
                let _ = writeln!(out, "  {}. held by {}{lib}{pid}", i + 1, h.describe());
                let also: Vec<String> = h
                    .also
                    .iter()
                    .filter(|a| a.is_named())
                    .map(Describe::describe)
                    .collect();
                if !also.is_empty() {
                    let _ = writeln!(out, "     also held by {}", also.join("; "));
                }
                if let Some(hint) = &h.hint {
                    let _ = writeln!(out, "     free it: {hint}");
                }
            }
            _ => match &g.static_holder {
                Some(h) => {
                    let _ = writeln!(
                        out,
                        "  {}. holder not found by the probe; kept by {h} on the line that made them{pid}",
                        i + 1
                    );
                }
                None => {
                    let _ = writeln!(out, "  {}. holder not found{pid}", i + 1);
                }
            },
        }
        for gr in g.growers.iter().take(4) {
            let _ = writeln!(out, "     - {}", gr.describe());
        }
        if let Some(c) = &g.created_at {
            let func = c
                .function
                .as_deref()
                .map(|f| format!(" in {f}()"))
                .unwrap_or_default();
            match &g.site_from {
                Some(from) => {
                    let _ = writeln!(out, "     kept at {} ({from})", c.describe());
                }
                None => {
                    let _ = writeln!(out, "     made at {}{func}", c.describe());
                }
            }
        }
        for m in &g.static_findings {
            let fix = match (&m.fix, m.safe_fix) {
                (Some(f), true) => format!(" [fix: {f}]"),
                (Some(f), false) => format!(" [unsafe fix: {f}]"),
                (None, _) => String::new(),
            };
            let _ = writeln!(
                out,
                "     check: {} {} {}{fix}",
                m.rule,
                m.location(),
                m.message
            );
        }
    }
    if d.growth.len() > MAX_GROUPS {
        let _ = writeln!(
            out,
            "  ({} more in the JSON report)",
            d.growth.len() - MAX_GROUPS
        );
    }
}

/// Groups shown in the terminal; the JSON and HTML reports have all.
const MAX_GROUPS: usize = 5;

/// Control characters from the trace (a command line, a process name) must
/// not drive the terminal: they are shown escaped.
fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() && c != '\n' {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn strip_verdict(summary: &str) -> &str {
    summary.split_once(": ").map_or(summary, |(_, rest)| rest)
}

fn growth_line(g: &Growth) -> String {
    format!(
        "{}  ({:.0}% interval {} .. {}, R² {:.2}, n = {})",
        fmt_rate(g),
        g.confidence * 100.0,
        fmt_rate_value(g.lo, g),
        fmt_rate_value(g.hi, g),
        g.r2,
        g.n
    )
}

/// The command as a shell would show it (arguments with spaces quoted).
pub(crate) fn shell_words(cmd: &[String]) -> String {
    cmd.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A `leakspy diff` comparison for a terminal: both sides in columns.
pub fn render_diff_text(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "leakspy diff: {}: {}",
        c.verdict.as_str().to_uppercase(),
        c.reason
    );
    let _ = writeln!(
        out,
        "  compared: {}, per {}",
        c.what,
        match c.basis {
            crate::model::Basis::Step => "step",
            crate::model::Basis::Second => "second",
        }
    );
    const LABELS: [&str; 7] = [
        "trace", "verdict", "growth", "interval", "R², n", "shape", "run",
    ];
    let (before, after) = (side_cells(&c.before), side_cells(&c.after));
    let cells: Vec<(&str, String, String)> = LABELS
        .iter()
        .zip(before.into_iter().zip(after))
        .map(|(k, (b, a))| (*k, b, a))
        .collect();
    let w = cells
        .iter()
        .map(|(_, b, _)| b.chars().count())
        .max()
        .unwrap_or(0)
        .max(6);
    let _ = writeln!(out, "  {:<10} {:<w$}   after", "", "before");
    for (k, b, a) in &cells {
        let _ = writeln!(out, "  {k:<10} {b:<w$}   {a}");
    }
    if let Some(r) = c.ratio {
        let _ = writeln!(out, "  ratio after/before: {r:.2}");
    }
    for (name, s) in [("before", &c.before), ("after", &c.after)] {
        let _ = writeln!(out, "  {name}: {}", s.summary);
    }
    if !c.holders.is_empty() {
        let _ = writeln!(out, "  what the probe saw grow before:");
        for h in &c.holders {
            let _ = writeln!(out, "    - {} (before: {})", h.describe(), h.before);
        }
    }
    sanitize(&out)
}

/// The proof of `leakspy fix`: its verdict with both growths and what
/// became of each holder on one line (`FIXED: +72.1 KiB/step (95% ...) →
/// flat (95% ...); held by Trainer.history: gone`), then how the two runs
/// went, and why they cannot be compared or what still grows.
pub fn render_proof_text(p: &FixProof) -> String {
    let mut out = String::new();
    let c = &p.comparison;
    // "95% +64.9 … +78.7 KiB/step": the unit once, when both ends share it.
    let interval = |g: &Growth| {
        let (lo, hi) = (fmt_rate_value(g.lo, g), fmt_rate_value(g.hi, g));
        let unit = hi.rsplit_once(' ').map_or("", |(_, u)| u);
        let lo = match lo.strip_suffix(unit) {
            Some(n) if !unit.is_empty() => n.trim_end().to_string(),
            _ => lo,
        };
        format!("{:.0}% {lo} … {hi}", g.confidence * 100.0)
    };
    // "flat" only where the interval holds zero; a slope too small to be a
    // leak is still shown as measured.
    let side = |s: &DiffSide| match &s.growth {
        Some(g) if s.verdict == Verdict::NoLeak && g.lo <= 0.0 && g.hi >= 0.0 => {
            format!("flat ({})", interval(g))
        }
        // Warm-up or a plateau: the fit over the whole run rises, the
        // verdict says why that is no leak, first.
        Some(g) if s.verdict == Verdict::NoLeak => {
            format!(
                "no leak, {} (fitted over the run {}, {})",
                s.shape_text,
                fmt_rate(g),
                interval(g)
            )
        }
        Some(g) => format!("{} ({})", fmt_rate(g), interval(g)),
        None => s.shape_text.clone(),
    };
    // Told on what malloc holds in use, not resident memory: said first.
    let on = if c.series == crate::diff::IN_USE_SERIES {
        " (on malloc's memory in use)"
    } else {
        ""
    };
    let _ = write!(
        out,
        "{}{on}: {} → {}",
        p.verdict.as_str(),
        side(&c.before),
        side(&c.after)
    );
    for h in &p.comparison.holders {
        let _ = write!(out, "; {}", h.describe());
    }
    out.push('\n');
    let work = |w: &Work, s: &DiffSide| {
        let why = match &s.leak_by {
            Some(by) if s.verdict == Verdict::Leak => {
                format!("by {by}; memory alone: {}", s.shape_text)
            }
            _ => s.shape_text.clone(),
        };
        format!(
            "{} steps in {:.1} s{}, {} ({why})",
            w.steps,
            w.duration_s,
            w.steps_per_s
                .map(|r| format!(" ({r:.1}/s)"))
                .unwrap_or_default(),
            match s.verdict {
                Verdict::Leak => "a leak",
                Verdict::NoLeak => "no leak",
                Verdict::Inconclusive => "inconclusive",
            },
        )
    };
    let _ = writeln!(out, "  before: {}", work(&p.before, &c.before));
    let _ = writeln!(out, "  after:  {}", work(&p.after, &c.after));
    match p.verdict {
        FixVerdict::NotComparable => {
            out.push_str("  the runs cannot be compared:\n");
            for why in &p.not_comparable {
                let _ = writeln!(out, "    - {why}");
            }
        }
        FixVerdict::NotFixed | FixVerdict::Improved => {
            let _ = writeln!(out, "  {} ({})", c.reason, c.verdict.as_str());
            if !p.still_grows.is_empty() {
                out.push_str("  still grows after the fixes:\n");
                for (i, g) in p.still_grows.iter().enumerate() {
                    let _ = writeln!(out, "    {}. {g}", i + 1);
                }
            }
        }
        FixVerdict::Fixed => {}
    }
    sanitize(&out)
}

/// The column of one side of a diff, in the order of the row labels.
fn side_cells(s: &DiffSide) -> Vec<String> {
    let dash = || "-".to_string();
    vec![
        s.label.clone(),
        match &s.leak_by {
            Some(by) if s.verdict == Verdict::Leak => format!("leak (by {by})"),
            _ => s.verdict.as_str().to_string(),
        },
        s.growth.as_ref().map(fmt_rate).unwrap_or_else(dash),
        s.growth
            .as_ref()
            .map(|g| {
                format!(
                    "{:.0}%: {} .. {}",
                    g.confidence * 100.0,
                    fmt_rate_value(g.lo, g),
                    fmt_rate_value(g.hi, g)
                )
            })
            .unwrap_or_else(dash),
        s.growth
            .as_ref()
            .map(|g| format!("{:.2}, {}", g.r2, g.n))
            .unwrap_or_else(dash),
        s.shape_text.clone(),
        format!("{:.1} s, {} steps", s.duration_s, s.steps),
    ]
}

/// Several traces (one `leakspy run` per node or per rank): each trace's
/// verdict, then every rank side by side.
pub fn render_ranks_text(traces: &[(String, Diagnosis)], rows: &[RankRow]) -> String {
    let mut out = String::new();
    let leaks = traces
        .iter()
        .filter(|(_, d)| d.verdict == Verdict::Leak)
        .count();
    let _ = writeln!(
        out,
        "leakspy: {} traces, {} with a leak",
        traces.len(),
        leaks
    );
    for (name, d) in traces {
        let _ = writeln!(out, "  {name}: {}", d.summary);
    }
    let _ = writeln!(out, "ranks side by side:");
    rank_table(&mut out, rows, true);
    let leaking: Vec<String> = rows
        .iter()
        .filter(|r| r.verdict == Verdict::Leak)
        .map(rank_label)
        .collect();
    if !leaking.is_empty() && leaking.len() < rows.len() {
        let _ = writeln!(
            out,
            "only {} of {} {}: look at what {} that the others do not",
            leaking.join(", "),
            rows.len(),
            if leaking.len() == 1 { "leaks" } else { "leak" },
            if leaking.len() == 1 {
                "it does"
            } else {
                "they do"
            }
        );
    }
    sanitize(&out)
}

/// The ranks of a torchrun job before and after `leakspy fix`'s fixes, side
/// by side (`rows`: both runs', their trace named `before` and `after`).
pub fn render_fix_ranks_text(rows: &[RankRow]) -> String {
    let mut out = String::from("ranks, before and after the fixes:\n");
    rank_table(&mut out, rows, true);
    sanitize(&out)
}

fn rank_label(r: &RankRow) -> String {
    match r.rank {
        Some(k) => format!("rank {k}"),
        None => r.trace.clone(),
    }
}

/// One line per rank: the columns a person compares across ranks.
fn rank_table(out: &mut String, rows: &[RankRow], with_trace: bool) {
    let mut table: Vec<Vec<String>> = vec![vec![
        "rank".into(),
        "host".into(),
        "pid".into(),
        "steps".into(),
        "peak RSS".into(),
        "growth".into(),
        "verdict".into(),
    ]];
    if with_trace {
        table[0].push("trace".into());
    }
    for r in rows {
        let rank = match (r.rank, r.local_rank, r.world_size) {
            (Some(k), Some(l), Some(w)) => format!("{k}/{w} (local {l})"),
            (Some(k), _, Some(w)) => format!("{k}/{w}"),
            (Some(k), _, None) => k.to_string(),
            (None, ..) => "-".into(),
        };
        let growth = r
            .growth_per_step
            .as_ref()
            .or(r.growth_per_second.as_ref())
            .map(fmt_rate)
            .unwrap_or_else(|| "-".into());
        let mut row = vec![
            rank,
            if r.host.is_empty() {
                "-".into()
            } else {
                r.host.clone()
            },
            r.pid.map_or_else(|| "-".into(), |p| p.to_string()),
            r.steps.to_string(),
            fmt_bytes(r.peak_rss as f64),
            growth,
            r.shape.clone(),
        ];
        if with_trace {
            row.push(r.trace.clone());
        }
        table.push(row);
    }
    let widths: Vec<usize> = (0..table[0].len())
        .map(|c| {
            table
                .iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in &table {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        let _ = writeln!(out, "  {}", line.join("  ").trim_end());
    }
    for r in rows {
        if let Some(g) = &r.grows {
            let _ = writeln!(out, "  {}: {g}", rank_label(r));
        }
    }
}

//! Ranks side by side: in a torchrun/DDP job every rank is a process with its
//! own steps and its own memory, and a leak is often in one rank only (rank 0
//! keeps the metrics, the logger, the checkpoints). Each rank is fitted on its
//! own RSS against its own steps. With several traces (one `leakspy run` per
//! node) the rows of all of them make one table.

use serde::Serialize;

use leakspy_stats::Verdict;
use leakspy_trace::Trace;

use crate::diagnose::analyse_series;
use crate::extract::{Series, StepClock};
use crate::model::{Basis, DiagnoseOptions, Diagnosis, Growth};

/// One rank (a process whose probe reported `RANK`), or a whole trace when
/// none did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankRow {
    /// The trace the row comes from (as the user named it).
    pub trace: String,
    pub host: String,
    pub pid: Option<u32>,
    pub rank: Option<i64>,
    pub local_rank: Option<i64>,
    pub world_size: Option<i64>,
    /// Steps this process counted.
    pub steps: usize,
    pub peak_rss: u64,
    pub last_rss: u64,
    pub verdict: Verdict,
    /// The verdict in a few words (`leak`, or the shape of a non-leak).
    pub shape: String,
    pub growth_per_step: Option<Growth>,
    pub growth_per_second: Option<Growth>,
    /// The first thing the probe saw growing in this process, with its holder.
    pub grows: Option<String>,
}

/// The rows of one trace: one per ranked process; without ranks, one row for
/// the whole trace (its diagnosis).
pub fn rank_rows(
    trace: &Trace,
    d: &Diagnosis,
    label: &str,
    opts: &DiagnoseOptions,
) -> Vec<RankRow> {
    let ranked = ranked_processes(trace);
    if ranked.is_empty() {
        return vec![RankRow {
            trace: label.to_string(),
            host: trace.header.hostname.clone(),
            pid: trace.header.pid,
            rank: None,
            local_rank: None,
            world_size: None,
            steps: d.run.steps,
            peak_rss: d.run.peak_rss,
            last_rss: d.run.last_rss,
            verdict: d.verdict,
            shape: d
                .series
                .iter()
                .find(|s| s.key == d.headline)
                .map(|s| shape_words(s.verdict, &s.shape_text))
                .unwrap_or_else(|| d.verdict.as_str().to_string()),
            growth_per_step: d.growth_per_step.clone(),
            growth_per_second: d.growth_per_second.clone(),
            grows: d.growth.first().map(|g| g.headline()),
        }];
    }
    ranked
        .into_iter()
        .map(|p| {
            let mut series = Series {
                key: format!("proc.{}.rss", p.pid),
                what: format!("RSS of rank {}", p.rank),
                t: Vec::new(),
                y: Vec::new(),
            };
            for s in trace.samples() {
                if let Some(q) = s.procs.iter().find(|q| q.pid == p.pid) {
                    series.t.push(s.t);
                    series.y.push(q.rss as f64);
                }
            }
            let clock = StepClock::for_pid(trace, Some(p.pid));
            let basis = if clock.len() >= opts.min_steps.max(2) {
                Basis::Step
            } else {
                Basis::Second
            };
            let (r, _) = analyse_series(&series, &clock, basis, opts);
            RankRow {
                trace: label.to_string(),
                host: trace.header.hostname.clone(),
                pid: Some(p.pid),
                rank: Some(p.rank),
                local_rank: p.local_rank,
                world_size: p.world_size,
                steps: clock.steps_done().unwrap_or(0),
                peak_rss: r.peak as u64,
                last_rss: r.last as u64,
                verdict: r.verdict,
                shape: shape_words(r.verdict, &r.shape_text),
                growth_per_step: r.per_step,
                growth_per_second: r.per_second,
                grows: d
                    .growth
                    .iter()
                    .find(|g| g.pid == p.pid)
                    .map(|g| g.headline()),
            }
        })
        .collect()
}

/// Rows of several traces in one table, by rank (rankless rows last, in the
/// order given).
pub fn merge_rank_rows(rows: impl IntoIterator<Item = RankRow>) -> Vec<RankRow> {
    let mut all: Vec<(usize, RankRow)> = rows.into_iter().enumerate().collect();
    all.sort_by(|(ia, a), (ib, b)| {
        let key = |r: &RankRow| r.rank.unwrap_or(i64::MAX);
        key(a)
            .cmp(&key(b))
            .then(a.local_rank.cmp(&b.local_rank))
            .then(ia.cmp(ib))
    });
    all.into_iter().map(|(_, r)| r).collect()
}

fn shape_words(verdict: Verdict, shape_text: &str) -> String {
    match verdict {
        Verdict::Leak => "leak".to_string(),
        _ => shape_text.to_string(),
    }
}

struct RankedProcess {
    pid: u32,
    rank: i64,
    local_rank: Option<i64>,
    world_size: Option<i64>,
}

/// Processes whose probe said hello with a rank. A forked child inherits its
/// parent's environment (DataLoader workers see `RANK` too), so only the
/// first process per rank counts: the one that runs the training loop, which
/// is also the one that counts steps.
fn ranked_processes(trace: &Trace) -> Vec<RankedProcess> {
    let mut out: Vec<RankedProcess> = Vec::new();
    let step_pids: std::collections::HashSet<u32> = trace.steps().filter_map(|s| s.pid).collect();
    for m in trace.probes() {
        let int = |k: &str| m.get(k).and_then(serde_json::Value::as_i64);
        let (Some(pid), Some(rank)) = (int("pid"), int("rank")) else {
            continue;
        };
        let Ok(pid) = u32::try_from(pid) else {
            continue;
        };
        let p = RankedProcess {
            pid,
            rank,
            local_rank: int("local_rank"),
            world_size: int("world_size"),
        };
        match out.iter_mut().find(|q| q.rank == rank) {
            // A worker of that rank said hello first; the stepping process wins.
            Some(q) if !step_pids.contains(&q.pid) && step_pids.contains(&pid) => *q = p,
            Some(_) => {}
            None => out.push(p),
        }
    }
    out.sort_by_key(|p| p.rank);
    out
}

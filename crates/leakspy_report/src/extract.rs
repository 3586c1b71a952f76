//! Pulls the memory series and the step clock out of a trace.

use std::collections::{BTreeMap, HashMap};

use leakspy_trace::Trace;

/// One memory series over time.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    pub key: String,
    pub what: String,
    /// Seconds since start.
    pub t: Vec<f64>,
    /// Bytes.
    pub y: Vec<f64>,
}

/// Key of the tree's memory fitted on PSS (`Sample::tree_memory`): a tree
/// of several processes, whose summed RSS counts every shared page once per
/// process that maps it.
pub(crate) const TREE_PSS: &str = "total.pss";
/// Key of the summed RSS, the tree's memory for one process.
pub(crate) const TREE_RSS: &str = "total.rss";

/// CPU seconds the process tree had used by each sample that read any (`/proc` times): each
/// process's rises summed, so one born or gone mid-run counts what it used while seen. The
/// measure of what steps cost whatever else the machine ran (`diagnose`, `proof`).
pub(crate) fn tree_cpu_used(trace: &Trace) -> Vec<(f64, f64)> {
    let mut last: HashMap<u32, f64> = HashMap::new();
    let mut used = 0.0;
    let mut out = Vec::new();
    for s in trace.samples() {
        let mut seen = false;
        for p in &s.procs {
            if let Some(c) = p.cpu_s.filter(|c| c.is_finite()) {
                seen = true;
                if let Some(prev) = last.insert(p.pid, c) {
                    used += (c - prev).max(0.0);
                }
            }
        }
        if seen {
            out.push((s.t, used));
        }
    }
    out
}

/// The memory series worth analysing: tree totals (RSS, anon, and PSS when
/// the tree had several processes), the biggest processes when there are
/// several, and GPU memory per device.
pub(crate) fn memory_series(trace: &Trace, max_processes: usize) -> Vec<Series> {
    let mut out = Vec::new();
    let mut rss = new_series("total.rss", "resident memory (RSS) of the process tree");
    let mut anon = new_series("total.anon", "anonymous memory (heap) of the process tree");
    let mut procs: BTreeMap<u32, (String, Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for s in trace.samples() {
        rss.t.push(s.t);
        rss.y.push(s.total.rss as f64);
        anon.t.push(s.t);
        anon.y.push(s.total.anon as f64);
        for p in &s.procs {
            let e = procs
                .entry(p.pid)
                .or_insert_with(|| (p.name.clone(), Vec::new(), Vec::new()));
            // Named as last seen: sampled between its fork and its exec, a child still has
            // its parent's name.
            if e.0 != p.name && !p.name.is_empty() {
                e.0.clone_from(&p.name);
            }
            e.1.push(s.t);
            e.2.push(p.rss as f64);
        }
    }
    let anon_recorded = anon.y.iter().any(|&v| v > 0.0);
    out.push(rss);
    if let Some(pss) = tree_pss_series(trace) {
        out.push(pss);
    }
    if anon_recorded {
        out.push(anon);
    }
    if procs.len() > 1 {
        let mut by_peak: Vec<(u32, f64)> = procs
            .iter()
            .map(|(pid, (_, _, y))| (*pid, y.iter().copied().fold(0.0, f64::max)))
            .collect();
        by_peak.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        for (pid, _) in by_peak.into_iter().take(max_processes) {
            let (name, t, y) = procs.remove(&pid).unwrap_or_default();
            out.push(Series {
                key: format!("proc.{pid}.rss"),
                what: format!("RSS of process {pid} ({name})"),
                t,
                y,
            });
        }
    }
    let mut gpus: BTreeMap<u32, Series> = BTreeMap::new();
    for g in trace.gpu() {
        for d in &g.devices {
            let s = gpus.entry(d.index).or_insert_with(|| Series {
                key: format!("gpu.{}.used", d.index),
                what: format!("GPU {} memory used ({})", d.index, d.name),
                t: Vec::new(),
                y: Vec::new(),
            });
            s.t.push(g.t);
            s.y.push(d.used as f64);
        }
    }
    out.extend(gpus.into_values());
    out
}

/// The tree's memory on PSS (`TreeMemory`), when several processes were
/// sampled for a tenth of the run or more with their PSS read.
fn tree_pss_series(trace: &Trace) -> Option<Series> {
    let (mut multi, mut with_pss) = (0usize, 0usize);
    for s in trace.samples() {
        if s.procs.len() > 1 {
            multi += 1;
            with_pss += usize::from(s.total.pss.is_some());
        }
    }
    if with_pss < 8 || multi * 10 < trace.samples().count() {
        return None;
    }
    let mut pss = new_series(TREE_PSS, "proportional memory (PSS) of the process tree");
    let mut tree = leakspy_trace::TreeMemory::new(false, true);
    for s in trace.samples() {
        if let Some(m) = tree.observe(s) {
            pss.t.push(s.t);
            pss.y.push(m as f64);
        }
    }
    Some(pss)
}

fn new_series(key: &str, what: &str) -> Series {
    Series {
        key: key.to_string(),
        what: what.to_string(),
        t: Vec::new(),
        y: Vec::new(),
    }
}

/// Maps seconds to steps done, interpolating between step events.
#[derive(Debug, Clone, Default)]
pub(crate) struct StepClock {
    /// Event times, increasing.
    pub t: Vec<f64>,
    /// Step numbers, increasing.
    pub step: Vec<f64>,
}

impl StepClock {
    /// The step events of one process (the one that reported most: with
    /// several ranks each counts its own steps). Step numbers are used when
    /// they increase; otherwise events are counted.
    pub fn from_trace(trace: &Trace) -> StepClock {
        let mut counts: HashMap<Option<u32>, usize> = HashMap::new();
        for s in trace.steps() {
            *counts.entry(s.pid).or_default() += 1;
        }
        let Some(pid) = counts
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map(|(pid, _)| *pid)
        else {
            return StepClock::default();
        };
        StepClock::for_pid(trace, pid)
    }

    /// The step events of one process (`None`: steps with no pid, from
    /// `--step-regex`).
    pub fn for_pid(trace: &Trace, pid: Option<u32>) -> StepClock {
        let mut ev: Vec<(f64, u64)> = trace
            .steps()
            .filter(|s| s.pid == pid)
            .map(|s| (s.t, s.step))
            .collect();
        ev.sort_by(|a, b| a.0.total_cmp(&b.0));
        let increasing = ev.windows(2).all(|w| w[1].1 > w[0].1);
        let mut clock = StepClock::default();
        for (i, (t, s)) in ev.into_iter().enumerate() {
            if clock.t.last().is_some_and(|&last| t <= last) {
                continue;
            }
            clock.t.push(t);
            clock
                .step
                .push(if increasing { s as f64 } else { (i + 1) as f64 });
        }
        clock
    }

    /// The last step number: steps done by the clock's process (`None`
    /// without steps).
    pub fn steps_done(&self) -> Option<usize> {
        self.step.last().map(|&s| s as usize)
    }

    pub fn len(&self) -> usize {
        self.t.len()
    }

    /// Steps done at time `t`; `None` before the first or after the last
    /// step event (imports before training, evaluation or exit after it).
    pub fn step_at(&self, t: f64) -> Option<f64> {
        let n = self.t.len();
        if n < 2 || t < self.t[0] || t > self.t[n - 1] {
            return None;
        }
        let i = self.t.partition_point(|&x| x <= t);
        if i >= n {
            return Some(self.step[n - 1]);
        }
        let (t0, t1) = (self.t[i - 1], self.t[i]);
        let (s0, s1) = (self.step[i - 1], self.step[i]);
        Some(s0 + (t - t0) / (t1 - t0) * (s1 - s0))
    }

    /// `(t, steps)` pairs of the series samples that fall inside the steps.
    /// `t` must be sorted (samples are written in time order).
    pub fn map(&self, t: &[f64], y: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let mut xs = Vec::with_capacity(t.len());
        let mut ys = Vec::with_capacity(t.len());
        let n = self.t.len();
        if n < 2 {
            return (xs, ys);
        }
        // One merge-like walk instead of a search per sample.
        let mut i = 0;
        for (&ti, &yi) in t.iter().zip(y) {
            if ti < self.t[0] || ti > self.t[n - 1] {
                continue;
            }
            while i + 1 < n && self.t[i + 1] < ti {
                i += 1;
            }
            let j = (i + 1).min(n - 1);
            let (t0, t1) = (self.t[i], self.t[j]);
            let (s0, s1) = (self.step[i], self.step[j]);
            let s = if t1 > t0 {
                s0 + (ti - t0) / (t1 - t0) * (s1 - s0)
            } else {
                s1
            };
            xs.push(s);
            ys.push(yi);
        }
        (xs, ys)
    }

    /// Step events as `(t, step)` for the throughput trend.
    pub fn events(&self) -> Vec<(f64, f64)> {
        self.t
            .iter()
            .copied()
            .zip(self.step.iter().copied())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolates_between_steps() {
        let c = StepClock {
            t: vec![1.0, 2.0, 4.0],
            step: vec![1.0, 2.0, 3.0],
        };
        assert_eq!(c.step_at(0.5), None);
        assert_eq!(c.step_at(1.5), Some(1.5));
        assert_eq!(c.step_at(3.0), Some(2.5));
        assert_eq!(c.step_at(4.0), Some(3.0));
        assert_eq!(c.step_at(4.1), None);
        let (xs, ys) = c.map(
            &[0.5, 1.0, 1.5, 3.0, 4.0, 4.1],
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        );
        assert_eq!(xs, vec![1.0, 1.5, 2.5, 3.0]);
        assert_eq!(ys, vec![2.0, 3.0, 4.0, 5.0]);
    }
}

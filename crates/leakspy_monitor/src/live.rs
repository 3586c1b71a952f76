//! Live figures for the status line, kept in bounded memory: per-second
//! minima of total RSS (minima, because a sawtooth of temporaries and
//! allocator caches inflate maxima) over the last few minutes, and the times
//! of recent steps.

use std::collections::VecDeque;

use leakspy_trace::{ProcSample, Sample};

/// Seconds of per-second minima kept for the growth estimate.
const GROWTH_WINDOW: usize = 120;
/// Fewer buckets than this give no growth estimate (too noisy to show).
const GROWTH_MIN_BUCKETS: usize = 10;
/// Seconds of step times kept for steps/s.
const STEP_WINDOW_S: f64 = 60.0;

/// What the status line shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LiveStatus {
    pub elapsed: f64,
    /// Total RSS of the tree at the last sample.
    pub rss: u64,
    pub anon: u64,
    pub procs: usize,
    pub steps: u64,
    pub last_step: Option<u64>,
    pub steps_per_s: Option<f64>,
    /// Bytes per second, Theil–Sen slope of per-second minima (recent window).
    pub growth_per_s: Option<f64>,
    /// Bytes left before the tighter of MemAvailable and the cgroup limit.
    pub headroom: Option<u64>,
    /// Seconds until `headroom` is used up at `growth_per_s`; only when growing.
    pub time_to_oom_s: Option<f64>,
    /// GPU memory used by the tree (sum over devices), when sampled.
    pub gpu_used: Option<u64>,
    /// The processes of the last sample (for per-process metrics).
    pub processes: Vec<ProcSample>,
    /// `(pid, rank)` of the processes whose probe reported a torchrun rank.
    pub ranks: Vec<(u32, i64)>,
}

#[derive(Debug, Default)]
pub struct LiveEstimator {
    status: LiveStatus,
    /// (bucket mid time, minimum RSS in that second)
    buckets: VecDeque<(f64, u64)>,
    open: Option<(i64, u64)>,
    step_times: VecDeque<f64>,
}

impl LiveEstimator {
    pub fn status(&self) -> &LiveStatus {
        &self.status
    }

    pub fn set_elapsed(&mut self, t: f64) {
        self.status.elapsed = t;
    }

    pub fn on_sample(&mut self, s: &Sample) {
        let st = &mut self.status;
        st.elapsed = s.t;
        st.rss = s.total.rss;
        st.anon = s.total.anon;
        st.procs = s.procs.len();
        st.processes.clone_from(&s.procs);
        let cg_room = s
            .cgroup
            .and_then(|c| c.limit.map(|l| l.saturating_sub(c.usage)));
        st.headroom = match (s.mem_available, cg_room) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let sec = s.t.floor() as i64;
        match self.open {
            Some((b, m)) if b == sec => self.open = Some((b, m.min(s.total.rss))),
            Some((b, m)) => {
                self.buckets.push_back((b as f64 + 0.5, m));
                if self.buckets.len() > GROWTH_WINDOW {
                    self.buckets.pop_front();
                }
                self.open = Some((sec, s.total.rss));
                self.status.growth_per_s = growth(&self.buckets);
            }
            None => self.open = Some((sec, s.total.rss)),
        }
        let st = &mut self.status;
        st.time_to_oom_s = match (st.growth_per_s, st.headroom) {
            // Below 1 KiB/s the estimate would be years of noise.
            (Some(g), Some(h)) if g > 1024.0 => Some(h as f64 / g),
            _ => None,
        };
    }

    pub fn on_step(&mut self, t: f64, step: u64) {
        self.status.steps += 1;
        self.status.last_step = Some(step);
        self.step_times.push_back(t);
        while self
            .step_times
            .front()
            .is_some_and(|&f| t - f > STEP_WINDOW_S)
        {
            self.step_times.pop_front();
        }
        self.status.steps_per_s = match (self.step_times.front(), self.step_times.len()) {
            (Some(&first), n) if n >= 2 && t > first => Some((n - 1) as f64 / (t - first)),
            _ => None,
        };
    }

    pub fn on_rank(&mut self, pid: u32, rank: i64) {
        if !self.status.ranks.iter().any(|&(p, _)| p == pid) {
            self.status.ranks.push((pid, rank));
        }
    }

    pub fn on_gpu(&mut self, used: u64) {
        self.status.gpu_used = Some(used);
    }
}

fn growth(buckets: &VecDeque<(f64, u64)>) -> Option<f64> {
    if buckets.len() < GROWTH_MIN_BUCKETS {
        return None;
    }
    let pts: Vec<(f64, f64)> = buckets.iter().map(|&(t, v)| (t, v as f64)).collect();
    theil_sen(&pts)
}

/// Median of pairwise slopes: robust to the outliers a sawtooth leaves in minima.
pub fn theil_sen(pts: &[(f64, f64)]) -> Option<f64> {
    let mut slopes = Vec::with_capacity(pts.len() * pts.len() / 2);
    for (i, a) in pts.iter().enumerate() {
        for b in &pts[i + 1..] {
            let dt = b.0 - a.0;
            if dt > 0.0 {
                slopes.push((b.1 - a.1) / dt);
            }
        }
    }
    if slopes.is_empty() {
        return None;
    }
    let mid = slopes.len() / 2;
    let (_, m, _) = slopes.select_nth_unstable_by(mid, f64::total_cmp);
    Some(*m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use leakspy_trace::{CgroupSample, MemTotals};

    fn sample(t: f64, rss: u64, avail: u64) -> Sample {
        Sample {
            t,
            procs: vec![],
            total: MemTotals {
                rss,
                ..Default::default()
            },
            mem_available: Some(avail),
            cgroup: None,
        }
    }

    #[test]
    fn steady_growth_gives_rate_and_time_to_oom() {
        let mut e = LiveEstimator::default();
        // 1 MiB/s with a sawtooth of +50 MiB temporaries on top.
        for i in 0..300 {
            let t = i as f64 * 0.1;
            let saw = if i % 7 == 0 { 50 << 20 } else { 0 };
            e.on_sample(&sample(
                t,
                (100 << 20) + (t * 1048576.0) as u64 + saw,
                1 << 30,
            ));
        }
        let st = e.status();
        let g = st.growth_per_s.unwrap();
        assert!((g - 1048576.0).abs() < 0.05 * 1048576.0, "growth {g}");
        let tto = st.time_to_oom_s.unwrap();
        assert!((tto - 1024.0).abs() < 60.0, "tto {tto}");
    }

    #[test]
    fn flat_memory_has_no_time_to_oom() {
        let mut e = LiveEstimator::default();
        for i in 0..300 {
            e.on_sample(&sample(i as f64 * 0.1, 100 << 20, 1 << 30));
        }
        assert_eq!(e.status().growth_per_s, Some(0.0));
        assert_eq!(e.status().time_to_oom_s, None);
    }

    #[test]
    fn cgroup_limit_tightens_headroom() {
        let mut e = LiveEstimator::default();
        let mut s = sample(0.0, 10, 1 << 30);
        s.cgroup = Some(CgroupSample {
            limit: Some(1000),
            usage: 400,
            oom_kill: 0,
        });
        e.on_sample(&s);
        assert_eq!(e.status().headroom, Some(600));
    }

    #[test]
    fn steps_per_second_over_recent_window() {
        let mut e = LiveEstimator::default();
        for i in 0..100 {
            e.on_step(i as f64 * 0.5, i);
        }
        assert_eq!(e.status().steps, 100);
        assert_eq!(e.status().last_step, Some(99));
        assert!((e.status().steps_per_s.unwrap() - 2.0).abs() < 1e-9);
    }
}

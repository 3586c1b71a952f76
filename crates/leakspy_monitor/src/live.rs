//! Live figures for the status line, kept in bounded memory: per-second
//! minima of total RSS (minima, because a sawtooth of temporaries and
//! allocator caches inflate maxima) over the last few minutes, the times
//! of recent steps, and the live leak fit ([`LeakWatch`]): memory since the
//! first step against steps done, judged as the final report judges it.

use std::collections::VecDeque;

use leakspy_stats::{analyze, Verdict, VerdictOptions};
use leakspy_trace::{ProcSample, Sample};

/// Seconds of per-second minima kept for the growth estimate.
const GROWTH_WINDOW: usize = 120;
/// Fewer buckets than this give no growth estimate (too noisy to show).
const GROWTH_MIN_BUCKETS: usize = 10;
/// Seconds of step times kept for steps/s.
const STEP_WINDOW_S: f64 = 60.0;
/// Samples the live leak fit keeps (pairs are merged into their minimum
/// beyond it, so a long run keeps its whole span at a coarser grain).
const WATCH_SAMPLES: usize = 4000;
/// A job that has not stepped by then (no optimizer, no `leakspy.step()`)
/// gets a rate per second all the same.
const NO_STEP_RATE_AFTER_S: f64 = 60.0;
/// Seconds between live fits.
const WATCH_EVERY_S: f64 = 1.0;
/// Fits in a row that must agree before the status line changes its mind.
const WATCH_AGREE: usize = 2;
/// Steps before the fit is made per step rather than per second.
const WATCH_MIN_STEPS: usize = 20;
/// Least growth over the fit that asks the probe to look (`rising`): half
/// of what a leak verdict needs (4 MiB, 1 % of the level rather than 2 %).
const RISE_MIN_BYTES: f64 = 4.0 * 1024.0 * 1024.0;
const RISE_MIN_REL: f64 = 0.01;

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
    /// The most steps one process of the tree has reported: the child's,
    /// or a descendant's (a torchrun rank, a notebook's kernel), whose
    /// steps `steps` leaves to the report.
    pub tree_steps: u64,
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
    /// The live leak fit, once confident: memory grows with the work done
    /// as a leak does.
    pub suspected: Option<LiveLeak>,
    /// The first holder the in-process probe named (`Trainer.losses (list)`).
    pub holder: Option<String>,
    /// A bounded buffer filling, as the last census saw it
    /// (`ReplayBuffer.memory 21 % of 75000`): growth that stops when it is full.
    pub filling: Option<String>,
}

/// What the live fit says about a leak it suspects.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveLeak {
    /// Bytes per unit of `per` (its slope).
    pub slope: f64,
    /// `"step"` or `"s"`.
    pub per: &'static str,
    /// Seconds since the start when it was first suspected.
    pub since: f64,
    /// Its rate is known, not still moving
    /// ([`leakspy_stats::SeriesAnalysis::settled`]).
    pub settled: bool,
}

#[derive(Debug, Default)]
pub struct LiveEstimator {
    status: LiveStatus,
    /// (bucket mid time, minimum RSS in that second)
    buckets: VecDeque<(f64, u64)>,
    open: Option<(i64, u64)>,
    /// `(t, step number)` of recent steps.
    step_times: VecDeque<(f64, u64)>,
    watch: LeakWatch,
    /// The tree's memory as the report fits it.
    tree: leakspy_trace::TreeMemory,
}

impl LiveEstimator {
    pub fn status(&self) -> &LiveStatus {
        &self.status
    }

    pub fn set_elapsed(&mut self, t: f64) {
        self.status.elapsed = t;
    }

    pub fn set_pss_unreadable(&mut self, unreadable: bool) {
        self.tree.set_pss_unreadable(unreadable);
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
        // The tree's memory as the report fits it (PSS once several
        // processes ran).
        let Some(mem) = self.tree.observe(s) else {
            return;
        };
        let sec = s.t.floor() as i64;
        match self.open {
            Some((b, m)) if b == sec => self.open = Some((b, m.min(mem))),
            Some((b, m)) => {
                self.buckets.push_back((b as f64 + 0.5, m));
                if self.buckets.len() > GROWTH_WINDOW {
                    self.buckets.pop_front();
                }
                self.open = Some((sec, mem));
                // Before the first step memory rises with imports and set-up:
                // no rate (and no time to OOM) from that, unless the job runs
                // long without ever stepping.
                self.status.growth_per_s = if self.status.steps > 0 || s.t >= NO_STEP_RATE_AFTER_S {
                    growth(&self.buckets)
                } else {
                    None
                };
            }
            None => self.open = Some((sec, mem)),
        }
        let st = &mut self.status;
        st.time_to_oom_s = match (st.growth_per_s, st.headroom) {
            // Below 1 KiB/s the estimate would be years of noise.
            (Some(g), Some(h)) if g > 1024.0 => Some(h as f64 / g),
            _ => None,
        };
        if let Some(s) = self.watch.on_sample(s.t, mem as f64) {
            self.status.suspected = s;
        }
    }

    pub fn on_step(&mut self, t: f64, step: u64) {
        if self.status.steps == 0 {
            // The rate is of the work: start-up's rise is left behind.
            self.buckets.clear();
            self.status.growth_per_s = None;
        }
        self.status.steps += 1;
        self.status.last_step = Some(step);
        self.step_times.push_back((t, step));
        while self
            .step_times
            .front()
            .is_some_and(|&(f, _)| t - f > STEP_WINDOW_S)
        {
            self.step_times.pop_front();
        }
        // From step numbers, not step events: the probe sends at most ten
        // step messages a second, each with the count so far.
        self.status.steps_per_s = match self.step_times.front() {
            Some(&(t0, s0)) if self.step_times.len() >= 2 && t > t0 && step >= s0 => {
                Some((step - s0) as f64 / (t - t0))
            }
            _ => None,
        };
        self.watch.on_step(t, step);
    }

    /// A step reported by any process of the tree (`step`: its count so far).
    pub fn on_tree_step(&mut self, step: u64) {
        self.status.tree_steps = self.status.tree_steps.max(step);
    }

    /// The probe named a holder (the first one stays on the status line).
    pub fn on_holder(&mut self, holder: String) {
        self.status.holder.get_or_insert(holder);
    }

    /// The bounded buffers of a census: the fullest one still filling
    /// (none when all are full).
    pub fn on_bounded(&mut self, bounded: &[leakspy_trace::BoundedLen]) {
        self.status.filling = bounded
            .iter()
            .filter(|b| b.maxlen > 0.0 && b.len < b.maxlen)
            .max_by(|a, b| (a.len * a.item_bytes).total_cmp(&(b.len * b.item_bytes)))
            .map(|b| {
                let name = b
                    .holder
                    .as_ref()
                    .map_or("a deque", |h| h.path.as_str())
                    .to_string();
                format!(
                    "{name} {:.0} % of {:.0}",
                    100.0 * b.len / b.maxlen,
                    b.maxlen
                )
            });
    }

    /// Whether the live fit suspects a leak now.
    pub fn suspected(&self) -> Option<&LiveLeak> {
        self.status.suspected.as_ref()
    }

    /// Memory grows steadily with the work done, by at least
    /// [`RISE_MIN_BYTES`] and 1 % of its level over the fit, though not yet
    /// by the 2 % a leak verdict needs: worth a look by the probe (its
    /// burst is bounded), not yet worth saying on the status line.
    pub fn rising(&self) -> Option<&LiveLeak> {
        self.watch.rising.as_ref()
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

/// The live leak fit: total RSS since the first step, fitted against steps
/// done (seconds without steps) once a second with the verdict of the
/// report (`leakspy_stats::analyze`: warm-up trimmed, flat tails and
/// sawtooths are not leaks). It changes its mind only when
/// [`WATCH_AGREE`] fits in a row agree.
#[derive(Debug, Default)]
struct LeakWatch {
    /// `(t, rss)` from the first step on.
    samples: Vec<(f64, f64)>,
    /// `(t, step)`, increasing.
    steps: Vec<(f64, f64)>,
    next_fit: f64,
    /// Fits in a row that found a leak / no leak.
    leak_run: usize,
    clear_run: usize,
    current: Option<LiveLeak>,
    /// Fits in a row that found steady growth (the relaxed threshold).
    rise_run: usize,
    rising: Option<LiveLeak>,
}

impl LeakWatch {
    fn on_step(&mut self, t: f64, step: u64) {
        let s = step as f64;
        if self
            .steps
            .last()
            .is_some_and(|&(lt, ls)| t <= lt || s <= ls)
        {
            return;
        }
        self.steps.push((t, s));
        if self.steps.len() > WATCH_SAMPLES {
            // Every other point: the interpolation stays as good.
            let kept: Vec<(f64, f64)> = self.steps.iter().copied().step_by(2).collect();
            self.steps = kept;
        }
    }

    /// A new sample; `Some(new state)` when the verdict changed.
    fn on_sample(&mut self, t: f64, rss: f64) -> Option<Option<LiveLeak>> {
        if self.steps.is_empty() {
            return None; // imports and set-up: nothing to judge yet
        }
        self.samples.push((t, rss));
        if self.samples.len() > WATCH_SAMPLES {
            let merged: Vec<(f64, f64)> = self
                .samples
                .chunks(2)
                .map(|c| *c.iter().min_by(|a, b| a.1.total_cmp(&b.1)).unwrap_or(&c[0]))
                .collect();
            self.samples = merged;
        }
        if t < self.next_fit {
            return None;
        }
        self.next_fit = t + WATCH_EVERY_S;
        let (found, rises) = self.fit(t);
        match rises {
            Some(r) => {
                self.rise_run += 1;
                if self.rise_run >= WATCH_AGREE {
                    let since = self.rising.as_ref().map_or(t, |c| c.since);
                    self.rising = Some(LiveLeak { since, ..r });
                }
            }
            None => {
                self.rise_run = 0;
                self.rising = None;
            }
        }
        match found {
            Some(leak) => {
                self.clear_run = 0;
                self.leak_run += 1;
                if self.leak_run >= WATCH_AGREE {
                    let since = self.current.as_ref().map_or(t, |c| c.since);
                    let leak = LiveLeak { since, ..leak };
                    if self.current.as_ref() != Some(&leak) {
                        self.current = Some(leak);
                        return Some(self.current.clone());
                    }
                }
            }
            None => {
                self.leak_run = 0;
                self.clear_run += 1;
                if self.clear_run >= WATCH_AGREE && self.current.is_some() {
                    self.current = None;
                    return Some(None);
                }
            }
        }
        None
    }

    /// (a leak by the report's verdict, steady growth of at least
    /// [`RISE_MIN_BYTES`]).
    fn fit(&self, now: f64) -> (Option<LiveLeak>, Option<LiveLeak>) {
        let per_step = self.steps.len() >= WATCH_MIN_STEPS;
        let (mut xs, mut ys) = (Vec::new(), Vec::new());
        if per_step {
            let mut i = 0;
            let n = self.steps.len();
            for &(t, y) in &self.samples {
                if t < self.steps[0].0 || t > self.steps[n - 1].0 {
                    continue;
                }
                while i + 1 < n && self.steps[i + 1].0 < t {
                    i += 1;
                }
                let j = (i + 1).min(n - 1);
                let ((t0, s0), (t1, s1)) = (self.steps[i], self.steps[j]);
                xs.push(if t1 > t0 {
                    s0 + (t - t0) / (t1 - t0) * (s1 - s0)
                } else {
                    s1
                });
                ys.push(y);
            }
        } else {
            for &(t, y) in &self.samples {
                xs.push(t);
                ys.push(y);
            }
        }
        let opts = if per_step {
            VerdictOptions::per_step()
        } else {
            VerdictOptions::default()
        };
        let per = if per_step { "step" } else { "s" };
        let leak = |a: &leakspy_stats::SeriesAnalysis| {
            a.trend
                .filter(|_| a.verdict == Verdict::Leak)
                .map(|t| LiveLeak {
                    slope: t.slope,
                    per,
                    since: now,
                    settled: a.settled(),
                })
        };
        let a = analyze(&xs, &ys, &opts);
        if let Some(l) = leak(&a) {
            return (Some(l.clone()), Some(l));
        }
        let relaxed = VerdictOptions {
            min_growth_abs: RISE_MIN_BYTES,
            min_growth_rel: RISE_MIN_REL,
            ..opts
        };
        (None, leak(&analyze(&xs, &ys, &relaxed)))
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
        e.on_step(0.0, 1);
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
        e.on_step(0.0, 1);
        for i in 0..300 {
            e.on_sample(&sample(i as f64 * 0.1, 100 << 20, 1 << 30));
        }
        assert_eq!(e.status().growth_per_s, Some(0.0));
        assert_eq!(e.status().time_to_oom_s, None);
    }

    #[test]
    fn start_up_before_the_first_step_gives_no_rate() {
        let mut e = LiveEstimator::default();
        // Imports: +40 MiB/s for 20 s, no step yet.
        for i in 0..200 {
            let t = i as f64 * 0.1;
            e.on_sample(&sample(
                t,
                (100 << 20) + (t * 40.0 * 1048576.0) as u64,
                8 << 30,
            ));
        }
        assert_eq!(e.status().growth_per_s, None);
        assert_eq!(e.status().time_to_oom_s, None);
        // Training, flat: the rate is of the steps' time only.
        e.on_step(20.0, 1);
        for i in 200..400 {
            e.on_sample(&sample(i as f64 * 0.1, 900 << 20, 8 << 30));
        }
        assert_eq!(e.status().growth_per_s, Some(0.0));
        assert_eq!(e.status().time_to_oom_s, None);
    }

    #[test]
    fn a_job_that_never_steps_gets_a_rate_after_a_minute() {
        let mut e = LiveEstimator::default();
        for i in 0..700 {
            let t = i as f64 * 0.1;
            e.on_sample(&sample(t, (100 << 20) + (t * 1048576.0) as u64, 8 << 30));
            if t < 59.0 {
                assert_eq!(e.status().growth_per_s, None, "at {t}");
            }
        }
        let g = e.status().growth_per_s.unwrap();
        assert!((g - 1048576.0).abs() < 0.05 * 1048576.0, "growth {g}");
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

    #[test]
    fn the_rate_comes_from_step_numbers_not_step_messages() {
        // The probe sends at most ten step messages a second, each with the
        // count so far: 300 steps a second.
        let mut e = LiveEstimator::default();
        for i in 0..100u64 {
            e.on_step(i as f64 * 0.1, i * 30);
        }
        assert!((e.status().steps_per_s.unwrap() - 300.0).abs() < 1e-6);
    }

    /// 30 s of a job stepping 100 times a second, memory 700 MiB after its
    /// imports and then `per_step` bytes more each step (with 8 MiB of
    /// temporaries coming and going).
    fn live_run(per_step: f64) -> LiveEstimator {
        let mut e = LiveEstimator::default();
        for i in 0..300 {
            let t = i as f64 * 0.1;
            let steps = (i * 10) as u64;
            e.on_step(t, steps);
            let saw = if i % 3 == 0 { 8u64 << 20 } else { 0 };
            e.on_sample(&sample(
                t,
                (700u64 << 20) + (per_step * steps as f64) as u64 + saw,
                1 << 34,
            ));
        }
        e
    }

    #[test]
    fn the_live_fit_suspects_a_steady_leak_per_step() {
        let e = live_run(20.0 * 1024.0);
        let leak = e.status().suspected.clone().expect("a leak suspected");
        assert_eq!(leak.per, "step");
        assert!((leak.slope - 20.0 * 1024.0).abs() < 1024.0, "{leak:?}");
        assert!(leak.since < 15.0, "{leak:?}");
        assert!(e.rising().is_some());
    }

    #[test]
    fn the_live_fit_suspects_nothing_in_flat_memory() {
        let e = live_run(0.0);
        assert_eq!(e.status().suspected, None);
        assert!(e.rising().is_none());
    }

    #[test]
    fn slow_growth_asks_for_a_look_before_it_is_called_a_leak() {
        // 10 MiB over the run: more than the 1 % of 700 MiB a look needs,
        // less than the 2 % a leak verdict does.
        let e = live_run(10.0 * 1048576.0 / 3000.0);
        assert_eq!(e.status().suspected, None);
        assert!(e.rising().is_some());
        // An allocator's creep (4 MiB over the run) asks for nothing.
        assert!(live_run(4.0 * 1048576.0 / 3000.0).rising().is_none());
    }
}

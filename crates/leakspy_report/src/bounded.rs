//! Bounded containers filling. A `deque(maxlen=...)` holds at most its
//! maxlen items: memory that grows while one fills stops growing when it is
//! full, and a replay buffer of 100,000 transitions can take most of a
//! short run to fill. The probe reports each bounded container from its
//! first rise with its length, its bound and what an item weighs
//! (`Census::bounded`); here the tree's memory is judged again with what
//! they hold taken out, and the filling is told as what it is.

use std::collections::BTreeMap;

use leakspy_stats::{fmt_bytes, fmt_thousands as thousands};
use leakspy_trace::{BoundedHolder, Location, Trace};

use crate::extract::{Series, StepClock};
use crate::model::{Growth, Mechanism, MechanismKind};

/// One bounded container as the censuses saw it fill.
#[derive(Debug, Clone)]
pub(crate) struct Fill {
    pub pid: u32,
    pub maxlen: f64,
    /// What an item weighs, bytes (the median of what the censuses said).
    pub item_bytes: f64,
    pub holder: Option<BoundedHolder>,
    /// `(t, len)` per census, in time order.
    points: Vec<(f64, f64)>,
    /// The step each census was taken at, by the report's clock, when
    /// every one was taken within the steps.
    steps: Option<Vec<f64>>,
}

/// How fast `ys` went from its first point to its last, per unit of `xs`
/// (0 where they are at one x): the pace a buffer filled at, by seconds or
/// by steps.
fn pace(xs: &[f64], ys: &[f64]) -> f64 {
    let n = xs.len();
    let (x0, y0, x1, y1) = (xs[0], ys[0], xs[n - 1], ys[n - 1]);
    if x1 > x0 {
        (y1 - y0) / (x1 - x0)
    } else {
        0.0
    }
}

/// `ys` at `x` along increasing `xs`: between two points on the line
/// between them, outside at the [`pace`] from the first point to the last.
fn along(xs: &[f64], ys: &[f64], x: f64) -> f64 {
    let n = xs.len();
    let (x0, y0, x1, y1) = (xs[0], ys[0], xs[n - 1], ys[n - 1]);
    let pace = pace(xs, ys);
    if x <= x0 {
        y0 - pace * (x0 - x)
    } else if x >= x1 {
        y1 + pace * (x - x1)
    } else {
        let i = xs.partition_point(|&v| v <= x);
        let (a, b) = (xs[i - 1], xs[i]);
        if b > a {
            ys[i - 1] + (x - a) / (b - a) * (ys[i] - ys[i - 1])
        } else {
            ys[i]
        }
    }
}

impl Fill {
    /// Items per second over the censuses.
    fn rate(&self) -> f64 {
        pace(&self.times(), &self.lens())
    }

    /// Items per step, where the censuses were taken within the steps.
    fn rate_per_step(&self) -> Option<f64> {
        self.steps.as_deref().map(|s| pace(s, &self.lens()))
    }

    /// Its length at time `t`, at step `x` when the censuses were taken
    /// within the steps (a buffer fills with the steps: bursts of censuses
    /// slow the job, and a rate per second taken during one is not the
    /// rate after it): between censuses as the line between them; before
    /// the first and after the last at the rate it filled, never below
    /// empty or past its bound.
    fn len_at(&self, t: f64, x: Option<f64>) -> f64 {
        let by_step = match (x, self.steps.as_deref()) {
            (Some(x), Some(steps)) => Some(along(steps, &self.lens(), x)),
            _ => None,
        };
        let len = by_step.unwrap_or_else(|| along(&self.times(), &self.lens(), t));
        len.clamp(0.0, self.maxlen)
    }

    fn times(&self) -> Vec<f64> {
        self.points.iter().map(|p| p.0).collect()
    }

    fn lens(&self) -> Vec<f64> {
        self.points.iter().map(|p| p.1).collect()
    }

    fn last_len(&self) -> f64 {
        self.points[self.points.len() - 1].1
    }

    /// `ReplayBuffer.memory (a deque, maxlen 75,000)`.
    pub fn name(&self) -> String {
        let bound = format!("maxlen {}", thousands(self.maxlen));
        match &self.holder {
            Some(h) if !h.path.is_empty() => format!("{} (a deque, {bound})", h.path),
            _ => format!("a deque ({bound}; holder not named)"),
        }
    }
}

/// `a bounded buffer`, `3 bounded buffers`: what fills, said one way in
/// the summary, the headline and the explained series.
pub(crate) fn buffers(n: usize) -> String {
    if n == 1 {
        "a bounded buffer".to_string()
    } else {
        format!("{n} bounded buffers")
    }
}

/// The bounded containers that filled during the run, each with two
/// censuses or more and more items at the last than at the first.
pub(crate) fn fills(trace: &Trace, clock: &StepClock) -> Vec<Fill> {
    let mut by_id: BTreeMap<(u32, u64), (Fill, Vec<f64>)> = BTreeMap::new();
    for c in trace.census() {
        if c.look.as_deref() == Some("exit") {
            continue;
        }
        for b in &c.bounded {
            if b.maxlen <= 0.0 {
                continue;
            }
            let (fill, weights) = by_id.entry((c.pid, b.id)).or_insert_with(|| {
                (
                    Fill {
                        pid: c.pid,
                        maxlen: b.maxlen,
                        item_bytes: 0.0,
                        holder: None,
                        points: Vec::new(),
                        steps: None,
                    },
                    Vec::new(),
                )
            });
            fill.points.push((c.t, b.len));
            if b.item_bytes > 0.0 {
                weights.push(b.item_bytes);
            }
            if b.holder.is_some() {
                fill.holder = b.holder.clone();
            }
        }
    }
    by_id
        .into_values()
        .filter_map(|(mut f, mut w)| {
            f.points.sort_by(|a, b| a.0.total_cmp(&b.0));
            f.points.dedup_by(|b, a| b.0 <= a.0);
            if f.points.len() < 2 || f.last_len() <= f.points[0].1 || w.is_empty() {
                return None;
            }
            w.sort_by(f64::total_cmp);
            f.item_bytes = w[w.len() / 2];
            let steps: Option<Vec<f64>> = f.points.iter().map(|p| clock.step_at(p.0)).collect();
            f.steps = steps.filter(|s| s.windows(2).all(|w| w[1] > w[0]));
            Some(f)
        })
        .collect()
}

/// `s` with what the fills of the processes `pids` held at each sample taken
/// out (`None`: every process, for the tree's memory), their items weighing
/// `weight` times what the probe measured.
pub(crate) fn without_fills(
    s: &Series,
    fills: &[Fill],
    clock: &StepClock,
    pids: Option<&[u32]>,
    weight: f64,
) -> Series {
    let mine: Vec<&Fill> = fills
        .iter()
        .filter(|f| pids.is_none_or(|p| p.contains(&f.pid)))
        .collect();
    let y =
        s.t.iter()
            .zip(&s.y)
            .map(|(&t, &y)| {
                let x = clock.step_at(t);
                y - mine
                    .iter()
                    .map(|f| f.len_at(t, x) * f.item_bytes * weight)
                    .sum::<f64>()
            })
            .collect();
    Series {
        key: s.key.clone(),
        what: s.what.clone(),
        t: s.t.clone(),
        y,
    }
}

/// What an item's weight, as the probe measures it, can miss: the
/// allocator's headers and rounding (16 bytes of a 512-byte array, a slot
/// of the deque's block) and the fragmentation of a heap shared with the
/// job's temporaries. Measured: a DQN's transitions of two 1 KiB arrays
/// weighed 2,432 bytes by the probe, 2,458 by RSS alone, and 7 % more in
/// the job. Growth within this share of the buffers' is not a leak.
pub(crate) const WEIGHT_SLACK: f64 = 0.15;

/// The filling told: how fast each fills and what it adds, beside the
/// memory's own rate (`measured`); how far each is from full; what memory
/// does without them (`rest`, in words: `it is flat`).
pub(crate) fn mechanism(
    fills: &[Fill],
    clock: &StepClock,
    measured: Option<&Growth>,
    rest: &str,
) -> Mechanism {
    let per_step = measured.is_some_and(|g| g.unit.ends_with("/step"));
    let mut evidence = Vec::new();
    let mut added = 0.0;
    let mut full = 0.0;
    for f in fills {
        let last_t = f.points[f.points.len() - 1].0;
        // Items per step where the censuses were taken within the steps.
        let per = f.rate_per_step().filter(|_| per_step);
        let (rate, unit) = match per {
            Some(r) => (r, "step"),
            None => (f.rate(), "s"),
        };
        added += rate * f.item_bytes;
        full += f.maxlen * f.item_bytes;
        let remaining = (f.maxlen - f.last_len()).max(0.0);
        let at = match clock.step_at(last_t) {
            Some(s) => format!("step {}", thousands(s)),
            None => format!("{last_t:.0} s"),
        };
        let more = fmt_bytes(remaining * f.item_bytes);
        let when = match (per, clock.step_at(last_t)) {
            _ if rate <= 0.0 || remaining <= 0.0 => String::new(),
            (Some(_), Some(s)) => format!(
                ": {more} more until it is full, at about step {}",
                thousands(s + remaining / rate)
            ),
            _ => format!(
                ": {more} more until it is full, in about {}",
                crate::diagnose::fmt_duration(remaining / f.rate().max(1e-9))
            ),
        };
        evidence.push(format!(
            "{} fills by {rate:.1} items/{unit} of about {} each (+{}/{unit}); it held {} of \
             {} at the last census ({at}){when}",
            f.name(),
            fmt_bytes(f.item_bytes),
            fmt_bytes(rate * f.item_bytes),
            thousands(f.last_len()),
            thousands(f.maxlen),
        ));
    }
    let unit = if per_step { "step" } else { "s" };
    let summary = match measured {
        Some(g) => format!(
            "memory grew +{}/{unit}, and {} filling accounts for +{}/{unit} of it: bounded, \
             it stops growing when full",
            fmt_bytes(g.slope),
            buffers(fills.len()),
            fmt_bytes(added),
        ),
        None => "bounded buffers filling: they stop growing when full".to_string(),
    };
    let they = if fills.len() > 1 {
        "they hold"
    } else {
        "it holds"
    };
    evidence.push(format!("memory without what {they}: {rest}"));
    let location = fills.iter().find_map(|f| {
        let h = f.holder.as_ref()?;
        Some(Location {
            file: h.file.clone()?,
            line: h.line?,
            function: None,
            thread: None,
        })
    });
    let mut pids: Vec<u32> = fills.iter().map(|f| f.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    Mechanism {
        kind: MechanismKind::BoundedFill,
        summary,
        evidence,
        fix: Some(
            "none needed: a buffer bounded by its maxlen is not a leak; lower the maxlen if, \
             full, it needs more memory than the machine has"
                .to_string(),
        ),
        // What they hold when full.
        bound: Some(full),
        pids,
        location,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(points: Vec<(f64, f64)>, maxlen: f64) -> Fill {
        Fill {
            pid: 1,
            maxlen,
            item_bytes: 1000.0,
            holder: None,
            points,
            steps: None,
        }
    }

    #[test]
    fn the_length_follows_the_censuses_and_stays_within_its_bound() {
        let f = fill(vec![(10.0, 100.0), (20.0, 200.0), (30.0, 300.0)], 350.0);
        assert_eq!(f.len_at(15.0, None), 150.0);
        // Before the first census, back at its pace, never below empty.
        assert_eq!(f.len_at(5.0, None), 50.0);
        assert_eq!(f.len_at(0.0, None), 0.0);
        // After the last, on at its pace up to its bound.
        assert_eq!(f.len_at(33.0, None), 330.0);
        assert_eq!(f.len_at(100.0, None), 350.0);
    }

    #[test]
    fn it_fills_with_the_steps_when_censuses_were_taken_within_them() {
        // Censuses in a burst that slowed the job: 10 items a step, but
        // only 100 items a second while they were taken.
        let mut f = fill(vec![(10.0, 1000.0), (11.0, 1100.0)], 1e6);
        f.steps = Some(vec![100.0, 110.0]);
        // After the burst the job makes 50 steps a second: at step 610.
        assert_eq!(f.len_at(21.0, Some(610.0)), 6100.0);
        // Outside the steps, seconds are all there is.
        assert_eq!(f.len_at(21.0, None), 2100.0);
    }

    #[test]
    fn what_it_holds_is_taken_out_of_memory() {
        let f = fill(vec![(10.0, 100.0), (20.0, 200.0)], 1000.0);
        let s = Series {
            key: "total.rss".into(),
            what: "rss".into(),
            t: vec![10.0, 15.0, 20.0],
            y: vec![500_000.0, 560_000.0, 600_000.0],
        };
        let clock = StepClock::default();
        let out = without_fills(&s, std::slice::from_ref(&f), &clock, None, 1.0);
        assert_eq!(out.y, vec![400_000.0, 410_000.0, 400_000.0]);
        // Another process's buffer is not this process's memory.
        let other = without_fills(&s, &[f], &clock, Some(&[2]), 1.0);
        assert_eq!(other.y, s.y);
    }
}

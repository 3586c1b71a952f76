//! Throughput trend: steps per second falling over the run is a symptom of a
//! leak (a growing list walked each step, swapping, a slower allocator).

use serde::Serialize;

use crate::theil_sen::{theil_sen, Trend};

/// Steps per second over the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThroughputTrend {
    /// Fit of steps/s against seconds.
    pub trend: Trend,
    /// Fitted steps/s at the start of the fitted range.
    pub start_rate: f64,
    /// Fitted steps/s at the end.
    pub end_rate: f64,
    /// `(end - start) / start`.
    pub change: f64,
    /// True when the rate falls significantly (interval below zero) by at least 10 %.
    pub falling: bool,
    /// Rate points fitted (bins).
    pub n: usize,
}

/// Steps/s in bins of consecutive step events `(t seconds, step number)`,
/// fitted against time. `None` with fewer than 10 events or 4 bins.
pub fn throughput_trend(events: &[(f64, f64)], confidence: f64) -> Option<ThroughputTrend> {
    if events.len() < 10 {
        return None;
    }
    let (ts, rates) = step_rates(events);
    if ts.len() < 4 {
        return None;
    }
    let trend = theil_sen(&ts, &rates, confidence)?;
    // The rates seen at the start and the end (medians of the first and
    // last quarter of the bins), not the fitted line's ends: a line through
    // a rate that collapsed at the end can pass below zero.
    let q = (rates.len() / 4).max(1);
    let start_rate = crate::theil_sen::median(&rates[..q]);
    let end_rate = crate::theil_sen::median(&rates[rates.len() - q..]);
    let change = if start_rate > 0.0 {
        (end_rate - start_rate) / start_rate
    } else {
        0.0
    };
    Some(ThroughputTrend {
        falling: trend.hi < 0.0 && change <= -0.10,
        n: ts.len(),
        trend,
        start_rate,
        end_rate,
        change,
    })
}

/// Steps/s in about 20 bins of consecutive step events `(t, step)`: enough
/// points for an interval, enough steps per bin to smooth per-step jitter.
/// Returns the bin mid-times and rates.
pub fn step_rates(events: &[(f64, f64)]) -> (Vec<f64>, Vec<f64>) {
    let per_bin = (events.len() / 20).max(2);
    let mut ts = Vec::new();
    let mut rates = Vec::new();
    let mut i = 0;
    while i + per_bin < events.len() {
        let (t0, s0) = events[i];
        let (t1, s1) = events[i + per_bin];
        if t1 > t0 && s1 > s0 {
            ts.push((t0 + t1) / 2.0);
            rates.push((s1 - s0) / (t1 - t0));
        }
        i += per_bin;
    }
    (ts, rates)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_rate_is_not_falling() {
        let ev: Vec<(f64, f64)> = (0..200)
            .map(|i| (f64::from(i) * 0.1, f64::from(i)))
            .collect();
        let t = throughput_trend(&ev, 0.95).unwrap();
        assert!(!t.falling);
        assert!((t.start_rate - 10.0).abs() < 1e-6, "{t:?}");
    }

    #[test]
    fn slowing_steps_are_falling() {
        // Each step takes longer than the last: 0.05 s growing by 1 %.
        let mut t = 0.0;
        let mut ev = Vec::new();
        for i in 0..200 {
            ev.push((t, f64::from(i)));
            t += 0.05 * 1.01f64.powi(i);
        }
        let tr = throughput_trend(&ev, 0.95).unwrap();
        assert!(tr.falling, "{tr:?}");
        assert!(tr.change < -0.5, "{tr:?}");
    }

    #[test]
    fn a_rate_that_collapses_is_never_negative() {
        // 50 steps/s, then a machine so busy that steps crawl at the end.
        let mut ev = Vec::new();
        let (mut t, mut s) = (0.0, 0.0);
        for i in 0..400 {
            let dt = if i < 300 { 0.02 } else { 2.0 };
            t += dt;
            s += 1.0;
            ev.push((t, s));
        }
        let tr = throughput_trend(&ev, 0.95).unwrap();
        assert!(tr.end_rate > 0.0 && tr.start_rate > 40.0, "{tr:?}");
        assert!(tr.change > -1.0, "{tr:?}");
    }

    #[test]
    fn too_few_steps() {
        assert!(throughput_trend(&[(0.0, 0.0), (1.0, 1.0)], 0.95).is_none());
    }
}

//! Windowed minima: the lower envelope of a memory series.
//!
//! RSS swings up while temporaries are alive and back down when they are
//! freed; only the troughs show what stays allocated. Taking the minimum of
//! each window also bins long traces down to a few hundred points, which keeps
//! the pairwise-slope estimators cheap.

/// Windows wanted for long series.
const TARGET_WINDOWS: usize = 200;
/// Samples per window for short series (10 Hz sampling: half a second).
const SHORT_WINDOW: usize = 5;
/// Short series keep at least this many windows.
const MIN_WINDOWS: usize = 12;

/// Per-window minima of a series, with the window ranges (max - min).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Windowed {
    /// x of each window's minimum sample.
    pub xs: Vec<f64>,
    /// The minimum of each window.
    pub ys: Vec<f64>,
    /// max - min inside each window: how far the series swings above its floor.
    pub ranges: Vec<f64>,
    /// Samples per window.
    pub window: usize,
}

/// Samples per window for a series of `n` samples: about 0.5 s at 10 Hz for
/// short runs (at least 12 windows), about 200 windows for long ones.
pub fn window_size_for(n: usize) -> usize {
    let long = n.div_ceil(TARGET_WINDOWS);
    let short = SHORT_WINDOW.min(n / MIN_WINDOWS);
    long.max(short).max(1)
}

/// Minima of consecutive windows of `window` samples (the last window may be
/// shorter; it is kept when it holds at least half a window, else merged).
pub fn window_minima(xs: &[f64], ys: &[f64], window: usize) -> Windowed {
    let n = xs.len().min(ys.len());
    let window = window.max(1);
    let mut out = Windowed {
        window,
        ..Windowed::default()
    };
    let mut start = 0;
    while start < n {
        let mut end = (start + window).min(n);
        if n - end < window.div_ceil(2) {
            end = n;
        }
        let mut best = start;
        let mut max = ys[start];
        for i in start..end {
            if ys[i] < ys[best] {
                best = i;
            }
            max = max.max(ys[i]);
        }
        out.xs.push(xs[best]);
        out.ys.push(ys[best]);
        out.ranges.push(max - ys[best]);
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_sizes() {
        assert_eq!(window_size_for(10), 1);
        assert_eq!(window_size_for(30), 2);
        assert_eq!(window_size_for(60), 5);
        assert_eq!(window_size_for(1000), 5);
        assert_eq!(window_size_for(864_000), 4320);
    }

    #[test]
    fn minima_of_a_sawtooth_are_flat() {
        let xs: Vec<f64> = (0..100).map(f64::from).collect();
        let ys: Vec<f64> = (0..100).map(|i| 100.0 + f64::from(i % 5) * 10.0).collect();
        let w = window_minima(&xs, &ys, 5);
        assert_eq!(w.ys.len(), 20);
        assert!(w.ys.iter().all(|&y| y == 100.0));
        assert!(w.ranges.iter().all(|&r| r == 40.0));
    }

    #[test]
    fn short_tail_is_merged() {
        let xs: Vec<f64> = (0..11).map(f64::from).collect();
        let w = window_minima(&xs, &xs, 5);
        assert_eq!(w.xs, vec![0.0, 5.0]);
    }
}

//! Theil–Sen slope with Sen's rank-based confidence interval.

use serde::Serialize;

/// Above this many points the pairwise slopes are subsampled: all pairs of
/// 600 points are ~180 k slopes, which sort in a few milliseconds.
const MAX_EXACT_POINTS: usize = 600;
/// Pairs drawn when subsampling.
const SAMPLED_PAIRS: usize = 180_000;

/// A robust linear fit `y = intercept + slope * x` with an interval on the slope.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Trend {
    /// Median of the pairwise slopes.
    pub slope: f64,
    /// Lower bound of the slope's confidence interval.
    pub lo: f64,
    /// Upper bound of the slope's confidence interval.
    pub hi: f64,
    /// Median of `y - slope * x`.
    pub intercept: f64,
    /// Coefficient of determination of this (robust) line, clamped to 0..=1.
    pub r2: f64,
    /// Points fitted.
    pub n: usize,
    /// Confidence level of `lo..hi`.
    pub confidence: f64,
    /// First x fitted.
    pub x_start: f64,
    /// Last x fitted.
    pub x_end: f64,
}

impl Trend {
    /// The fitted value at `x`.
    pub fn at(&self, x: f64) -> f64 {
        self.intercept + self.slope * x
    }

    /// Fitted change between the first and last x.
    pub fn growth(&self) -> f64 {
        self.slope * (self.x_end - self.x_start)
    }
}

/// Theil–Sen estimator on `(xs[i], ys[i])` with Sen's interval at `confidence`
/// (e.g. 0.95), from the normal approximation of Kendall's S variance.
///
/// Returns `None` with fewer than 3 points, mismatched lengths, non-finite
/// input, or when all x are equal. Long inputs are handled by a deterministic
/// subsample of pairs, so the cost stays bounded.
pub fn theil_sen(xs: &[f64], ys: &[f64], confidence: f64) -> Option<Trend> {
    let n = xs.len();
    if n < 3 || ys.len() != n {
        return None;
    }
    if xs.iter().chain(ys).any(|v| !v.is_finite()) {
        return None;
    }
    let mut slopes = if n <= MAX_EXACT_POINTS {
        let mut s = Vec::with_capacity(n * (n - 1) / 2);
        for i in 0..n {
            for j in (i + 1)..n {
                let dx = xs[j] - xs[i];
                if dx != 0.0 {
                    s.push((ys[j] - ys[i]) / dx);
                }
            }
        }
        s
    } else {
        sampled_slopes(xs, ys)
    };
    if slopes.is_empty() {
        return None;
    }
    slopes.sort_unstable_by(f64::total_cmp);
    let m = slopes.len();
    let slope = median_sorted(&slopes);

    // Sen (1968): the interval runs between the slopes of ranks (N - C)/2
    // and (N + C)/2 + 1, with C = z * sqrt(Var S), Var S = n(n-1)(2n+5)/18.
    // With subsampled pairs the same fractions of the sample are used.
    let nf = n as f64;
    let total_pairs = nf * (nf - 1.0) / 2.0;
    let var_s = nf * (nf - 1.0) * (2.0 * nf + 5.0) / 18.0;
    let z = normal_quantile(0.5 + confidence.clamp(0.5, 0.999_999) / 2.0);
    let c = z * var_s.sqrt();
    let frac_lo = ((total_pairs - c) / 2.0 / total_pairs).clamp(0.0, 1.0);
    let frac_hi = ((total_pairs + c) / 2.0 / total_pairs).clamp(0.0, 1.0);
    let mf = m as f64;
    let lo_idx = ((frac_lo * mf).floor() as isize - 1).clamp(0, m as isize - 1) as usize;
    let hi_idx = ((frac_hi * mf).ceil() as usize).min(m - 1);
    let lo = slopes[lo_idx].min(slope);
    let hi = slopes[hi_idx].max(slope);

    let mut resid: Vec<f64> = xs.iter().zip(ys).map(|(x, y)| y - slope * x).collect();
    resid.sort_unstable_by(f64::total_cmp);
    let intercept = median_sorted(&resid);

    let mean_y = ys.iter().sum::<f64>() / nf;
    let ss_tot: f64 = ys.iter().map(|y| (y - mean_y).powi(2)).sum();
    let ss_res: f64 = xs
        .iter()
        .zip(ys)
        .map(|(x, y)| (y - intercept - slope * x).powi(2))
        .sum();
    let r2 = if ss_tot <= f64::EPSILON * mean_y.abs().max(1.0) {
        if ss_res <= f64::EPSILON * mean_y.abs().max(1.0) {
            1.0
        } else {
            0.0
        }
    } else {
        (1.0 - ss_res / ss_tot).clamp(0.0, 1.0)
    };
    let (x_start, x_end) = xs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    Some(Trend {
        slope,
        lo,
        hi,
        intercept,
        r2,
        n,
        confidence,
        x_start,
        x_end,
    })
}

fn sampled_slopes(xs: &[f64], ys: &[f64]) -> Vec<f64> {
    let n = xs.len() as u64;
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out = Vec::with_capacity(SAMPLED_PAIRS);
    let mut tries = 0;
    while out.len() < SAMPLED_PAIRS && tries < SAMPLED_PAIRS * 4 {
        tries += 1;
        let i = (splitmix64(&mut state) % n) as usize;
        let j = (splitmix64(&mut state) % n) as usize;
        if i == j {
            continue;
        }
        let dx = xs[j] - xs[i];
        if dx != 0.0 {
            out.push((ys[j] - ys[i]) / dx);
        }
    }
    out
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

pub(crate) fn median_sorted(v: &[f64]) -> f64 {
    let m = v.len();
    if m == 0 {
        return f64::NAN;
    }
    if m % 2 == 1 {
        v[m / 2]
    } else {
        (v[m / 2 - 1] + v[m / 2]) / 2.0
    }
}

pub(crate) fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_unstable_by(f64::total_cmp);
    median_sorted(&s)
}

/// Inverse of the standard normal CDF (Acklam's rational approximation,
/// relative error below 1.2e-9), for `p` in (0, 1).
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let p = p.clamp(1e-300, 1.0 - 1e-16);
    let p_low = 0.02425;
    if p < p_low {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - p_low {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        let q = (-2.0 * (1.0 - p).ln()).sqrt();
        -(((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_matches_tables() {
        assert!((normal_quantile(0.975) - 1.959_964).abs() < 1e-5);
        assert!((normal_quantile(0.5)).abs() < 1e-12);
        assert!((normal_quantile(0.005) + 2.575_829).abs() < 1e-5);
    }

    #[test]
    fn exact_line() {
        let xs: Vec<f64> = (0..20).map(f64::from).collect();
        let ys: Vec<f64> = xs.iter().map(|x| 3.0 + 2.0 * x).collect();
        let t = theil_sen(&xs, &ys, 0.95).unwrap();
        assert_eq!(t.slope, 2.0);
        assert_eq!(t.lo, 2.0);
        assert_eq!(t.hi, 2.0);
        assert_eq!(t.intercept, 3.0);
        assert_eq!(t.r2, 1.0);
    }

    #[test]
    fn outlier_does_not_move_the_slope() {
        let xs: Vec<f64> = (0..30).map(f64::from).collect();
        let mut ys: Vec<f64> = xs.iter().map(|x| 1.0 * x).collect();
        ys[10] = 1e6;
        let t = theil_sen(&xs, &ys, 0.95).unwrap();
        assert!((t.slope - 1.0).abs() < 1e-9, "{t:?}");
    }

    #[test]
    fn degenerate_inputs() {
        assert!(theil_sen(&[1.0, 2.0], &[1.0, 2.0], 0.95).is_none());
        assert!(theil_sen(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0], 0.95).is_none());
        assert!(theil_sen(&[1.0, 2.0, 3.0], &[1.0, f64::NAN, 3.0], 0.95).is_none());
    }

    #[test]
    fn subsampled_long_series() {
        let xs: Vec<f64> = (0..5000).map(f64::from).collect();
        let ys: Vec<f64> = xs
            .iter()
            .enumerate()
            .map(|(i, x)| 0.5 * x + if i % 2 == 0 { 3.0 } else { -3.0 })
            .collect();
        let t = theil_sen(&xs, &ys, 0.95).unwrap();
        assert!((t.slope - 0.5).abs() < 0.01, "{t:?}");
        assert!(t.lo <= 0.5 && t.hi >= 0.5, "{t:?}");
    }
}

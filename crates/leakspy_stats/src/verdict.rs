//! The leak verdict on one series.
//!
//! A leak is growth that keeps going with work done. The series is reduced
//! to per-window minima (sawtooths of freed temporaries vanish), the warm-up
//! is trimmed (imports and first-step lazy work are one-off jumps), and the
//! remaining window must show growth that is statistically positive, large
//! in absolute and relative terms, and still going on in the second half
//! (buffers, caches and data sets loaded once flatten out).

use serde::Serialize;

use crate::series::{window_minima, window_size_for, Windowed};
use crate::theil_sen::{median, theil_sen, Trend};
use crate::units::{fmt_bytes_as, fmt_value, ValueUnit};

/// Short series (up to this many samples) are also searched for a flat tail
/// sample by sample, not only window by window.
const RAW_TAIL_MAX: usize = 600;

/// The answer for one series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Growth that keeps going with work done.
    Leak,
    /// Flat, saturating, shrinking, a sawtooth, or growth too small to matter.
    NoLeak,
    /// Too little data, or data too noisy to decide.
    Inconclusive,
}

impl Verdict {
    /// `"leak"`, `"no-leak"` or `"inconclusive"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Leak => "leak",
            Verdict::NoLeak => "no-leak",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

/// What the analysed part of the series looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    /// Steady growth through the end.
    LinearGrowth,
    /// Growth that gets faster toward the end.
    Accelerating,
    /// Growth that stopped: flat since `flat_since`.
    Saturating,
    /// Still growing, but clearly slower at the end than overall.
    Slowing,
    /// No growth worth reporting.
    Flat,
    /// Large swings whose minima are flat.
    Sawtooth,
    /// Memory going down.
    Shrinking,
    /// Growth too noisy to call.
    Noisy,
    /// Growing steadily, but not yet by the growth a leak needs: the run
    /// stopped too early to tell a leak from warm-up or a filling buffer.
    TooEarly,
    /// Not enough data.
    TooShort,
}

/// Thresholds and units for [`analyze`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerdictOptions {
    /// Confidence level of slope intervals.
    pub confidence: f64,
    /// Fewest raw samples to decide anything.
    pub min_samples: usize,
    /// Fewest window minima in the analysed part.
    pub min_fit_points: usize,
    /// Smallest fitted growth over the analysed span that can be a leak (y units).
    pub min_growth_abs: f64,
    /// Same, relative to the series level (0.02 = 2 %).
    pub min_growth_rel: f64,
    /// Always trim this fraction of the x span as warm-up.
    pub warmup_fraction: f64,
    /// Never trim more than this fraction as warm-up.
    pub max_warmup_fraction: f64,
    /// A fit that explains less of the variance than this is no evidence
    /// of a leak, however significant its slope (a machine so busy that
    /// memory moves with the scheduler, not the work).
    pub min_r2: f64,
    /// Growth is "slowing" when the second half's whole 95 % interval lies
    /// below this fraction of the run's slope.
    pub late_ratio_slowing: f64,
    /// A flat tail covering this fraction of the analysed span means "stopped growing".
    pub flat_tail_min: f64,
    /// Unit of y.
    pub unit: ValueUnit,
    /// Unit of x: `"step"` or `"s"`.
    pub x_unit: String,
}

impl Default for VerdictOptions {
    fn default() -> Self {
        VerdictOptions {
            confidence: 0.95,
            min_samples: 20,
            min_fit_points: 8,
            min_growth_abs: 4.0 * 1024.0 * 1024.0,
            min_growth_rel: 0.02,
            warmup_fraction: 0.10,
            max_warmup_fraction: 0.5,
            min_r2: 0.5,
            late_ratio_slowing: 0.75,
            flat_tail_min: 0.25,
            unit: ValueUnit::Bytes,
            x_unit: "s".to_string(),
        }
    }
}

impl VerdictOptions {
    /// Defaults for a series over steps.
    pub fn per_step() -> Self {
        VerdictOptions {
            x_unit: "step".to_string(),
            ..VerdictOptions::default()
        }
    }
}

/// Everything [`analyze`] found about one series, with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeriesAnalysis {
    pub verdict: Verdict,
    pub shape: Shape,
    /// One line saying what the shape is, e.g. "saturating: flat since 4.2 s".
    pub shape_text: String,
    /// Fit on the window minima of the analysed part (after warm-up).
    pub trend: Option<Trend>,
    /// Fit on the second half of the analysed part.
    pub late_trend: Option<Trend>,
    /// Raw samples given.
    pub n_samples: usize,
    /// Samples per window.
    pub window: usize,
    /// Window minima fitted.
    pub n_fit: usize,
    /// x where the analysed part starts (end of warm-up).
    pub warmup_end: Option<f64>,
    /// Rise of the minima during the warm-up.
    pub warmup_rise: f64,
    /// Fitted growth over the analysed span.
    pub growth: f64,
    /// Growth needed to call a leak: max(absolute, relative * level).
    pub threshold: f64,
    /// Median of the analysed minima.
    pub level: f64,
    /// Where the series went flat, when it stopped growing.
    pub flat_since: Option<f64>,
    /// Median swing above the floor within a window.
    pub swing: f64,
    /// Samples dropped at the end because the process was tearing down
    /// (memory falling steeply as the interpreter exits).
    pub teardown_trimmed: usize,
    /// Why: slope, interval, R², n, window, shape.
    pub evidence: Vec<String>,
    #[serde(skip)]
    pub minima: Windowed,
}

/// Widest 95 % interval, as a fraction of the rate on each side, of a leak
/// whose rate [`SeriesAnalysis::settled`] calls known.
pub const SETTLED_HALF_WIDTH: f64 = 0.25;

impl SeriesAnalysis {
    /// A leak whose rate is known, not still moving: the second half of the
    /// fit says what the whole says (their intervals meet) and the whole's
    /// interval is within [`SETTLED_HALF_WIDTH`] of its rate. A run cut
    /// while the rate still drifts (start-up allocations winding down over
    /// its first few hundred steps) measures that drift, and a second run
    /// as long measures its own: comparing the two proves nothing.
    pub fn settled(&self) -> bool {
        let (Verdict::Leak, Some(t), Some(l)) = (self.verdict, self.trend, self.late_trend) else {
            return false;
        };
        t.slope > 0.0
            && l.hi >= t.lo
            && l.lo <= t.hi
            && (t.hi - t.lo) / 2.0 <= SETTLED_HALF_WIDTH * t.slope
    }
}

/// Decides whether the series `(xs, ys)` leaks. `xs` must be non-decreasing
/// (steps when known, else seconds).
pub fn analyze(xs: &[f64], ys: &[f64], opts: &VerdictOptions) -> SeriesAnalysis {
    let n = xs.len().min(ys.len());
    let mut a = SeriesAnalysis {
        verdict: Verdict::Inconclusive,
        shape: Shape::TooShort,
        shape_text: String::new(),
        trend: None,
        late_trend: None,
        n_samples: n,
        window: 0,
        n_fit: 0,
        warmup_end: None,
        warmup_rise: 0.0,
        growth: 0.0,
        threshold: opts.min_growth_abs,
        level: 0.0,
        flat_since: None,
        swing: 0.0,
        teardown_trimmed: 0,
        evidence: Vec::new(),
        minima: Windowed::default(),
    };
    if n < opts.min_samples {
        a.shape_text = format!("too short: {n} samples, need at least {}", opts.min_samples);
        a.evidence.push(a.shape_text.clone());
        return a;
    }
    let kept = teardown_start(&ys[..n], opts.min_growth_abs);
    a.teardown_trimmed = n - kept;
    let n_used = kept;
    let win = window_minima(&xs[..n_used], &ys[..n_used], window_size_for(n_used));
    a.window = win.window;
    let k = win.xs.len();
    let span_all = win.xs[k - 1] - win.xs[0];
    if k < opts.min_fit_points || span_all <= 0.0 {
        a.shape_text = format!(
            "too short: {k} windows over {}, need at least {}",
            fmt_span(span_all, &opts.x_unit),
            opts.min_fit_points
        );
        a.evidence.push(a.shape_text.clone());
        a.minima = win;
        return a;
    }

    let mut start = warmup_end(&win, opts);
    start = start.min(k - opts.min_fit_points);
    let (axs, ays) = (&win.xs[start..], &win.ys[start..]);
    a.warmup_end = Some(axs[0]);
    a.warmup_rise = ays[0] - win.ys[0];
    a.n_fit = axs.len();
    a.level = median(ays);
    a.threshold = opts.min_growth_abs.max(opts.min_growth_rel * a.level.abs());
    a.swing = median(&win.ranges[start..]);
    let Some(t) = theil_sen(axs, ays, opts.confidence) else {
        a.shape_text = "too short: the analysed part has no spread in x".to_string();
        a.evidence.push(a.shape_text.clone());
        a.minima = win;
        return a;
    };
    a.trend = Some(t);
    let span = axs[axs.len() - 1] - axs[0];
    a.growth = t.slope * span;

    let mid = axs[0] + span / 2.0;
    let late_from = axs.iter().position(|&x| x >= mid).unwrap_or(axs.len());
    a.late_trend = if axs.len() - late_from >= 4 {
        theil_sen(&axs[late_from..], &ays[late_from..], opts.confidence)
    } else {
        None
    };
    a.flat_since = flat_since(axs, ays, &t, span, a.threshold, opts.confidence, 3);
    if a.flat_since.is_none() && n_used <= RAW_TAIL_MAX {
        // In a short run a stall in the last second spans only two or three
        // windows; the raw samples show it.
        // Longer flat tails span enough windows to be found above, so only
        // the last few windows' samples are searched.
        let from = xs[..n_used]
            .partition_point(|&x| x < axs[0])
            .max(n_used.saturating_sub(6 * win.window).min(n_used));
        a.flat_since = flat_since(
            &xs[from..n_used],
            &ys[from..n_used],
            &t,
            span,
            a.threshold,
            opts.confidence,
            5,
        );
    }
    let flat_cover = a
        .flat_since
        .map(|x| (axs[axs.len() - 1] - x) / span)
        .unwrap_or(0.0);

    let u = opts.unit;
    let xu = &opts.x_unit;
    let grew = a.growth >= a.threshold;
    let sawtooth = a.swing >= a.threshold.max(2.0 * a.growth.abs());
    let (verdict, shape) = if grew && flat_cover >= opts.flat_tail_min {
        (Verdict::NoLeak, Shape::Saturating)
    } else if grew && flat_cover > 0.10 {
        // A flat stretch under a tenth of the span is what a steady leak
        // shows when freed memory is reused for a while (a big temporary,
        // the allocator's mmap threshold rising): not evidence of a plateau.
        (Verdict::Inconclusive, Shape::Saturating)
    } else if a.growth.abs() < a.threshold {
        // Growing significantly and steadily, already past half of what a
        // leak needs, and not flattening: a leak cut short (Ctrl-C after
        // seconds) looks like this. Not a clean bill of health.
        let early = a.growth >= 0.5 * a.threshold
            && t.lo > 0.0
            && t.r2 >= opts.min_r2
            && a.flat_since.is_none();
        if sawtooth {
            (Verdict::NoLeak, Shape::Sawtooth)
        } else if early {
            (Verdict::Inconclusive, Shape::TooEarly)
        } else {
            (Verdict::NoLeak, Shape::Flat)
        }
    } else if a.growth < 0.0 {
        (Verdict::NoLeak, Shape::Shrinking)
    } else if t.lo <= 0.0 || t.r2 < opts.min_r2 {
        (Verdict::Inconclusive, Shape::Noisy)
    } else {
        match a.late_trend {
            // Slowing needs evidence: the second half's interval must lie
            // below the run's rate by a margin. Five windows of a short run
            // give an interval as wide as the rate itself, and their point
            // estimate alone falls far below the true rate of a steady leak
            // often enough to make a flaky verdict.
            Some(l) if l.hi < opts.late_ratio_slowing * t.slope => {
                (Verdict::Inconclusive, Shape::Slowing)
            }
            Some(l) if l.lo > 0.0 && l.slope > 1.5 * t.slope => {
                (Verdict::Leak, Shape::Accelerating)
            }
            Some(l) if l.lo > 0.0 => (Verdict::Leak, Shape::LinearGrowth),
            // The second half alone is too short to be significant but agrees
            // with the whole run's significant rate.
            Some(l) if l.hi >= t.slope => (Verdict::Leak, Shape::LinearGrowth),
            Some(_) => (Verdict::Inconclusive, Shape::Noisy),
            // Too few late points to check the end on its own: the whole
            // analysed part is significant and large, which is the best
            // evidence there is.
            None => (Verdict::Leak, Shape::LinearGrowth),
        }
    };
    a.verdict = verdict;
    a.shape = shape;
    a.shape_text = match shape {
        Shape::LinearGrowth => "linear growth".to_string(),
        Shape::Accelerating => "accelerating growth".to_string(),
        Shape::Saturating => format!(
            "saturating: flat since {}",
            fmt_x(a.flat_since.unwrap_or(axs[0]), xu)
        ),
        Shape::Slowing => {
            "growth slowing down: may be saturating, a longer run would tell".to_string()
        }
        Shape::Flat => "flat".to_string(),
        Shape::Sawtooth => format!(
            "sawtooth: minima flat, swings of {} above them",
            fmt_value(a.swing, u)
        ),
        Shape::Shrinking => "shrinking".to_string(),
        Shape::Noisy if t.lo > 0.0 && t.r2 < opts.min_r2 => format!(
            "noisy: the fitted line explains too little (R² {:.2}, below {:.2}): memory moves \
             with something other than the work (a busy machine)",
            t.r2, opts.min_r2
        ),
        Shape::Noisy => "noisy: the slope's interval includes zero".to_string(),
        Shape::TooEarly => format!(
            "too early to tell: grew {} over {} at {}; a leak of this size needs {}, which \
             this rate reaches after about {}",
            fmt_value(a.growth, u),
            fmt_span(span, xu),
            fmt_rate(t.slope, u, xu),
            fmt_value(a.threshold, u),
            fmt_span(a.threshold / t.slope, xu)
        ),
        Shape::TooShort => unreachable!(),
    };

    let pct = (opts.confidence * 100.0).round();
    a.evidence.push(format!(
        "slope {} ({pct:.0}% interval {} to {}), R² {:.2}",
        fmt_rate(t.slope, u, xu),
        fmt_rate_like(t.lo, t.slope, u, xu),
        fmt_rate_like(t.hi, t.slope, u, xu),
        t.r2
    ));
    a.evidence.push(format!(
        "fitted on {} window minima ({} samples each) from {} to {}, of {} samples",
        a.n_fit,
        a.window,
        fmt_x(axs[0], xu),
        fmt_x(axs[axs.len() - 1], xu),
        n
    ));
    a.evidence.push(format!(
        "fitted growth {} over the analysed span; a leak needs at least {} (max of {} and {:.0}% of the level {})",
        fmt_value(a.growth, u),
        fmt_value(a.threshold, u),
        fmt_value(opts.min_growth_abs, u),
        opts.min_growth_rel * 100.0,
        fmt_value(a.level, u)
    ));
    if let Some(l) = a.late_trend {
        a.evidence.push(format!(
            "second half: slope {} ({} to {})",
            fmt_rate(l.slope, u, xu),
            fmt_rate_like(l.lo, l.slope, u, xu),
            fmt_rate_like(l.hi, l.slope, u, xu)
        ));
    }
    if start > 0 {
        a.evidence.push(format!(
            "warm-up trimmed: up to {} (rise {})",
            fmt_x(axs[0], xu),
            fmt_value(a.warmup_rise, u)
        ));
    }
    if a.teardown_trimmed > 0 {
        a.evidence.push(format!(
            "exit teardown: the last {} sample(s) fell to {} and were left out",
            a.teardown_trimmed,
            fmt_value(ys[n - 1], u)
        ));
    }
    a.evidence.push(format!("shape: {}", a.shape_text));
    a.minima = win;
    a
}

/// Length of the series without its exit teardown: the trailing samples
/// that fell steeply (below 3/4 of the peak before them, by more than
/// `min_drop`) as the interpreter freed everything on its way out. At most
/// 5 % of the samples are dropped, but always up to 8 (an exit can take 0.8 s
/// at 10 Hz), and never more than a quarter of the run.
fn teardown_start(ys: &[f64], min_drop: f64) -> usize {
    let n = ys.len();
    let cap = (n / 20).max(8).min(n / 4).max(1).min(n.saturating_sub(1));
    // prefix_max[j] = max of ys[..tail + j], for the tail that may be cut.
    let tail = n - cap;
    let mut prefix_max = Vec::with_capacity(cap + 1);
    prefix_max.push(ys[..tail].iter().copied().fold(f64::NEG_INFINITY, f64::max));
    for &y in &ys[tail..] {
        let last = prefix_max[prefix_max.len() - 1];
        prefix_max.push(f64::max(last, y));
    }
    let mut k = n;
    while k > 1 && n - k < cap {
        let before = prefix_max[k - 1 - tail];
        let y = ys[k - 1];
        if y < 0.75 * before && before - y > min_drop {
            k -= 1;
        } else {
            break;
        }
    }
    k
}

/// Index of the first window minimum after the warm-up: at least
/// `warmup_fraction` of the span, and past the last early jump that is much
/// larger than the typical change in the second half (imports, lazy first-step
/// work, a data set loaded once), capped at `max_warmup_fraction`.
fn warmup_end(win: &Windowed, opts: &VerdictOptions) -> usize {
    let (xs, ys) = (&win.xs, &win.ys);
    let k = xs.len();
    let x0 = xs[0];
    let span = xs[k - 1] - x0;
    let base = xs
        .iter()
        .position(|&x| x >= x0 + opts.warmup_fraction * span)
        .unwrap_or(0);
    let cap_x = x0 + opts.max_warmup_fraction * span;
    let late_rates: Vec<f64> = (k / 2..k - 1)
        .filter(|&j| xs[j + 1] > xs[j])
        .map(|j| ((ys[j + 1] - ys[j]) / (xs[j + 1] - xs[j])).abs())
        .collect();
    let typical = if late_rates.is_empty() {
        0.0
    } else {
        median(&late_rates)
    };
    // A steady leak whose late windows are mostly flat (the allocator
    // refilling freed heap) has a small typical change: a jump must also
    // stand well above the second half's mean rate to be start-up work
    // (warm-up that then flattens leaves that rate near zero).
    let mid = k / 2;
    let mean_rate = if xs[k - 1] > xs[mid] {
        ((ys[k - 1] - ys[mid]) / (xs[k - 1] - xs[mid])).max(0.0)
    } else {
        0.0
    };
    let mut end = base;
    for j in 0..k - 1 {
        if xs[j + 1] > cap_x {
            break;
        }
        let d = ys[j + 1] - ys[j];
        let dx = xs[j + 1] - xs[j];
        if d > (5.0 * typical.max(mean_rate) * dx).max(opts.min_growth_abs) {
            end = end.max(j + 1);
        }
    }
    // Warm-up is start-up: what it trims must have risen faster than what
    // follows. A steady leak with a few stair steps (the allocator taking a
    // new arena, the probe's own burst slowing the steps) rises before its
    // last step as it does after: that is the leak, not warm-up.
    if end > base && xs[k - 1] > xs[end] && xs[end] > x0 {
        let before = (ys[end] - ys[0]) / (xs[end] - x0);
        let after = (ys[k - 1] - ys[end]) / (xs[k - 1] - xs[end]);
        if after > 0.0 && before < 2.0 * after {
            end = base;
        }
    }
    end
}

/// The start of the longest tail that no longer grows: its slope, carried
/// over the whole analysed span, stays under the threshold, is under a
/// quarter of the overall slope, and is significantly below it.
fn flat_since(
    xs: &[f64],
    ys: &[f64],
    overall: &Trend,
    span: f64,
    threshold: f64,
    confidence: f64,
    min_tail: usize,
) -> Option<f64> {
    let k = xs.len();
    if k < 8 || k < 2 * min_tail {
        return None;
    }
    let stride = (k / 40).max(1);
    let mut best = None;
    let mut s = k - min_tail;
    loop {
        if let Some(t) = theil_sen(&xs[s..], &ys[s..], confidence) {
            // Noise makes short tails look flat: the tail's interval must
            // also exclude the overall slope.
            if t.slope * span < threshold
                && t.slope < 0.25 * overall.slope.max(0.0)
                && t.hi < overall.slope
            {
                best = Some(s);
            }
        }
        if s < stride {
            break;
        }
        s -= stride;
    }
    // A robust fit tolerates the end of the rise inside the tail; the
    // plateau starts where the tail reaches its own level.
    let mut s = best?;
    let level = median(&ys[k - min_tail..]);
    while s + 1 < k && ys[s] < level - threshold / 4.0 {
        s += 1;
    }
    Some(xs[s])
}

fn fmt_rate(v: f64, unit: ValueUnit, x_unit: &str) -> String {
    format!("{}/{x_unit}", fmt_value(v, unit))
}

/// A bound of an interval in the unit of its slope.
fn fmt_rate_like(v: f64, slope: f64, unit: ValueUnit, x_unit: &str) -> String {
    match unit {
        ValueUnit::Bytes if slope != 0.0 => format!("{}/{x_unit}", fmt_bytes_as(v, slope)),
        _ => fmt_rate(v, unit, x_unit),
    }
}

/// `"step 120"` or `"12.3 s"`.
pub(crate) fn fmt_x(x: f64, x_unit: &str) -> String {
    if x_unit == "step" {
        format!("step {x:.0}")
    } else {
        format!("{x:.1} {x_unit}")
    }
}

fn fmt_span(dx: f64, x_unit: &str) -> String {
    if x_unit == "step" {
        format!("{dx:.0} steps")
    } else {
        format!("{dx:.1} {x_unit}")
    }
}

//! Before/after comparison of two diagnoses: did the fix work? Measured
//! growth with intervals instead of the "expected" tables of the seeds.

use leakspy_stats::{Shape, Verdict};
use serde::Serialize;

use crate::model::{Basis, Diagnosis, Growth};

/// The answer of `leakspy diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DiffVerdict {
    /// Before leaked; after does not (or grows significantly less and is not a leak).
    Fixed,
    /// Both leak and the intervals overlap.
    NotFixed,
    /// After grows significantly faster (or leaks where before did not).
    Worse,
    /// Still leaks, but significantly less.
    Improved,
    /// Neither run leaks.
    NoLeakEither,
    /// The data cannot tell.
    Inconclusive,
    /// Both traces are one run: nothing was compared.
    SameRun,
}

impl DiffVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            DiffVerdict::Fixed => "fixed",
            DiffVerdict::NotFixed => "not fixed",
            DiffVerdict::Worse => "worse",
            DiffVerdict::Improved => "improved",
            DiffVerdict::NoLeakEither => "no leak in either",
            DiffVerdict::Inconclusive => "inconclusive",
            DiffVerdict::SameRun => "same run",
        }
    }

    /// Whether this outcome is good news for CI (exit 0).
    pub fn passes(self) -> bool {
        matches!(
            self,
            DiffVerdict::Fixed | DiffVerdict::Improved | DiffVerdict::NoLeakEither
        )
    }
}

/// One side of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffSide {
    /// The trace path as given.
    pub label: String,
    /// Verdict of the compared series.
    pub verdict: Verdict,
    pub shape: Shape,
    pub shape_text: String,
    pub growth: Option<Growth>,
    /// Steps recorded.
    pub steps: usize,
    pub duration_s: f64,
}

/// `leakspy diff`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub verdict: DiffVerdict,
    /// Why, in one sentence.
    pub reason: String,
    /// What is compared (the series, e.g. "resident memory (RSS) of the process tree").
    pub what: String,
    /// Key of the compared series.
    pub series: String,
    /// Per step when both traces have steps, else per second.
    pub basis: Basis,
    pub before: DiffSide,
    pub after: DiffSide,
    /// after slope / before slope (null when before does not grow).
    pub ratio: Option<f64>,
}

impl Comparison {
    /// This comparison, marked as one of two traces of the same run
    /// (`run` says which): whatever the figures, nothing is proven.
    pub fn of_one_run(mut self, run: &str) -> Self {
        self.verdict = DiffVerdict::SameRun;
        self.ratio = None;
        self.reason = format!(
            "both traces are the same run ({run}), so nothing was compared: \
             record the job again after the fix and compare that trace with this one"
        );
        self
    }
}

/// Compares the same series in two diagnoses: the series `before` leaks in
/// (else total RSS), per step when both have steps, else per second.
pub fn compare(
    before: &Diagnosis,
    before_label: &str,
    after: &Diagnosis,
    after_label: &str,
) -> Comparison {
    let key = if after.series.iter().any(|s| s.key == before.headline) {
        before.headline.clone()
    } else {
        "total.rss".to_string()
    };
    let b = before.series.iter().find(|s| s.key == key);
    let a = after.series.iter().find(|s| s.key == key);
    let basis = match (b, a) {
        (Some(b), Some(a)) if b.per_step.is_some() && a.per_step.is_some() => Basis::Step,
        _ => Basis::Second,
    };
    let side = |d: &Diagnosis, label: &str, s: Option<&crate::model::SeriesReport>| {
        let growth = s.and_then(|s| match basis {
            Basis::Step => s.per_step.clone(),
            Basis::Second => s.per_second.clone(),
        });
        // Per-second fits are only the verdict's basis when the series was
        // fitted per second; otherwise the verdict stays the series' own.
        DiffSide {
            label: label.to_string(),
            verdict: s.map_or(Verdict::Inconclusive, |s| s.verdict),
            shape: s.map_or(Shape::TooShort, |s| s.shape),
            shape_text: s.map_or_else(|| "no memory samples".to_string(), |s| s.shape_text.clone()),
            growth,
            steps: d.run.steps,
            duration_s: d.run.duration_s,
        }
    };
    let before_side = side(before, before_label, b);
    let after_side = side(after, after_label, a);
    let what = b
        .or(a)
        .map_or_else(|| "memory".to_string(), |s| s.what.clone());
    let ratio = match (&before_side.growth, &after_side.growth) {
        (Some(bg), Some(ag)) if bg.slope > 0.0 => Some(ag.slope / bg.slope),
        _ => None,
    };
    let (verdict, reason) = decide(&before_side, &after_side);
    Comparison {
        verdict,
        reason,
        what,
        series: key,
        basis,
        before: before_side,
        after: after_side,
        ratio,
    }
}

fn decide(b: &DiffSide, a: &DiffSide) -> (DiffVerdict, String) {
    use Verdict::{Inconclusive, Leak, NoLeak};
    let (Some(bg), Some(ag)) = (&b.growth, &a.growth) else {
        return match (b.verdict, a.verdict) {
            (NoLeak, NoLeak) => (DiffVerdict::NoLeakEither, "neither run leaks".to_string()),
            _ => (
                DiffVerdict::Inconclusive,
                "a trace is too short to fit a trend".to_string(),
            ),
        };
    };
    let clearly_lower = ag.hi < bg.lo;
    let clearly_higher = ag.lo > bg.hi;
    match (b.verdict, a.verdict) {
        (Leak, NoLeak) => (
            DiffVerdict::Fixed,
            format!("before leaked; after does not ({})", a.shape_text),
        ),
        (Leak, Inconclusive) if clearly_lower => (
            DiffVerdict::Fixed,
            "before leaked; after grows significantly less and is not a leak".to_string(),
        ),
        (Leak, Inconclusive) => (
            DiffVerdict::Inconclusive,
            format!(
                "before leaked; after is inconclusive ({}) and its interval overlaps before's",
                a.shape_text
            ),
        ),
        (Leak, Leak) if clearly_higher => (
            DiffVerdict::Worse,
            "both leak, and after grows significantly faster".to_string(),
        ),
        (Leak, Leak) if clearly_lower => (
            DiffVerdict::Improved,
            "both leak, but after grows significantly less".to_string(),
        ),
        (Leak, Leak) => (
            DiffVerdict::NotFixed,
            "both leak and the intervals overlap".to_string(),
        ),
        (_, Leak) => (
            DiffVerdict::Worse,
            "after leaks where before did not".to_string(),
        ),
        (NoLeak, NoLeak) => (DiffVerdict::NoLeakEither, "neither run leaks".to_string()),
        _ => (
            DiffVerdict::Inconclusive,
            "neither run shows a leak, but at least one is inconclusive".to_string(),
        ),
    }
}

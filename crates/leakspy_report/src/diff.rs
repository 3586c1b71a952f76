//! Before/after comparison of two diagnoses: did the fix work? Measured
//! growth with intervals instead of the "expected" tables of the seeds.

use leakspy_stats::{Shape, Verdict};
use serde::Serialize;

use crate::census::Describe;
use crate::diagnose::fmt_rate_value;
use crate::model::{Basis, Diagnosis, Growth, InUse};

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
    /// Still leaks, but significantly less: at most `IMPROVED_RATIO` of before's rate.
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
    /// The trace's verdict: the diagnosis's own, what `leakspy report` says of it
    /// (memory fits, the probe's census and the exit together).
    pub verdict: Verdict,
    /// The diagnosis's one-line summary, as `report` prints it.
    pub summary: String,
    /// What made the compared series a leak when its own fit is not one
    /// (`the probe's census`).
    pub leak_by: Option<String>,
    /// Shape of the compared series (its own fit).
    pub shape: Shape,
    pub shape_text: String,
    /// Growth of the compared series, in the comparison's basis.
    pub growth: Option<Growth>,
    /// Steps recorded.
    pub steps: usize,
    pub duration_s: f64,
    /// Censuses the probe took (0: nothing was looked at inside the job).
    pub censuses: usize,
}

/// What became of one holder the probe named in the run before.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HolderChange {
    /// `Trainer.losses (list)`.
    pub holder: String,
    /// What grew under it before, in one line.
    pub before: String,
    /// What grows under it after; `None` when nothing does.
    pub after: Option<String>,
    /// Where nothing was found growing under it after, why that is not
    /// "gone": a count it held that still rose over the run after (the
    /// probe's holder search, which runs where memory grows, did not
    /// reach it), or only a container, which is followed by that search
    /// alone. `None`: what it held was counted after and did not rise.
    pub unseen: Option<String>,
}

impl HolderChange {
    /// "held by Trainer.losses (list): gone" / "... still grows (+1.00 ...)".
    pub fn describe(&self) -> String {
        match &self.after {
            None => match &self.unseen {
                None => format!("held by {}: gone", self.holder),
                Some(why) => format!("held by {}: not seen growing ({why})", self.holder),
            },
            Some(a) => format!("held by {}: still grows ({a})", self.holder),
        }
    }
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
    /// The holders the probe named in the run before, and what became of them
    /// (compared only where the run after was looked into).
    pub holders: Vec<HolderChange>,
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

/// Compares two diagnoses, each side's verdict being its diagnosis's (so
/// `diff` never contradicts `report`): growth of the series the run before
/// leaks in (else total RSS), per step when both have steps, else per second,
/// and what became of the holders the probe named before.
pub fn compare(
    before: &Diagnosis,
    before_label: &str,
    after: &Diagnosis,
    after_label: &str,
) -> Comparison {
    let key = if after.series.iter().any(|s| s.key == before.headline) {
        before.headline.clone()
    } else {
        crate::extract::TREE_RSS.to_string()
    };
    let b = before.series.iter().find(|s| s.key == key);
    let a = after.series.iter().find(|s| s.key == key);
    let basis = match (b, a) {
        (Some(b), Some(a)) if b.per_step.is_some() && a.per_step.is_some() => Basis::Step,
        _ => Basis::Second,
    };
    let side = |d: &Diagnosis, label: &str, s: Option<&crate::model::SeriesReport>| DiffSide {
        label: label.to_string(),
        verdict: d.verdict,
        summary: d.summary.clone(),
        leak_by: s.and_then(|s| s.leak_by.clone()),
        shape: s.map_or(Shape::TooShort, |s| s.shape),
        shape_text: s.map_or_else(|| "no memory samples".to_string(), |s| s.shape_text.clone()),
        growth: s.and_then(|s| match basis {
            Basis::Step => s.per_step.clone(),
            Basis::Second => s.per_second.clone(),
        }),
        steps: d.run.steps,
        duration_s: d.run.duration_s,
        censuses: d.probe.censuses,
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
    let holders = holder_changes(before, after);
    let (mut verdict, mut reason) = decide(&before_side, &after_side);
    // Memory grows less and is no leak by its own verdict, but not flat
    // either, while the probe still sees objects grow: a part of the leak
    // the fix left (a detached loss kept per step where its graph was).
    if verdict == DiffVerdict::Fixed {
        if let Some(still) = still_growing(after) {
            verdict = DiffVerdict::Improved;
            reason = format!(
                "before leaked; after grows significantly less, but the probe still sees \
                 objects grow ({still})"
            );
        }
    }
    let mut c = Comparison {
        verdict,
        reason,
        what,
        series: key,
        basis,
        before: before_side,
        after: after_side,
        ratio,
        holders,
    };
    // Either run's resident memory grows in what malloc keeps free: how
    // much of what a step frees a run keeps moves from run to run (and can
    // dwarf the leak itself), so resident memory cannot tell whether the
    // fix worked, whether after's came out flat or not this time. What
    // malloc holds in use can, where both runs' censuses read it and
    // before's leak shows there.
    let kept_after = allocator_growth(after);
    if kept_after.is_some() || allocator_growth(before).is_some() {
        if let Some(decided) = on_memory_in_use(before, after) {
            return decided.applied_to(c);
        }
    }
    // Else a fix judged not to work on memory the allocator keeps is not
    // judged: the data cannot say "not fixed" (nor "worse"). Flat or less
    // after is as measured.
    if matches!(c.verdict, DiffVerdict::NotFixed | DiffVerdict::Worse) {
        if let Some(why) = kept_after {
            (c.verdict, c.reason) = (DiffVerdict::Inconclusive, why);
        }
    }
    c
}

/// Series key of glibc malloc's memory in use, when a comparison is made on it.
pub const IN_USE_SERIES: &str = "malloc.in_use";

/// The most memory in use may still grow after a fix, as a share of before's rate, for the
/// fix to count as removing the leak.
const IN_USE_REMAINDER: f64 = 0.01;

/// A comparison decided on what malloc holds in use.
struct InUseDecision<'a> {
    verdict: DiffVerdict,
    reason: String,
    before: &'a InUse,
    after: &'a InUse,
}

impl InUseDecision<'_> {
    /// `c` compared on memory in use: its verdict, its series and both sides' growth.
    fn applied_to(self, mut c: Comparison) -> Comparison {
        c.verdict = self.verdict;
        c.reason = self.reason;
        c.what = "memory in use by glibc's malloc (allocated, not freed) in the process its \
                  censuses read most"
            .to_string();
        c.series = IN_USE_SERIES.to_string();
        c.basis = if self.before.growth.unit.ends_with("/step") {
            Basis::Step
        } else {
            Basis::Second
        };
        c.before.growth = Some(self.before.growth.clone());
        c.after.growth = Some(self.after.growth.clone());
        c.ratio = (self.before.growth.slope > 0.0)
            .then(|| self.after.growth.slope / self.before.growth.slope);
        c
    }
}

/// Whether the fix worked, told by malloc's memory in use (allocated and not freed), which the
/// memory it keeps free does not move, as `decide` tells it on resident memory: fixed when
/// after's whole interval lies below before's and after does not grow significantly (or by
/// under `IN_USE_REMAINDER` of before's rate), unless the probe still sees objects grow in
/// a run after whose own verdict is not no leak (then improved);
/// improved when it still grows at most `IMPROVED_RATIO` as fast; worse when its interval lies
/// above; not fixed when it grows less but not half as fast; inconclusive when the intervals
/// overlap (a few censuses may not tell). Not decided here (`None`): a run before that did
/// not leak, or whose leak does not show in its memory in use (another process's, say), or
/// runs without such readings.
fn on_memory_in_use<'a>(before: &'a Diagnosis, after: &'a Diagnosis) -> Option<InUseDecision<'a>> {
    if before.verdict != Verdict::Leak {
        return None;
    }
    let (b, a) = (before.in_use.as_ref()?, after.in_use.as_ref()?);
    let (bg, ag) = (&b.growth, &a.growth);
    if bg.unit != ag.unit || bg.lo <= 0.0 {
        return None;
    }
    let figures = format!(
        "memory in use by malloc grew {} (95% {} … {}) before and {} (95% {} … {}) after, over \
         {} and {} censuses; the freed memory malloc keeps, which resident memory counts, does \
         not count there",
        fmt_rate_value(bg.slope, bg),
        fmt_rate_value(bg.lo, bg),
        fmt_rate_value(bg.hi, bg),
        fmt_rate_value(ag.slope, ag),
        fmt_rate_value(ag.lo, ag),
        fmt_rate_value(ag.hi, ag),
        b.points,
        a.points
    );
    // A remainder two orders of magnitude below the leak (a float kept per step where a
    // graph was) is not what the fix left of it.
    let flat = ag.lo <= 0.0 || ag.slope < IN_USE_REMAINDER * bg.slope;
    // Objects the probe still sees grow after, by the run's own verdict:
    // less than memory in use can show, but not fixed.
    let still = still_growing(after);
    let (verdict, reason) = if ag.hi < bg.lo && flat && still.is_none() {
        (
            DiffVerdict::Fixed,
            format!("before leaked; after does not: {figures}"),
        )
    } else if ag.hi < bg.lo && flat {
        (
            DiffVerdict::Improved,
            format!(
                "before leaked; after grows significantly less, but the probe still sees \
                 objects grow ({}): {figures}",
                still.unwrap_or_default()
            ),
        )
    } else if significantly_below(ag, bg) && ag.slope <= IMPROVED_RATIO * bg.slope {
        (
            DiffVerdict::Improved,
            format!("before leaked; after grows significantly less but still grows: {figures}"),
        )
    } else if ag.hi < bg.lo {
        (
            DiffVerdict::NotFixed,
            format!(
                "both grow; after grows less ({:.0} % of before), but not half as fast: {figures}",
                100.0 * ag.slope / bg.slope
            ),
        )
    } else if ag.lo > bg.hi {
        (
            DiffVerdict::Worse,
            format!("after grows significantly faster: {figures}"),
        )
    } else {
        (
            DiffVerdict::Inconclusive,
            format!("the intervals overlap, so the censuses cannot tell the runs apart: {figures}"),
        )
    };
    Some(InUseDecision {
        verdict,
        reason,
        before: b,
        after: a,
    })
}

/// What the probe still sees grow in the run after a fix, unless that run's
/// own verdict is no leak (its report then says it is too little to matter).
fn still_growing(after: &Diagnosis) -> Option<String> {
    (after.verdict != Verdict::NoLeak)
        .then(|| after.growth.first())
        .flatten()
        .map(crate::census::GrowthGroup::headline)
}

/// Why the growth of a run after a fix cannot tell whether the fix worked:
/// the report found it is the allocator keeping freed memory (the same job
/// grew 2.3 KiB/step in one run, 13.5 in the next).
pub(crate) fn allocator_growth(after: &Diagnosis) -> Option<String> {
    let m = after
        .mechanisms
        .iter()
        .find(|m| m.kind == crate::model::MechanismKind::Allocator)?;
    Some(format!(
        "after's memory grows in what the allocator keeps ({}): how much freed memory a run \
         keeps varies from run to run, so its growth does not tell whether the fix worked (run \
         both with jemalloc, `LD_PRELOAD=libjemalloc.so.2`, to compare)",
        m.summary.trim_start_matches("the allocator: ")
    ))
}

/// The named holders of the run before, each looked up in the run after.
/// Nothing is said of a run after that the probe did not look into.
fn holder_changes(before: &Diagnosis, after: &Diagnosis) -> Vec<HolderChange> {
    if after.probe.censuses == 0 {
        return Vec::new();
    }
    let mut seen: Vec<&crate::census::Holder> = Vec::new();
    before
        .growth
        .iter()
        .flat_map(|g| {
            g.holder
                .iter()
                .flat_map(|h| h.all_named())
                .map(move |h| (g, h))
        })
        .filter_map(|(g, h)| {
            if seen.iter().any(|s| s.same_root(h)) {
                return None;
            }
            seen.push(h);
            // (A holder the run after names beside another, for the same
            // series, still holds what grows.)
            let same = |a: &&crate::census::GrowthGroup| {
                a.holder
                    .as_ref()
                    .is_some_and(|ah| ah.all_named().any(|x| x.same_root(h)))
            };
            // Still growing where memory does not grow with it: not gone.
            let still = after
                .growth
                .iter()
                .find(same)
                .map(|a| a.growers[0].describe());
            let quiet =
                || {
                    after.quiet.iter().find(same).map(|a| {
                        format!("{}; memory does not grow with it", a.growers[0].describe())
                    })
                };
            Some(HolderChange {
                holder: holder_name(h),
                before: g.growers[0].describe(),
                after: still.or_else(quiet),
                unseen: unseen(g, after),
            })
        })
        .collect()
}

/// Why a holder of the run before that the run after did not name is not
/// known to be gone (`HolderChange::unseen`).
fn unseen(before: &crate::census::GrowthGroup, after: &Diagnosis) -> Option<String> {
    // What it held first counted by itself: its own container's length is
    // followed only by the holder search; the objects in it are counted by
    // kind at every look.
    let Some(g) = before
        .growers
        .iter()
        .find(|g| !g.key.starts_with("container:"))
    else {
        return Some(
            "what it held is a container, followed only where the probe searches for holders"
                .to_string(),
        );
    };
    let &(a, b) = after.risen.get(&g.key)?;
    Some(format!(
        "{} still rose over the run after, {a:.0} to {b:.0}; the probe did not search for their \
         holder there",
        g.what
    ))
}

/// A holder in a few words: `Trainer.losses (list)`.
pub fn holder_name(h: &crate::census::Holder) -> String {
    match h.container.as_deref().filter(|c| !c.is_empty()) {
        Some(c) => format!("{} ({c})", h.path),
        None => h.path.clone(),
    }
}

/// Does `a` grow significantly slower than `b`? The difference of two independent rates has
/// an interval of its own, narrower than the two intervals laid end to end: each one's
/// half-width toward the other (`b`'s lower side, `a`'s upper side) added in quadrature. Two
/// 95 % intervals that just overlap can still differ at the 5 % level (under load a run gets
/// fewer censuses, and wide intervals: 7.2 (3.7 … 10.0) → 2.7 (1.8 … 3.9) KiB/step is
/// significantly less). Said of a rate that still grows, with `IMPROVED_RATIO` for what two
/// runs of one job differ by beyond their intervals; a fix is proven only by after's whole
/// interval lying below before's.
fn significantly_below(a: &Growth, b: &Growth) -> bool {
    let (below_b, above_a) = ((b.slope - b.lo).max(0.0), (a.hi - a.slope).max(0.0));
    b.slope - a.slope > below_b.hypot(above_a)
}

/// The most a run that still leaks may grow, as a share of the run before
/// it, to count as improved. Two runs of one job (other censuses, another
/// load) differ in rate by more than either run's interval: a fix measured
/// at 173 → 164 KiB/step was 166 → 167 when run again. Halving the rate is
/// beyond that noise.
pub const IMPROVED_RATIO: f64 = 0.5;

fn decide(b: &DiffSide, a: &DiffSide) -> (DiffVerdict, String) {
    use Verdict::{Inconclusive, Leak, NoLeak};
    let (bg, ag) = match (&b.growth, &a.growth) {
        (Some(bg), Some(ag)) => (bg, ag),
        _ => {
            return match (b.verdict, a.verdict) {
                (NoLeak, NoLeak) => (DiffVerdict::NoLeakEither, "neither run leaks".to_string()),
                (_, Leak) if b.verdict != Leak => (
                    DiffVerdict::Worse,
                    format!("after leaks where before did not ({})", a.summary),
                ),
                _ => (
                    DiffVerdict::Inconclusive,
                    "a trace is too short to fit a trend on the same series as the other"
                        .to_string(),
                ),
            };
        }
    };
    let clearly_lower = ag.hi < bg.lo;
    let clearly_higher = ag.lo > bg.hi;
    // A run after that does not leak proves a fix only if it could have
    // shown before's rate: its whole interval lies below it.
    let rules_out_before = ag.hi < bg.slope;
    match (b.verdict, a.verdict) {
        (Leak, NoLeak) if rules_out_before => (
            DiffVerdict::Fixed,
            format!("before leaked; after does not ({})", a.shape_text),
        ),
        (Leak, NoLeak) => (
            DiffVerdict::Inconclusive,
            format!(
                "before leaked; after does not by its own verdict, but its run ({} steps, {:.0} s) \
                 cannot rule out before's rate: its interval reaches {}; record it as long as \
                 before",
                a.steps,
                a.duration_s,
                fmt_rate_value(ag.hi, ag)
            ),
        ),
        // Still growing steadily, only not yet by what a leak needs in a
        // run this short: less, but not gone.
        (Leak, Inconclusive) if clearly_lower && a.shape == Shape::TooEarly => (
            DiffVerdict::Improved,
            format!(
                "before leaked; after grows significantly less but still grows ({})",
                a.shape_text
            ),
        ),
        (Leak, Inconclusive) if clearly_lower => (
            DiffVerdict::Fixed,
            "before leaked; after grows significantly less and is not a leak".to_string(),
        ),
        (Leak, Inconclusive) => (
            DiffVerdict::Inconclusive,
            format!(
                "before leaked; after is inconclusive ({}) and its interval overlaps before's",
                a.summary
            ),
        ),
        // Memory that grew steadily before has stopped growing after (its own fit: flat
        // since a step), and only the probe's census still calls it a leak: what the fix
        // left grows in objects, not in the memory the run before lost. Its overall slope
        // still counts the climb before it levelled, so it is no measure of that.
        (Leak, Leak)
            if a.leak_by.is_some()
                && a.shape == Shape::Saturating
                && matches!(b.shape, Shape::LinearGrowth | Shape::Accelerating) =>
        {
            (
                DiffVerdict::Improved,
                format!(
                    "before leaked; after's memory stopped growing ({}), but the probe still \
                     sees objects grow",
                    a.shape_text
                ),
            )
        }
        (Leak, Leak) if clearly_higher => (
            DiffVerdict::Worse,
            "both leak, and after grows significantly faster".to_string(),
        ),
        (Leak, Leak) if significantly_below(ag, bg) && ag.slope <= IMPROVED_RATIO * bg.slope => (
            DiffVerdict::Improved,
            "both leak, but after grows significantly less".to_string(),
        ),
        (Leak, Leak) if clearly_lower => (
            DiffVerdict::NotFixed,
            format!(
                "both leak; after grows less ({:.0} % of before), but not half as fast: two runs \
                 of one job differ by more than their intervals say, so that is no proof",
                100.0 * ag.slope / bg.slope
            ),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn loss_list() -> Diagnosis {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/probe_loss_list.jsonl"
        );
        let trace = leakspy_trace::read_trace(std::path::Path::new(path)).unwrap();
        crate::diagnose(&trace, &crate::DiagnoseOptions::default())
    }

    /// `before` with its memory growing a twentieth as fast, its shape
    /// saturating and its verdict `verdict`: what a fix that kept part of
    /// the leak records.
    fn after_of(before: &Diagnosis, verdict: Verdict) -> Diagnosis {
        let mut a = before.clone();
        a.verdict = verdict;
        for s in &mut a.series {
            for g in [&mut s.per_step, &mut s.per_second].into_iter().flatten() {
                (g.slope, g.lo, g.hi) = (g.slope / 20.0, g.lo / 20.0, g.hi / 20.0);
            }
            s.verdict = verdict;
            s.shape = Shape::Saturating;
        }
        if verdict == Verdict::NoLeak {
            a.quiet = std::mem::take(&mut a.growth);
        }
        a
    }

    #[test]
    fn what_the_probe_still_sees_grow_after_a_fix_is_not_fixed() {
        let before = loss_list();
        assert_eq!(before.verdict, Verdict::Leak);
        assert!(before.growth[0].holder.as_ref().unwrap().is_named());

        // Less memory growth, inconclusive on its own, and the probe still
        // sees the holder's objects grow: improved, with the holder named.
        let c = compare(&before, "b", &after_of(&before, Verdict::Inconclusive), "a");
        assert_eq!(c.verdict, DiffVerdict::Improved, "{}", c.reason);
        assert!(
            c.reason.contains("the probe still sees objects grow")
                && c.reason.contains("Trainer.losses"),
            "{}",
            c.reason
        );
        assert!(c.holders.iter().all(|h| h.after.is_some()));

        // Nothing grows any more in the probe's eyes: fixed.
        let mut gone = after_of(&before, Verdict::Inconclusive);
        gone.growth.clear();
        let c = compare(&before, "b", &gone, "a");
        assert_eq!(c.verdict, DiffVerdict::Fixed, "{}", c.reason);

        // The run after is no leak by its own verdict: what the probe saw
        // grow is too little to matter there, and so here.
        let c = compare(&before, "b", &after_of(&before, Verdict::NoLeak), "a");
        assert_eq!(c.verdict, DiffVerdict::Fixed, "{}", c.reason);
    }

    #[test]
    fn memory_that_levels_off_after_a_fix_is_improved_while_the_census_still_sees_growth() {
        let before = loss_list();
        assert!(before
            .series
            .iter()
            .any(|s| s.key == before.headline && s.shape == Shape::LinearGrowth));
        // The run after climbs as fast at first, then levels off: its overall slope
        // overlaps before's, and only the census keeps it a leak.
        let mut after = before.clone();
        for s in &mut after.series {
            s.shape = Shape::Saturating;
            s.shape_text = "saturating: flat since step 180".to_string();
            s.leak_by = Some("the probe's census".to_string());
        }
        let c = compare(&before, "b", &after, "a");
        assert_eq!(c.verdict, DiffVerdict::Improved, "{}", c.reason);
        assert!(c.reason.contains("flat since step 180"), "{}", c.reason);
        // Growing as before by its own fit: not fixed.
        let c = compare(&before, "b", &before.clone(), "a");
        assert_eq!(c.verdict, DiffVerdict::NotFixed, "{}", c.reason);
    }

    #[test]
    fn a_holder_is_gone_only_where_what_it_held_was_counted_flat() {
        let before = loss_list();
        let mut after = after_of(&before, Verdict::Inconclusive);
        after.growth.clear();
        after.risen.clear();
        let first = &before.growth[0];
        let holder = holder_name(first.holder.as_ref().unwrap());
        let change = |after: &Diagnosis| {
            holder_changes(&before, after)
                .into_iter()
                .find(|h| h.holder == holder)
                .unwrap()
                .describe()
        };
        // Counted after and flat: gone.
        assert_eq!(change(&after), format!("held by {holder}: gone"));
        // Its objects still rose by count, under no holder the run after
        // searched: not seen growing, which is not gone.
        let key = first
            .growers
            .iter()
            .find(|g| !g.key.starts_with("container:"))
            .unwrap()
            .key
            .clone();
        after.risen.insert(key, (100.0, 900.0));
        let said = change(&after);
        assert!(
            said.starts_with(&format!("held by {holder}: not seen growing ("))
                && said.contains("still rose over the run after, 100 to 900"),
            "{said}"
        );
    }
}

//! The proof of a fix (`leakspy fix`): the job run before and after its
//! fixes for as many steps, compared as `leakspy diff` compares two traces
//! ([`crate::compare`] on two diagnoses), once the runs are shown to be
//! comparable: a fixed run that failed, stopped short or ran much slower
//! proves nothing. What became of each holder of the first run is the
//! comparison's (`Comparison::holders`).

use leakspy_trace::Trace;
use serde::Serialize;

use crate::census::GrowthGroup;
use crate::diff::{compare, Comparison, DiffVerdict};
use crate::model::Diagnosis;

/// A fixed run slower than this share of the first run's speed (CPU time
/// per step, else steps per second) is not compared: a fix that halves the
/// speed of training is no fix.
const SLOWER_LIMIT: f64 = 0.5;
/// A fixed run with fewer steps than this share of the first run's stopped
/// short (a crash caught by the job, an early exit).
const SHORTER_LIMIT: f64 = 0.9;

/// One run of the job, as `leakspy fix` recorded it.
pub struct Leg<'a> {
    /// `before` or `after`, or the trace's path.
    pub label: &'a str,
    pub trace: &'a Trace,
    pub diagnosis: &'a Diagnosis,
    /// leakspy stopped the job at its bound; else it ended by itself.
    pub stopped: bool,
}

/// The work a run did: the most steps one of its processes reported.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Work {
    pub steps: u64,
    pub duration_s: f64,
    /// Steps per second between the first and the last step event.
    pub steps_per_s: Option<f64>,
    /// CPU seconds the process tree used per step over the run (`/proc`
    /// times in the samples): what a step costs, whatever else the machine
    /// ran. `None` for traces without CPU times.
    pub cpu_per_step: Option<f64>,
}

/// CPU seconds the tree used over the run.
fn tree_cpu_s(trace: &Trace) -> Option<f64> {
    crate::extract::tree_cpu_used(trace).last().map(|&(_, c)| c)
}

/// The most steps one process of the run reported (its count at its last
/// step event): the measure `leakspy fix` runs the fixed job for, the same
/// as the monitor's live `tree_steps`.
pub fn steps_done(trace: &Trace) -> u64 {
    trace.steps().map(|s| s.step).max().unwrap_or(0)
}

/// The step at which the probe's first burst began in a run (its first
/// census in a burst), if it had one: `leakspy fix` asks for a burst at the
/// same step of the fixed run, so that both runs are looked at alike.
pub fn burst_step(trace: &Trace) -> Option<u64> {
    trace
        .census()
        .filter(|c| c.burst.is_some())
        .filter_map(|c| c.step)
        .min()
}

impl Work {
    pub fn of(trace: &Trace) -> Self {
        let steps = steps_done(trace);
        let first = trace
            .steps()
            .map(|s| (s.t, s.step))
            .reduce(|a, b| if b.0 < a.0 { b } else { a });
        let last = trace
            .steps()
            .filter(|s| s.step == steps)
            .map(|s| s.t)
            .reduce(f64::min);
        let steps_per_s = match (first, last) {
            (Some((t0, s0)), Some(t1)) if t1 > t0 && steps > s0 => {
                Some((steps - s0) as f64 / (t1 - t0))
            }
            _ => None,
        };
        let cpu_per_step = tree_cpu_s(trace)
            .filter(|c| *c > 0.0)
            .and_then(|c| (steps > 0).then(|| c / steps as f64));
        Work {
            steps,
            cpu_per_step,
            duration_s: trace.duration(),
            steps_per_s,
        }
    }
}

/// What `leakspy fix` concludes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FixVerdict {
    /// The first run leaked; the fixed run, as long and comparable, does not.
    Fixed,
    /// The fixed run, as long and comparable, grows significantly less and
    /// either is no leak by the verdict (still growing steadily, too early
    /// to tell) or grows at most half as fast (leaks with no known fix
    /// remain): the fixes help, and what still grows is said.
    Improved,
    /// The growth remains (or the comparison cannot tell).
    NotFixed,
    /// The fixed run cannot be compared with the first: nothing is proven.
    NotComparable,
}

impl FixVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            FixVerdict::Fixed => "FIXED",
            FixVerdict::Improved => "IMPROVED",
            FixVerdict::NotFixed => "NOT FIXED",
            FixVerdict::NotComparable => "NOT PROVEN",
        }
    }
}

/// `leakspy fix`'s answer, with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FixProof {
    pub verdict: FixVerdict,
    /// The comparison `leakspy diff` makes of the two runs.
    pub comparison: Comparison,
    pub before: Work,
    pub after: Work,
    /// Why the runs cannot be compared (empty when they can).
    pub not_comparable: Vec<String>,
    /// What the fixed run's diagnosis says still grows, by holder, and how
    /// memory grows beyond the objects (its mechanisms).
    pub still_grows: Vec<String>,
}

/// Compares the run before the fixes with the run after them.
pub fn prove(before: &Leg<'_>, after: &Leg<'_>) -> FixProof {
    let comparison = compare(before.diagnosis, before.label, after.diagnosis, after.label);
    let (wb, wa) = (Work::of(before.trace), Work::of(after.trace));
    let mut not_comparable = comparability(before, after, &wb, &wa);
    // `diff` could not tell because the fixed run's growth is the
    // allocator's: the runs are not comparable on memory (said as such).
    // Told on memory in use, which the allocator does not move, it is the
    // censuses that could not tell the runs apart: that is the reason.
    if comparison.verdict == DiffVerdict::Inconclusive {
        if comparison.series == crate::diff::IN_USE_SERIES {
            not_comparable.push(comparison.reason.clone());
        } else {
            not_comparable.extend(crate::diff::allocator_growth(after.diagnosis));
        }
    }
    let verdict = if !not_comparable.is_empty() {
        FixVerdict::NotComparable
    } else if comparison.verdict == DiffVerdict::Fixed {
        FixVerdict::Fixed
    } else if comparison.verdict == DiffVerdict::Improved {
        // `diff`'s own answer: significantly less, and at most half the
        // growth where it is still a leak (a job with other leaks that have
        // no known fix). Fixes that remove a sliver of the growth (a list
        // that still keeps the values the fix detached) are not fixes.
        FixVerdict::Improved
    } else {
        FixVerdict::NotFixed
    };
    // What grows by holder, then how memory grows beyond those objects
    // (the allocator keeping what each step frees between them).
    let still_grows = after
        .diagnosis
        .growth
        .iter()
        .take(3)
        .map(GrowthGroup::headline)
        .chain(
            after
                .diagnosis
                .mechanisms
                .iter()
                .take(2)
                .map(|m| m.summary.clone()),
        )
        .collect();
    FixProof {
        verdict,
        comparison,
        before: wb,
        after: wa,
        not_comparable,
        still_grows,
    }
}

/// Why the fixed run cannot stand beside the first, if it cannot.
fn comparability(before: &Leg<'_>, after: &Leg<'_>, wb: &Work, wa: &Work) -> Vec<String> {
    let mut why = Vec::new();
    let (eb, ea) = (&before.diagnosis.exit, &after.diagnosis.exit);
    let failed = |leg: &Leg<'_>| {
        let e = &leg.diagnosis.exit;
        !leg.stopped && (!e.recorded || e.status.unwrap_or(1) != 0)
    };
    if failed(after) && !(failed(before) && eb.status == ea.status) {
        why.push(format!(
            "the fixed run failed ({}) where the first did not",
            ea.message
        ));
    }
    if wb.steps > 0 {
        if (wa.steps as f64) < wb.steps as f64 * SHORTER_LIMIT {
            why.push(format!(
                "the fixed run did {} steps, the first {}",
                wa.steps, wb.steps
            ));
        }
    } else if wa.duration_s < wb.duration_s * SHORTER_LIMIT {
        why.push(format!(
            "the fixed run lasted {:.1} s, the first {:.1} s",
            wa.duration_s, wb.duration_s
        ));
    }
    // Slower by the CPU time a step costs where the traces have it: a busy
    // machine slows the wall clock of one run and not the other far more
    // than what a step costs. Not never: torch's worker threads spin while
    // they wait for a core, so a machine much busier during one run can
    // double its CPU per step, and the message says so. Without CPU times,
    // by steps per second.
    if let (Some(cb), Some(ca)) = (wb.cpu_per_step, wa.cpu_per_step) {
        if ca * SLOWER_LIMIT > cb {
            why.push(format!(
                "the fixed run took {:.1} ms of CPU per step, the first {:.1} ms (a fix must \
                 not slow training down; a machine much busier during one run than the other \
                 does it too: run `leakspy fix` again)",
                ca * 1e3,
                cb * 1e3
            ));
        }
    } else if let (Some(rb), Some(ra)) = (wb.steps_per_s, wa.steps_per_s) {
        if ra < rb * SLOWER_LIMIT {
            why.push(format!(
                "the fixed run trained at {ra:.1} steps/s, the first at {rb:.1} (a fix must not \
                 slow training down; on a busy machine, run `leakspy fix` again)"
            ));
        }
    }
    why
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(lines: &[String]) -> Trace {
        leakspy_trace::parse_trace(&lines.join("\n")).unwrap()
    }

    fn header() -> String {
        r#"{"kind":"header","format":"leakspy-trace","version":1,"command":["python","t.py"],"cwd":"/w","pid":10,"sample_interval_s":0.1}"#.to_string()
    }

    #[test]
    fn work_is_the_most_steps_of_one_process() {
        let mut lines = vec![header()];
        for i in 1..=10u64 {
            lines.push(format!(
                r#"{{"kind":"step","t":{},"step":{},"source":"optimizer","pid":11}}"#,
                i as f64,
                i * 10
            ));
            lines.push(format!(
                r#"{{"kind":"step","t":{},"step":{},"source":"optimizer","pid":12}}"#,
                i as f64,
                i * 9
            ));
        }
        let w = Work::of(&trace(&lines));
        assert_eq!(w.steps, 100);
        // From step 10 at 1 s to step 100 at 10 s.
        assert!((w.steps_per_s.unwrap() - 10.0).abs() < 1e-9, "{w:?}");
        assert_eq!(steps_done(&trace(&[header()])), 0);
    }

    /// A run of `steps` steps over `secs` seconds whose process used `cpu`
    /// CPU seconds.
    fn run(steps: u64, secs: f64, cpu: f64) -> Trace {
        let mut lines = vec![header()];
        for i in 0..=10u64 {
            let t = secs * i as f64 / 10.0;
            lines.push(format!(
                r#"{{"kind":"sample","t":{t},"procs":[{{"pid":11,"rss":1000,"cpu_s":{}}}],"total":{{"rss":1000}}}}"#,
                cpu * i as f64 / 10.0
            ));
            lines.push(format!(
                r#"{{"kind":"step","t":{t},"step":{},"source":"optimizer","pid":11}}"#,
                steps * i / 10
            ));
        }
        trace(&lines)
    }

    fn why_not(before: &Trace, after: &Trace) -> Vec<String> {
        let d = crate::diagnose(before, &crate::DiagnoseOptions::default());
        let leg = |label, trace, diagnosis| Leg {
            label,
            trace,
            diagnosis,
            stopped: true,
        };
        let (wb, wa) = (Work::of(before), Work::of(after));
        comparability(&leg("b", before, &d), &leg("a", after, &d), &wb, &wa)
    }

    /// A leaking run of 3000 steps whose memory grows `per_step` bytes a
    /// step; its censuses see malloc's freed memory rise by `freed` MiB
    /// over the run, and its memory in use by `used` bytes a step.
    fn leaking(per_step: f64, freed: f64, used: f64) -> Trace {
        leaking_noisy(per_step, freed, used, 0.0)
    }

    /// As `leaking`, with each census's memory in use off its line by
    /// `noise` bytes times 1, -2, 1, 1, -2, 1 (no slope of their own).
    fn leaking_noisy(per_step: f64, freed: f64, used: f64, noise: f64) -> Trace {
        const MIB: f64 = 1024.0 * 1024.0;
        const OFF: [f64; 6] = [1.0, -2.0, 1.0, 1.0, -2.0, 1.0];
        let mut lines = vec![header()];
        for i in 0..600u64 {
            let t = i as f64 * 0.1;
            let rss = (700.0 * MIB + per_step * 5.0 * i as f64) as u64;
            lines.push(format!(
                r#"{{"kind":"sample","t":{t},"procs":[{{"pid":11,"rss":{rss}}}],"total":{{"rss":{rss},"anon":{rss}}}}}"#
            ));
            lines.push(format!(
                r#"{{"kind":"step","t":{t},"step":{},"source":"optimizer","pid":11}}"#,
                5 * i
            ));
        }
        for n in 1..=6u64 {
            let free = (10.0 + freed * (n - 1) as f64 / 5.0) * MIB;
            lines.push(format!(
                r#"{{"kind":"census","t":{},"pid":11,"step":{},"n":{n},"warmup":false,"malloc":{{"heap":{},"mmapped":0,"in_use":{},"free":{free},"arenas":1}}}}"#,
                n * 9,
                n * 450,
                free + 100.0 * MIB,
                100.0 * MIB + used * (n * 450) as f64 + noise * OFF[n as usize - 1]
            ));
        }
        lines.push(r#"{"kind":"exit","t":60.0,"code":0,"status":0}"#.to_string());
        trace(&lines)
    }

    fn proof_of(before: &Trace, after: &Trace) -> FixProof {
        let opts = crate::DiagnoseOptions::default();
        let (db, da) = (
            crate::diagnose(before, &opts),
            crate::diagnose(after, &opts),
        );
        let leg = |label, trace, diagnosis| Leg {
            label,
            trace,
            diagnosis,
            stopped: false,
        };
        prove(&leg("before", before, &db), &leg("after", after, &da))
    }

    #[test]
    fn growth_the_allocator_keeps_does_not_say_a_fix_failed() {
        // After grows faster, all of it freed memory malloc keeps: the
        // runs cannot be compared on memory, and `diff` cannot tell.
        let p = proof_of(&leaking(4096.0, 0.0, 0.0), &leaking(12288.0, 100.0, 0.0));
        assert_eq!(p.verdict, FixVerdict::NotComparable, "{:?}", p.comparison);
        assert_eq!(p.comparison.verdict, DiffVerdict::Inconclusive);
        assert!(
            p.not_comparable.len() == 1
                && p.not_comparable[0].contains("what the allocator keeps")
                && p.not_comparable[0].contains("varies from run to run"),
            "{:?}",
            p.not_comparable
        );
        // The same growth without malloc keeping it: worse, as measured.
        let p = proof_of(&leaking(4096.0, 0.0, 0.0), &leaking(12288.0, 0.0, 0.0));
        assert_eq!(p.verdict, FixVerdict::NotFixed, "{:?}", p.not_comparable);
        assert_eq!(p.comparison.verdict, DiffVerdict::Worse);
    }

    #[test]
    fn memory_in_use_tells_a_fix_from_what_the_allocator_keeps() {
        // Before's leak shows in malloc's memory in use; after's resident
        // memory grows faster, all of it freed memory malloc keeps, while
        // its memory in use is flat: fixed, told on memory in use.
        let before = leaking(8192.0, 0.0, 8192.0);
        let p = proof_of(&before, &leaking(24576.0, 100.0, 0.0));
        assert_eq!(p.verdict, FixVerdict::Fixed, "{:?}", p.comparison);
        assert_eq!(p.comparison.series, crate::diff::IN_USE_SERIES);
        assert!(p.not_comparable.is_empty(), "{:?}", p.not_comparable);
        assert!(
            p.comparison
                .reason
                .contains("memory in use by malloc grew +8.00 KiB/step")
                && p.comparison.after.growth.as_ref().unwrap().slope.abs() < 1.0,
            "{:?}",
            p.comparison
        );
        // The report's chart is of what the proof was told on: the
        // censuses' readings of memory in use, and their fitted lines.
        let after = leaking(24576.0, 100.0, 0.0);
        let opts = crate::DiagnoseOptions::default();
        let (db, da) = (
            crate::diagnose(&before, &opts),
            crate::diagnose(&after, &opts),
        );
        let html = crate::render_fix_html(&p, (&before, &db), (&after, &da), "");
        assert!(
            html.contains("Memory in use by malloc before and after the fixes")
                && html.contains("on malloc&#39;s memory in use: +8.00 KiB/step")
                && html.contains("fitted trend after the fixes")
                && !html.contains("no data"),
            "{html}"
        );
        // A float kept per step where a graph was: fixed.
        let p = proof_of(&before, &leaking(24576.0, 100.0, 32.0));
        assert_eq!(p.verdict, FixVerdict::Fixed, "{:?}", p.comparison);
        // In use still grows, at a quarter of before's rate: improved.
        let p = proof_of(&before, &leaking(24576.0, 100.0, 2048.0));
        assert_eq!(p.verdict, FixVerdict::Improved, "{:?}", p.comparison);
        assert!((p.comparison.ratio.unwrap() - 0.25).abs() < 0.01);
        // In use grows at 85 % of before's rate: not fixed, whatever
        // resident memory says.
        let p = proof_of(&before, &leaking(24576.0, 100.0, 7000.0));
        assert_eq!(p.verdict, FixVerdict::NotFixed, "{:?}", p.comparison);
        assert_eq!(p.comparison.verdict, DiffVerdict::NotFixed);
        // As fast as before: the censuses cannot tell the runs apart, and
        // that, not the allocator (which memory in use leaves out), is why.
        let p = proof_of(&before, &leaking(24576.0, 100.0, 8192.0));
        assert_eq!(p.verdict, FixVerdict::NotComparable, "{:?}", p.comparison);
        assert_eq!(p.comparison.verdict, DiffVerdict::Inconclusive);
        assert!(
            p.not_comparable.len() == 1
                && p.not_comparable[0].contains("cannot tell the runs apart")
                && !p.not_comparable[0].contains("jemalloc"),
            "{:?}",
            p.not_comparable
        );
        // After's resident memory is flat, and would say fixed, but it is
        // what malloc keeps free that moves it, and its memory in use still
        // grows at half before's rate: improved.
        let p = proof_of(
            &leaking(8192.0, 100.0, 2048.0),
            &leaking(0.0, 100.0, 1024.0),
        );
        assert_eq!(p.verdict, FixVerdict::Improved, "{:?}", p.comparison);
        assert_eq!(p.comparison.series, crate::diff::IN_USE_SERIES);
        // Only before's grew in what malloc keeps: after's flat resident
        // memory may be chance (a run keeps less), so memory in use tells
        // it too: still growing at half before's rate, improved.
        let p = proof_of(&leaking(8192.0, 100.0, 2048.0), &leaking(0.0, 0.0, 1024.0));
        assert_eq!(p.verdict, FixVerdict::Improved, "{:?}", p.comparison);
        assert_eq!(p.comparison.series, crate::diff::IN_USE_SERIES);
        // Neither grew in what malloc keeps: resident memory as measured.
        let p = proof_of(&leaking(8192.0, 0.0, 2048.0), &leaking(0.0, 0.0, 1024.0));
        assert_eq!(p.verdict, FixVerdict::Fixed, "{:?}", p.comparison);
        assert_ne!(p.comparison.series, crate::diff::IN_USE_SERIES);
        // A run before that did not leak: nothing to call fixed.
        let p = proof_of(&leaking(4096.0, 0.0, 4096.0), &leaking(24576.0, 100.0, 0.0));
        assert_eq!(p.verdict, FixVerdict::NotComparable, "{:?}", p.comparison);
    }

    #[test]
    fn the_html_says_of_each_holder_what_the_proofs_text_says() {
        let (before, after) = (leaking(8192.0, 0.0, 8192.0), leaking(0.0, 0.0, 0.0));
        let mut p = proof_of(&before, &after);
        p.comparison.holders = vec![
            crate::diff::HolderChange {
                holder: "DDPGAgent.actor_opt (Adam)".to_string(),
                before: "+2.56 tensors per 100 steps".to_string(),
                after: None,
                unseen: Some("tensors still rose over the run after".to_string()),
            },
            crate::diff::HolderChange {
                holder: "Trainer.total_loss".to_string(),
                before: "+10 autograd nodes per step".to_string(),
                after: None,
                unseen: None,
            },
        ];
        let opts = crate::DiagnoseOptions::default();
        let (db, da) = (
            crate::diagnose(&before, &opts),
            crate::diagnose(&after, &opts),
        );
        let html = crate::render_fix_html(&p, (&before, &db), (&after, &da), "");
        assert!(
            p.comparison.holders[0]
                .describe()
                .contains("not seen growing")
                && html.contains(
                    "<span class=\"v-inconclusive\">not seen growing</span>: tensors still \
                     rose over the run after"
                ),
            "{html}"
        );
        assert!(
            html.contains(
                "<td><code>Trainer.total_loss</code></td><td>+10 autograd nodes per step</td>\
                 <td><span class=\"v-no-leak\">gone</span>"
            ),
            "{html}"
        );
    }

    #[test]
    fn rates_whose_intervals_just_overlap_can_still_differ_significantly() {
        // Few censuses on a busy machine: wide intervals on memory in use.
        // Before 7.2 KiB/step and after 2.7 overlap by a sliver, but their
        // difference has an interval of its own, clear of zero: improved.
        let before = leaking_noisy(24576.0, 100.0, 1843.2, 0.13e6);
        let p = proof_of(&before, &leaking_noisy(24576.0, 100.0, 691.2, 0.05e6));
        let (b, a) = (
            p.comparison.before.growth.clone().unwrap(),
            p.comparison.after.growth.clone().unwrap(),
        );
        assert!(a.hi > b.lo, "the intervals should overlap: {b:?} {a:?}");
        assert_eq!(p.verdict, FixVerdict::Improved, "{:?}", p.comparison);
        assert_eq!(p.comparison.series, crate::diff::IN_USE_SERIES);
        // As noisy, at 80 % of before's rate: not half as fast, so not
        // improved, however the difference is read.
        let p = proof_of(&before, &leaking_noisy(24576.0, 100.0, 1474.6, 0.05e6));
        assert_ne!(p.verdict, FixVerdict::Improved, "{:?}", p.comparison);
        assert_ne!(p.verdict, FixVerdict::Fixed, "{:?}", p.comparison);
    }

    #[test]
    fn a_busy_machine_is_not_a_slower_fix_a_costlier_step_is() {
        let before = run(400, 20.0, 18.0);
        // The same CPU per step, at a third of the wall-clock speed: the
        // machine was busy, the fix did not slow training.
        assert_eq!(
            why_not(&before, &run(400, 60.0, 18.0)),
            Vec::<String>::new()
        );
        // Three times the CPU per step: the fix made training slower.
        let why = why_not(&before, &run(400, 60.0, 54.0));
        assert!(
            why.len() == 1 && why[0].contains("ms of CPU per step"),
            "{why:?}"
        );
        // Without CPU times, the wall clock is all there is.
        let strip = |t: &Trace| {
            let mut t = t.clone();
            for e in &mut t.events {
                if let leakspy_trace::Event::Sample(s) = e {
                    for p in &mut s.procs {
                        p.cpu_s = None;
                    }
                }
            }
            t
        };
        let why = why_not(&strip(&before), &strip(&run(400, 60.0, 18.0)));
        assert!(why.len() == 1 && why[0].contains("steps/s"), "{why:?}");
    }
}

//! From a trace to a diagnosis: every memory series is fitted per step (when
//! steps are known) and per second, and the verdicts are combined into one
//! answer with its evidence and with notes on what is not a leak.

use leakspy_stats::{
    analyze, fmt_bytes, fmt_value, throughput_trend, SeriesAnalysis, Shape, ValueUnit, Verdict,
    VerdictOptions,
};
use std::collections::BTreeMap;

use leakspy_trace::Trace;

use crate::census::Describe;
use crate::extract::{memory_series, Series, StepClock, TREE_PSS, TREE_RSS};
use crate::model::{
    Basis, DiagnoseOptions, Diagnosis, ExitInfo, Finding, Fit, Growth, Mechanism, ProbeInfo,
    RunInfo, SeriesReport, ThroughputReport,
};

/// Diagnoses a trace (complete, or cut short by a kill).
pub fn diagnose(trace: &Trace, opts: &DiagnoseOptions) -> Diagnosis {
    let clock = StepClock::from_trace(trace);
    let basis = if clock.len() >= opts.min_steps.max(2) {
        Basis::Step
    } else {
        Basis::Second
    };
    let series = memory_series(trace, opts.max_processes);
    let analysed: Vec<(Series, SeriesReport, SeriesAnalysis)> = series
        .into_iter()
        .map(|s| {
            let (report, main) = analyse_series(&s, &clock, basis, opts);
            (s, report, main)
        })
        .collect();

    let exit = exit_info(trace);
    let mut notes = Vec::new();
    let mut findings = Vec::new();
    // The tree's memory: PSS when several processes ran (their summed RSS
    // counts every page they share once per process), else RSS.
    let tree = if analysed
        .iter()
        .any(|(_, r, a)| r.key == TREE_PSS && a.shape != Shape::TooShort)
    {
        TREE_PSS
    } else {
        TREE_RSS
    };
    let rss_leaks = analysed
        .iter()
        .any(|(_, r, _)| r.key == tree && r.verdict == Verdict::Leak);
    for (_, r, _) in &analysed {
        if r.verdict != Verdict::Leak {
            continue;
        }
        // Anonymous memory rising with RSS is the same leak: one finding,
        // with the anon fit as extra evidence. Summed over processes that
        // share pages, RSS and anon are not the tree's memory at all.
        if (r.key == "total.anon" && rss_leaks)
            || (tree == TREE_PSS && (r.key == TREE_RSS || r.key == "total.anon"))
        {
            continue;
        }
        let mut evidence = r.evidence.clone();
        if r.key == TREE_RSS {
            if let Some((_, anon, _)) = analysed.iter().find(|(_, a, _)| a.key == "total.anon") {
                if let Some(g) = anon.per_step.as_ref().or(anon.per_second.as_ref()) {
                    evidence.push(format!(
                        "anonymous memory: {} ({})",
                        fmt_rate(g),
                        anon.verdict.as_str()
                    ));
                }
            }
        }
        findings.push(Finding::of_series(r, evidence));
    }
    // A bounded buffer filling (a replay buffer's `deque(maxlen=...)`) is
    // memory that grows, then stops: the tree's memory is judged again with
    // what such buffers hold taken out, and its leak stands only if it
    // still grows like one.
    let fills = crate::bounded::fills(trace, &clock);
    let bounded = analysed
        .iter()
        .find(|(_, r, _)| r.key == tree && r.verdict != Verdict::NoLeak)
        .filter(|_| !fills.is_empty())
        .and_then(|(s, r, _)| bounded_fill(s, r, &fills, &clock, basis, opts));
    if bounded.is_some() {
        let pids: Vec<u32> = fills.iter().map(|f| f.pid).collect();
        findings.retain(|f| !memory_of(&f.series, &pids));
    }

    let mut growth = crate::census::growth_groups(trace);
    crate::paths::show_relative_to(&mut growth, &trace.header.cwd);
    // The leak findings get the clearest in-process explanation: its
    // holder and creation site.
    if let Some(top) = growth.first() {
        for f in &mut findings {
            let same_process = match f.series.strip_prefix("proc.") {
                Some(rest) => rest.split('.').next() == Some(&top.pid.to_string()),
                None => true,
            };
            if !same_process {
                continue;
            }
            f.grows = Some(top.headline());
            f.holder = top
                .holder
                .as_ref()
                .and_then(|h| serde_json::to_value(h).ok());
            f.location = top
                .created_at
                .as_ref()
                .and_then(|c| serde_json::to_value(c).ok());
        }
    }
    let probe = probe_info(trace);

    let rss = analysed.iter().find(|(_, r, _)| r.key == tree);
    // What makes memory grow outside the Python objects of the process
    // that pays for it: processes, copy-on-read, the allocators.
    let mut mechanisms = crate::processes::mechanisms(trace, &clock);
    mechanisms.extend(crate::allocator::mechanisms(trace, &growth));
    if let Some(b) = &bounded {
        mechanisms.insert(0, b.mechanism.clone());
    }
    // RSS alone can look flat at the end of a leaking run (the allocator
    // refilling heap that the probe's own census freed, a short run): when
    // the probe saw heavy objects held by a named root grow through the
    // last census, and RSS grew by more than a leak needs, it is a leak.
    // What made a leak of a series whose own fit is not one: said in the
    // summary, so the numbers beside the verdict are explained.
    let mut corroborated: Option<String> = None;
    let mut leak_by: Option<&str> = None;
    if findings.is_empty() {
        if let Some((_, r, _)) = rss {
            if let Some((f, why)) = census_corroborated(r, &growth) {
                leak_by = Some("the probe's census");
                corroborated = Some(why);
                findings.push(f);
            }
        }
    }
    // Killed by the OOM killer after memory grew by more than a leak needs:
    // a leak, whatever its last moments look like (the kernel reclaiming
    // pages as the limit nears flattens the tail).
    if findings.is_empty() {
        if let Some((_, r, _)) = rss {
            if let Some(f) = oom_after_growth(r, &exit) {
                leak_by = Some("the OOM kill");
                findings.push(f);
                corroborated = Some(
                    "the OOM killer ended the run after it grew by more than a leak needs".into(),
                );
            }
        }
    }
    // Processes that pile up are a leak whatever the memory curve's last
    // moments look like: their count grows with the work done and none
    // ends, and the tree's memory rose by what a leak needs with them.
    if findings.is_empty() {
        let piled = mechanisms
            .iter()
            .find(|m| m.kind == crate::model::MechanismKind::ProcessesPileUp);
        if let (Some((_, r, _)), Some(m)) = (rss, piled) {
            if r.peak - r.first >= r.threshold {
                leak_by = Some("processes that pile up");
                corroborated = Some("processes pile up, and none ends".into());
                let mut evidence = r.evidence.clone();
                evidence.push(format!(
                    "{}: the tree's memory rose {} with them",
                    m.summary,
                    fmt_bytes(r.peak - r.first)
                ));
                findings.push(Finding {
                    grows: Some(m.summary.clone()),
                    ..Finding::of_series(r, evidence)
                });
            }
        }
    }
    let verdict = if !findings.is_empty() {
        Verdict::Leak
    } else if let Some(b) = &bounded {
        b.verdict
    } else {
        match rss {
            Some((_, r, _)) if r.verdict == Verdict::NoLeak => Verdict::NoLeak,
            _ => Verdict::Inconclusive,
        }
    };

    if let Some(b) = &bounded {
        notes.extend(shape_notes(
            &format!(
                "{} without the bounded buffers",
                if tree == TREE_PSS { "PSS" } else { "RSS" }
            ),
            &b.rest,
            &b.analysis,
            basis,
        ));
    } else if let Some((_, r, a)) = rss.filter(|_| corroborated.is_none()) {
        notes.extend(shape_notes(
            if tree == TREE_PSS { "PSS" } else { "RSS" },
            r,
            a,
            basis,
        ));
        if r.verdict == Verdict::Leak {
            if let Some((_, anon, _)) = analysed.iter().find(|(_, a, _)| a.key == "total.anon") {
                if anon.verdict == Verdict::NoLeak {
                    notes.push(
                        "RSS grows but anonymous memory does not: file-backed or shared pages \
                         (mapped files, libraries), not the heap"
                            .to_string(),
                    );
                }
            }
        }
    }
    for (_, r, a) in &analysed {
        // A short run has few GPU samples; "too short" there is not news.
        if r.key.starts_with("gpu.") && r.verdict != Verdict::Leak && a.shape != Shape::TooShort {
            notes.extend(shape_notes(
                &format!("GPU {}", &r.key[4..r.key.len() - 5]),
                r,
                a,
                basis,
            ));
        }
    }

    notes.extend(non_leak_notes(trace, verdict));
    crate::processes::label_groups(trace, &mut growth);
    // One story: under a no-leak verdict, what the probe saw grow is not a
    // leak either (its evidence would have made it one); said as a note,
    // not listed as what grows.
    let mut quiet = Vec::new();
    if verdict == Verdict::NoLeak && !growth.is_empty() {
        let held: Vec<String> = growth
            .iter()
            .filter(|g| g.holder.as_ref().is_some_and(|h| h.is_named()))
            .take(3)
            .map(crate::census::GrowthGroup::headline)
            .collect();
        if !held.is_empty() {
            notes.push(format!(
                "the probe saw {} — memory does not grow with it: too little to matter, or a \
                 record of the run (a log, a history), not a leak",
                held.join("; ")
            ));
        }
        quiet = std::mem::take(&mut growth);
    }
    match basis {
        Basis::Step => notes.push(format!(
            "growth fitted per step ({} step events): {}",
            trace.step_count(),
            step_meaning(trace, &clock)
        )),
        Basis::Second if clock.len() == 0 => notes
            .push("no step events recorded: growth is fitted per second of run time".to_string()),
        Basis::Second => notes.push(format!(
            "only {} step events (fewer than {}): growth is fitted per second",
            clock.len(),
            opts.min_steps
        )),
    }

    let throughput = throughput_trend(&clock.events(), opts.confidence).map(|t| ThroughputReport {
        start_rate: t.start_rate,
        end_rate: t.end_rate,
        change: t.change,
        falling: t.falling,
        slope: t.trend.slope,
        lo: t.trend.lo,
        hi: t.trend.hi,
        t_start: t.trend.x_start,
        t_end: t.trend.x_end,
    });
    if let Some(t) = &throughput {
        if t.falling {
            // Said as what was measured: wall-clock steps/s also fall when
            // other programs take the machine's cores. The CPU time a step
            // costs tells the two apart where the trace has it: steps that
            // wait cost no more; steps that work more (a growing list walked
            // every step) do.
            let span = (t.t_end - t.t_start) / 4.0;
            let cpu = cpu_per_step(trace, &clock, t.t_start, t.t_start + span).zip(cpu_per_step(
                trace,
                &clock,
                t.t_end - span,
                t.t_end,
            ));
            let wall = t.start_rate / t.end_rate.max(1e-9);
            let ms = |c: f64| format!("{:.2} ms", c * 1e3);
            let mut why = match cpu {
                Some((a, b)) if b < a * (1.0 + 0.5 * (wall - 1.0)) => format!(
                    "the job's CPU time per step held ({} to {}): its steps waited, they did \
                     not work more (other programs taking the machine's cores){}",
                    ms(a),
                    ms(b),
                    if verdict == Verdict::Leak {
                        ""
                    } else {
                        "; nothing here leaks"
                    }
                ),
                Some((a, b)) => format!(
                    "each step took more CPU time ({} to {}){}",
                    ms(a),
                    ms(b),
                    if verdict == Verdict::Leak {
                        ": with the leak (a growing list walked every step, swapping)"
                    } else {
                        ", with no leak: the steps themselves cost more"
                    }
                ),
                None if verdict == Verdict::Leak => "with the leak (a growing list walked every \
                     step, swapping), or other programs taking the machine's cores"
                    .to_string(),
                None => "other programs taking the machine's cores slow a job as much; nothing \
                     here leaks"
                    .to_string(),
            };
            if let Some(burst) = burst_during(trace, t.t_start, t.t_end) {
                let sep = if verdict == Verdict::Leak { "," } else { ";" };
                why = format!("{burst}{sep} {why}");
            }
            notes.push(format!(
                "steps/s fell from {} to {} ({:+.0}%) over the run: {why}",
                fmt_value(t.start_rate, ValueUnit::StepsPerSecond),
                fmt_value(t.end_rate, ValueUnit::StepsPerSecond),
                t.change * 100.0
            ));
        }
    }

    let headline_key = findings
        .first()
        .map(|f| f.series.clone())
        .unwrap_or_else(|| tree.to_string());
    let headline = analysed.iter().find(|(_, r, _)| r.key == headline_key);
    let (growth_per_step, growth_per_second) = headline
        .map(|(_, r, _)| (r.per_step.clone(), r.per_second.clone()))
        .unwrap_or((None, None));

    if verdict == Verdict::Leak {
        // Memory follows the work: a per-second fit that disagrees with a
        // significant per-step one is the pace of the steps, said so that
        // the two numbers beside the verdict do not contradict it.
        if let (Some(ps), Some(pt)) = (&growth_per_step, &growth_per_second) {
            if ps.lo > 0.0 && (pt.lo <= 0.0 || pt.r2 < 0.5) {
                notes.push(format!(
                    "growth per second ({}, R² {:.2}) is not steady: the steps did not come at \
                     a steady pace (pauses, evaluation, a busy machine); the verdict rests on the \
                     per-step fit",
                    fmt_rate(pt),
                    pt.r2
                ));
            }
        }
        if let Some(note) = time_to_oom(trace, growth_per_second.as_ref()) {
            notes.push(note);
        }
    }
    if exit.killed || exit.oom_killed {
        notes.push(exit.message.clone());
    }
    if let Some(ds) = trace.downsampled {
        notes.push(format!(
            "long trace: read thinned to the lowest and highest of every {} samples ({} in the \
             file) and one step event in {}; fits use window minima, so they are unaffected",
            ds.sample_window, ds.samples_in_file, ds.step_stride
        ));
    }
    notes.extend(crate::attached::attach_notes(trace));
    for w in &trace.warnings {
        notes.push(format!("trace: {w}"));
    }

    let summary = match (verdict, headline) {
        (Verdict::Leak, Some((_, r, _))) if corroborated.is_some() => {
            let why = corroborated.as_deref().unwrap_or_default();
            match r.per_step.as_ref().or(r.per_second.as_ref()) {
                Some(g) => format!(
                    "leak: {why}; {} grew {} ({:.0}% interval {} to {}), and alone reads {}",
                    r.what,
                    fmt_rate(g),
                    g.confidence * 100.0,
                    fmt_rate_value(g.lo, g),
                    fmt_rate_value(g.hi, g),
                    r.shape_text
                ),
                None => format!("leak: {why}"),
            }
        }
        (Verdict::Leak, Some((_, r, _))) => {
            let g = r.per_step.as_ref().or(r.per_second.as_ref());
            match g {
                Some(g) => format!(
                    "leak: {} grows {} ({:.0}% interval {} to {})",
                    r.what,
                    fmt_rate(g),
                    g.confidence * 100.0,
                    fmt_rate_value(g.lo, g),
                    fmt_rate_value(g.hi, g)
                ),
                None => format!("leak: {} grows", r.what),
            }
        }
        (_, Some((_, r, _))) if bounded.is_some() => {
            let b = bounded.as_ref().expect("checked");
            let several = fills.len() > 1;
            format!(
                "{}: {} grows as {} {}, and without what {} {}",
                if verdict == Verdict::NoLeak {
                    "no leak"
                } else {
                    "inconclusive"
                },
                r.what,
                crate::bounded::buffers(fills.len()),
                if several { "fill" } else { "fills" },
                if several { "they hold" } else { "it holds" },
                b.words
            )
        }
        (Verdict::NoLeak, Some((_, r, _))) => format!("no leak: {} is {}", r.what, r.shape_text),
        (_, Some((_, r, _))) if r.shape == Shape::TooEarly => format!(
            "inconclusive: too early to tell ({:.0} s, {} steps): {} {}",
            trace.duration(),
            clock.steps_done().unwrap_or_else(|| trace.step_count()),
            r.what,
            r.shape_text.trim_start_matches("too early to tell: ")
        ),
        (_, Some((_, r, _))) => format!("inconclusive: {} is {}", r.what, r.shape_text),
        (_, None) => "inconclusive: the trace holds no memory samples".to_string(),
    };

    let (mut peak_rss, mut last_rss) = (0, 0);
    let mut pids = std::collections::HashSet::new();
    for s in trace.samples() {
        peak_rss = peak_rss.max(s.total.rss);
        last_rss = s.total.rss;
        pids.extend(s.procs.iter().map(|p| p.pid));
    }

    let mut d = Diagnosis {
        verdict,
        summary,
        basis,
        headline: headline_key,
        growth_per_step,
        growth_per_second,
        findings,
        growth,
        probe,
        notes,
        killed: exit.killed,
        exit,
        throughput,
        run: RunInfo {
            command: trace.header.command.clone(),
            cwd: trace.header.cwd.clone(),
            duration_s: trace.duration(),
            samples: trace.sample_count(),
            // Steps done, not step events: the probe coalesces its step
            // messages (one per 50 ms), so the last step number counts.
            steps: clock.steps_done().unwrap_or_else(|| trace.step_count()),
            sample_interval_s: trace.header.sample_interval_s,
            processes: pids.len(),
            peak_rss,
            last_rss,
            trace_warnings: trace.warnings.clone(),
        },
        series: analysed
            .into_iter()
            .map(|(_, mut r, _)| {
                if r.key == tree {
                    r.leak_by = leak_by.map(str::to_string);
                }
                if let Some(b) = bounded.as_ref().filter(|_| r.verdict == Verdict::Leak) {
                    if memory_of(&r.key, &b.mechanism.pids) {
                        r.explained = Some(crate::model::Explained {
                            verdict: b.verdict,
                            by: format!("{} filling", crate::bounded::buffers(b.buffers)),
                        });
                    }
                }
                r
            })
            .collect(),
        ranks: Vec::new(),
        no_holder: None,
        mechanisms,
        quiet,
        risen: crate::census::risen(trace),
        in_use: crate::allocator::in_use(trace),
    };
    if d.verdict == Verdict::Leak && d.mechanisms.is_empty() {
        d.no_holder = no_holder_reason(trace, &d.growth, &d.probe);
    }
    let ranks = crate::ranks::rank_rows(trace, &d, "", opts);
    // A job without ranks gets no table (its one row would repeat the verdict).
    if ranks.iter().any(|r| r.rank.is_some()) {
        d.ranks = ranks;
    }
    d
}

pub(crate) fn analyse_series(
    s: &Series,
    clock: &StepClock,
    basis: Basis,
    opts: &DiagnoseOptions,
) -> (SeriesReport, SeriesAnalysis) {
    let vopts = |x_unit: &str| VerdictOptions {
        confidence: opts.confidence,
        min_growth_abs: opts.min_growth_bytes as f64,
        min_growth_rel: opts.min_growth_rel,
        unit: ValueUnit::Bytes,
        x_unit: x_unit.to_string(),
        ..VerdictOptions::default()
    };
    let per_second = analyze(&s.t, &s.y, &vopts("s"));
    let per_step = match basis {
        Basis::Step => {
            let (xs, ys) = clock.map(&s.t, &s.y);
            Some(analyze(&xs, &ys, &vopts("step")))
        }
        Basis::Second => None,
    };
    // A series with too few samples inside the steps falls back to seconds.
    let (main, basis) = match per_step {
        Some(a) if a.shape != Shape::TooShort => (a, Basis::Step),
        _ => (per_second.clone(), Basis::Second),
    };
    let growth = |a: &SeriesAnalysis, unit: &str| a.trend.map(|t| Growth::of_bytes(&t, unit));
    let report = SeriesReport {
        key: s.key.clone(),
        what: s.what.clone(),
        verdict: main.verdict,
        shape: main.shape,
        shape_text: main.shape_text.clone(),
        basis,
        per_step: if basis == Basis::Step {
            growth(&main, "step")
        } else {
            None
        },
        per_second: growth(&per_second, "s"),
        fit: main.trend.map(|t| Fit {
            x_start: t.x_start,
            x_end: t.x_end,
            intercept: t.intercept,
            slope: t.slope,
        }),
        warmup_end: main.warmup_end,
        warmup_rise: main.warmup_rise,
        flat_since: main.flat_since,
        growth: main.growth,
        threshold: main.threshold,
        first: s.y.first().copied().unwrap_or(0.0),
        peak: s.y.iter().copied().fold(0.0, f64::max),
        last: s.y.last().copied().unwrap_or(0.0),
        evidence: main.evidence.clone(),
        leak_by: None,
        explained: None,
    };
    (report, main)
}

/// What one tensor or array costs beside its data (the Python object, the
/// tensor and storage structs, the allocation's header): about half a KiB.
const ARRAY_OVERHEAD_BYTES: f64 = 512.0;

/// A leak finding on RSS from the probe's census: a held group whose
/// growers include heavy objects (autograd graphs, tensors, modules, figures,
/// numpy arrays, CUDA memory) or enough bytes to matter, still growing at the
/// last census, while RSS grew by more than a leak needs over the fit. A
/// held list of floats growing one per step is not enough.
/// Memory explained by bounded buffers filling: the verdict on the rest.
struct BoundedFill {
    mechanism: Mechanism,
    verdict: Verdict,
    /// The memory series without what the buffers hold.
    rest: SeriesReport,
    analysis: SeriesAnalysis,
    /// What the rest does, in words (`it is flat`).
    words: String,
    /// How many buffers fill.
    buffers: usize,
}

/// The tree's memory `s` (a leak or inconclusive by itself, `r`) judged with what the
/// bounded buffers hold taken out. The verdict is taken with their items
/// weighing [`WEIGHT_SLACK`](crate::bounded::WEIGHT_SLACK) more than the
/// probe measured (what its weight misses: the allocator's headers and
/// rounding, fragmentation between the job's temporaries), so that a rest
/// growing within that share is not called a leak; the rest is shown at
/// the weight measured. `None` when the rest is still a leak, or as
/// inconclusive as the whole.
fn bounded_fill(
    s: &Series,
    r: &SeriesReport,
    fills: &[crate::bounded::Fill],
    clock: &StepClock,
    basis: Basis,
    opts: &DiagnoseOptions,
) -> Option<BoundedFill> {
    let slack = 1.0 + crate::bounded::WEIGHT_SLACK;
    let judged = crate::bounded::without_fills(s, fills, clock, None, slack);
    let (jr, _) = analyse_series(&judged, clock, basis, opts);
    if jr.verdict == Verdict::Leak {
        return None;
    }
    let rest = crate::bounded::without_fills(s, fills, clock, None, 1.0);
    let (ar, aa) = analyse_series(&rest, clock, basis, opts);
    let rate = ar.per_step.as_ref().or(ar.per_second.as_ref());
    let (verdict, words) = if ar.verdict == Verdict::NoLeak {
        let words = match rate {
            Some(g) => format!("it is {} ({})", ar.shape_text, fmt_rate(g)),
            None => format!("it is {}", ar.shape_text),
        };
        (Verdict::NoLeak, words)
    } else if jr.verdict == Verdict::NoLeak {
        (
            Verdict::NoLeak,
            format!(
                "it grows {}, within the {:.0} % that an item's weight as measured can miss",
                rate.map_or_else(|| "a little".to_string(), fmt_rate),
                crate::bounded::WEIGHT_SLACK * 100.0
            ),
        )
    } else if r.verdict != Verdict::Leak {
        // Inconclusive by itself and without them: nothing gained.
        return None;
    } else {
        (Verdict::Inconclusive, format!("it is {}", ar.shape_text))
    };
    let mechanism = crate::bounded::mechanism(
        fills,
        clock,
        r.per_step.as_ref().or(r.per_second.as_ref()),
        &words,
    );
    Some(BoundedFill {
        mechanism,
        verdict,
        rest: ar,
        analysis: aa,
        words,
        buffers: fills.len(),
    })
}

/// Whether `key` is the memory of the tree or of one of `pids` (what a
/// bounded buffer of theirs fills).
fn memory_of(key: &str, pids: &[u32]) -> bool {
    key == TREE_RSS
        || key == TREE_PSS
        || key == "total.anon"
        || key.strip_prefix("proc.").is_some_and(|rest| {
            rest.split('.')
                .next()
                .and_then(|p| p.parse::<u32>().ok())
                .is_some_and(|p| pids.contains(&p))
        })
}

fn census_corroborated(
    r: &SeriesReport,
    growth: &[crate::census::GrowthGroup],
) -> Option<(Finding, String)> {
    if r.verdict == Verdict::Leak {
        return None;
    }
    let g = r.per_step.as_ref().or(r.per_second.as_ref())?;
    if g.slope <= 0.0 {
        return None;
    }
    // RSS grew by what a leak needs: any heavy series held by a named root
    // that still grows says what it is. RSS grew less (freed heap being
    // refilled, a short run): the series must have been fitted on censuses
    // enough to stand on its own.
    let rss_grew = r.growth >= r.threshold;
    // Heavy by nature: a graph, a figure, a module, CUDA memory. Tensors and
    // arrays weigh what they store: a list of detached scalars grows by one
    // tensor a step and a few hundred bytes, which explains no RSS growth of
    // tens of KiB a step (what the fixed run of such a list shows).
    let heavy = |gr: &crate::census::Grower| {
        let k = gr.key.as_str();
        if k == "numpy" || k.starts_with("tensors:") {
            return gr.bytes_slope.is_none_or(|b| {
                let per_step = b + gr.slope.max(0.0) * ARRAY_OVERHEAD_BYTES;
                // Steps the grower was seen over: what it added in all must
                // matter beside what a leak needs, as its share of RSS's rate.
                let steps = if gr.slope > 0.0 {
                    (gr.last - gr.first).max(0.0) / gr.slope
                } else {
                    0.0
                };
                per_step >= 0.1 * g.slope.max(0.0) && per_step * steps >= 0.1 * r.threshold
            });
        }
        k == "graph"
            || k == "graph.history"
            || k == "graph.largest"
            || k == "figures"
            || k.starts_with("modules")
            || k.starts_with("cuda.")
    };
    let group = growth.iter().find(|grp| {
        grp.holder
            .as_ref()
            .is_some_and(|h| h.is_named() && !h.library)
            && grp.growers.iter().any(|gr| {
                gr.lo > 0.0
                    && (rss_grew || (gr.basis == "fit" && gr.censuses >= 5))
                    && (heavy(gr)
                        || (rss_grew && gr.bytes_slope.is_some_and(|b| b >= 0.1 * g.lo.max(0.0))))
            })
    })?;
    let mut evidence = r.evidence.clone();
    evidence.push(format!(
        "in-process census: {} — still growing at the last census: RSS alone ({}) understates \
         it (freed heap being refilled, a short run)",
        group.headline(),
        r.shape_text
    ));
    let why = format!(
        "what {} holds kept growing to the probe's last census ({})",
        group
            .holder
            .as_ref()
            .map_or(String::new(), |h| h.path.clone()),
        group.growers[0].describe()
    );
    let finding = Finding {
        holder: group
            .holder
            .as_ref()
            .and_then(|h| serde_json::to_value(h).ok()),
        location: group
            .created_at
            .as_ref()
            .and_then(|c| serde_json::to_value(c).ok()),
        grows: Some(group.headline()),
        ..Finding::of_series(r, evidence)
    };
    Some((finding, why))
}

/// A leak finding on RSS when the OOM killer ended a run whose memory grew
/// by more than a leak needs: the kernel reclaiming pages near the limit
/// can flatten the last samples, which are then no evidence of a plateau.
fn oom_after_growth(r: &SeriesReport, exit: &ExitInfo) -> Option<Finding> {
    if !exit.oom_killed || r.verdict == Verdict::Leak {
        return None;
    }
    let g = r.per_step.as_ref().or(r.per_second.as_ref())?;
    let rise = r.peak - r.first;
    if !(g.slope > 0.0 && (r.growth >= r.threshold || rise >= r.threshold)) {
        return None;
    }
    let mut evidence = r.evidence.clone();
    evidence.push(format!(
        "killed by the OOM killer after memory rose {} (a leak needs {}): the run's last \
         moments ({}) are the kernel reclaiming memory at the limit, not a plateau",
        fmt_bytes(rise),
        fmt_bytes(r.threshold),
        r.shape_text
    ));
    Some(Finding::of_series(r, evidence))
}

/// What "a step" counted: the unit every "per step" of the report is in.
fn step_meaning(trace: &Trace, clock: &StepClock) -> String {
    use leakspy_trace::StepSource;
    let mut sources = std::collections::BTreeSet::new();
    for s in trace.steps() {
        sources.insert(match s.source {
            StepSource::Optimizer => "optimizer",
            StepSource::Manual => "manual",
            StepSource::Regex => "regex",
            StepSource::Other => "other",
        });
    }
    let optimizers = trace
        .costs()
        .filter_map(|c| c.optimizers)
        .max()
        .unwrap_or(1);
    let n = clock.steps_done().unwrap_or(0);
    if sources.contains("regex") {
        return format!(
            "a step is a line of the job's output that matched --step-regex ({n} of them)"
        );
    }
    if sources.contains("optimizer") && !sources.contains("manual") {
        return if optimizers > 1 {
            format!(
                "a step is one training iteration: {optimizers} optimizers step in each, counted \
                 once ({n} iterations)"
            )
        } else {
            format!("a step is one optimizer.step() ({n} of them)")
        };
    }
    if sources.contains("manual") && !sources.contains("optimizer") {
        return format!("a step is one call of leakspy.step() ({n} of them)");
    }
    format!("a step is one optimizer step or leakspy.step() call ({n} in the busiest process)")
}

/// Why a leak has no holder named, and what to do about it.
fn no_holder_reason(
    trace: &Trace,
    growth: &[crate::census::GrowthGroup],
    probe: &ProbeInfo,
) -> Option<String> {
    if growth
        .iter()
        .any(|g| g.holder.as_ref().is_some_and(|h| h.is_named()))
    {
        return None;
    }
    let duration = trace.duration();
    if probe.processes.is_empty() {
        return Some(
            "no in-process probe reported in this run (only /proc figures): `leakspy run` puts \
             it in Python jobs that import `site`"
                .to_string(),
        );
    }
    let censuses = probe.cost.as_ref().map_or(probe.censuses as u64, |c| {
        c.censuses.max(probe.censuses as u64)
    });
    if censuses == 0 {
        return Some(format!(
            "no census in {duration:.0} s: the probe looks once its budget has paid for it (about \
             25 s of training at 1 %) or when memory grows like a leak; run longer"
        ));
    }
    if censuses < 4 {
        return Some(format!(
            "{censuses} census{} in {duration:.0} s: a holder is named from 4 censuses that rise in \
             a row; run longer",
            if censuses == 1 { "" } else { "es" }
        ));
    }
    let unknown = trace
        .suspects()
        .filter(|s| s.holder.as_ref().is_some_and(|h| !h.is_named()))
        .filter_map(|s| s.what.clone())
        .next();
    // "Native" only once every process that grows was looked into as often
    // as a holder needs (a notebook's kernel may get one census while its
    // launcher, which does not grow, gets the rest).
    // Every process sampled, those that ended before the job too.
    let mut pids: Vec<u32> = trace
        .samples()
        .flat_map(|s| s.procs.iter().map(|p| p.pid))
        .collect();
    pids.sort_unstable();
    pids.dedup();
    let unlooked: Vec<(u32, usize)> = pids
        .into_iter()
        .map(|pid| (pid, trace.census().filter(|c| c.pid == pid).count()))
        .filter(|(pid, n)| *n < 4 && grows_alone(trace, *pid))
        .collect();
    if unknown.is_none() && !unlooked.is_empty() {
        let said: Vec<String> = unlooked
            .iter()
            .map(|(p, n)| {
                let label = crate::processes::process_label(trace, *p);
                match n {
                    0 => format!(
                        "{label} grew and had none (not Python, or the probe could not start there)"
                    ),
                    1 => format!("{label} grew and had 1"),
                    n => format!("{label} grew and had {n}"),
                }
            })
            .collect();
        return Some(format!(
            "{censuses} censuses found no Python objects growing with the memory in the \
             processes they looked at; {}: what grows there is not known (a holder is named \
             from 4 censuses of the process that rise in a row; run longer)",
            said.join(", ")
        ));
    }
    Some(match unknown {
        Some(what) => format!(
            "the probe saw {what} grow but no holder within reach: held from C (an extension's \
             cache), by a reference cycle, or only by a running frame"
        ),
        None => format!(
            "{censuses} censuses found no Python objects growing with the memory: it grows outside \
             them (native allocations, an extension's buffers); a native profiler (memray) can tell"
        ),
    })
}

/// Whether one process's own RSS grew by 16 MiB or more from its first
/// sample to its last (a process that grows, whatever the tree does).
fn grows_alone(trace: &Trace, pid: u32) -> bool {
    let rss: Vec<u64> = trace
        .samples()
        .filter_map(|s| s.procs.iter().find(|p| p.pid == pid).map(|p| p.rss))
        .collect();
    match (rss.first(), rss.last()) {
        (Some(a), Some(b)) if rss.len() >= 10 => *b >= *a + (16 << 20),
        _ => false,
    }
}

/// Why a series that does not leak looks the way it does.
fn shape_notes(name: &str, r: &SeriesReport, a: &SeriesAnalysis, basis: Basis) -> Vec<String> {
    let at = |x: f64| match basis_of(r, basis) {
        Basis::Step => format!("step {x:.0}"),
        Basis::Second => format!("{x:.1} s"),
    };
    let first = |x: f64| match basis_of(r, basis) {
        Basis::Step => format!("first {x:.0} steps"),
        Basis::Second => format!("first {x:.1} s"),
    };
    let mut notes = Vec::new();
    // The trimmed start of a steady leak also "rises"; only a rise well
    // above what the fitted slope explains is warm-up.
    let explained = match (a.trend, a.warmup_end, a.minima.xs.first()) {
        (Some(t), Some(end), Some(&x0)) => t.slope.max(0.0) * (end - x0),
        _ => 0.0,
    };
    let warm = a.warmup_rise >= a.threshold.max(2.0 * explained);
    // Per step, start-up is the first steps (lazy imports, the optimizer's
    // state; imports before the first step are not in the fit at all): a
    // rise that went on past them and then stopped is something filling
    // up. Per second, start-up includes the imports, which can take long.
    let startup = match (a.warmup_end, a.minima.xs.first(), a.minima.xs.last()) {
        (Some(end), Some(&x0), Some(&x1)) if basis_of(r, basis) == Basis::Step => {
            end - x0 <= (0.02 * (x1 - x0)).max(10.0)
        }
        _ => true,
    };
    match a.shape {
        Shape::Flat | Shape::Sawtooth if warm && startup => notes.push(format!(
            "{name} rose {} in the {} then stayed flat: warm-up, not a leak",
            fmt_bytes(a.warmup_rise),
            first(a.warmup_end.unwrap_or(0.0))
        )),
        Shape::Flat | Shape::Sawtooth if warm => notes.push(format!(
            "{name} rose {} up to {}, then stayed flat: it fills, then stays flat — bounded, \
             not a leak",
            fmt_bytes(a.warmup_rise),
            at(a.warmup_end.unwrap_or(0.0))
        )),
        _ if warm => notes.push(format!(
            "{name} rose {} during warm-up (up to {}), left out of the fit",
            fmt_bytes(a.warmup_rise),
            at(a.warmup_end.unwrap_or(0.0))
        )),
        _ => {}
    }
    match a.shape {
        Shape::Saturating if a.verdict == Verdict::NoLeak => notes.push(format!(
            "{name} grew, then stayed flat since {}: bounded, not a leak",
            at(a.flat_since.unwrap_or(0.0))
        )),
        Shape::Saturating => notes.push(format!(
            "{name} grew, then stayed flat since {}, but only for the end of the run: a longer \
             run would tell a leak from a filling buffer",
            at(a.flat_since.unwrap_or(0.0))
        )),
        Shape::Sawtooth => notes.push(format!(
            "{name} swings by {} as temporaries are allocated and freed; the minima stay flat: \
             not a leak",
            fmt_bytes(a.swing)
        )),
        Shape::Slowing => notes.push(format!(
            "{name} growth slows down toward the end: it may be saturating; a longer run would tell"
        )),
        Shape::Noisy => notes.push(format!(
            "{name} changes too noisily to call: the slope's interval includes zero"
        )),
        Shape::TooShort => notes.push(format!("{name}: {}", a.shape_text)),
        Shape::Flat if !warm && a.verdict == Verdict::NoLeak && a.growth.abs() > 0.0 => {
            notes.push(format!(
                "{name} changed by {} over the analysed span, below the {} a leak needs",
                fmt_bytes(a.growth),
                fmt_bytes(a.threshold)
            ))
        }
        _ => {}
    }
    notes
}

fn basis_of(r: &SeriesReport, _fallback: Basis) -> Basis {
    r.basis
}

fn exit_info(trace: &Trace) -> ExitInfo {
    if let Some(x) = crate::attached::detach_exit(trace) {
        return x;
    }
    let Some(x) = trace.exit() else {
        return ExitInfo {
            recorded: false,
            code: None,
            signal: None,
            status: None,
            oom_killed: false,
            killed: true,
            message: "trace ends without an exit event: leakspy itself was killed or the trace \
                      is cut"
                .to_string(),
        };
    };
    let message = match (x.signal, x.code) {
        (Some(9), _) if x.oom_killed => {
            "killed by SIGKILL from the OOM killer (the cgroup's oom_kill counter rose)".to_string()
        }
        (Some(9), _) => "killed by SIGKILL (the OOM killer, or kill -9)".to_string(),
        (Some(sig), _) => format!("killed by signal {sig}{}", signal_name(sig)),
        (None, Some(code)) if x.oom_killed => {
            format!("exited with code {code} after the OOM killer fired in its cgroup")
        }
        (None, Some(code)) => format!("exited with code {code}"),
        (None, None) => format!("ended with status {}", x.status),
    };
    ExitInfo {
        recorded: true,
        code: x.code,
        signal: x.signal,
        status: Some(x.status),
        oom_killed: x.oom_killed,
        killed: x.signal.is_some(),
        message,
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        1 => " (SIGHUP)",
        2 => " (SIGINT, Ctrl-C)",
        6 => " (SIGABRT)",
        11 => " (SIGSEGV)",
        15 => " (SIGTERM)",
        _ => "",
    }
}

/// How long the memory left lasts at the fitted rate.
fn time_to_oom(trace: &Trace, per_second: Option<&Growth>) -> Option<String> {
    let g = per_second?;
    if g.slope <= 0.0 {
        return None;
    }
    let last = trace.samples().last()?;
    let (left, what) = match last.cgroup.and_then(|c| c.limit.map(|l| (l, c.usage))) {
        Some((limit, usage)) => (limit.saturating_sub(usage), "the cgroup's memory limit"),
        None => (last.mem_available?, "the machine's available memory"),
    };
    let secs = left as f64 / g.slope;
    Some(format!(
        "at {}/s, {what} ({} left at the end) runs out in about {}",
        fmt_bytes(g.slope),
        fmt_bytes(left as f64),
        fmt_duration(secs)
    ))
}

pub(crate) fn fmt_duration(secs: f64) -> String {
    if secs < 90.0 {
        format!("{secs:.0} s")
    } else if secs < 5400.0 {
        format!("{:.0} min", secs / 60.0)
    } else if secs < 172_800.0 {
        format!("{:.1} h", secs / 3600.0)
    } else {
        format!("{:.1} days", secs / 86400.0)
    }
}

/// `"+1.00 MiB/step"`.
pub fn fmt_rate(g: &Growth) -> String {
    fmt_rate_value(g.slope, g)
}

/// A rate in the unit of the growth's slope, so an interval reads in one unit.
pub(crate) fn fmt_rate_value(v: f64, g: &Growth) -> String {
    let unit = g.unit.strip_prefix("bytes/").unwrap_or(&g.unit);
    let reference = if g.slope != 0.0 {
        g.slope
    } else {
        g.lo.abs().max(g.hi.abs())
    };
    let sign = if v > 0.0 { "+" } else { "" };
    format!("{sign}{}/{unit}", leakspy_stats::fmt_bytes_as(v, reference))
}

fn probe_info(trace: &Trace) -> ProbeInfo {
    let mut processes: Vec<u32> = trace
        .probes()
        .filter_map(|p| p.get("pid").and_then(serde_json::Value::as_u64))
        .map(|p| p as u32)
        .collect();
    processes.sort_unstable();
    processes.dedup();
    ProbeInfo {
        processes,
        censuses: trace.census().count(),
        suspects: trace.suspects().count(),
        optimizer_steps: trace
            .steps()
            .filter(|s| s.source == leakspy_trace::StepSource::Optimizer)
            .count(),
        cost: probe_cost(trace),
    }
}

/// CPU seconds the process tree spent per step over `[t0, t1]`: the `/proc`
/// times in the samples (each process's rises summed, so one that starts or
/// ends meanwhile counts what it used), over the steps done between the
/// samples nearest inside. None without CPU times or steps there.
fn cpu_per_step(trace: &Trace, clock: &StepClock, t0: f64, t1: f64) -> Option<f64> {
    let used = crate::extract::tree_cpu_used(trace);
    let mut inside = used.iter().filter(|(t, _)| *t >= t0 && *t <= t1);
    let &(ta, ca) = inside.next()?;
    let &(tb, cb) = inside.next_back().unwrap_or(&(ta, ca));
    let steps = clock.step_at(tb)? - clock.step_at(ta)?;
    (steps > 0.0 && cb > ca).then(|| (cb - ca) / steps)
}

/// The probe's bursts as a cause of slower steps, when they fell within
/// `[t0, t1]` (the throughput fit's span): a burst spends up to half the
/// job's time for a few seconds, and what it took is measured.
fn burst_during(trace: &Trace, t0: f64, t1: f64) -> Option<String> {
    let (first, last) = trace
        .census()
        .filter(|c| c.burst.is_some())
        .map(|c| c.t)
        .fold(None, |span: Option<(f64, f64)>, t| {
            Some(span.map_or((t, t), |(a, b)| (a.min(t), b.max(t))))
        })?;
    let spent = probe_cost(trace).map(|c| c.burst_s).unwrap_or(0.0);
    if last < t0 || first > t1 || spent <= 0.0 {
        return None;
    }
    Some(format!(
        "while the probe's burst looked for what grows ({first:.0} s to {last:.0} s, {spent:.2} s \
         of probe work on the job's threads)"
    ))
}

fn probe_cost(trace: &Trace) -> Option<crate::model::ProbeCost> {
    let mut cost = crate::model::ProbeCost {
        probe_s: 0.0,
        share: 0.0,
        budget: None,
        censuses: 0,
        parts: std::collections::BTreeMap::new(),
        bursts: 0,
        burst_s: 0.0,
        burst_budget: None,
    };
    let mut any = false;
    for c in trace.costs() {
        let (p, wall) = (c.probe_s, c.wall_s);
        if !(p.is_finite() && wall.is_finite() && p >= 0.0 && wall > p) {
            continue;
        }
        any = true;
        cost.probe_s += p;
        cost.share = cost.share.max(p / (wall - p));
        cost.budget = cost.budget.or(c.budget);
        cost.censuses += c.censuses.unwrap_or(0);
        for (k, v) in &c.parts {
            if v.is_finite() && *v > 0.0 {
                *cost.parts.entry(k.clone()).or_default() += v;
            }
        }
        if let Some(s) = c.steps.filter(|s| s.is_finite() && *s > 0.0) {
            *cost.parts.entry("steps".into()).or_default() += s;
        }
        cost.bursts += c.bursts.unwrap_or(0);
        cost.burst_s += c.burst_s.filter(|s| s.is_finite()).unwrap_or(0.0);
        cost.burst_budget = cost.burst_budget.or(c.burst_budget);
    }
    any.then_some(cost)
}

/// What grows but is not a leak, said plainly so nobody chases it.
fn non_leak_notes(trace: &Trace, verdict: Verdict) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(note) = copy_on_read_note(trace, verdict) {
        notes.push(note);
    }
    notes
}

/// Forked workers whose RSS grows while their private memory (USS) stays
/// flat are reading pages they share with the parent: counted again in each
/// RSS, not new memory.
fn copy_on_read_note(trace: &Trace, verdict: Verdict) -> Option<String> {
    let root = trace.header.pid?;
    let mut per: BTreeMap<u32, Vec<(u64, Option<u64>)>> = BTreeMap::new();
    for s in trace.samples() {
        for p in s.procs.iter().filter(|p| p.pid != root) {
            per.entry(p.pid).or_default().push((p.rss, p.uss));
        }
    }
    let mut workers = 0;
    let (mut rss_rise, mut uss_rise) = (0f64, 0f64);
    for v in per.values() {
        let with_uss: Vec<(u64, u64)> = v.iter().filter_map(|(r, u)| u.map(|u| (*r, u))).collect();
        if with_uss.len() < 3 {
            continue;
        }
        let (r0, u0) = with_uss[0];
        let (r1, u1) = with_uss[with_uss.len() - 1];
        let dr = r1 as f64 - r0 as f64;
        let du = u1 as f64 - u0 as f64;
        if dr > 8.0 * 1024.0 * 1024.0 && du < 0.2 * dr {
            workers += 1;
            rss_rise += dr;
            uss_rise += du;
        }
    }
    (workers > 0).then(|| {
        format!(
            "{workers} worker process(es): RSS rose {} but private memory (USS) only {}: \
             pages shared with the parent (a data set the workers read) counted again in \
             each worker's RSS, not new memory{}",
            leakspy_stats::fmt_bytes(rss_rise),
            leakspy_stats::fmt_bytes(uss_rise.max(0.0)),
            if verdict == Verdict::Leak {
                ""
            } else {
                "; were USS to grow as well, that would be copy-on-read (Python reference \
                 counts copying the parent's pages of a list-of-objects data set)"
            }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"kind":"header","format":"leakspy-trace","version":1,"leakspy_version":"0.1.0","t":0.0,"started_at":0.0,"command":["python","train.py"],"cwd":"/tmp","hostname":"h","pid":7,"sample_interval_s":0.1}"#;
    const MIB: f64 = 1048576.0;

    /// A 60-s run of 100 steps a second whose RSS is `rss(t)`, with optional
    /// extra lines (censuses, suspects, an exit).
    fn trace(rss: impl Fn(f64) -> f64, extra: &[String], exit: &str) -> Trace {
        let mut lines = vec![HEADER.to_string()];
        for i in 0..600 {
            let t = i as f64 * 0.1;
            lines.push(format!(
                r#"{{"kind":"sample","t":{t},"procs":[{{"pid":7,"rss":{r}}}],"total":{{"rss":{r},"anon":{r}}}}}"#,
                r = rss(t) as u64
            ));
            if i % 2 == 0 {
                lines.push(format!(
                    r#"{{"kind":"step","t":{},"step":{},"source":"optimizer","pid":7}}"#,
                    t + 0.05,
                    i * 10
                ));
            }
        }
        lines.extend(extra.iter().cloned());
        lines.push(exit.to_string());
        leakspy_trace::parse_trace(&lines.join("\n")).unwrap()
    }

    const EXIT_OK: &str = r#"{"kind":"exit","t":60.0,"code":0,"status":0}"#;

    /// Six censuses 10 s apart in which the graphs held by `Trainer.losses`
    /// grow by 2000 nodes each, and the suspect naming them.
    fn held_graphs() -> Vec<String> {
        let mut v: Vec<String> = (1..=6)
            .map(|i| {
                format!(
                    r#"{{"kind":"census","t":{},"pid":7,"step":{},"n":{i},"warmup":{},"graph":{{"roots":{},"nodes":{},"saved_bytes":0}}}}"#,
                    i * 10,
                    i * 1000,
                    i == 1,
                    i * 100,
                    i * 2000
                )
            })
            .collect();
        v.push(r#"{"kind":"suspect","t":45.0,"pid":7,"step":4000,"key":"graph","what":"autograd graph nodes","holder":{"kind":"attribute","path":"Trainer.losses","container":"list","chain":["Tensor","list","Trainer"]}}"#.to_string());
        v
    }

    #[test]
    fn the_probes_evidence_decides_a_close_call() {
        // RSS rises 3 MiB in a minute, under the 2 % of 700 MiB a leak needs
        // by itself; the probe saw graphs held by a named root grow at
        // every census.
        let t = trace(|t| 700.0 * MIB + t * 0.05 * MIB, &held_graphs(), EXIT_OK);
        let d = diagnose(&t, &DiagnoseOptions::default());
        assert_eq!(d.verdict, Verdict::Leak, "{:#?}", d.findings);
        assert_eq!(
            d.findings[0].holder.as_ref().unwrap()["path"],
            "Trainer.losses"
        );
        assert!(
            d.findings[0]
                .evidence
                .iter()
                .any(|e| e.starts_with("in-process census")),
            "{:?}",
            d.findings[0].evidence
        );
        // The same RSS without the probe's word is not a leak.
        let t = trace(|t| 700.0 * MIB + t * 0.05 * MIB, &[], EXIT_OK);
        assert_ne!(
            diagnose(&t, &DiagnoseOptions::default()).verdict,
            Verdict::Leak
        );
    }

    #[test]
    fn what_grows_under_no_leak_is_a_note_not_a_list() {
        // Flat memory; a list of floats held by the trainer grows (a log).
        let mut extra: Vec<String> = (1..=6)
            .map(|i| {
                format!(
                    r#"{{"kind":"census","t":{},"pid":7,"step":{},"n":{i},"warmup":{},"containers":[{{"id":5,"type":"list","len":{}}}]}}"#,
                    i * 10,
                    i * 1000,
                    i == 1,
                    i * 50
                )
            })
            .collect();
        extra.push(r#"{"kind":"suspect","t":45.0,"pid":7,"step":4000,"key":"container:5","what":"list of float (len 200)","holder":{"kind":"attribute","path":"Trainer.log_history","container":"list","chain":["list","Trainer"]}}"#.to_string());
        let t = trace(|_| 700.0 * MIB, &extra, EXIT_OK);
        let d = diagnose(&t, &DiagnoseOptions::default());
        assert_eq!(d.verdict, Verdict::NoLeak);
        assert!(d.growth.is_empty(), "{:#?}", d.growth);
        assert!(
            d.notes
                .iter()
                .any(|n| n.contains("Trainer.log_history") && n.contains("not a leak")),
            "{:?}",
            d.notes
        );
    }

    #[test]
    fn an_oom_kill_after_growth_is_a_leak_whatever_the_tail() {
        // 90 MiB in 50 s, then flat for the last 10 s as the kernel reclaims.
        let rss = |t: f64| 300.0 * MIB + t.min(50.0) * 1.8 * MIB;
        let killed = r#"{"kind":"exit","t":60.0,"signal":9,"status":137,"oom_killed":true}"#;
        let d = diagnose(&trace(rss, &[], killed), &DiagnoseOptions::default());
        assert_eq!(d.verdict, Verdict::Leak, "{}", d.summary);
        assert!(d.findings[0]
            .evidence
            .iter()
            .any(|e| e.contains("OOM killer")));
        let plain = diagnose(&trace(rss, &[], EXIT_OK), &DiagnoseOptions::default());
        assert_ne!(plain.verdict, Verdict::Leak, "{}", plain.summary);
    }

    #[test]
    fn a_buffer_that_fills_after_start_up_is_bounded_not_warm_up() {
        // Flat, then 120 MiB over steps 6000 to 16000, then flat to the end.
        let rss = |t: f64| 700.0 * MIB + ((t - 6.0).clamp(0.0, 10.0) * 12.0 * MIB);
        let d = diagnose(&trace(rss, &[], EXIT_OK), &DiagnoseOptions::default());
        assert_ne!(d.verdict, Verdict::Leak, "{}", d.summary);
        assert!(
            d.notes.iter().any(|n| n.contains("fills, then stays flat")),
            "{:?}",
            d.notes
        );
    }

    /// Censuses every 5 s of a `deque(maxlen=1_000_000)` held by
    /// `ReplayBuffer.memory` that gains 1024 items of 2 KiB a second.
    fn filling_buffer() -> Vec<String> {
        (1..12)
            .map(|i| {
                let t = i as f64 * 5.0;
                format!(
                    r#"{{"kind":"census","pid":7,"t":{t},"step":{},"source":"optimizer","n":{},"bounded":[{{"id":5,"type":"deque","len":{},"maxlen":1000000,"item_bytes":2048,"holder":{{"kind":"attribute","path":"ReplayBuffer.memory","file":"replay.py","line":12}}}}]}}"#,
                    (t * 100.0) as u64,
                    i + 1,
                    t * 1024.0
                )
            })
            .collect()
    }

    #[test]
    fn memory_that_a_bounded_buffer_filling_explains_is_no_leak() {
        // 2 MiB a second, all of it the buffer's items.
        let rss = |t: f64| 700.0 * MIB + t * 2.0 * MIB;
        let plain = diagnose(&trace(rss, &[], EXIT_OK), &DiagnoseOptions::default());
        assert_eq!(plain.verdict, Verdict::Leak, "{}", plain.summary);
        let d = diagnose(
            &trace(rss, &filling_buffer(), EXIT_OK),
            &DiagnoseOptions::default(),
        );
        assert_eq!(d.verdict, Verdict::NoLeak, "{}", d.summary);
        assert!(d.findings.is_empty(), "{:?}", d.findings);
        let m = &d.mechanisms[0];
        assert_eq!(m.kind, crate::model::MechanismKind::BoundedFill);
        assert!(
            m.evidence[0].starts_with(
                "ReplayBuffer.memory (a deque, maxlen 1,000,000) fills by 10.2 items/step"
            ),
            "{:?}",
            m.evidence
        );
        assert_eq!(m.location.as_ref().map(|l| l.line), Some(12));
        // Every series table shows the diagnosis's verdict, with why.
        let rss = d.series.iter().find(|s| s.key == "total.rss").unwrap();
        assert_eq!(rss.verdict, Verdict::Leak);
        assert_eq!(rss.diagnosed(), Verdict::NoLeak);
        assert_eq!(
            rss.explained.as_ref().map(|e| e.by.as_str()),
            Some("a bounded buffer filling")
        );
        // 8 % more than the items weigh as measured (the allocator's
        // share, measured in a DQN): still the buffer.
        let rss = |t: f64| 700.0 * MIB + t * 2.16 * MIB;
        let d = diagnose(
            &trace(rss, &filling_buffer(), EXIT_OK),
            &DiagnoseOptions::default(),
        );
        assert_eq!(d.verdict, Verdict::NoLeak, "{}", d.summary);
        assert!(d.summary.contains("within the 15 %"), "{}", d.summary);
        // Twice what the buffer takes: the other half is a leak.
        let rss = |t: f64| 700.0 * MIB + t * 4.0 * MIB;
        let d = diagnose(
            &trace(rss, &filling_buffer(), EXIT_OK),
            &DiagnoseOptions::default(),
        );
        assert_eq!(d.verdict, Verdict::Leak, "{}", d.summary);
        assert!(d.mechanisms.is_empty(), "{:?}", d.mechanisms);
    }

    #[test]
    fn a_holder_still_growing_where_memory_does_not_is_not_gone() {
        let before = diagnose(
            &trace(|t| 700.0 * MIB + t * 2.0 * MIB, &held_graphs(), EXIT_OK),
            &DiagnoseOptions::default(),
        );
        assert_eq!(before.verdict, Verdict::Leak, "{}", before.summary);
        // After: memory flat, the probe still sees what the holder keeps
        // grow (too little to matter): no leak, and the holder not gone.
        let after = diagnose(
            &trace(|_| 700.0 * MIB, &held_graphs(), EXIT_OK),
            &DiagnoseOptions::default(),
        );
        assert_eq!(after.verdict, Verdict::NoLeak, "{}", after.summary);
        assert!(after.growth.is_empty() && !after.quiet.is_empty());
        let c = crate::compare(&before, "before", &after, "after");
        let change = c
            .holders
            .iter()
            .find(|h| h.holder.starts_with("Trainer.losses"));
        let change = change.unwrap_or_else(|| panic!("{:?}", c.holders));
        assert!(
            change
                .describe()
                .contains("still grows (+2.00 autograd graph nodes"),
            "{}",
            change.describe()
        );
        assert!(change.describe().contains("memory does not grow with it"));
    }

    #[test]
    fn a_leak_by_the_census_is_said_on_the_trees_pss_too() {
        // Two processes (a notebook's kernel under its runner): the tree is
        // fitted on PSS, which rises too little alone; the held graphs make
        // it a leak, and the series the diff compares says by what.
        let mut lines = vec![HEADER.to_string()];
        for i in 0..600 {
            let t = i as f64 * 0.1;
            let pss = (700.0 * MIB + t * 0.1 * MIB) as u64;
            lines.push(format!(
                r#"{{"kind":"sample","t":{t},"procs":[{{"pid":7,"rss":{pss}}},{{"pid":8,"rss":{MIB}}}],"total":{{"rss":{},"pss":{pss},"anon":{pss}}}}}"#,
                pss + MIB as u64
            ));
            if i % 2 == 0 {
                lines.push(format!(
                    r#"{{"kind":"step","t":{},"step":{},"source":"optimizer","pid":7}}"#,
                    t + 0.05,
                    i * 10
                ));
            }
        }
        lines.extend(held_graphs());
        lines.push(EXIT_OK.to_string());
        let d = diagnose(
            &leakspy_trace::parse_trace(&lines.join("\n")).unwrap(),
            &DiagnoseOptions::default(),
        );
        assert_eq!(d.verdict, Verdict::Leak, "{}", d.summary);
        let pss = d.series.iter().find(|s| s.key == TREE_PSS).unwrap();
        assert_eq!(
            pss.leak_by.as_deref(),
            Some("the probe's census"),
            "{}",
            d.summary
        );
    }

    /// A leaking run whose steps come ever slower, to less than half as
    /// fast at the end, with the probe's burst in the second half or not.
    /// `cpu(t, step)`: the process's CPU seconds at a sample, if recorded.
    fn slower_steps_cpu(burst: bool, cpu: fn(f64, u64) -> Option<f64>) -> Trace {
        let mut lines = vec![HEADER.to_string()];
        let mut step = 0;
        for i in 0..600 {
            let t = i as f64 * 0.1;
            let r = (700.0 * MIB + t * 2.0 * MIB) as u64;
            let c = cpu(t, step)
                .map(|c| format!(r#","cpu_s":{c}"#))
                .unwrap_or_default();
            lines.push(format!(
                r#"{{"kind":"sample","t":{t},"procs":[{{"pid":7,"rss":{r}{c}}}],"total":{{"rss":{r},"anon":{r}}}}}"#
            ));
            step += 10 - i / 100;
            lines.push(format!(
                r#"{{"kind":"step","t":{},"step":{step},"source":"optimizer","pid":7}}"#,
                t + 0.05
            ));
        }
        let b = if burst { r#","burst":1"# } else { "" };
        for (n, t) in [31.0, 36.0, 41.0, 46.0].iter().enumerate() {
            lines.push(format!(
                r#"{{"kind":"census","t":{t},"pid":7,"step":{},"n":{}{b}}}"#,
                (t * 80.0) as u64,
                n + 1
            ));
        }
        let burst_s = if burst { 7.5 } else { 0.0 };
        lines.push(format!(
            r#"{{"kind":"cost","t":59.0,"pid":7,"probe_s":8.0,"wall_s":59.0,"censuses":4,"bursts":{},"burst_s":{burst_s}}}"#,
            u8::from(burst)
        ));
        lines.push(EXIT_OK.to_string());
        leakspy_trace::parse_trace(&lines.join("\n")).unwrap()
    }

    fn slower_steps(burst: bool) -> Trace {
        slower_steps_cpu(burst, |_, _| None)
    }

    #[test]
    fn slower_steps_are_told_by_the_cpu_time_a_step_costs() {
        // 1 ms of CPU a step all run long: the steps waited.
        let d = diagnose(
            &slower_steps_cpu(false, |_, step| Some(step as f64 * 1e-3)),
            &DiagnoseOptions::default(),
        );
        let note = d.notes.iter().find(|n| n.starts_with("steps/s fell"));
        let note = note.unwrap_or_else(|| panic!("{:?}", d.notes));
        assert!(
            note.contains("CPU time per step held (1.00 ms to 1.00 ms)")
                && note.contains("other programs")
                && !note.contains("with the leak"),
            "{note}"
        );
        // A core busy all run long while the steps slow: each costs more.
        let d = diagnose(
            &slower_steps_cpu(false, |t, _| Some(t)),
            &DiagnoseOptions::default(),
        );
        let note = d.notes.iter().find(|n| n.starts_with("steps/s fell"));
        let note = note.unwrap_or_else(|| panic!("{:?}", d.notes));
        assert!(
            note.contains("each step took more CPU time") && note.contains("with the leak"),
            "{note}"
        );
    }

    #[test]
    fn slower_steps_during_the_probes_burst_name_the_burst() {
        let d = diagnose(&slower_steps(true), &DiagnoseOptions::default());
        assert_eq!(d.verdict, Verdict::Leak, "{}", d.summary);
        let note = d.notes.iter().find(|n| n.starts_with("steps/s fell"));
        let note = note.unwrap_or_else(|| panic!("{:?}", d.notes));
        assert!(
            note.contains("while the probe's burst looked for what grows (31 s to 46 s, 7.50 s"),
            "{note}"
        );
        assert!(note.contains("with the leak"), "{note}");
        // Without a burst, the probe is not named.
        let d = diagnose(&slower_steps(false), &DiagnoseOptions::default());
        let note = d.notes.iter().find(|n| n.starts_with("steps/s fell"));
        let note = note.unwrap_or_else(|| panic!("{:?}", d.notes));
        assert!(!note.contains("probe"), "{note}");
    }

    #[test]
    fn a_leak_without_a_holder_says_why() {
        let rss = |t: f64| 700.0 * MIB + t * 2.0 * MIB;
        let census = r#"{"kind":"census","t":30.0,"pid":7,"step":3000,"n":1}"#.to_string();
        let probe = r#"{"kind":"probe","t":0.5,"pid":7}"#.to_string();
        let cost = r#"{"kind":"cost","t":30.0,"pid":7,"probe_s":0.1,"wall_s":30.0,"censuses":1}"#
            .to_string();
        let d = diagnose(
            &trace(rss, &[probe, census, cost], EXIT_OK),
            &DiagnoseOptions::default(),
        );
        assert_eq!(d.verdict, Verdict::Leak);
        let why = d.no_holder.expect("a reason");
        assert!(
            why.starts_with("1 census in 60 s") && why.contains("run longer"),
            "{why}"
        );
    }

    #[test]
    fn native_is_said_only_of_processes_looked_into_enough() {
        // A launcher with five flat censuses; the kernel that grows, one
        // census, and gone before the end (not in the last sample).
        let mut lines = vec![HEADER.to_string()];
        for i in 0..600 {
            let t = i as f64 * 0.1;
            let kernel = 200.0 * MIB + t * 4.0 * MIB;
            let procs = if i < 590 {
                format!(
                    r#"[{{"pid":7,"rss":{l}}},{{"pid":8,"ppid":7,"rss":{k}}}]"#,
                    l = 100.0 * MIB,
                    k = kernel
                )
            } else {
                format!(r#"[{{"pid":7,"rss":{}}}]"#, 100.0 * MIB)
            };
            lines.push(format!(
                r#"{{"kind":"sample","t":{t},"procs":{procs},"total":{{"rss":{r},"anon":{r}}}}}"#,
                r = (100.0 * MIB + kernel) as u64
            ));
            if i % 2 == 0 {
                lines.push(format!(
                    r#"{{"kind":"step","t":{},"step":{},"source":"optimizer","pid":8}}"#,
                    t + 0.05,
                    i * 10
                ));
            }
        }
        for (i, t) in [10, 20, 30, 40, 50].iter().enumerate() {
            lines.push(format!(
                r#"{{"kind":"census","t":{t},"pid":7,"n":{},"types":{{"builtins.dict":100}}}}"#,
                i + 1
            ));
        }
        lines.push(r#"{"kind":"census","t":45.0,"pid":8,"step":4500,"n":1}"#.to_string());
        lines.push(r#"{"kind":"probe","t":0.5,"pid":7}"#.to_string());
        lines.push(r#"{"kind":"probe","t":0.6,"pid":8}"#.to_string());
        lines.push(EXIT_OK.to_string());
        let trace = leakspy_trace::parse_trace(&lines.join("\n")).unwrap();
        let d = diagnose(&trace, &DiagnoseOptions::default());
        assert_eq!(d.verdict, Verdict::Leak);
        let why = d.no_holder.expect("a reason");
        assert!(
            why.contains("pid 8") && why.contains("had 1") && !why.contains("native"),
            "{why}"
        );
    }
}

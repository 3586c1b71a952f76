//! `leakspy fix [OPTIONS] -- CMD [ARGS...]`: from a leaking job to a proven
//! patch. Runs the job under `run`'s monitor until the leak and its holder
//! are known (or for `--steps` / `--duration`; or reads `--from TRACE`),
//! takes the `check` fixes joined to what grows, makes them in a scratch
//! copy of the project, runs the copy for as many steps, compares the two
//! runs as `leakspy diff` does, and writes the patch only when the fixed
//! run no longer leaks.

mod leg;
mod patch;
mod plan;
mod scratch;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Args;
use leakspy_report::{
    diagnose, merge_rank_rows, prove, rank_rows, render_fix_ranks_text, render_proof_text,
    DiagnoseOptions, Diagnosis, FixVerdict, Leg,
};
use leakspy_stats::Verdict;
use leakspy_trace::Trace;

use crate::{EXIT_CLEAN, EXIT_FINDINGS};
use leg::{Bound, Job, Recorded, Watch};

/// The most the first run takes at the defaults, in seconds: enough for
/// the live fit to call a leak of the zoo's size and for the probe to name
/// its holder on a busy machine, many times over.
const DEFAULT_MAX_S: f64 = 180.0;
/// The fixed run may take this many times the first run's duration (and
/// [`AFTER_SLACK_S`] more) to do as many steps; beyond, it is much slower
/// and the runs are not compared.
const AFTER_TIMES: f64 = 3.0;
const AFTER_SLACK_S: f64 = 60.0;
/// Runs of the fixed copy at most: the fixes for what the first run named,
/// then for what a fixed run still names (a holder that the first one hid:
/// the probe names the top holder of a chain).
const MAX_ROUNDS: usize = 5;

#[derive(Args)]
#[command(
    override_usage = "leakspy fix [OPTIONS] -- CMD [ARGS...]\n       leakspy fix [OPTIONS] --from TRACE",
    after_help = "By default the job runs until the leak, its rate and who holds it are known (at \
most 3 minutes), then the fixed copy runs for as many steps. The project's files are never changed \
without --apply; the scratch copy is removed however fix ends.\n\n\
Exit status: 0 when the fixes are proven (the patch is written or applied) or the job does not \
leak; 1 when growth remains (IMPROVED: the patch that reduces it is written; NOT FIXED), no fix \
is known, or the runs cannot be compared; 2 for a tool error; 128+N when signal N (Ctrl-C: 130) \
interrupted it."
)]
pub struct FixArgs {
    /// Run the job for N training steps (both runs).
    #[arg(long, value_name = "N", conflicts_with = "duration")]
    pub steps: Option<u64>,
    /// Run the job for SECS seconds (the fixed run then goes on for as many
    /// steps as the first did).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Start from a trace `leakspy run` recorded (its command runs again in
    /// the fixed copy, from the folder it ran in, for as many steps).
    #[arg(long, value_name = "TRACE", conflicts_with_all = ["steps", "duration"])]
    pub from: Option<PathBuf>,
    /// Try unsafe fixes too (they may change what training computes: review
    /// the patch).
    #[arg(long)]
    pub unsafe_fixes: bool,
    /// Write the proven fixes into the project's files instead of a patch.
    #[arg(long)]
    pub apply: bool,
    /// Where to write the patch (a unified diff for `git apply`, or `patch -p1`
    /// at the top of the project's git work tree, else of its folder).
    #[arg(long, value_name = "FILE", default_value = "leakspy-fix.patch")]
    pub patch: PathBuf,
    /// Also write an HTML report: both runs' memory on one chart, and the patch.
    #[arg(long, value_name = "FILE")]
    pub report_html: Option<PathBuf>,
    /// Folder for the runs' traces.
    #[arg(long, value_name = "DIR", default_value = "leakspy-runs")]
    pub trace_dir: PathBuf,
    /// No status line.
    #[arg(long, short)]
    pub quiet: bool,
    /// Mean seconds between memory samples (jittered ±20 %).
    #[arg(long, value_name = "SECS", default_value_t = 0.1)]
    pub interval: f64,
    /// Fraction of the job's time the probe's work may use (docs/probe.md).
    #[arg(long, value_name = "FRACTION", default_value_t = leakspy_monitor::DEFAULT_PROBE_BUDGET)]
    pub probe_budget: f64,
    /// Seconds between status lines when stderr is not a terminal (logs).
    #[arg(long, value_name = "SECS", default_value_t = 10.0, hide = true)]
    pub status_interval: f64,
    /// The command to run and its arguments (after `--`).
    #[arg(
        value_name = "CMD",
        trailing_var_arg = true,
        required_unless_present = "from",
        conflicts_with = "from"
    )]
    pub command: Vec<String>,
}

/// Ctrl-C (SIGINT), SIGTERM or SIGHUP received: the job has them too (the
/// monitor forwards them); `fix` stops at the next step of its own.
struct Interrupts {
    flags: Vec<(i32, Arc<AtomicBool>)>,
    ids: Vec<signal_hook::SigId>,
}

impl Interrupts {
    fn install() -> Result<Self> {
        let mut flags = Vec::new();
        let mut ids = Vec::new();
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            let flag = Arc::new(AtomicBool::new(false));
            ids.push(
                signal_hook::flag::register(sig, flag.clone())
                    .context("cannot install signal handlers")?,
            );
            flags.push((sig, flag));
        }
        Ok(Interrupts { flags, ids })
    }

    /// The first signal received, if any.
    fn received(&self) -> Option<i32> {
        self.flags
            .iter()
            .find(|(_, f)| f.load(Ordering::SeqCst))
            .map(|(s, _)| *s)
    }
}

impl Drop for Interrupts {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

pub fn run(args: FixArgs) -> Result<u8> {
    super::run::check_interval(args.interval)?;
    super::run::check_probe_budget(args.probe_budget)?;
    if args.steps == Some(0) {
        bail!("--steps must be at least 1");
    }
    if let Some(d) = args.duration {
        if !(d.is_finite() && d > 0.0) {
            bail!("--duration must be a positive number of seconds, got {d}");
        }
    }
    for (option, path) in [
        ("--patch", Some(&args.patch)),
        ("--report-html", args.report_html.as_ref()),
    ] {
        if let Some(p) = path.filter(|p| p.is_dir()) {
            bail!("{option} {} is a folder; give a file name", p.display());
        }
    }
    let interrupts = Interrupts::install()?;
    // Orphans of the job (a daemon of a DataLoader, a subprocess that
    // outlived its parent) come back to `fix`, which ends them: nothing is
    // left running when it returns.
    // SAFETY: prctl(2) on this process, with a plain integer argument.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
    let result = fix(&args, &interrupts);
    end_orphans();
    // Interrupted: whatever step it stopped (a run, the copy), the status
    // says so, as a shell would.
    match interrupts.received() {
        Some(sig) => {
            if result.is_err() {
                say("leakspy fix: interrupted; nothing was changed and no patch written\n");
            }
            Ok(u8::try_from(128 + sig).unwrap_or(crate::EXIT_ERROR))
        }
        None => result,
    }
}

fn say(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.flush();
}

fn fix(args: &FixArgs, interrupts: &Interrupts) -> Result<u8> {
    let opts = DiagnoseOptions::default();
    let watch = Watch {
        interval: args.interval,
        probe_budget: args.probe_budget,
        quiet: args.quiet,
        status_interval: args.status_interval,
    };

    // 1. The run before: recorded now, or read from --from.
    let (before_trace, before_path, stopped_before) = match &args.from {
        Some(path) => (super::traces::read(path)?, path.clone(), false),
        None => {
            let bound = match (args.steps, args.duration) {
                (Some(steps), _) => Bound::Steps {
                    steps,
                    max_s: f64::INFINITY,
                },
                (None, Some(d)) => Bound::Duration(d),
                (None, None) => Bound::Verdict {
                    max_s: DEFAULT_MAX_S,
                },
            };
            say(&format!(
                "leakspy fix: running `{}` {}\n",
                args.command.join(" "),
                match bound {
                    Bound::Verdict { max_s } => format!(
                        "until the leak, its rate and who holds it are known (at most {}; --steps N or \
                         --duration SECS to choose)",
                        fmt_duration(max_s)
                    ),
                    Bound::Steps { steps, .. } => format!("for {steps} steps"),
                    Bound::Duration(d) => format!("for {}", fmt_duration(d)),
                }
            ));
            let path = trace_path(&args.trace_dir, &args.command, "")?;
            let rec = leg::record(
                &Job {
                    command: &args.command,
                    cwd: None,
                    env: Vec::new(),
                    trace: &path,
                    burst_at_steps: None,
                },
                bound,
                &watch,
            )?;
            say_stopped("first run", &rec);
            if interrupts.received().is_some() {
                say("leakspy fix: interrupted; nothing was changed\n");
                return Ok(EXIT_FINDINGS);
            }
            let trace = super::traces::read(&rec.trace)?;
            let failed = rec.stopped.is_none()
                && rec.outcome.interrupted == 0
                && rec.outcome.exit.status != 0;
            if failed {
                let d = diagnose(&trace, &opts);
                let too_short = d
                    .series
                    .iter()
                    .find(|s| s.key == d.headline)
                    .is_none_or(|s| s.shape == leakspy_stats::Shape::TooShort);
                let failure = super::run::JobFailure {
                    command: &args.command,
                    exit: &rec.outcome.exit,
                    stderr_tail: rec.outcome.stderr_tail.as_deref(),
                };
                say(&failure.describe(&d.exit.message, too_short.then(|| trace.sample_count())));
                if d.verdict != Verdict::Leak {
                    say("leakspy fix: the job failed before its memory could be judged: nothing to fix\n");
                    return Ok(EXIT_FINDINGS);
                }
            }
            (trace, rec.trace, rec.stopped.is_some())
        }
    };
    let mut before = diagnose(&before_trace, &opts);
    let checked = if args.from.is_some() {
        // A trace of the user's: read, never written.
        leakspy_report::attach_static_findings(&mut before, before_trace.static_record())
    } else {
        super::run::join_static(&mut before, &before_trace, &before_path)
    };
    let cwd = before_trace.header.cwd.clone();
    if cwd.is_empty() {
        bail!(
            "{} does not say which folder the job ran in (a trace from an older leakspy): \
             record it again with `leakspy run`",
            before_path.display()
        );
    }
    let command = before_trace.header.command.clone();
    say(&format!(
        "leakspy fix: first run: {} (trace: {})\n",
        verdict_words(&before),
        before_path.display()
    ));
    match before.verdict {
        Verdict::Leak => {}
        Verdict::NoLeak => {
            say("leakspy fix: no leak: nothing to fix\n");
            return Ok(EXIT_CLEAN);
        }
        Verdict::Inconclusive if stopped_before => {
            say(
                "leakspy fix: the first run cannot tell whether the job leaks: run it for longer \
                 (--steps N or --duration SECS)\n",
            );
            return Ok(EXIT_FINDINGS);
        }
        Verdict::Inconclusive => {
            say(
                "leakspy fix: the job ended before its memory could tell whether it leaks: let it \
                 train for longer (more steps or epochs), then run `leakspy fix` again\n",
            );
            return Ok(EXIT_FINDINGS);
        }
    }

    // 2. The fixes joined to what grows; where the run named nothing that grows, those of the
    // leak findings in the files the job runs, which only the next run can prove.
    let mut plan = plan::plan(&before, args.unsafe_fixes);
    if plan.apply.is_empty() && plan.withheld.is_empty() && plan.unfixed.is_empty() {
        let found = plan::from_findings(&checked.files, args.unsafe_fixes);
        if !found.apply.is_empty() || !found.withheld.is_empty() {
            say(&plan_text(&plan, &before));
            say(
                "leakspy fix: trying the fixes of `check`'s leak findings in the files the job \
                 runs instead; the next run tells whether they were the leak\n",
            );
            plan = found;
        }
    }
    say(&plan_text(&plan, &before));
    if plan.apply.is_empty() {
        if !plan.withheld.is_empty() {
            say(
                "leakspy fix: the only fixes known are unsafe (they may change what training \
                 computes): `leakspy fix --unsafe-fixes` tries them and proves them the same way\n",
            );
        } else {
            say("leakspy fix: no fix known for what grows: change what is said above, then run `leakspy fix` again to prove it\n");
        }
        return Ok(EXIT_FINDINGS);
    }

    // 3. The fixes, in a scratch copy of the project.
    let files: Vec<PathBuf> = plan
        .apply
        .iter()
        .map(|p| leakspy_report::resolve_source(&p.file, &cwd))
        .collect();
    let root = scratch::project_root(Path::new(&cwd), &files);
    let scratch = scratch::Scratch::create(&root, &|| interrupts.received().is_some())?;
    let work = leakspy_report::steps_done(&before_trace);
    let bound = if work >= opts.min_steps as u64 {
        Bound::Steps {
            steps: work,
            max_s: before_trace.duration() * AFTER_TIMES + AFTER_SLACK_S,
        }
    } else {
        Bound::Duration(before_trace.duration())
    };
    let job_cwd = scratch
        .map(Path::new(&cwd))
        .unwrap_or_else(|| scratch.dir().to_path_buf());
    let after_command = scratch.command(&command, Path::new(&cwd));
    let before_leg = Leg {
        label: "before",
        trace: &before_trace,
        diagnosis: &before,
        stopped: stopped_before,
    };

    // 4. The same command in the copy, for as long; again with the fixes
    // for what a fixed run still names (a holder the first run's hid), at
    // most MAX_ROUNDS runs.
    let mut changed: Vec<patch::Changed> = Vec::new();
    let mut tried: Vec<plan::Planned> = Vec::new();
    let mut withheld = plan.withheld.clone();
    let mut next = plan.apply.clone();
    let mut round = 1;
    let (after_trace, after, after_rec, proof) = loop {
        let (made, missed) = patch::make(&next, &cwd, &scratch)?;
        for m in &missed {
            say(&format!(
                "leakspy fix: not made: {} {} ({}): {}\n",
                m.fix.rule,
                m.fix.location(),
                m.fix.fix,
                m.why
            ));
        }
        let n: usize = made.iter().map(|c| c.applied.len()).sum();
        tried.append(&mut next);
        patch::merge(&mut changed, made);
        if n == 0 && round == 1 {
            say("leakspy fix: none of the fixes could be made: nothing to prove\n");
            return Ok(EXIT_FINDINGS);
        }
        let in_files = changed.len();
        say(&format!(
            "leakspy fix: {n} fix{} made in a scratch copy of {} ({}{}); running it {}\n",
            if n == 1 { "" } else { "es" },
            root.display(),
            scratch.dir().display(),
            if round > 1 {
                format!(
                    ", {in_files} file{} changed in all",
                    if in_files == 1 { "" } else { "s" }
                )
            } else {
                String::new()
            },
            match bound {
                Bound::Steps { steps, .. } => format!("for {steps} steps, as the first run"),
                _ => format!(
                    "for {}, as the first run (it counted no steps)",
                    fmt_duration(before_trace.duration())
                ),
            }
        ));
        if interrupts.received().is_some() {
            return Ok(EXIT_FINDINGS);
        }
        let suffix = if round == 1 {
            "-fixed".to_string()
        } else {
            format!("-fixed{round}")
        };
        let after_path = trace_path(&args.trace_dir, &command, &suffix)?;
        let rec = leg::record(
            &Job {
                command: &after_command,
                cwd: Some(&job_cwd),
                env: scratch.env(Path::new(&cwd)),
                trace: &after_path,
                burst_at_steps: Some(leakspy_report::burst_step(&before_trace).unwrap_or(work / 2)),
            },
            bound,
            &watch,
        )?;
        say_stopped("fixed run", &rec);
        if interrupts.received().is_some() {
            say("leakspy fix: interrupted during the fixed run; nothing was changed and no patch written\n");
            return Ok(EXIT_FINDINGS);
        }
        let trace = super::traces::read(&rec.trace)?;
        let mut diagnosis = diagnose(&trace, &opts);
        // The findings on the fixed copy's lines, for another round.
        super::run::join_static(&mut diagnosis, &trace, &rec.trace);
        let proof = prove(
            &before_leg,
            &Leg {
                label: "after",
                trace: &trace,
                diagnosis: &diagnosis,
                stopped: rec.stopped.is_some(),
            },
        );
        if matches!(proof.verdict, FixVerdict::NotFixed | FixVerdict::Improved)
            && round < MAX_ROUNDS
        {
            let more = plan::plan(&diagnosis, args.unsafe_fixes);
            let new = |p: &plan::Planned, seen: &[plan::Planned]| {
                !seen
                    .iter()
                    .any(|t| t.file == p.file && t.line == p.line && t.rule == p.rule)
            };
            for w in more.withheld {
                if new(&w, &withheld) {
                    withheld.push(w);
                }
            }
            next = more.apply.into_iter().filter(|p| new(p, &tried)).collect();
            if !next.is_empty() {
                round += 1;
                say(&format!(
                    "leakspy fix: the fixed run still leaks ({}); fixes for what it names:\n",
                    proof.comparison.after.shape_text
                ));
                say(&plan_text(
                    &plan::Plan {
                        apply: next.clone(),
                        ..plan::Plan::default()
                    },
                    &diagnosis,
                ));
                continue;
            }
        }
        break (trace, diagnosis, rec, proof);
    };
    let plan = plan::Plan {
        withheld,
        ..plan::Plan::default()
    };

    // 5. The proof.
    let mut text = render_proof_text(&proof);
    if !before.ranks.is_empty() || !after.ranks.is_empty() {
        text.push_str(&ranks_text(
            (&before_trace, &before),
            (&after_trace, &after),
            &opts,
        ));
    }
    say(&text);
    say(&format!(
        "traces: {} (before), {} (after)\n",
        before_path.display(),
        after_rec.trace.display()
    ));
    if after_rec.outcome.exit.status != 0 && after_rec.stopped.is_none() {
        if let Some(tail) = &after_rec.outcome.stderr_tail {
            say("  the fixed run's last lines on stderr:\n");
            for line in tail {
                say(&format!("    {line}\n"));
            }
        }
    }
    let base = patch::patch_base(&root);
    let diff = patch::unified(&changed, &base);
    if let Some(path) = &args.report_html {
        let html = leakspy_report::render_fix_html(
            &proof,
            (&before_trace, &before),
            (&after_trace, &after),
            &diff,
        );
        match super::write_output(path, html.as_bytes()) {
            Ok(()) => say(&format!("report: {}\n", path.display())),
            Err(e) => say(&format!(
                "leakspy: error: cannot write {}: {e}\n",
                path.display()
            )),
        }
    }
    if !matches!(proof.verdict, FixVerdict::Fixed | FixVerdict::Improved) {
        if proof.verdict == FixVerdict::NotFixed && !plan.withheld.is_empty() {
            say(&format!(
                "leakspy fix: unsafe fixes were not tried ({}): `leakspy fix --unsafe-fixes` \
                 tries them too\n",
                plan.withheld
                    .iter()
                    .map(|f| format!("{} {} for {}", f.rule, f.location(), f.holder))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        say("leakspy fix: no patch written: the fixes are not proven\n");
        return Ok(EXIT_FINDINGS);
    }
    let improved = proof.verdict == FixVerdict::Improved;
    if improved {
        if !plan.withheld.is_empty() {
            say(&format!(
                "leakspy fix: unsafe fixes were not tried ({}): `leakspy fix --unsafe-fixes` \
                 tries them too\n",
                plan.withheld
                    .iter()
                    .map(|f| format!("{} {} for {}", f.rule, f.location(), f.holder))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        say(
            "leakspy fix: the patch reduces the growth (proven) but does not remove it: what \
             still grows is listed above\n",
        );
    }
    let done = if improved { EXIT_FINDINGS } else { EXIT_CLEAN };
    if args.apply {
        match patch::apply(&changed) {
            Ok(()) => {
                for c in &changed {
                    say(&format!("fixed: {}\n", c.user.display()));
                }
            }
            Err(why) => {
                for w in &why {
                    say(&format!("leakspy fix: not applied: {w}\n"));
                }
                write_patch(&args.patch, &diff, &base)?;
                return Ok(EXIT_FINDINGS);
            }
        }
    } else {
        write_patch(&args.patch, &diff, &base)?;
    }
    Ok(done)
}

fn write_patch(path: &Path, diff: &str, base: &Path) -> Result<()> {
    super::write_output(path, diff.as_bytes())
        .with_context(|| format!("cannot write the patch to {}", path.display()))?;
    let abs = absolute(path);
    say(&format!(
        "patch: {} (`git apply {}`, or `patch -p1 < {}` in {}; `leakspy fix --apply` writes it)\n",
        path.display(),
        abs.display(),
        abs.display(),
        base.display(),
    ));
    Ok(())
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// `leakspy-runs/<stamp>-<name><suffix>.jsonl` in `dir`.
fn trace_path(dir: &Path, command: &[String], suffix: &str) -> Result<PathBuf> {
    let default = super::run::default_trace_path(command)?;
    let name = default
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "run".to_string());
    let mut path = dir.join(format!("{name}{suffix}.jsonl"));
    let mut n = 2;
    while path.exists() {
        path = dir.join(format!("{name}{suffix}-{n}.jsonl"));
        n += 1;
    }
    Ok(path)
}

fn say_stopped(which: &str, rec: &Recorded) {
    let e = &rec.outcome.exit;
    let how = match &rec.stopped {
        Some(why) => format!("stopped by leakspy after {:.1} s: {why}", e.t),
        None if e.status == 0 => format!("ended by itself after {:.1} s", e.t),
        None => format!(
            "ended by itself after {:.1} s with status {} ({})",
            e.t,
            e.status,
            rec.outcome
                .stderr_tail
                .as_ref()
                .and_then(|t| t.last())
                .map_or("see its stderr above", String::as_str)
        ),
    };
    say(&format!("leakspy fix: {which} {how}\n"));
}

/// "a leak: +219 KiB/step over 412 steps (48.2 s)".
fn verdict_words(d: &Diagnosis) -> String {
    let v = match d.verdict {
        Verdict::Leak => "a leak",
        Verdict::NoLeak => "no leak",
        Verdict::Inconclusive => "inconclusive",
    };
    // "a leak of +202 KiB/step"; otherwise the fitted rate is no leak's:
    // "no leak (fitted +760 B/step)".
    let rate = d
        .growth_per_step
        .as_ref()
        .or(d.growth_per_second.as_ref())
        .map(|g| match d.verdict {
            Verdict::Leak => format!(" of {}", leakspy_report::fmt_growth(g)),
            _ => format!(" (fitted {})", leakspy_report::fmt_growth(g)),
        })
        .unwrap_or_default();
    format!(
        "{v}{rate}, {} steps in {:.1} s",
        d.run.steps, d.run.duration_s
    )
}

fn plan_text(p: &plan::Plan, d: &Diagnosis) -> String {
    let mut out = String::new();
    for f in &p.apply {
        out.push_str(&format!(
            "  fix: {} {} {}{} (held by {})\n",
            f.rule,
            f.location(),
            f.fix,
            if f.safe { "" } else { " [unsafe]" },
            f.holder
        ));
    }
    for f in &p.withheld {
        out.push_str(&format!(
            "  unsafe, not tried without --unsafe-fixes: {} {} {} (held by {})\n",
            f.rule,
            f.location(),
            f.fix,
            f.holder
        ));
    }
    for u in &p.unfixed {
        out.push_str(&format!("  no fix known: {}", plan::advice_text(u)));
    }
    if p.apply.is_empty() && p.withheld.is_empty() && p.unfixed.is_empty() {
        match &d.no_holder {
            Some(why) => out.push_str(&format!("  no holder named: {why}\n")),
            None => out.push_str("  the probe named nothing that grows\n"),
        }
    }
    out
}

/// The ranks of both runs side by side (a torchrun job).
fn ranks_text(
    before: (&Trace, &Diagnosis),
    after: (&Trace, &Diagnosis),
    opts: &DiagnoseOptions,
) -> String {
    let rows = merge_rank_rows(
        rank_rows(before.0, before.1, "before", opts)
            .into_iter()
            .chain(rank_rows(after.0, after.1, "after", opts)),
    );
    render_fix_ranks_text(&rows)
}

/// "3 min", "45 s".
fn fmt_duration(s: f64) -> String {
    if s >= 120.0 && (s % 60.0).abs() < 0.5 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{s:.0} s")
    }
}

/// Ends what the job left running that came back to `fix` (it is their
/// subreaper): SIGTERM, a moment, then SIGKILL; reaps them.
fn end_orphans() {
    let relay = std::ffi::OsStr::new(leakspy_monitor::RELAY_ARG);
    let orphans: Vec<i32> = children()
        .into_iter()
        .filter(|&pid| {
            // The stderr relay ends by itself once every writer is gone.
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            cmdline
                .split(|b| *b == 0)
                .nth(1)
                .is_none_or(|a| a != relay.as_encoded_bytes())
        })
        .collect();
    if orphans.is_empty() {
        return;
    }
    for &pid in &orphans {
        // SAFETY: kill(2) on our own children (they are reaped only below).
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    let mut left = orphans;
    while !left.is_empty() && std::time::Instant::now() < deadline {
        left.retain(|&pid| !reaped(pid));
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    for &pid in &left {
        // SAFETY: as above.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    }
}

/// Whether our child `pid` has ended (and is now reaped).
fn reaped(pid: i32) -> bool {
    // SAFETY: waitpid(2) on one of our children, without blocking.
    let rc = unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
    rc != 0
}

/// This process's children.
fn children() -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for t in tasks.flatten() {
        if let Ok(list) = std::fs::read_to_string(t.path().join("children")) {
            out.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    out
}

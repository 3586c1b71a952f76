//! `leakspy run` on real Python programs: steady leaks are found with the
//! right rate, and the usual shapes of healthy memory are not called leaks.

mod run_support;

use run_support::{run_workload, verdict, Finished, MIB};

fn assert_not_leak(f: &Finished) {
    assert_ne!(
        verdict(f),
        "leak",
        "a control was called a leak:\n{}",
        f.stderr
    );
    assert_eq!(f.code, Some(0), "{}", f.stderr);
}

fn assert_rate(f: &Finished, key: &str, truth: f64) {
    let slope = f.report[key]["slope"]
        .as_f64()
        .unwrap_or_else(|| panic!("no {key} in the report:\n{}", f.stderr));
    // Generous band: the program paces itself on the clock, but RSS also
    // carries allocator slack and interpreter noise.
    assert!(
        slope > 0.8 * truth && slope < 1.25 * truth,
        "{key} {:.2} MiB, truth {:.2} MiB\n{}",
        slope / MIB,
        truth / MIB,
        f.stderr
    );
}

#[test]
fn steady_fast_leak_is_found_at_its_rate_and_fails_ci() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let f = run_workload(
        dir.path(),
        &["--fail-on-leak", "--report-html", html.to_str().unwrap()],
        "leak",
        &["5", "16"],
    );
    assert_eq!(verdict(&f), "leak", "{}", f.stderr);
    assert_rate(&f, "growth_per_second", 16.0 * MIB);
    assert!(f.stderr.contains("LEAK"), "{}", f.stderr);
    // The child exited 0; --fail-on-leak turns the leak into exit 1.
    assert_eq!(f.code, Some(1), "{}", f.stderr);
    assert_eq!(f.trace.exit().unwrap().status, 0);
    let page = std::fs::read_to_string(&html).expect("HTML report written");
    assert!(
        page.starts_with("<!DOCTYPE html>"),
        "{}",
        &page[..page.len().min(200)]
    );
}

#[test]
fn steady_slow_leak_is_found_at_its_rate() {
    let dir = tempfile::tempdir().unwrap();
    let f = run_workload(dir.path(), &[], "leak", &["5", "4"]);
    assert_eq!(verdict(&f), "leak", "{}", f.stderr);
    assert_rate(&f, "growth_per_second", 4.0 * MIB);
    // Without --fail-on-leak the child's status is leakspy's.
    assert_eq!(f.code, Some(0));
}

#[test]
fn per_step_leak_is_found_per_step_with_step_regex() {
    let dir = tempfile::tempdir().unwrap();
    let f = run_workload(
        dir.path(),
        &["--step-regex", r"^step (\d+)"],
        "stepleak",
        &["6", "0.5"],
    );
    assert_eq!(verdict(&f), "leak", "{}", f.stderr);
    // Fitted per step: enough step lines were read (a loaded machine runs
    // fewer than the 120 of an idle one).
    assert_eq!(f.report["basis"], "step", "{}", f.stderr);
    assert!(
        f.trace.step_count() >= 20,
        "steps: {}",
        f.trace.step_count()
    );
    assert_rate(&f, "growth_per_step", 0.5 * MIB);
}

#[test]
fn leak_in_a_worker_process_is_found_in_the_tree() {
    let dir = tempfile::tempdir().unwrap();
    let f = run_workload(dir.path(), &[], "workers", &["5", "8"]);
    assert_eq!(f.code, Some(0), "{}", f.stderr);
    // Main process and both workers were sampled, workers as children of
    // main. (`python3` may be a launcher, pyenv's shim, whose chain of
    // shells a loaded machine samples before it execs Python: only Python
    // processes count.)
    let root = f.trace.header.pid.unwrap();
    let workers = |s: &leakspy_trace::Sample| {
        s.procs
            .iter()
            .filter(|p| p.ppid == root && p.name.starts_with("python"))
            .count()
    };
    let most = f.trace.samples().map(workers).max().unwrap_or(0);
    assert!(most >= 2, "at most {most} worker processes sampled");
    assert_eq!(verdict(&f), "leak", "{}", f.stderr);
    assert_rate(&f, "growth_per_second", 8.0 * MIB);
}

// The controls run 8 s: what they fill, they fill in a count of steps (a
// buffer of 30) or in their first second, so even at half speed on a loaded
// machine most of the run is the flat part that tells them from a leak.

#[test]
fn bounded_buffer_filling_then_flat_is_not_a_leak() {
    let dir = tempfile::tempdir().unwrap();
    assert_not_leak(&run_workload(dir.path(), &[], "bounded", &["8"]));
}

#[test]
fn warm_up_then_flat_is_not_a_leak() {
    let dir = tempfile::tempdir().unwrap();
    assert_not_leak(&run_workload(dir.path(), &[], "warmup", &["8"]));
}

#[test]
fn sawtooth_of_big_temporaries_is_not_a_leak() {
    let dir = tempfile::tempdir().unwrap();
    assert_not_leak(&run_workload(dir.path(), &[], "sawtooth", &["8"]));
}

#[test]
fn reference_cycles_reclaimed_by_gc_are_not_a_leak() {
    let dir = tempfile::tempdir().unwrap();
    assert_not_leak(&run_workload(dir.path(), &[], "cycles", &["8"]));
}

#[test]
fn one_large_load_then_flat_is_not_a_leak() {
    let dir = tempfile::tempdir().unwrap();
    let f = run_workload(dir.path(), &[], "load", &["8"]);
    assert_not_leak(&f);
    // The load itself was seen: 200 MiB of data is in the peak.
    let peak = f.trace.samples().map(|s| s.total.rss).max().unwrap();
    assert!(peak as f64 > 200.0 * MIB, "peak {peak}");
}

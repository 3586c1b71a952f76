//! `leakspy report` and `leakspy diff` with the real binary, on the replay
//! traces of crates/leakspy_report/tests/fixtures and on traces cut short
//! the way a kill cuts them.

mod run_support;

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../leakspy_report/tests/fixtures")
}

fn leakspy() -> Command {
    let mut cmd = Command::cargo_bin("leakspy").unwrap();
    // Relative fixture names keep paths out of the snapshots.
    cmd.current_dir(fixtures());
    cmd
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str]) -> Out {
    let o = leakspy().args(args).output().unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

#[test]
fn report_text_of_a_leak() {
    let o = run(&["report", "leak_steps.jsonl"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    insta::assert_snapshot!(o.stdout);
}

#[test]
fn report_fails_on_leak_only_when_asked_and_only_for_a_leak() {
    assert_eq!(
        run(&["report", "leak_steps.jsonl", "--fail-on-leak"]).code,
        1
    );
    assert_eq!(run(&["report", "fixed.jsonl", "--fail-on-leak"]).code, 0);
    assert_eq!(
        run(&["report", "flat_after_warmup.jsonl", "--fail-on-leak"]).code,
        0
    );
}

#[test]
fn report_of_a_run_killed_mid_write() {
    let o = run(&["report", "killed_torn.jsonl"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("LEAK"), "{}", o.stdout);
    assert!(
        o.stdout.contains(
            "trace ends without an exit event: leakspy itself was killed or the trace is cut"
        ),
        "{}",
        o.stdout
    );
    assert!(o.stdout.contains("torn last line"), "{}", o.stdout);
}

#[test]
fn report_of_a_sigkilled_child() {
    let o = run(&["report", "sigkill.jsonl", "--format", "json"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["killed"], true);
    assert_eq!(v["exit"]["signal"], 9);
    assert_eq!(
        v["exit"]["message"],
        "killed by SIGKILL (the OOM killer, or kill -9)"
    );
}

/// Cutting a trace anywhere after its header (as a kill -9 of leakspy
/// would) still gives a report.
#[test]
fn report_of_a_trace_cut_at_any_byte() {
    let full = std::fs::read(fixtures().join("leak_steps.jsonl")).unwrap();
    let header_end = full.iter().position(|&b| b == b'\n').unwrap() + 1;
    let dir = tempfile::tempdir().unwrap();
    for cut in [
        header_end,
        header_end + 17,
        full.len() / 3,
        full.len() / 2 + 5,
        full.len() - 3,
    ] {
        let path = dir.path().join(format!("cut-{cut}.jsonl"));
        std::fs::write(&path, &full[..cut]).unwrap();
        let o = run(&["report", path.to_str().unwrap(), "--format", "json"]);
        assert_eq!(o.code, 0, "cut at {cut}: {}", o.stderr);
        let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
        assert_eq!(v["exit"]["recorded"], false, "cut at {cut}");
        assert!(v["verdict"].is_string());
    }
}

#[test]
fn report_writes_json_and_html_files() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let html = dir.path().join("r.html");
    let o = run(&[
        "report",
        "leak_steps.jsonl",
        "--format",
        "json",
        "-o",
        json.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.is_empty());
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["verdict"], "leak");
    assert_eq!(v["growth_per_step"]["unit"], "bytes/step");
    let o = run(&[
        "report",
        "hostile.jsonl",
        "--format",
        "html",
        "-o",
        html.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(!page.contains("<script"), "unescaped script tag");
}

#[test]
fn report_errors_exit_2_with_a_message() {
    let o = run(&["report", "no-such-trace.jsonl"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("cannot read trace file"), "{}", o.stderr);
    let o = run(&["report", "make.py"]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("expected a leakspy trace header"),
        "{}",
        o.stderr
    );
}

#[test]
fn diff_fixed() {
    let o = run(&["diff", "leak_steps.jsonl", "fixed.jsonl"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    insta::assert_snapshot!(o.stdout);
}

#[test]
fn diff_not_fixed() {
    // Another run of the same leaky job: its own pid and start time.
    let dir = tempfile::tempdir().unwrap();
    let again = dir.path().join("again.jsonl");
    let text = std::fs::read_to_string(fixtures().join("leak_steps.jsonl")).unwrap();
    std::fs::write(
        &again,
        text.replacen("\"pid\":4242,", "\"pid\":4343,", 1).replacen(
            "\"started_at\":1763700000.0",
            "\"started_at\":1763709000.0",
            1,
        ),
    )
    .unwrap();
    let o = run(&["diff", "leak_steps.jsonl", again.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stdout.starts_with("leakspy diff: NOT FIXED"),
        "{}",
        o.stdout
    );
}

#[test]
fn diff_improved_json() {
    let o = run(&[
        "diff",
        "leak_steps.jsonl",
        "half_fixed.jsonl",
        "--format",
        "json",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(v["verdict"], "improved");
    assert_eq!(v["basis"], "step");
    let ratio = v["ratio"].as_f64().unwrap();
    assert!((ratio - 0.25).abs() < 0.02, "{ratio}");
    insta::assert_snapshot!(o.stdout);
}

#[test]
fn diff_of_a_fix_that_took_a_sliver_off_is_not_fixed() {
    // 1 MiB/step before, 0.8 after: the intervals part, but two runs of one
    // job differ by more than that; `fix` reads the same verdict.
    let o = run(&["diff", "leak_steps.jsonl", "sliver_fixed.jsonl"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stdout.starts_with("leakspy diff: NOT FIXED")
            && o.stdout
                .contains("after grows less (80 % of before), but not half as fast"),
        "{}",
        o.stdout
    );
}

#[test]
fn diff_worse() {
    let o = run(&["diff", "fixed.jsonl", "leak_steps.jsonl"]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stdout.starts_with("leakspy diff: WORSE"), "{}", o.stdout);
    let o = run(&[
        "diff",
        "half_fixed.jsonl",
        "leak_steps.jsonl",
        "--format",
        "json",
    ]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stdout.contains("\"verdict\": \"worse\""), "{}", o.stdout);
}

#[test]
fn diff_no_leak_either_and_errors() {
    assert_eq!(
        run(&["diff", "fixed.jsonl", "flat_after_warmup.jsonl"]).code,
        0
    );
    let o = run(&["diff", "fixed.jsonl", "missing.jsonl"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("missing.jsonl"), "{}", o.stderr);
}

/// The whole loop on real Python processes: a history list that keeps
/// 0.5 MiB per step, then the same loop with a bounded deque; `leakspy run`
/// records both, `leakspy diff` says the fix worked.
#[test]
fn diff_of_real_runs_before_and_after_a_fix() {
    let dir = tempfile::tempdir().unwrap();
    let workload = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run/workload.py");
    let record_for = |name: &str, mode: &str, rate: &str, seconds: &str| {
        let trace = dir.path().join(format!("{name}.jsonl"));
        let o = Command::cargo_bin("leakspy")
            .unwrap()
            .current_dir(dir.path())
            .args(["run", "-q", "--trace"])
            .arg(&trace)
            .args(["--step-regex", r"^step (\d+)", "--", "python3"])
            .arg(&workload)
            .args([mode, seconds, rate])
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        trace
    };
    let record = |name: &str, mode: &str, rate: &str| record_for(name, mode, rate, "5");
    let before = record("before", "stepleak", "0.5");
    // 8 s: the buffer fills in 30 steps, so the after run is mostly flat
    // even at half speed on a loaded machine.
    let after = record_for("after", "bounded", "0", "8");
    let o = leakspy()
        .arg("diff")
        .arg(&before)
        .arg(&after)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["verdict"], "fixed", "{stdout}");
    assert_eq!(v["basis"], "step", "{stdout}");
    let g = &v["before"]["growth"];
    let mib = 1024.0 * 1024.0;
    let (lo, hi) = (g["lo"].as_f64().unwrap(), g["hi"].as_f64().unwrap());
    // 0.5 MiB kept per step; RSS may round it up a little (allocator pages).
    assert!(lo < 0.6 * mib && hi > 0.45 * mib, "{g}");
    // And the other way round is worse.
    let o = leakspy()
        .arg("diff")
        .arg(&after)
        .arg(&before)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("leakspy diff: WORSE"));
}

/// One answer on every replay trace: `report` in text, JSON and HTML and
/// `diff` (as either side) reach the same verdict.
#[test]
fn every_fixture_trace_gets_one_verdict_everywhere() {
    let mut seen = 0;
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        let o = run(&["report", path.to_str().unwrap(), "--format", "json"]);
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&o.stdout) else {
            // Not a trace `report` reads (a fixture of bad input).
            continue;
        };
        run_support::assert_one_verdict(&path, v["verdict"].as_str().unwrap());
        seen += 1;
    }
    assert!(seen >= 10, "{seen} traces");
}

/// A leak decided by the probe's census while RSS alone flattens (freed heap
/// refilled) or is inconclusive (a busy machine shaking it): `diff` calls it a
/// leak as `report` does, so a flat run after it proves a fix, a leaking run
/// after a flat one is worse, and the evidence says what decided it.
#[test]
fn diff_of_a_leak_the_probe_decided_is_a_fix_not_no_leak_in_either() {
    for (trace, alone) in [
        ("probe_flat_tail.jsonl", "no-leak"),
        ("probe_noisy_rss.jsonl", "inconclusive"),
    ] {
        let o = run(&["report", trace, "--format", "json"]);
        let report: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
        assert_eq!(report["verdict"], "leak", "{trace}");
        let rss = report["series"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["key"] == "total.rss")
            .unwrap();
        // Its own fit is not a leak: the probe's census decided.
        assert_eq!(rss["verdict"], alone, "{trace}");
        assert_eq!(rss["leak_by"], "the probe's census", "{trace}");
        let o = run(&["diff", trace, "fixed.jsonl"]);
        assert_eq!(o.code, 0, "{}", o.stdout);
        assert!(o.stdout.starts_with("leakspy diff: FIXED"), "{}", o.stdout);
        assert!(
            o.stdout.contains("leak (by the probe's census)"),
            "{}",
            o.stdout
        );
        let o = run(&["diff", "fixed.jsonl", trace]);
        assert_eq!(o.code, 1, "{}", o.stdout);
        assert!(o.stdout.starts_with("leakspy diff: WORSE"), "{}", o.stdout);
    }
}

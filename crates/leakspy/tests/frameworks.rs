//! Real frameworks under `leakspy run` at its defaults (examples/frameworks):
//! a LightningModule, a transformers `Trainer` subclass, a stable-baselines3
//! callback and a single-file DQN, each run unmodified as a leaky and a
//! healthy twin. The leak must be found with its holder and the line that
//! made it; the healthy twin must not be called a leak, nor anything in it
//! blamed; and steps must be counted as the framework counts its optimizer
//! steps (each program prints its own count at the end).

mod run_support;

use run_support::repo_root;

use std::path::PathBuf;

use serde_json::Value;

/// Seconds of training, of the job's own CPU time: the live fit sees a leak
/// within a few seconds of its first steps and the burst names its holder and
/// line within a few more. Counted in wall time, a busy machine cut the job's
/// steps by half and the burst began as it ended (holder named at exit, no
/// line): a job must do the same work under load, only slower.
const SECONDS: &str = "25";

/// One framework job at a time: two torch jobs on a 2-core CI machine
/// starve each other.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Ran {
    report: Value,
    stdout: String,
    stderr: String,
    code: Option<i32>,
}

fn program(name: &str) -> PathBuf {
    repo_root().join("examples/frameworks").join(name)
}

fn run(name: &str, mode: &str) -> Ran {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let f = run_support::run_program(dir.path(), &program(name), &[mode, SECONDS], |cmd| {
        // Models come from configs: nothing may be downloaded.
        cmd.env("HF_HUB_OFFLINE", "1")
            .env("TRANSFORMERS_OFFLINE", "1")
            .env("TMPDIR", dir.path())
            .current_dir(dir.path());
    });
    Ran {
        report: f.report,
        stdout: f.stdout,
        stderr: f.stderr,
        code: f.code,
    }
}

/// The line numbers of `marker` comments in a program.
fn lines_of(name: &str, marker: &str) -> Vec<u64> {
    let text = std::fs::read_to_string(program(name)).unwrap();
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.contains(marker))
        .map(|(i, _)| i as u64 + 1)
        .collect()
}

/// The framework's own count of optimizer steps, as the program printed it.
fn framework_steps(r: &Ran) -> u64 {
    r.stdout
        .lines()
        .find_map(|l| l.strip_prefix("optimizer steps: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no step count printed: {:?}\n{}", r.stdout, r.stderr))
}

fn check_steps(name: &str, mode: &str, r: &Ran) {
    let steps = r.report["run"]["steps"].as_u64().unwrap();
    assert_eq!(
        steps,
        framework_steps(r),
        "{name} {mode}: leakspy counted {steps} steps\n{}",
        r.stderr
    );
}

/// The leaky twin: a leak, held by `holder`, made on one of the lines the
/// program marks (its forward pass, or the line that keeps the result).
fn check_leak(name: &str, holder: &str) {
    let r = run(name, "leak");
    assert_eq!(r.code, Some(0), "{name}: {}", r.stderr);
    assert_eq!(r.report["verdict"], "leak", "{name}\n{}", r.stderr);
    check_steps(name, "leak", &r);
    let groups = r.report["growth"].as_array().cloned().unwrap_or_default();
    let g = groups
        .iter()
        .find(|g| g["holder"]["path"] == holder)
        .unwrap_or_else(|| panic!("{name}: {holder} not named\n{}", r.stderr));
    let mut lines = lines_of(name, "# LEAK_LINE");
    lines.extend(lines_of(name, "# FORWARD_LINE"));
    let made = &g["created_at"];
    assert!(
        made["file"]
            .as_str()
            .is_some_and(|f| f.ends_with(&format!("examples/frameworks/{name}")))
            && lines.contains(&made["line"].as_u64().unwrap_or(0)),
        "{name}: made at {made}, expected one of lines {lines:?}\n{}",
        r.stderr
    );
    // The leak comes first in the report and in its finding.
    assert_eq!(groups[0]["holder"]["path"], holder, "{name}\n{}", r.stderr);
    assert_eq!(
        r.report["findings"][0]["holder"]["path"], holder,
        "{name}\n{}",
        r.stderr
    );
    assert!(
        r.stderr.contains(&format!("held by {holder}")),
        "{}",
        r.stderr
    );
}

/// The healthy twin: no leak, nothing blamed.
fn check_healthy(name: &str) {
    let r = run(name, "healthy");
    assert_eq!(r.code, Some(0), "{name}: {}", r.stderr);
    assert_ne!(r.report["verdict"], "leak", "{name}\n{}", r.stderr);
    check_steps(name, "healthy", &r);
    let groups = r.report["growth"].as_array().cloned().unwrap_or_default();
    let held: Vec<&Value> = groups.iter().filter(|g| !g["holder"].is_null()).collect();
    assert!(held.is_empty(), "{name}: {held:#?}\n{}", r.stderr);
}

#[test]
fn lightning_training_step_outputs() {
    check_leak("lightning_outputs.py", "Classifier.training_step_outputs");
    check_healthy("lightning_outputs.py");
}

#[test]
fn transformers_trainer_keeping_logits() {
    check_leak("hf_trainer_logits.py", "KeepingTrainer.kept_logits");
    check_healthy("hf_trainer_logits.py");
}

#[test]
fn stable_baselines3_callback_keeping_values() {
    check_leak("sb3_value_callback.py", "ValueLoggerCallback.values");
    check_healthy("sb3_value_callback.py");
}

#[test]
fn single_file_dqn_logging_q_values() {
    check_leak("dqn_q_log.py", "__main__.stats");
    check_healthy("dqn_q_log.py");
}

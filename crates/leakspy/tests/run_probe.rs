//! The in-process probe through the real binary: injected with no code
//! changes, chained to the user's own `sitecustomize`, reporting steps,
//! censuses and holders; and said to be off when Python skips `site`.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn leakspy() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("leakspy")
}

struct Ran {
    trace: leakspy_trace::Trace,
    report: Value,
    stdout: String,
    stderr: String,
    code: Option<i32>,
}

fn run(dir: &Path, extra: &[&str], cmd: &[&str], env: &[(&str, &str)]) -> Ran {
    let trace = dir.join("t.jsonl");
    let report = dir.join("r.json");
    let out = Command::new(leakspy())
        .args(["run", "-q", "--trace"])
        .arg(&trace)
        .arg("--report-json")
        .arg(&report)
        .args(extra)
        .arg("--")
        .args(cmd)
        .envs(env.iter().copied())
        .current_dir(dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    Ran {
        trace: leakspy_trace::read_trace(&trace).unwrap(),
        report: serde_json::from_str(
            &std::fs::read_to_string(&report).unwrap_or_else(|e| panic!("{e}: {stderr}")),
        )
        .unwrap(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr,
        code: out.status.code(),
    }
}

/// A plain-Python loop with `leakspy.step()` (no torch): a module-global
/// list of dicts grows every step, by some 16 KiB (a few MiB a second, on a
/// busy machine too).
const MANUAL_LOOP: &str = r#"
import time
import leakspy

history = []

def main():
    t0 = time.monotonic()
    step = 0
    while time.monotonic() - t0 < 15.0:
        history.append({"step": step, "payload": [float(step)] * 2000})
        step += 1
        leakspy.step()
        time.sleep(0.005)
    print("done", step)

main()
"#;

#[test]
fn manual_steps_census_and_a_global_holder_from_plain_python() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("loop.py"), MANUAL_LOOP).unwrap();
    // At the defaults: the monitor's live fit sees the growth and the
    // probe's burst names its holder.
    let r = run(dir.path(), &[], &["python3", "loop.py"], &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    // The job's output is its own: nothing from the probe in it.
    assert!(r.stdout.starts_with("done "), "{:?}", r.stdout);
    let hello: Vec<_> = r.trace.probes().collect();
    assert_eq!(hello.len(), 1, "{hello:?}");
    assert_eq!(
        hello[0]["pid"].as_u64(),
        r.trace.header.pid.map(u64::from),
        "{hello:?}"
    );
    let manual = r
        .trace
        .steps()
        .filter(|s| s.source == leakspy_trace::StepSource::Manual)
        .count();
    assert!(manual >= 20, "{manual} manual step events\n{}", r.stderr);
    assert!(r.trace.census().count() >= 3, "{}", r.stderr);
    let groups = r.report["growth"].as_array().unwrap();
    let g = groups
        .iter()
        .find(|g| g["holder"]["path"] == "__main__.history")
        .unwrap_or_else(|| panic!("{:#}\n{}", r.report["growth"], r.stderr));
    assert_eq!(g["holder"]["kind"], "global");
    assert!(
        r.stderr.contains("held by __main__.history"),
        "{}",
        r.stderr
    );
}

#[test]
fn the_users_own_sitecustomize_still_runs() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("site");
    std::fs::create_dir(&site).unwrap();
    std::fs::write(
        site.join("sitecustomize.py"),
        "import os\nos.environ['USER_SITE_RAN'] = 'yes'\n",
    )
    .unwrap();
    let r = run(
        dir.path(),
        &[],
        &[
            "python3",
            "-c",
            "import os, sys; print(os.environ.get('USER_SITE_RAN'), 'leakspy' in sys.modules)",
        ],
        &[("PYTHONPATH", site.to_str().unwrap())],
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "yes True", "{}", r.stderr);
    assert_eq!(r.trace.probes().count(), 1);
}

#[test]
fn python_flags_that_skip_site_are_reported_not_fatal() {
    for flag in ["-I", "-E", "-S"] {
        let dir = tempfile::tempdir().unwrap();
        let r = run(
            dir.path(),
            &[],
            &[
                "python3",
                flag,
                "-c",
                "import time; time.sleep(0.5); print('ok')",
            ],
            &[],
        );
        assert_eq!(r.code, Some(0), "{flag}: {}", r.stderr);
        assert_eq!(r.stdout.trim(), "ok");
        assert_eq!(r.trace.probes().count(), 0, "{flag}");
        let notes: Vec<&str> = r.trace.notes().map(|n| n.message.as_str()).collect();
        assert!(
            notes
                .iter()
                .any(|n| n.contains("probe is off") && n.contains(flag)),
            "{flag}: {notes:?}"
        );
    }
}

#[test]
fn no_probe_leaves_the_child_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(
        dir.path(),
        &["--no-probe"],
        &[
            "python3",
            "-c",
            "import os, sys; print(os.environ.get('LEAKSPY_PROBE_SOCKET'), 'leakspy' in sys.modules)",
        ],
        &[],
    );
    assert_eq!(r.stdout.trim(), "None False", "{}", r.stderr);
    assert_eq!(r.trace.probes().count(), 0);
    assert_eq!(r.report["probe"]["censuses"], 0);
}

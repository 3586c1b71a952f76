//! A real OOM kill: leakspy and a leaking Python child run in a memory cgroup
//! limited to 100 MiB; the kernel's OOM killer kills the child, and leakspy
//! says so and exits 137. Needs a writable memory cgroup (root, cgroup v1
//! memory controller or v2 with memory delegated); without one the test says
//! so and does nothing.

mod run_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use run_support::{leakspy, workload};

const LIMIT: u64 = 100 << 20;

/// A fresh memory cgroup limited to LIMIT, and the file to join it.
fn limited_cgroup(name: &str) -> Option<(PathBuf, PathBuf)> {
    let v1 = Path::new("/sys/fs/cgroup/memory");
    if v1.join("memory.limit_in_bytes").exists() {
        let dir = v1.join(name);
        std::fs::create_dir(&dir).ok()?;
        std::fs::write(dir.join("memory.limit_in_bytes"), LIMIT.to_string()).ok()?;
        // Without swap limits the child would swap instead of being killed.
        let _ = std::fs::write(dir.join("memory.memsw.limit_in_bytes"), LIMIT.to_string());
        return Some((dir.clone(), dir.join("cgroup.procs")));
    }
    let v2 = Path::new("/sys/fs/cgroup");
    let controls = std::fs::read_to_string(v2.join("cgroup.subtree_control")).ok()?;
    if !controls.split_whitespace().any(|c| c == "memory") {
        return None;
    }
    let dir = v2.join(name);
    std::fs::create_dir(&dir).ok()?;
    std::fs::write(dir.join("memory.max"), LIMIT.to_string()).ok()?;
    let _ = std::fs::write(dir.join("memory.swap.max"), "0");
    Some((dir.clone(), dir.join("cgroup.procs")))
}

#[test]
fn oom_kill_in_a_limited_cgroup_is_reported_and_exits_137() {
    let name = format!("leakspy-test-oom-{}", std::process::id());
    let Some((cgroup, procs)) = limited_cgroup(&name) else {
        eprintln!("no writable memory cgroup here: OOM test not run");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("oom.jsonl");
    let report = dir.path().join("oom.json");
    // The shell joins the cgroup, then becomes leakspy: leakspy and its child
    // share the limit, and the OOM killer picks the child (by far the biggest).
    let script = format!(
        "echo $$ > {} && exec {} run -q --trace {} --report-json {} -- python3 {} leak 60 30",
        procs.display(),
        leakspy().display(),
        trace.display(),
        report.display(),
        workload().display()
    );
    let out = Command::new("sh").arg("-c").arg(&script).output().unwrap();
    let _ = std::fs::remove_dir(&cgroup);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(137), "{stderr}");
    let t = leakspy_trace::read_trace(&trace).unwrap();
    let exit = t.exit().unwrap();
    assert_eq!(
        (exit.signal, exit.status, exit.oom_killed),
        (Some(9), 137, true)
    );
    assert!(
        t.notes().any(|n| n
            .message
            .starts_with("killed by SIGKILL from the OOM killer")),
        "{stderr}"
    );
    // The limit was seen, so the time to OOM had something to work with.
    assert!(t
        .samples()
        .any(|s| s.cgroup.and_then(|c| c.limit) == Some(LIMIT)));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["exit"]["oom_killed"], true, "{r}");
    assert_eq!(r["verdict"], "leak", "{stderr}");
}

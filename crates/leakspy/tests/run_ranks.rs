//! Ranks of a distributed job: a real two-node torchrun (gloo on CPU, both
//! "nodes" on this machine), one `leakspy run` per node as on a cluster, where
//! only rank 0 leaks. Each trace names its rank; `leakspy report A B` puts
//! the ranks side by side and says which one leaks and who holds it.

mod run_support;

use run_support::{repo_root, torch_python};

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn node(dir: &Path, node_rank: u32, port: u16) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("leakspy"));
    cmd.args(["run", "--quiet", "--probe-budget", "0.2", "--trace"])
        .arg(dir.join(format!("node{node_rank}.jsonl")))
        .arg("--report-json")
        .arg(dir.join(format!("node{node_rank}.json")))
        .arg("--")
        .arg(torch_python())
        .args([
            "-m",
            "torch.distributed.run",
            "--nnodes",
            "2",
            "--nproc_per_node",
            "1",
            "--node_rank",
        ])
        .arg(node_rank.to_string())
        .args(["--master_addr", "127.0.0.1", "--master_port"])
        .arg(port.to_string())
        .arg(repo_root().join("examples/ddp/rank0_metrics.py"))
        .args(["--seconds", "12"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

#[test]
fn a_leak_in_one_rank_is_shown_beside_the_healthy_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let n0 = node(dir.path(), 0, port).spawn().unwrap();
    let n1 = node(dir.path(), 1, port).spawn().unwrap();
    let o0 = n0.wait_with_output().unwrap();
    let o1 = n1.wait_with_output().unwrap();
    let err = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o0.status.code(), Some(0), "node 0:\n{}", err(&o0));
    assert_eq!(o1.status.code(), Some(0), "node 1:\n{}", err(&o1));

    // Each node's own report has its rank's row.
    for (k, o) in [(0, &o0), (1, &o1)] {
        let text = std::fs::read_to_string(dir.path().join(format!("node{k}.json"))).unwrap();
        let report: Value = serde_json::from_str(&text).unwrap();
        let ranks = report["ranks"].as_array().expect("ranks");
        assert_eq!(ranks.len(), 1, "node {k}: {ranks:?}\n{}", err(o));
        assert_eq!(ranks[0]["rank"], k);
        assert_eq!(ranks[0]["world_size"], 2);
    }

    let out = Command::new(assert_cmd::cargo::cargo_bin("leakspy"))
        .args(["report", "--format", "json", "--fail-on-leak"])
        .arg(dir.path().join("node0.jsonl"))
        .arg(dir.path().join("node1.jsonl"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "one trace leaks");
    let both: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ranks = both["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 2, "{ranks:?}");
    assert_eq!(ranks[0]["rank"], 0);
    assert_eq!(ranks[1]["rank"], 1);
    assert_eq!(ranks[0]["verdict"], "leak", "{:#}", ranks[0]);
    assert_ne!(ranks[1]["verdict"], "leak", "{:#}", ranks[1]);
    let grows = ranks[0]["grows"].as_str().unwrap_or_default();
    assert!(grows.contains("ProgressLog.losses"), "{grows}");
    assert!(ranks[0]["trace"].as_str().unwrap().ends_with("node0.jsonl"));
    assert_eq!(both["traces"].as_array().unwrap().len(), 2);

    let text = Command::new(assert_cmd::cargo::cargo_bin("leakspy"))
        .arg("report")
        .arg(dir.path().join("node0.jsonl"))
        .arg(dir.path().join("node1.jsonl"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("ranks side by side:"), "{text}");
    assert!(text.contains("only rank 0 of 2 leaks"), "{text}");
}

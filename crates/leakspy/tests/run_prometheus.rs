//! `leakspy run --prometheus`: a real job scraped over HTTP while it runs; the
//! exposition is checked by the official Python client's OpenMetrics parser
//! (prometheus_client), not by our own reading of the format.

mod run_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use run_support::{kill, leakspy, torch_python, workload};

/// One HTTP/1.1 request; returns (status line, content type, body).
fn get(addr: &str, path: &str) -> (String, String, String) {
    let mut s = TcpStream::connect(addr).expect("the metrics server accepts");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/openmetrics-text\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("a full response");
    let status = head.lines().next().unwrap_or_default().to_string();
    let ctype = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Type: "))
        .unwrap_or_default()
        .to_string();
    (status, ctype, body.to_string())
}

#[test]
fn a_running_job_is_scraped_as_openmetrics() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(leakspy())
        .args([
            "run",
            "--prometheus",
            "127.0.0.1:0",
            "--status-interval",
            "1000",
        ])
        .args(["--step-regex", r"^step (\d+) ", "--trace"])
        .arg(dir.path().join("t.jsonl"))
        .arg("--")
        .arg("python3")
        .arg(workload())
        // Long enough that a loaded machine cannot end it before the live
        // fit is sure; it is stopped (Ctrl-C) once the scrape has shown it.
        .args(["leak", "90", "20"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut addr = None;
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 {
        if let Some(rest) = line.trim().strip_prefix("leakspy: metrics at http://") {
            addr = rest.strip_suffix("/metrics").map(str::to_string);
            break;
        }
        line.clear();
    }
    let addr = addr.expect("leakspy says where the metrics are");
    // Drain the rest of stderr so the job never blocks on a full pipe.
    let drain = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
        rest
    });

    // Scrape until the job has stepped and grown (bounded wait).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut body = String::new();
    while Instant::now() < deadline {
        let (status, ctype, b) = get(&addr, "/metrics");
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
        body = b;
        // The live growth needs ten seconds of per-second minima.
        let suspected = body
            .lines()
            .any(|l| l.starts_with("leakspy_leak_suspected{") && l.ends_with(" 1"));
        if suspected && body.contains("leakspy_growth_bytes_per_step{") {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let (status, _, _) = get(&addr, "/nope");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    kill(child.id(), libc::SIGINT);
    let status = child.wait().unwrap();
    let rest = drain.join().unwrap();
    // Interrupted as a person would: Python's KeyboardInterrupt, 128 + 2.
    assert_eq!(status.code(), Some(130), "{rest}");

    assert!(body.ends_with("# EOF\n"), "{body}");
    // The official parser accepts it, and the figures are the job's.
    let check = r#"
import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
fams = {f.name: f for f in text_string_to_metric_families(sys.stdin.read())}
rss = fams["leakspy_resident_bytes"].samples[0].value
procs = fams["leakspy_process_resident_bytes"].samples
steps = fams["leakspy_steps"].samples[0].value
per_step = fams["leakspy_growth_bytes_per_step"].samples[0].value
suspected = fams["leakspy_leak_suspected"].samples[0].value
verdict = [s.labels["leakspy_verdict"] for s in fams["leakspy_verdict"].samples if s.value == 1]
assert rss > 10 * 2**20, rss
assert procs and all(s.labels["name"] for s in procs), procs
assert steps >= 10, steps
assert per_step > 100 * 2**10, per_step  # 20 MiB/s at 20 steps/s: ~1 MiB/step
assert suspected == 1
assert verdict == ["running"], verdict
print("ok", fams["leakspy_run"].samples[0].labels["command"])
"#;
    let mut py = Command::new(torch_python())
        .args(["-c", check])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    py.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
    let out = py.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}\n{body}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("workload.py leak 90 20"));
}

#[test]
fn a_port_in_use_is_an_error_before_the_job_starts() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let out = Command::new(leakspy())
        .args(["run", "-q", "--prometheus", &addr, "--trace"])
        .arg(dir.path().join("t.jsonl"))
        .args(["--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("--prometheus {addr}: cannot listen")),
        "{err}"
    );
    assert!(!marker.exists(), "the job must not start unwatched");

    let out = Command::new(leakspy())
        .args(["run", "-q", "--prometheus", "not an address", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not an address (want HOST:PORT or PORT)")
    );
}

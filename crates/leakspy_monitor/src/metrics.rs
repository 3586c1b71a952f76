//! OpenMetrics over HTTP (`--prometheus ADDR`): the Prometheus a cluster
//! already runs scrapes every job's memory, growth per step and verdict.
//!
//! A listener only when asked, on loopback unless told otherwise. One small
//! thread answers scrapes from a text rendered at each sample, so a scrape
//! never waits for the monitor and the monitor never waits for a scraper.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::MonitorError;
use crate::live::LiveStatus;

/// The address `--prometheus` listens on when given no value.
pub const DEFAULT_METRICS_ADDR: &str = "127.0.0.1:9464";
/// A scraper that sends nothing for this long is dropped: one slow client
/// must not hold the only thread.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest request head read; a scrape's is a few hundred bytes.
const MAX_REQUEST: usize = 8 * 1024;

/// What labels every series of this job: enough to tell jobs apart in a
/// cluster's Prometheus.
#[derive(Debug, Clone, Default)]
pub struct MetricsLabels {
    pub command: String,
    pub host: String,
    pub version: String,
}

pub struct MetricsServer {
    addr: SocketAddr,
    body: Arc<Mutex<String>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    labels: MetricsLabels,
}

/// `9464` means loopback port 9464; `host:port` as given.
pub fn parse_metrics_addr(text: &str) -> Result<SocketAddr, MonitorError> {
    let bad = |why: String| MonitorError::Metrics {
        addr: text.to_string(),
        message: why,
    };
    let spec = if text.bytes().all(|b| b.is_ascii_digit()) && !text.is_empty() {
        format!("127.0.0.1:{text}")
    } else {
        text.to_string()
    };
    spec.to_socket_addrs()
        .map_err(|e| bad(format!("not an address (want HOST:PORT or PORT): {e}")))?
        .next()
        .ok_or_else(|| bad("the name resolves to no address".to_string()))
}

impl MetricsServer {
    /// Binds now, so a port in use is an error before the job starts.
    pub fn bind(addr: SocketAddr, labels: MetricsLabels) -> Result<Self, MonitorError> {
        let listener = TcpListener::bind(addr).map_err(|e| MonitorError::Metrics {
            addr: addr.to_string(),
            message: format!("cannot listen: {e}"),
        })?;
        let addr = listener.local_addr().unwrap_or(addr);
        // Non-blocking accept: the thread checks `stop` between polls rather
        // than needing a connection to wake it.
        listener
            .set_nonblocking(true)
            .map_err(|e| MonitorError::Metrics {
                addr: addr.to_string(),
                message: format!("cannot set up the listener: {e}"),
            })?;
        let body = Arc::new(Mutex::new(String::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let body = Arc::clone(&body);
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("leakspy-metrics".into())
                .spawn(move || serve(&listener, &body, &stop))
                .map_err(|e| MonitorError::Metrics {
                    addr: addr.to_string(),
                    message: format!("cannot start the server thread: {e}"),
                })?
        };
        let server = MetricsServer {
            addr,
            body,
            stop,
            thread: Some(thread),
            labels,
        };
        server.update(&LiveStatus::default(), None);
        Ok(server)
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Renders the metrics of the latest status. `verdict` is the final one
    /// once the run is diagnosed (`leak`, `no-leak`, `inconclusive`).
    pub fn update(&self, st: &LiveStatus, verdict: Option<&str>) {
        let text = render(st, &self.labels, verdict);
        if let Ok(mut b) = self.body.lock() {
            *b = text;
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(listener: &TcpListener, body: &Mutex<String>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                // A client's failure is its own; the server goes on.
                let _ = answer(stream, body);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn answer(mut stream: TcpStream, body: &Mutex<String>) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_REQUEST {
            return respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "text/plain",
                "",
            );
        }
    }
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            let text = body.lock().map(|b| b.clone()).unwrap_or_default();
            let text = if method == "HEAD" {
                String::new()
            } else {
                text
            };
            respond(
                &mut stream,
                "200 OK",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                &text,
            )
        }
        ("GET" | "HEAD", "/") => respond(
            &mut stream,
            "200 OK",
            "text/plain; charset=utf-8",
            "leakspy: metrics at /metrics\n",
        ),
        ("GET" | "HEAD", _) => respond(&mut stream, "404 Not Found", "text/plain", "not found\n"),
        _ => respond(
            &mut stream,
            "405 Method Not Allowed",
            "text/plain",
            "GET only\n",
        ),
    }
}

fn respond(stream: &mut TcpStream, status: &str, ctype: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()
}

/// A label value as OpenMetrics wants it: backslash, quote and newline escaped.
fn label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// The exposition text of one status (pure, for tests).
pub fn render(st: &LiveStatus, labels: &MetricsLabels, verdict: Option<&str>) -> String {
    let mut o = String::with_capacity(2048);
    let job = format!(
        "command=\"{}\",host=\"{}\"",
        label(&labels.command),
        label(&labels.host)
    );
    let gauge = |o: &mut String, name: &str, help: &str, unit: Option<&str>, v: Option<f64>| {
        let _ = writeln!(o, "# TYPE {name} gauge");
        if let Some(u) = unit {
            let _ = writeln!(o, "# UNIT {name} {u}");
        }
        let _ = writeln!(o, "# HELP {name} {help}");
        if let Some(v) = v.filter(|v| v.is_finite()) {
            let _ = writeln!(o, "{name}{{{job}}} {v}");
        }
    };
    let _ = writeln!(o, "# TYPE leakspy_run info");
    let _ = writeln!(o, "# HELP leakspy_run The job leakspy watches.");
    let _ = writeln!(
        o,
        "leakspy_run_info{{{job},version=\"{}\"}} 1",
        label(&labels.version)
    );
    gauge(
        &mut o,
        "leakspy_elapsed_seconds",
        "Seconds since the job started.",
        Some("seconds"),
        Some(st.elapsed),
    );
    gauge(
        &mut o,
        "leakspy_resident_bytes",
        "Resident memory (RSS) of the whole process tree.",
        Some("bytes"),
        Some(st.rss as f64),
    );
    gauge(
        &mut o,
        "leakspy_anonymous_bytes",
        "Anonymous memory (heap) of the whole process tree.",
        Some("bytes"),
        Some(st.anon as f64),
    );
    let _ = writeln!(o, "# TYPE leakspy_process_resident_bytes gauge");
    let _ = writeln!(o, "# UNIT leakspy_process_resident_bytes bytes");
    let _ = writeln!(
        o,
        "# HELP leakspy_process_resident_bytes Resident memory of each process of the tree."
    );
    for p in &st.processes {
        let rank = st
            .ranks
            .iter()
            .find(|&&(pid, _)| pid == p.pid)
            .map(|&(_, r)| r.to_string())
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "leakspy_process_resident_bytes{{{job},pid=\"{}\",name=\"{}\",rank=\"{}\"}} {}",
            p.pid,
            label(&p.name),
            rank,
            p.rss
        );
    }
    let _ = writeln!(o, "# TYPE leakspy_steps counter");
    let _ = writeln!(
        o,
        "# HELP leakspy_steps Training steps counted (optimizer steps, leakspy.step(), --step-regex)."
    );
    let _ = writeln!(o, "leakspy_steps_total{{{job}}} {}", st.steps);
    gauge(
        &mut o,
        "leakspy_steps_per_second",
        "Steps per second over the last minute.",
        None,
        st.steps_per_s,
    );
    gauge(
        &mut o,
        "leakspy_growth_bytes_per_second",
        "Growth of the tree's resident memory (robust slope of per-second minima over the last two minutes).",
        None,
        st.growth_per_s,
    );
    let per_step = match (st.growth_per_s, st.steps_per_s) {
        (Some(g), Some(r)) if r > 0.0 => Some(g / r),
        _ => None,
    };
    gauge(
        &mut o,
        "leakspy_growth_bytes_per_step",
        "Growth of the tree's resident memory per training step.",
        None,
        per_step,
    );
    gauge(
        &mut o,
        "leakspy_headroom_bytes",
        "Memory left before the tighter of MemAvailable and the cgroup limit.",
        Some("bytes"),
        st.headroom.map(|h| h as f64),
    );
    gauge(
        &mut o,
        "leakspy_time_to_oom_seconds",
        "Seconds until the headroom is used up at the current growth (only while growing).",
        Some("seconds"),
        st.time_to_oom_s,
    );
    gauge(
        &mut o,
        "leakspy_gpu_used_bytes",
        "GPU memory used by the tree, summed over devices (when NVML is present).",
        Some("bytes"),
        st.gpu_used.map(|g| g as f64),
    );
    gauge(
        &mut o,
        "leakspy_leak_suspected",
        "1 while the live fit (the report's analysis of the run so far) finds memory growing with the work done as a leak does; the verdict comes at the end.",
        None,
        Some(if st.suspected.is_some() { 1.0 } else { 0.0 }),
    );
    let _ = writeln!(o, "# TYPE leakspy_verdict stateset");
    let _ = writeln!(
        o,
        "# HELP leakspy_verdict The diagnosis: running until the job ends, then leak, no-leak or inconclusive."
    );
    let now = verdict.unwrap_or("running");
    for v in ["running", "leak", "no-leak", "inconclusive"] {
        let _ = writeln!(
            o,
            "leakspy_verdict{{{job},leakspy_verdict=\"{v}\"}} {}",
            u8::from(v == now)
        );
    }
    o.push_str("# EOF\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use leakspy_trace::ProcSample;

    fn status() -> LiveStatus {
        LiveStatus {
            elapsed: 42.5,
            rss: 3 << 30,
            anon: 2 << 30,
            procs: 2,
            steps: 1200,
            last_step: Some(1199),
            tree_steps: 1199,
            steps_per_s: Some(20.0),
            growth_per_s: Some(2.0 * 1024.0 * 1024.0),
            headroom: Some(10 << 30),
            time_to_oom_s: Some(5120.0),
            gpu_used: None,
            processes: vec![
                ProcSample {
                    pid: 100,
                    ppid: 1,
                    name: "python".into(),
                    rss: 2 << 30,
                    anon: 0,
                    swap: 0,
                    pss: None,
                    uss: None,
                    pss_file: None,
                    rss_file: None,
                    cpu_s: None,
                },
                ProcSample {
                    pid: 101,
                    ppid: 100,
                    name: "pt_data_worker\"\\\n".into(),
                    rss: 1 << 30,
                    anon: 0,
                    swap: 0,
                    pss: None,
                    uss: None,
                    pss_file: None,
                    rss_file: None,
                    cpu_s: None,
                },
            ],
            ranks: vec![(100, 0)],
            suspected: Some(crate::LiveLeak {
                slope: 2.0 * 1024.0 * 1024.0 / 20.0,
                per: "step",
                since: 30.0,
                settled: true,
            }),
            holder: None,
            filling: None,
        }
    }

    fn labels() -> MetricsLabels {
        MetricsLabels {
            command: "python train.py --name \"x\"".into(),
            host: "node-1".into(),
            version: "0.1.0".into(),
        }
    }

    #[test]
    fn exposition_of_a_growing_job() {
        insta::assert_snapshot!(render(&status(), &labels(), None));
    }

    #[test]
    fn final_verdict_replaces_running() {
        let text = render(&status(), &labels(), Some("leak"));
        assert!(text.contains("leakspy_verdict=\"leak\"} 1\n"));
        assert!(text.contains("leakspy_verdict=\"running\"} 0\n"));
    }

    #[test]
    fn unknown_figures_are_left_out_not_zero() {
        let text = render(&LiveStatus::default(), &labels(), None);
        assert!(!text.contains("leakspy_growth_bytes_per_second{"));
        assert!(!text.contains("leakspy_gpu_used_bytes{"));
        assert!(text.contains("leakspy_leak_suspected{"));
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn addresses() {
        assert_eq!(
            parse_metrics_addr("9464").unwrap().to_string(),
            "127.0.0.1:9464"
        );
        assert_eq!(
            parse_metrics_addr("0.0.0.0:9000").unwrap().to_string(),
            "0.0.0.0:9000"
        );
        assert!(parse_metrics_addr("nonsense").is_err());
        assert!(parse_metrics_addr("").is_err());
    }
}

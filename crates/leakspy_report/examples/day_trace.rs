//! Times `diagnose` and the renderers on a 24-hour trace held in memory:
//! 864 000 samples at 10 Hz of two processes, 432 000 step events.
//! `cargo run --release -p leakspy_report --example day_trace`

use std::collections::BTreeMap;
use std::time::Instant;

use leakspy_report::{diagnose, render_html, render_json, render_text, DiagnoseOptions};
use leakspy_trace::{Event, Header, MemTotals, ProcSample, Sample, Step, StepSource, Trace};

fn main() {
    let mib = 1024 * 1024;
    let mut events = Vec::new();
    for i in 0..864_000u64 {
        let t = i as f64 / 10.0;
        let main = 2048 * mib + i * 512 + (i % 13) * 8 * mib;
        let worker = 300 * mib + (i % 7) * mib;
        let procs = vec![
            ProcSample {
                pid: 10,
                ppid: 1,
                name: "python".into(),
                rss: main,
                anon: main - 100 * mib,
                swap: 0,
                pss: None,
                uss: None,
                pss_file: None,
                rss_file: None,
                cpu_s: None,
            },
            ProcSample {
                pid: 11,
                ppid: 10,
                name: "pt_data_worker".into(),
                rss: worker,
                anon: worker / 2,
                swap: 0,
                pss: None,
                uss: None,
                pss_file: None,
                rss_file: None,
                cpu_s: None,
            },
        ];
        let total = MemTotals {
            rss: main + worker,
            anon: main - 100 * mib + worker / 2,
            swap: 0,
            pss: None,
            uss: None,
            pss_file: None,
            rss_file: None,
        };
        events.push(Event::Sample(Sample {
            t,
            procs,
            total,
            mem_available: Some(64 * 1024 * mib),
            cgroup: None,
        }));
        if i % 2 == 0 {
            events.push(Event::Step(Step {
                t: t + 0.01,
                step: i / 2 + 1,
                source: StepSource::Optimizer,
                pid: Some(10),
            }));
        }
    }
    let trace = Trace {
        header: Header::new(vec!["python".into(), "train.py".into()], Some(10), 0.0, 0.1),
        events,
        warnings: Vec::new(),
        unknown_kinds: BTreeMap::new(),
        downsampled: None,
    };
    let start = Instant::now();
    let d = diagnose(&trace, &DiagnoseOptions::default());
    println!(
        "diagnose: {:.0} ms, verdict {}",
        start.elapsed().as_secs_f64() * 1e3,
        d.verdict.as_str()
    );
    let start = Instant::now();
    let text = render_text(&d, &trace);
    let json = render_json(&d);
    println!(
        "text + json: {:.1} ms ({} + {} bytes)",
        start.elapsed().as_secs_f64() * 1e3,
        text.len(),
        json.len()
    );
    let start = Instant::now();
    let html = render_html(&d, &trace);
    println!(
        "html: {:.0} ms ({} bytes)",
        start.elapsed().as_secs_f64() * 1e3,
        html.len()
    );
    print!("{text}");
}

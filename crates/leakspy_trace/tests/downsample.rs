//! Long traces are thinned while reading so that a 24-hour run fits in memory.

use leakspy_trace::{
    parse_trace, read_trace_from_with, Event, Header, MemTotals, ReadOptions, Sample, Step,
    StepSource,
};

fn long_trace(samples: usize, steps_per_sample: usize) -> String {
    let mut out = serde_json::to_string(&Event::Header(Header::new(
        vec!["x".into()],
        Some(1),
        0.0,
        0.1,
    )))
    .unwrap();
    out.push('\n');
    let mut step = 0u64;
    for i in 0..samples {
        let t = i as f64 * 0.1;
        // A slow ramp with a sawtooth, a dip at i = 5000 and a spike at 7000.
        let mut rss = 1_000_000 + (i as u64) * 100 + (i as u64 % 10) * 50_000;
        if i == 5000 {
            rss = 10;
        }
        if i == 7000 {
            rss = 1 << 40;
        }
        let pss = (i % 50 == 0).then_some(rss / 2);
        let s = Event::Sample(Sample {
            t,
            procs: vec![],
            total: MemTotals {
                rss,
                anon: rss / 2,
                swap: 0,
                pss,
                uss: pss,
                ..Default::default()
            },
            mem_available: Some(1 << 33),
            cgroup: None,
        });
        out.push_str(&serde_json::to_string(&s).unwrap());
        out.push('\n');
        for _ in 0..steps_per_sample {
            let e = Event::Step(Step {
                t,
                step,
                source: StepSource::Manual,
                pid: None,
            });
            step += 1;
            out.push_str(&serde_json::to_string(&e).unwrap());
            out.push('\n');
        }
    }
    out.push_str(
        r#"{"kind":"exit","t":1000.0,"code":0,"signal":null,"status":0,"oom_killed":false}"#,
    );
    out.push('\n');
    out
}

#[test]
fn long_traces_keep_extremes_order_and_counts_within_limits() {
    let text = long_trace(10_000, 2);
    let opts = ReadOptions {
        max_samples: 300,
        max_steps: 200,
        max_gpu: 10,
        max_census: 10,
    };
    let t = read_trace_from_with(text.as_bytes(), "long", &opts).unwrap();
    let d = t.downsampled.expect("thinned");
    assert_eq!((d.samples_in_file, d.steps_in_file), (10_000, 20_000));
    assert_eq!((t.sample_count(), t.step_count()), (10_000, 20_000));

    let kept: Vec<&Sample> = t.samples().collect();
    assert!(kept.len() <= 300 && kept.len() >= 100, "{}", kept.len());
    // The dip and the spike survive, and times stay in order.
    assert!(kept.iter().any(|s| s.total.rss == 10));
    assert!(kept.iter().any(|s| s.total.rss == 1 << 40));
    assert!(kept.windows(2).all(|w| w[0].t < w[1].t));
    // Minima of the sawtooth are what is kept, not its tops: trends fit the same.
    let first = kept[0];
    assert_eq!(first.t, 0.0);
    assert!(kept.iter().filter(|s| s.total.pss.is_some()).count() > 10);

    let steps: Vec<u64> = t.steps().map(|s| s.step).collect();
    assert!(steps.len() <= 201, "{}", steps.len());
    assert_eq!(steps.first(), Some(&0));
    assert_eq!(steps.last(), Some(&19_999));
    assert!(steps.windows(2).all(|w| w[0] < w[1]));

    // Other events are all kept, in place.
    assert_eq!(t.exit().unwrap().t, 1000.0);
    assert!(matches!(t.events.last(), Some(Event::Exit(_))));
}

#[test]
fn short_traces_are_read_whole() {
    let text = long_trace(500, 1);
    let t = parse_trace(&text).unwrap();
    assert_eq!(t.downsampled, None);
    assert_eq!(t.samples().count(), 500);
    assert_eq!(t.steps().count(), 500);
}

#[test]
fn unlimited_reads_everything() {
    let text = long_trace(2_000, 1);
    let t = read_trace_from_with(text.as_bytes(), "x", &ReadOptions::unlimited()).unwrap();
    assert_eq!(t.downsampled, None);
    assert_eq!(t.samples().count(), 2_000);
}

//! Times `analyze` on a 24-hour trace at 10 Hz (864 000 samples), the size
//! that must analyse in well under a second. Run with
//! `cargo run --release -p leakspy_stats --example long_trace`.

use std::time::Instant;

use leakspy_stats::{analyze, theil_sen, VerdictOptions};

fn main() {
    let n = 864_000;
    let mib = 1024.0 * 1024.0;
    let xs: Vec<f64> = (0..n).map(|i| f64::from(i) / 10.0).collect();
    let leak: Vec<f64> = (0..n)
        .map(|i| 2048.0 * mib + f64::from(i) * 1024.0 + f64::from(i % 13) * 8.0 * mib)
        .collect();
    let flat: Vec<f64> = (0..n)
        .map(|i| 2048.0 * mib + f64::from(i % 13) * 8.0 * mib)
        .collect();
    let opts = VerdictOptions::default();
    for (name, ys) in [("leak", &leak), ("flat", &flat)] {
        let start = Instant::now();
        let a = analyze(&xs, ys, &opts);
        let took = start.elapsed();
        println!(
            "analyze {name}: {n} samples -> {} minima, verdict {}, {:.1} ms",
            a.n_fit,
            a.verdict.as_str(),
            took.as_secs_f64() * 1e3
        );
    }
    // The raw estimator on a long input uses sampled pairs.
    let start = Instant::now();
    let t = theil_sen(&xs[..100_000], &leak[..100_000], 0.95).unwrap();
    println!(
        "theil_sen on 100000 raw points: slope {:.1} B/s, {:.1} ms",
        t.slope,
        start.elapsed().as_secs_f64() * 1e3
    );
}

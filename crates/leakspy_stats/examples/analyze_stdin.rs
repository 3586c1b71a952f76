//! Debugging aid: analyses "x y" pairs read from standard input (one pair a
//! line, y in bytes) and prints the analysis with its window minima.
//! `cargo run -p leakspy_stats --example analyze_stdin [step|s] < series.txt`

use std::io::BufRead;

use leakspy_stats::{analyze, VerdictOptions};

fn main() {
    let unit = std::env::args().nth(1).unwrap_or_else(|| "s".to_string());
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    for line in std::io::stdin().lock().lines().map_while(Result::ok) {
        let mut it = line
            .split_whitespace()
            .filter_map(|v| v.parse::<f64>().ok());
        if let (Some(x), Some(y)) = (it.next(), it.next()) {
            xs.push(x);
            ys.push(y);
        }
    }
    let opts = VerdictOptions {
        x_unit: unit,
        ..VerdictOptions::default()
    };
    let a = analyze(&xs, &ys, &opts);
    println!("{} / {}", a.verdict.as_str(), a.shape_text);
    for e in &a.evidence {
        println!("  {e}");
    }
    println!("flat_since {:?}", a.flat_since);
    for (x, y) in a.minima.xs.iter().zip(&a.minima.ys) {
        println!("  {x:10.2} {:8.2} MiB", y / 1048576.0);
    }
}

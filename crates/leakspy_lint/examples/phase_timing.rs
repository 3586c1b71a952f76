//! Splits `check` time into parsing and analysis, single-threaded, over a folder of sources:
//! `cargo run --release -p leakspy_lint --example phase_timing -- DIR`.

use std::time::{Duration, Instant};

fn walk(dir: &std::path::Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|e| e == "py") {
            if let Ok(s) = std::fs::read_to_string(&p) {
                out.push(s);
            }
        }
    }
}

fn main() {
    let dir = std::env::args().nth(1).expect("usage: phase_timing DIR");
    let mut sources = Vec::new();
    walk(std::path::Path::new(&dir), &mut sources);
    let rules = leakspy_lint::RuleSet::default();
    let mut parse = Duration::ZERO;
    let t0 = Instant::now();
    for s in &sources {
        let t = Instant::now();
        let _ = ruff_python_parser::parse_module(s);
        parse += t.elapsed();
    }
    let parse_total = t0.elapsed();
    let t1 = Instant::now();
    let mut n = 0;
    for s in &sources {
        n += leakspy_lint::check_source(s, &rules).diagnostics.len();
    }
    let check = t1.elapsed();
    println!(
        "{} files: parse {:.2}s ({:.2}s), full check {:.2}s, analysis ≈ {:.2}s, {} findings",
        sources.len(),
        parse.as_secs_f64(),
        parse_total.as_secs_f64(),
        check.as_secs_f64(),
        (check - parse).as_secs_f64(),
        n
    );
}

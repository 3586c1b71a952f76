//! Splits `check` time into parsing and analysis, single-threaded, over a folder of sources, and
//! lists the files whose analysis costs most next to their parse:
//! `cargo run --release -p leakspy_lint --example phase_timing -- DIR`.

use std::time::Instant;

fn walk(dir: &std::path::Path, out: &mut Vec<(std::path::PathBuf, String)>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|e| e == "py") {
            if let Ok(s) = std::fs::read_to_string(&p) {
                out.push((p, s));
            }
        }
    }
}

fn main() {
    let dir = std::env::args().nth(1).expect("usage: phase_timing DIR");
    let mut sources = Vec::new();
    walk(std::path::Path::new(&dir), &mut sources);
    let rules = leakspy_lint::RuleSet::default();
    let (mut parse_total, mut check_total, mut findings) = (0.0, 0.0, 0);
    let mut rows = Vec::new();
    for (path, s) in &sources {
        let t = Instant::now();
        let _ = ruff_python_parser::parse_module(s);
        let parse = t.elapsed().as_secs_f64();
        let t = Instant::now();
        findings += leakspy_lint::check_source(s, &rules).diagnostics.len();
        let check = t.elapsed().as_secs_f64();
        parse_total += parse;
        check_total += check;
        rows.push((
            check - parse,
            parse,
            s.lines().count(),
            path.display().to_string(),
        ));
    }
    println!(
        "{} files: parse {parse_total:.2}s, full check {check_total:.2}s, analysis ≈ {:.2}s, {findings} findings",
        sources.len(),
        check_total - parse_total,
    );
    rows.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (analysis, parse, lines, path) in rows.iter().take(15) {
        println!(
            "{:7.1} ms analysis {:6.1} ms parse ({:4.1}x) {lines:6} lines  {path}",
            analysis * 1e3,
            parse * 1e3,
            analysis / parse
        );
    }
}

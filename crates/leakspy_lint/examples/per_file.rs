//! Per-file `check` time over a folder, slowest first, to find files where the analysis costs
//! more than its size suggests: `cargo run --release -p leakspy_lint --example per_file -- DIR`.

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
    let dir = std::env::args().nth(1).expect("usage: per_file DIR");
    let mut sources = Vec::new();
    walk(std::path::Path::new(&dir), &mut sources);
    let rules = leakspy_lint::RuleSet::default();
    let mut rows = Vec::new();
    for (path, s) in &sources {
        let t = Instant::now();
        let _ = ruff_python_parser::parse_module(s);
        let parse = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let _ = leakspy_lint::check_source(s, &rules);
        let check = t.elapsed().as_secs_f64();
        rows.push((
            check - parse,
            parse,
            s.lines().count(),
            path.display().to_string(),
        ));
    }
    rows.sort_by(|a, b| b.0.total_cmp(&a.0));
    let total: f64 = rows.iter().map(|r| r.0).sum();
    println!("analysis total {total:.3}s");
    for (a, p, lines, path) in rows.iter().take(15) {
        println!(
            "{:7.1} ms analysis {:6.1} ms parse {lines:6} lines  ratio {:4.1}  {path}",
            a * 1e3,
            p * 1e3,
            a / p
        );
    }
}

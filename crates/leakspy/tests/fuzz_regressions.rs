//! The fuzz targets' bodies (fuzz/fuzz_targets) on stable, over every seed
//! (see fuzz/README.md) and every input that once crashed (fuzz/regressions):
//! a crash found by `cargo +nightly fuzz` is saved there and stays tested.

use std::path::{Path, PathBuf};

/// The seeds (the files the fuzzers start from: the rules' fixtures and the
/// examples, the recorded traces) and the saved crashes of one target.
fn inputs(target: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let seeds: &[(&str, &str)] = match target {
        "check_source" => &[
            ("crates/leakspy_lint/resources/test/fixtures", "py"),
            ("examples", "py"),
            ("examples/zoo", "py"),
        ],
        _ => &[("crates/leakspy_report/tests/fixtures", "jsonl")],
    };
    let mut out = Vec::new();
    let mut add = |dir: PathBuf, ext: Option<&str>| {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let wanted = ext.is_none_or(|x| p.extension().is_some_and(|e| e == x));
            if p.is_file() && wanted && p.file_name().is_none_or(|n| n != ".keep") {
                out.push(p);
            }
        }
    };
    for (dir, ext) in seeds {
        add(root.join(dir), Some(ext));
    }
    add(root.join("fuzz/regressions").join(target), None);
    out.sort();
    out
}

include!("../../../fuzz/bodies.rs");

#[test]
fn check_source_seeds_and_regressions() {
    let all = inputs("check_source");
    assert!(all.len() >= 10, "seeds missing: {all:?}");
    for p in all {
        let data = std::fs::read(&p).unwrap();
        let run = std::panic::catch_unwind(|| check_source_body(&data));
        assert!(run.is_ok(), "{} panics", p.display());
        // Every prefix too: what an editor sees while the file is typed.
        for cut in (0..data.len()).step_by((data.len() / 80).max(97)) {
            let run = std::panic::catch_unwind(|| check_source_body(&data[..cut]));
            assert!(run.is_ok(), "{} cut at byte {cut} panics", p.display());
        }
    }
}

#[test]
fn trace_reader_seeds_and_regressions() {
    let all = inputs("trace_reader");
    assert!(all.len() >= 3, "seeds missing: {all:?}");
    for p in all {
        let data = std::fs::read(&p).unwrap();
        for cut in (0..=data.len()).step_by((data.len() / 60).max(211)) {
            let run = std::panic::catch_unwind(|| trace_reader_body(&data[..cut]));
            assert!(run.is_ok(), "{} cut at byte {cut} panics", p.display());
        }
    }
}

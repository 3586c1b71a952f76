//! A hash of the analysis's own sources, for the summary cache's key: summaries written by
//! one analysis are never read by another, even when the package version is the same (a
//! build from a newer checkout, a development build).

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let src = manifest.join("src");
    println!("cargo:rerun-if-changed={}", src.display());
    let mut files = Vec::new();
    collect(&src, &mut files);
    files.sort();
    // SipHash with fixed keys: the same sources give the same hash in every build.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        f.strip_prefix(&src).unwrap_or(f).hash(&mut h);
        std::fs::read(f).unwrap_or_default().hash(&mut h);
    }
    println!("cargo:rustc-env=LEAKSPY_ANALYSIS_HASH={:016x}", h.finish());
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

//! File summaries cached by content hash: in memory for a run, and on disk between runs, in the
//! user's cache folder (`$XDG_CACHE_HOME/leakspy`, else `~/.cache/leakspy`), one file per
//! project root and analysis (leakspy's version and a hash of the analysis's sources). Nothing is written into the checked tree: a project may be
//! read-only, an installed package or someone else's checkout.
//!
//! A summary depends on the file's text, its module name, its kind (a notebook's cells) and the
//! facts the project gave it; the key hashes all of them with the analysis's, so an entry
//! is never stale: a changed file, or a file whose facts changed, has a new key. What a run
//! used is what the next run finds; entries no run asks for again are dropped when the cache
//! is written, and so are the folders of other analyses no run has written to for two weeks.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;
use xxhash_rust::xxh3::Xxh3;

use crate::summaries::{ExternalFacts, FileSummary};

/// The analysis that wrote a summary: the package version and a hash of the analysis's
/// sources (`build.rs`), so that a build from a newer checkout with the same version never
/// reads what an older analysis concluded.
const ANALYSIS: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "-",
    env!("LEAKSPY_ANALYSIS_HASH")
);

/// The user's cache folder for leakspy: `$XDG_CACHE_HOME/leakspy`, else `~/.cache/leakspy`.
pub fn default_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("leakspy"))
}

/// A cache key: 128 bits of XXH3 over everything a summary depends on.
pub type Key = u128;

#[derive(Default)]
pub struct SummaryCache {
    /// The file it is read from and written to; `None` keeps it in memory only.
    file: Option<PathBuf>,
    /// What the last run wrote.
    stored: FxHashMap<Key, Arc<FileSummary>>,
    /// What this run asked for or made, to write back.
    used: Mutex<FxHashMap<Key, Arc<FileSummary>>>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct OnDisk {
    version: String,
    entries: Vec<(String, FileSummary)>,
}

impl SummaryCache {
    /// A cache in memory only.
    pub fn in_memory() -> Self {
        Self::default()
    }

    /// The cache of the project at `root`, kept in the cache folder `dir`: what the last run
    /// wrote there, when it was this version's. A cache that cannot be read is an empty one.
    pub fn open(dir: &Path, root: &Path) -> Self {
        let name = format!(
            "{:032x}.json",
            xxhash_rust::xxh3::xxh3_128(root.as_os_str().as_encoded_bytes())
        );
        let file = dir.join(ANALYSIS).join(name);
        let stored = std::fs::read(&file)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<OnDisk>(&bytes).ok())
            .filter(|d| d.version == ANALYSIS)
            .map(|d| {
                d.entries
                    .into_iter()
                    .filter_map(|(k, s)| Some((Key::from_str_radix(&k, 16).ok()?, Arc::new(s))))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            file: Some(file),
            stored,
            used: Mutex::default(),
        }
    }

    /// The key of a file's summary.
    pub fn key(module: Option<&str>, notebook: bool, text: &str, facts: &ExternalFacts) -> Key {
        let mut h = Xxh3::new();
        h.update(ANALYSIS.as_bytes());
        h.update(&[0, u8::from(notebook)]);
        h.update(module.unwrap_or("").as_bytes());
        h.update(&[0]);
        if !facts.is_empty() {
            // Serialized in a fixed order (sorted maps): the same facts hash the same.
            h.update(&serde_json::to_vec(facts).unwrap_or_default());
        }
        h.update(&[0]);
        h.update(text.as_bytes());
        h.digest128()
    }

    pub fn get(&self, key: Key) -> Option<Arc<FileSummary>> {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = used.get(&key) {
            return Some(s.clone());
        }
        let s = self.stored.get(&key)?.clone();
        used.insert(key, s.clone());
        Some(s)
    }

    pub fn put(&self, key: Key, summary: Arc<FileSummary>) {
        self.used
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, summary);
    }

    /// Writes what this run used, when it differs from what was read: atomically (a temporary
    /// file renamed), with a `CACHEDIR.TAG` so that backups skip it.
    pub fn save(&self) -> std::io::Result<()> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        if used.len() == self.stored.len() && used.keys().all(|k| self.stored.contains_key(k)) {
            return Ok(());
        }
        let dir = file.parent().expect("a file in the version's folder");
        std::fs::create_dir_all(dir)?;
        let top = dir.parent().expect("the cache folder");
        let tag = top.join("CACHEDIR.TAG");
        if !tag.exists() {
            std::fs::write(
                &tag,
                "Signature: 8a477f597d28d172789f06886806bc55\n# A cache made by leakspy.\n",
            )?;
        }
        let mut entries: Vec<(String, FileSummary)> = used
            .iter()
            .map(|(k, s)| (format!("{k:032x}"), (**s).clone()))
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let data = serde_json::to_vec(&OnDisk {
            version: ANALYSIS.to_string(),
            entries,
        })
        .map_err(std::io::Error::other)?;
        let tmp = file.with_extension(format!("{}.tmp", std::process::id()));
        std::fs::write(&tmp, data)?;
        std::fs::rename(&tmp, file)?;
        prune(top, STALE_AFTER);
        Ok(())
    }
}

/// How long the folder of another analysis (an older leakspy, or another install used beside
/// this one) is kept after its last write: without this, every upgrade would leave its
/// summaries on disk for good.
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(14 * 24 * 3600);

/// Removes the folders of other analyses in the cache folder `top` that no run has written to
/// for `stale`: best effort, since a cache that cannot be tidied is still a cache.
fn prune(top: &Path, stale: std::time::Duration) {
    let Ok(entries) = std::fs::read_dir(top) else {
        return;
    };
    let now = std::time::SystemTime::now();
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() || entry.file_name() == ANALYSIS {
            continue;
        }
        // Its newest file: the folder's own time moves only when a file is added or removed.
        let newest = std::fs::read_dir(&path)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|f| f.metadata().ok()?.modified().ok())
            .max();
        if newest.is_some_and(|t| now.duration_since(t).is_ok_and(|age| age > stale)) {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder_written(top: &Path, name: &str, age: std::time::Duration) -> PathBuf {
        let dir = top.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("0.json");
        std::fs::write(&file, b"{}").unwrap();
        let f = std::fs::File::options().write(true).open(&file).unwrap();
        f.set_modified(std::time::SystemTime::now() - age).unwrap();
        dir
    }

    #[test]
    fn another_analysis_left_alone_for_long_is_removed_and_nothing_else() {
        let top = tempfile::tempdir().unwrap();
        let day = std::time::Duration::from_secs(24 * 3600);
        let old = folder_written(top.path(), "0.0.9-0123", day * 30);
        let recent = folder_written(top.path(), "0.0.9-4567", day);
        let ours = folder_written(top.path(), ANALYSIS, day * 30);
        let tag = top.path().join("CACHEDIR.TAG");
        std::fs::write(&tag, b"Signature").unwrap();
        prune(top.path(), STALE_AFTER);
        assert!(!old.exists());
        assert!(recent.exists() && ours.exists() && tag.exists());
    }
}

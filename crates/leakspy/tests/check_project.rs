//! `leakspy check` on a project: the real binary on a real tree of files, where a leak spans
//! two modules (a metric updated in `utils/metrics.py` with each step's loss from `train.py`).

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A project (marked by its `pyproject.toml`) holding the recall fixture whose leak spans two
/// files, one folder down.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let fixture =
        repo_root().join("crates/leakspy_lint/resources/test/recall/horovod_metric_average");
    let src = dir.path().join("src");
    fs::create_dir_all(src.join("utils")).unwrap();
    fs::copy(
        fixture.join("train_imagenet.py"),
        src.join("train_imagenet.py"),
    )
    .unwrap();
    fs::copy(
        fixture.join("utils/metrics.py"),
        src.join("utils/metrics.py"),
    )
    .unwrap();
    fs::write(
        dir.path().join("pyproject.toml"),
        "[project]\nname = \"demo\"\n",
    )
    .unwrap();
    dir
}

/// (file name, line, code, message) of each finding, from `check --output-format json`.
fn findings(dir: &Path, cache: &Path, args: &[&str]) -> Vec<(String, u64, String, String)> {
    let out = Command::cargo_bin("leakspy")
        .unwrap()
        .current_dir(dir)
        .env("XDG_CACHE_HOME", cache)
        .args(["check", "--output-format", "json", "--exit-zero"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let items: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let mut found: Vec<(String, u64, String, String)> = items
        .iter()
        .map(|i| {
            let file = Path::new(i["filename"].as_str().unwrap())
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (
                file,
                i["location"]["row"].as_u64().unwrap(),
                i["code"].as_str().unwrap().to_string(),
                i["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    found.sort();
    found
}

#[test]
fn one_file_inside_a_project_gets_the_findings_of_the_whole_project() {
    let dir = project();
    let cache = tempfile::tempdir().unwrap();
    let whole = findings(dir.path(), cache.path(), &["--no-cache", "."]);
    // The leak is in the metric, with the loss made in the training loop of the other file.
    assert_eq!(whole.len(), 1, "{whole:?}");
    assert_eq!((whole[0].0.as_str(), whole[0].1), ("metrics.py", 19));
    assert_eq!(whole[0].2, "LS001");
    assert!(
        whole[0].3.contains("src/train_imagenet.py:26"),
        "the origin is named in its file: {}",
        whole[0].3
    );
    // From the project root, from inside a folder of it, and named by its path.
    let one = findings(
        dir.path(),
        cache.path(),
        &["--no-cache", "src/utils/metrics.py"],
    );
    assert_eq!(one, whole);
    let inside = findings(
        &dir.path().join("src/utils"),
        cache.path(),
        &["--no-cache", "metrics.py"],
    );
    assert_eq!(inside, whole);
    // The file that makes the loss has no finding of its own.
    let train = findings(
        dir.path(),
        cache.path(),
        &["--no-cache", "src/train_imagenet.py"],
    );
    assert!(train.is_empty(), "{train:?}");
}

#[test]
fn summaries_are_cached_between_runs_and_a_changed_file_is_seen() {
    let dir = project();
    let cache = tempfile::tempdir().unwrap();
    let cold = findings(dir.path(), cache.path(), &["src/utils/metrics.py"]);
    assert_eq!(cold.len(), 1, "{cold:?}");
    // The summaries of the project's other files went to the cache folder, and nowhere in the
    // project.
    let written: Vec<PathBuf> = walk(&cache.path().join("leakspy"));
    assert_eq!(
        written
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .count(),
        1
    );
    assert!(walk(dir.path())
        .iter()
        .all(|p| !p.to_string_lossy().contains("cache")));
    let warm = findings(dir.path(), cache.path(), &["src/utils/metrics.py"]);
    assert_eq!(warm, cold);
    // The training loop now detaches the loss: the other file's finding goes with it.
    let train = dir.path().join("src/train_imagenet.py");
    let text = fs::read_to_string(&train).unwrap();
    fs::write(
        &train,
        text.replace(
            "train_loss.update(loss)",
            "train_loss.update(loss.detach())",
        ),
    )
    .unwrap();
    let after = findings(dir.path(), cache.path(), &["src/utils/metrics.py"]);
    assert!(after.is_empty(), "{after:?}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// LS011's fix is safe where nothing can backpropagate through the statistic;
/// another file that reads it through the object holding it makes it unsafe.
#[test]
fn a_statistic_read_in_another_file_keeps_its_fix_unsafe() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    fs::write(
        dir.path().join("pyproject.toml"),
        "[project]\nname = \"demo\"\n",
    )
    .unwrap();
    let norm = r#"import torch
import torch.nn as nn


class Centre:
    def __init__(self, dim):
        self.mean = torch.zeros(dim)

    def observe(self, x):
        self.mean = 0.99 * self.mean + 0.01 * x.mean(0)

    def __call__(self, x):
        return x - self.mean


class Agent:
    def __init__(self):
        self.net = nn.Linear(8, 8)
        self.centre = Centre(8)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def step(self, x):
        h = self.net(x)
        self.centre.observe(h)
        loss = (self.centre(h).detach() - h).pow(2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()


def main():
    agent = Agent()
    for step in range(100):
        agent.step(torch.randn(4, 8))
"#;
    fs::write(dir.path().join("norm.py"), norm).unwrap();
    let applicability = |dir: &Path| -> Vec<String> {
        let out = Command::cargo_bin("leakspy")
            .unwrap()
            .current_dir(dir)
            .env("XDG_CACHE_HOME", cache.path())
            .args(["check", ".", "--select", "LS011", "--output-format", "json"])
            .args(["--exit-zero"])
            .output()
            .unwrap();
        let items: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        items
            .iter()
            .map(|i| i["fix"]["applicability"].as_str().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(applicability(dir.path()), ["safe"]);
    fs::write(
        dir.path().join("train.py"),
        "import torch\nfrom norm import Agent\n\nagent = Agent()\nfor step in range(100):\n    \
         agent.step(torch.randn(4, 8))\n    penalty = agent.centre.mean.sum()\n",
    )
    .unwrap();
    assert_eq!(applicability(dir.path()), ["unsafe"]);
}

//! leakspy in a live Jupyter kernel: real notebooks (tests/fixtures/notebooks/kernel_*.ipynb)
//! executed headless by nbclient in a real ipykernel with torch, watched with `%load_ext
//! leakspy` and `%%leakspy watch` / `%leakspy start` at default settings, the real binary
//! found on PATH; and `leakspy attach <kernel pid>` from outside. Each must name what leaks
//! and who holds it, raise no alarm on healthy training, and leave the kernel running with
//! its state, whatever happens to the watch.

mod run_support;

use run_support::{repo_root, torch_python};

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Kernels with torch and their monitors on a 2-core machine starve each other: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/notebooks")
}

/// PATH with the leakspy binary under test first, as `pip install` puts it on a user's.
fn path_with_leakspy() -> std::ffi::OsString {
    let bin = assert_cmd::cargo::cargo_bin("leakspy");
    let mut paths = vec![bin.parent().unwrap().to_path_buf()];
    if let Some(p) = std::env::var_os("PATH") {
        paths.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(paths).unwrap()
}

/// The environment of a kernel a user started: leakspy's package importable, its binary on
/// PATH; temporary files (the watch's trace and reports) in the test's folder.
fn kernel_env(cmd: &mut Command, dir: &Path) {
    cmd.env("PATH", path_with_leakspy())
        .env_remove("LEAKSPY_BIN")
        .env("PYTHONPATH", repo_root().join("python"))
        .env("TMPDIR", dir)
        .env("JUPYTER_PLATFORM_DIRS", "1")
        .env("PYDEVD_DISABLE_FILE_VALIDATION", "1");
}

/// One output's text for a mime type (nbformat splits long strings into lists of lines).
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

struct Executed {
    /// Per code cell (in order), its outputs.
    cells: Vec<Vec<Value>>,
    seconds: f64,
}

impl Executed {
    /// Every text/plain and stream text of a code cell (0-based among code cells).
    fn texts(&self, cell: usize) -> Vec<String> {
        self.cells[cell]
            .iter()
            .map(|o| match o["output_type"].as_str() {
                Some("stream") => text_of(&o["text"]),
                Some("error") => format!(
                    "error: {}: {}",
                    o["ename"].as_str().unwrap_or(""),
                    o["evalue"].as_str().unwrap_or("")
                ),
                _ => text_of(&o["data"]["text/plain"]),
            })
            .collect()
    }

    /// The diagnosis a watch showed under a cell: its text, its HTML and the JSON report
    /// whose path the text gives.
    fn report(&self, cell: usize) -> (String, String, Value) {
        let out = self.cells[cell]
            .iter()
            .find(|o| text_of(&o["data"]["text/plain"]).starts_with("leakspy: "))
            .unwrap_or_else(|| {
                panic!(
                    "no report under code cell {}: {:#?}",
                    cell + 1,
                    self.texts(cell)
                )
            });
        let text = text_of(&out["data"]["text/plain"]);
        let html = text_of(&out["data"]["text/html"]);
        let json_path = text
            .lines()
            .filter_map(|l| l.strip_prefix("report: "))
            .find(|p| p.ends_with(".json"))
            .unwrap_or_else(|| panic!("no JSON report named in:\n{text}"));
        let report = serde_json::from_str(&std::fs::read_to_string(json_path).unwrap()).unwrap();
        (text, html, report)
    }
}

/// Runs a fixture notebook in a fresh kernel (nbclient, as `jupyter nbconvert --execute`).
fn execute(dir: &Path, name: &str) -> Executed {
    let out = dir.join(format!("executed-{name}"));
    let start = Instant::now();
    let mut cmd = Command::new(torch_python());
    cmd.arg(fixtures().join("execute.py"))
        .arg(fixtures().join(name))
        .arg(&out)
        .current_dir(dir);
    kernel_env(&mut cmd, dir);
    let output = cmd.output().expect("python runs");
    assert!(
        output.status.success(),
        "{name} did not run: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let nb: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let cells = nb["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["cell_type"] == "code")
        .map(|c| c["outputs"].as_array().cloned().unwrap_or_default())
        .collect();
    Executed {
        cells,
        seconds: start.elapsed().as_secs_f64(),
    }
}

fn holder_paths(report: &Value) -> Vec<String> {
    report["growth"]
        .as_array()
        .map(|g| {
            g.iter()
                .filter_map(|g| g["holder"]["path"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_leaking_training_cell_is_named_with_the_cell_that_bound_its_holder() {
    let _turn = turn();
    let dir = tempfile::tempdir().unwrap();
    let nb = execute(dir.path(), "kernel_leak.ipynb");
    let (text, html, report) = nb.report(2);
    assert_eq!(report["verdict"], "leak", "{text}");
    // The loss kept with its graph, held by the notebook's global, bound in the first cell.
    let top = &report["growth"][0];
    assert_eq!(top["holder"]["path"], "__main__.val_losses", "{text}");
    assert_eq!(top["holder"]["container"], "list", "{text}");
    assert_eq!(top["holder"]["file"], "Cell In[1]", "{text}");
    assert_eq!(top["holder"]["line"], 10, "{text}");
    assert!(
        text.contains("held by __main__.val_losses (list) [Cell In[1]:10]"),
        "{text}"
    );
    // The HTML report's sections, scoped so as not to restyle the notebook.
    assert!(
        html.starts_with("<div class=\"leakspy-report\"><style>"),
        "{html}"
    );
    assert!(html.contains("What grows (in-process probe)"), "{html}");
    assert!(html.contains("__main__.val_losses"), "{html}");
    assert!(!html.contains("<html"), "{html}");
    // The live line, updated in place, ended saying the diagnosis follows.
    let texts = nb.texts(2);
    assert!(
        texts[0].starts_with("leakspy \u{b7} watched "),
        "{texts:#?}"
    );
    // The kernel goes on with its state.
    let after = nb.texts(3).join("");
    assert!(after.starts_with("steps "), "{after}");
    eprintln!("leaking notebook: {:.1} s; {}", nb.seconds, texts[0]);
}

#[test]
fn the_fixed_twin_raises_no_alarm() {
    let _turn = turn();
    let dir = tempfile::tempdir().unwrap();
    let nb = execute(dir.path(), "kernel_fixed.ipynb");
    let (text, _, report) = nb.report(2);
    assert_ne!(report["verdict"], "leak", "{text}");
    // No tensor and no graph grows any more (the list of floats itself still grows by one
    // float a step, and may be listed as such).
    for g in report["growth"].as_array().unwrap() {
        for gr in g["growers"].as_array().unwrap() {
            let key = gr["key"].as_str().unwrap();
            assert!(
                !key.starts_with("tensors:")
                    && !key.starts_with("graph")
                    && key != "type:torch.Tensor",
                "{key} grows in the fixed twin:\n{text}"
            );
        }
    }
    eprintln!(
        "fixed twin: {:.1} s; verdict {}",
        nb.seconds, report["verdict"]
    );
}

#[test]
fn a_healthy_notebook_with_a_filling_buffer_raises_no_alarm() {
    let _turn = turn();
    let dir = tempfile::tempdir().unwrap();
    let nb = execute(dir.path(), "kernel_healthy.ipynb");
    let (text, _, report) = nb.report(2);
    assert_ne!(report["verdict"], "leak", "{text}");
    assert!(
        !holder_paths(&report).iter().any(|p| p.contains("replay")),
        "{text}"
    );
    let after = nb.texts(3).join("");
    assert!(after.contains("buffer 16"), "{after}");
    eprintln!(
        "healthy notebook: {:.1} s; verdict {}",
        nb.seconds, report["verdict"]
    );
}

#[test]
fn results_kept_in_out_are_named_with_how_to_free_them() {
    let _turn = turn();
    let dir = tempfile::tempdir().unwrap();
    let nb = execute(dir.path(), "kernel_out_history.ipynb");
    // `%leakspy start` in code cell 3, thirty cells ending with a tensor, `%leakspy stop`.
    let stop = nb.cells.len() - 2;
    let (text, html, report) = nb.report(stop);
    assert_eq!(report["verdict"], "leak", "{text}");
    // The output history is named among what grows, with the tensors (or graphs) it keeps.
    // (The history's dict and the entry whose graphs grow may be named apart.)
    let group = report["growth"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| {
            g["holder"]["kind"] == "ipython_output"
                && g["growers"].as_array().unwrap().iter().any(|g| {
                    let key = g["key"].as_str().unwrap();
                    key.starts_with("tensors:") || key.starts_with("graph")
                })
        })
        .unwrap_or_else(|| panic!("the output history is not named with its tensors:\n{text}"));
    let top = &group["holder"];
    let path = top["path"].as_str().unwrap();
    assert!(path.starts_with("IPython's output history Out["), "{text}");
    assert!(
        top["hint"].as_str().unwrap().contains("`%reset -f out`"),
        "{text}"
    );
    assert!(
        text.contains("free it: IPython keeps each cell's result"),
        "{text}"
    );
    assert!(html.contains("%reset -f out"), "{html}");
    let after = nb.texts(stop + 1).join("");
    assert!(after.starts_with("results kept 30"), "{after}");
    eprintln!("output history: {:.1} s; held by {path}", nb.seconds);
}

#[test]
fn the_kernel_survives_whatever_happens_to_the_watch() {
    let _turn = turn();
    let dir = tempfile::tempdir().unwrap();
    let nb = execute(dir.path(), "kernel_faults.ipynb");
    // An error in the watched cell: its traceback, and the diagnosis all the same.
    let failing = nb.texts(2).join("\n");
    assert!(
        failing.contains("ValueError") && failing.contains("the cell fails"),
        "{failing}"
    );
    nb.report(2);
    // The monitor killed mid-cell: the cell runs on, the watch says there is no report.
    let killed = nb.texts(3).join("\n");
    assert!(killed.contains("leakspy: no report"), "{killed}");
    // Interrupted (the stop button's SIGINT): the loop stops, the diagnosis still comes.
    let interrupted = nb.texts(4).join("\n");
    assert!(interrupted.contains("KeyboardInterrupt"), "{interrupted}");
    nb.report(4);
    // No binary anywhere: the cell runs unwatched, saying so.
    let unwatched = nb.texts(6).join("\n");
    assert!(
        unwatched.contains("the leakspy binary was not found"),
        "{unwatched}"
    );
    // `%leakspy watch` (the line magic) works after all that.
    nb.report(8);
    // Every cell's state is there, and no monitor is left behind.
    let last = nb.texts(9).join("");
    assert_eq!(
        last.trim(),
        "['after the monitor died', 'before', 'error in the cell', 'interrupted at', 'line magic', 'unwatched'] []",
        "{last}"
    );
    eprintln!("faults notebook: {:.1} s", nb.seconds);
}

#[test]
fn leakspy_attach_names_the_holder_in_a_running_kernel() {
    let _turn = turn();
    let dir = tempfile::tempdir().unwrap();
    let start = Instant::now();
    let mut cmd = Command::new(torch_python());
    // The cell trains longer than the attach watches, at leakspy's defaults.
    cmd.arg(fixtures().join("attach_kernel.py"))
        .arg("30")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    kernel_env(&mut cmd, dir.path());
    let mut driver = cmd.spawn().unwrap();
    let mut stdout = BufReader::new(driver.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let Some(pid) = line.trim().strip_prefix("pid ") else {
        let _ = driver.kill();
        let mut err = String::new();
        driver
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        panic!("the kernel did not start: {line:?} {err}");
    };
    // The training cell runs; attach from outside, as to any job.
    std::thread::sleep(Duration::from_secs(1));
    let report = dir.path().join("attach.json");
    let output = Command::new(assert_cmd::cargo::cargo_bin("leakspy"))
        .args(["attach", pid, "--duration", "20", "-q"])
        .arg("--trace")
        .arg(dir.path().join("attach.jsonl"))
        .arg("--report-json")
        .arg(&report)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let status = driver.wait().unwrap();
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(&report).unwrap_or_else(|e| panic!("{e}: {stderr}")),
    )
    .unwrap();
    assert_eq!(report["verdict"], "leak", "{stderr}");
    let top = &report["growth"][0]["holder"];
    assert_eq!(top["path"], "__main__.val_losses", "{stderr}");
    assert_eq!(top["file"], "Cell In[1]", "{stderr}");
    assert!(
        stderr.contains("through ptrace") || stderr.contains("through gdb"),
        "{stderr}"
    );
    // The kernel finished its cell and ran the next one, its state intact.
    assert!(status.success(), "{rest}");
    assert!(rest.starts_with("after: kept "), "{rest}");
    eprintln!("attach to a kernel: {:.1} s", start.elapsed().as_secs_f64());
}

/// A script (no notebook): `leakspy.watch()` as a context manager and a decorator prints the
/// live line and the text report on stderr and hands the report back.
#[test]
fn watch_outside_a_notebook_reports_as_text() {
    let _turn = turn();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("watched.py");
    std::fs::write(
        &script,
        r#"
import sys, time
import torch
import leakspy

history = []

@leakspy.watch()
def warm_up():
    for _ in range(20):
        leakspy.step()

warm_up()
with leakspy.watch() as w:
    t0 = time.time()
    while time.time() - t0 < 10:
        # 32 KiB a step, never let go: a tensor, whose bytes the census
        # weighs, so a busy machine's noisy RSS cannot hide the leak.
        history.append(torch.zeros(8192))
        leakspy.step()
        time.sleep(0.002)
print("verdict", w.report["verdict"], "holder", w.report["growth"][0]["holder"]["path"])
"#,
    )
    .unwrap();
    let mut cmd = Command::new(torch_python());
    cmd.arg(&script).current_dir(dir.path());
    kernel_env(&mut cmd, dir.path());
    let out = cmd.output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        stdout.trim(),
        "verdict leak holder __main__.history",
        "{stderr}"
    );
    // Two watches, two text reports; the live line once a run ends (stderr is not a terminal).
    assert_eq!(
        stderr.matches("\nwhat grows (in-process probe):").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.matches("leakspy: ").count() >= 2, "{stderr}");
    assert!(stderr.contains("leakspy \u{b7} watched "), "{stderr}");
}

/// `check --fix` on notebooks nbformat wrote (awkward content: non-ASCII, tabs, form feeds,
/// CRLF, control characters, outputs, attachments; nbformat 4.4 and 4.5; one-string sources
/// with ASCII escapes) leaves exactly what nbformat writes for the fixed cell.
#[test]
fn fixes_leave_exactly_what_nbformat_writes() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(torch_python())
        .arg(fixtures().join("roundtrip.py"))
        .arg(assert_cmd::cargo::cargo_bin("leakspy"))
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        text,
        "same nb-5-lines.ipynb\nsame nb-4-lines.ipynb\nsame nb-5-one-string.ipynb\n"
    );
}

/// The validation logits of every epoch kept with their graph: the holder is
/// the list that keeps them, by reference, and the line is the one that made
/// them; the constant labels `Y` and the loop's batch `yb` (tensors of the
/// same kind, alive at every census) are never named.
#[test]
fn kept_validation_graphs_are_named_by_their_list_never_by_a_tensor_of_their_kind() {
    let _turn = turn();
    let dir = tempfile::tempdir().unwrap();
    let nb = execute(dir.path(), "kernel_val_graphs.ipynb");
    let (text, _html, report) = nb.report(2);
    assert_eq!(report["verdict"], "leak", "{text}");
    let top = &report["growth"][0];
    assert_eq!(top["holder"]["path"], "__main__.val_history", "{text}");
    assert_eq!(top["created_at"]["file"], "Cell In[3]", "{text}");
    assert_eq!(top["created_at"]["line"], 12, "{text}");
    for path in holder_paths(&report) {
        assert!(
            !["__main__.X", "__main__.Y", "__main__.xb", "__main__.yb"].contains(&path.as_str()),
            "{path} named: {text}"
        );
    }
}

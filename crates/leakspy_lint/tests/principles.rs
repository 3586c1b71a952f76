//! The principles that keep `check` precise on code it was never tuned on (issue 20), each as a
//! pair in `resources/test/principles`: `NAME.py` (or `.ipynb`) holds the leaking shape, which
//! must still be reported on exactly the lines marked `# expect: LSxxx`, and `NAME_ok.py` the
//! shape a rule used to mistake for a leak, which must raise nothing. The principles: tuple
//! elements and dict entries keep their own provenance; construction is not training; a trim
//! right after the append bounds it; a fixed small loop inside an epoch is not an iteration;
//! module-level code gets a function's exemptions; numbers are not a leak; figures in notebooks
//! and plotting scripts; `del` is path-sensitive; a dict whose entry is backpropagated holds a
//! graph; a collective (`hvd.allreduce`) passes its argument's graph; where `isinstance` says a
//! value is a number, it is one; a test of a test suite runs once; a method that registers
//! hooks is not a hook; a call under `step % n == 0 or i + 1 == n` runs once per period; a
//! plotting method's calls are `self.plot(...)`, not `ax.plot(...)`; state set afresh at the
//! start of a call carries that call's graph only; many figures made by a comprehension are
//! closed one by one or all at once, not by `plt.close()`; a `deque(maxlen=...)` entry keeps a
//! bounded number of items; a list whose newest entry is backpropagated keeps every earlier
//! one, with its graph; a dict's entries keep their own values when one is rebound
//! (`out["loss"] = out["loss"] / n`) and when branches build it with different keys; code
//! under `if not hasattr(self, "fig"):` that sets `self.fig` runs once; a module-level list
//! pushed in one hook and popped in its pair (a method's closure) is a stack; an object made as
//! a local of a function that drives no training, used only through its methods, is scratch;
//! indices drawn by `multinomial` and counts (`histc`, `count_nonzero`) carry no graph; a
//! helper's result made from several of its parameters carries the graph of whichever argument
//! brings one; a local made afresh by each call of a function that runs again and again (or by
//! each round of an outer loop), filled for a count written in the source, is bounded; a list
//! a hook closes over lives as long as the hook's registration (on a tensor the call makes, or
//! with its handle removed or handed out); a tensor's `.clone()` is no model copy because a
//! model class of the file also has a `clone` method; a function's result built from a
//! parameter carries no graph where every caller passes a number there; a closure cell that a
//! function nested in its factory clears, or that a factory running once per step makes
//! afresh, is no history; a local summing the elements of a collection the caller passed keeps
//! no graph the caller's collection does not; a module global a script writes out once, after
//! its loop, is its result; a total made afresh by a call that steps the optimizer once after
//! counted rounds of micro-batches that only backpropagate (gradient accumulation) keeps one
//! step's graphs; a callback a framework drives and keeps for the run (stable-baselines3's,
//! skorch's, transformers') keeps what its per-step hook appends, as a `LightningModule` does,
//! unless one of its own hooks clears it; the lists a dataset's `__getitem__` serves are its
//! storage, however it is filled; a list grown only while a count the method steps is below a
//! cap (or after a guard that returns once it reaches it) is bounded; an input detached under
//! an option before a running statistic's update keeps its graph only where the author asked;
//! an object the loop that grows it renews when a condition ends its stretch (`if done:
//! recorders[i] = EpisodeRecorder()`) keeps one episode; views a decode loop over `range`
//! keeps and stacks before it returns die with the call; what a module-level loop that trains
//! nothing collects and reads afterwards is the script's result; a module of tests (it imports
//! pytest or unittest and defines tests) runs no job's steps: what its helpers keep dies with
//! the test that made them.

mod common;

use std::path::PathBuf;

use common::{expected, found};
use leakspy_lint::notebook::Notebook;
use leakspy_lint::SourceKind;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("resources/test/principles")
}

/// (line, rule code) pairs.
type Lines = Vec<(usize, String)>;

/// The findings `check` raises on a fixture (a notebook's cells are joined into one module),
/// and the lines its `# expect:` comments mark.
fn checked(name: &str) -> (Lines, Lines) {
    let text = std::fs::read_to_string(dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    if name.ends_with(".ipynb") {
        let notebook = Notebook::parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let joined = notebook.joined();
        (
            found(&joined.checked, joined.source_kind()),
            expected(&joined.checked),
        )
    } else {
        (found(&text, SourceKind::Python), expected(&text))
    }
}

#[test]
fn each_principle_keeps_the_leak_and_drops_the_false_alarm() {
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| (n.ends_with(".py") || n.ends_with(".ipynb")) && !n.contains("_ok."))
        .collect();
    names.sort();
    assert!(names.len() >= 9, "principle fixtures: {names:?}");
    let mut failures = Vec::new();
    for name in &names {
        let (got, want) = checked(name);
        assert!(!want.is_empty(), "{name} marks no expected finding");
        if got != want {
            failures.push(format!("{name}: expected {want:?}, found {got:?}"));
        }
        let (stem, ext) = name.rsplit_once('.').unwrap();
        let twin = format!("{stem}_ok.{ext}");
        let (got, marked) = checked(&twin);
        assert!(marked.is_empty(), "{twin} must expect nothing");
        if !got.is_empty() {
            failures.push(format!("{twin}: expected nothing, found {got:?}"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

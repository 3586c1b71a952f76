//! Every kind of growth told right (examples/growth): worker processes,
//! copy-on-read, processes that pile up, a background thread's queue, a
//! native leak. Each program runs unmodified under `leakspy run` at its
//! defaults; the report must name the mechanism or the holder that was
//! measured, and nothing else.

mod run_support;

use run_support::repo_root;

use serde_json::Value;

struct Run {
    report: Value,
    stderr: String,
}

/// One program at a time: several torch jobs with their workers starve a
/// 2-core machine.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run(program: &str) -> Run {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = repo_root().join("examples/growth").join(program);
    let f = run_support::run_program(dir.path(), &path, &[], |_| {});
    assert_eq!(f.code, Some(0), "{program}: {}", f.stderr);
    Run {
        report: f.report,
        stderr: f.stderr,
    }
}

fn mechanism<'a>(r: &'a Value, kind: &str) -> Option<&'a Value> {
    r["mechanisms"]
        .as_array()?
        .iter()
        .find(|m| m["kind"] == kind)
}

fn named_holders(r: &Value) -> Vec<String> {
    r["growth"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| g["holder"]["path"].as_str().map(str::to_string))
        .collect()
}

fn line_of(program: &str, marker: &str) -> u64 {
    let text = std::fs::read_to_string(repo_root().join("examples/growth").join(program)).unwrap();
    text.lines()
        .position(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("{marker} not in {program}")) as u64
        + 1
}

#[test]
fn dataloader_workers_over_dicts_copy_on_read_on_pss() {
    let Run { report: r, stderr } = run("cow_dicts.py");
    // The tree's memory is its PSS: summed RSS counts the parent's pages
    // once more in every worker.
    assert_eq!(r["headline"], "total.pss", "{stderr}");
    // Bounded: the workers copy what they share, then stop.
    assert_ne!(r["verdict"], "leak", "{}\n{stderr}", r["summary"]);
    let m = mechanism(&r, "copy_on_read")
        .unwrap_or_else(|| panic!("no copy-on-read: {:#}\n{stderr}", r["mechanisms"]));
    assert_eq!(m["pids"].as_array().unwrap().len(), 2, "{m:#}");
    assert!(
        m["bound"].as_f64().unwrap_or(0.0) > 100.0 * 1048576.0,
        "{m:#}"
    );
    assert!(m["fix"].as_str().unwrap().contains("numpy arrays"), "{m:#}");
    // Nothing in Python is blamed for it.
    assert!(named_holders(&r).is_empty(), "{:#}", r["growth"]);
}

#[test]
fn the_same_workers_over_numpy_arrays_copy_nothing() {
    let Run { report: r, stderr } = run("cow_numpy.py");
    assert_eq!(r["headline"], "total.pss", "{stderr}");
    assert_eq!(r["verdict"], "no-leak", "{}\n{stderr}", r["summary"]);
    assert!(
        mechanism(&r, "copy_on_read").is_none(),
        "{:#}",
        r["mechanisms"]
    );
}

#[test]
fn a_cache_filled_in_workers_is_named_in_its_worker() {
    let Run { report: r, stderr } = run("worker_cache.py");
    assert_eq!(r["verdict"], "leak", "{}\n{stderr}", r["summary"]);
    let groups = r["growth"].as_array().cloned().unwrap_or_default();
    let held: Vec<&Value> = groups
        .iter()
        .filter(|g| g["holder"]["path"] == "SpectrogramDataset.cache")
        .collect();
    assert!(!held.is_empty(), "{groups:#?}\n{stderr}");
    for g in &held {
        let process = g["process"].as_str().unwrap_or_default();
        assert!(
            process.starts_with("DataLoader worker ") && process.contains(" of 2"),
            "{g:#}"
        );
    }
    // Made where the sample is computed, in a worker. (A worker's census
    // of a cache of tens of thousands of tensors is dear: the burst's work
    // limit may end before the second worker's lookup.)
    let line = line_of("worker_cache.py", "self.cache[idx] = sample");
    let sites: Vec<&Value> = held
        .iter()
        .map(|g| &g["created_at"])
        .filter(|c| !c.is_null())
        .collect();
    assert!(!sites.is_empty(), "{held:#?}\n{stderr}");
    for c in sites {
        assert!(
            c["file"]
                .as_str()
                .is_some_and(|f| f.ends_with("worker_cache.py"))
                && c["line"].as_u64().unwrap_or(0) < line,
            "{c:#}"
        );
    }
    // No guess that it is native: the workers were looked into.
    assert!(r["no_holder"].is_null(), "{}", r["no_holder"]);
}

#[test]
fn processes_started_per_epoch_and_left_alive_pile_up() {
    let Run { report: r, stderr } = run("eval_procs.py");
    assert_eq!(r["verdict"], "leak", "{}\n{stderr}", r["summary"]);
    assert_eq!(r["headline"], "total.pss", "{stderr}");
    let m = mechanism(&r, "processes_pile_up")
        .unwrap_or_else(|| panic!("no pile-up: {:#}\n{stderr}", r["mechanisms"]));
    assert!(m["pids"].as_array().unwrap().len() >= 5, "{m:#}");
    // Where they are started, from the probe in the new processes.
    assert_eq!(
        m["location"]["line"].as_u64(),
        Some(line_of("eval_procs.py", "p.start()")),
        "{m:#}"
    );
    assert!(r["no_holder"].is_null(), "{}", r["no_holder"]);
}

#[test]
fn a_thread_filling_a_queue_is_told_by_the_users_object_and_its_thread() {
    let Run { report: r, stderr } = run("queue_thread.py");
    assert_eq!(r["verdict"], "leak", "{}\n{stderr}", r["summary"]);
    let g = &r["growth"][0];
    assert_eq!(
        g["holder"]["path"], "AsyncValidator.results",
        "{g:#}\n{stderr}"
    );
    assert_eq!(
        g["created_at"]["line"].as_u64(),
        Some(line_of(
            "queue_thread.py",
            "loss = F.cross_entropy(self.model(x_val)"
        )),
        "{g:#}"
    );
    assert_eq!(g["created_at"]["thread"], "validator", "{g:#}");
    // One leak, one group: no library's deque or tensor count on its own.
    let others: Vec<&Value> = r["growth"].as_array().unwrap()[1..]
        .iter()
        .filter(|g| g["holder"]["path"] != "AsyncValidator.results")
        .collect();
    assert!(others.is_empty(), "{others:#?}");
}

#[test]
fn a_native_leak_is_said_native_with_nothing_else_blamed() {
    let Run { report: r, stderr } = run("native_ctypes.py");
    assert_eq!(r["verdict"], "leak", "{}\n{stderr}", r["summary"]);
    assert!(named_holders(&r).is_empty(), "{:#}", r["growth"]);
    assert!(
        r["mechanisms"].as_array().is_none_or(|m| m.is_empty()),
        "{:#}",
        r["mechanisms"]
    );
    let why = r["no_holder"].as_str().unwrap_or_default();
    assert!(
        why.contains("native") && why.contains("memray"),
        "{why}\n{stderr}"
    );
}

/// The holders one group names (the one that leads, then the others its
/// objects reached) and the rule and line of each finding joined to it.
type NamedAndJoined = (Vec<String>, Vec<(String, u64)>);

/// Every group's holders and findings.
fn holders_and_findings(r: &Value) -> Vec<NamedAndJoined> {
    r["growth"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|g| {
            let h = &g["holder"];
            let names = std::iter::once(h)
                .chain(h["also"].as_array().into_iter().flatten())
                .filter_map(|h| h["path"].as_str().map(str::to_string))
                .collect();
            let found = g["static_findings"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|m| {
                    (
                        m["rule"].as_str().unwrap_or_default().to_string(),
                        m["line"].as_u64().unwrap_or_default(),
                    )
                })
                .collect();
            (names, found)
        })
        .collect()
}

#[test]
fn two_leaks_feeding_the_graphs_are_each_named_with_their_finding() {
    let Run { report: r, stderr } = run("two_graph_leaks.py");
    assert_eq!(r["verdict"], "leak", "{}\n{stderr}", r["summary"]);
    let groups = holders_and_findings(&r);
    let line = |marker| line_of("two_graph_leaks.py", marker);
    let (append, update) = (
        line("self.losses.append(loss)"),
        line("self.value = self.value +"),
    );
    for (holder, rule, at) in [
        ("Trainer.losses", "LS002", append),
        ("RunningMean.value", "LS001", update),
    ] {
        let g = groups
            .iter()
            .find(|(names, _)| names.iter().any(|n| n == holder))
            .unwrap_or_else(|| panic!("{holder} not named: {groups:?}\n{stderr}"));
        assert!(
            g.1.iter().any(|(r, l)| r == rule && *l == at),
            "{holder}: {groups:?}"
        );
    }
    // A finding joins a group only for a holder that group names.
    for (names, found) in &groups {
        for (rule, at) in found {
            let whose = if *at == append {
                "Trainer.losses"
            } else {
                "RunningMean.value"
            };
            assert!(
                names.iter().any(|n| n == whose),
                "{rule} at {at} joined to {names:?}"
            );
        }
    }
}

//! What the processes of a job's tree did, told from /proc and the probe's
//! hellos: processes that pile up (started during training and never
//! ended), and forked workers whose private memory grows while their
//! resident memory does not (copy-on-read: pages shared with the parent
//! copied as the worker reads the objects on them). Each is a
//! [`Mechanism`]: what was measured, the fix, and how far it can go.

use std::collections::BTreeMap;

use leakspy_stats::fmt_bytes;
use leakspy_trace::{Location, Trace};

use crate::extract::StepClock;
use crate::model::{Mechanism, MechanismKind};

const MIB: f64 = 1024.0 * 1024.0;
/// Processes that pile up: at least this many, started at as many
/// different moments of the training loop, still alive at its end.
const PILE_UP_MIN: usize = 3;
/// Starts closer than this are one moment (a pool of workers starts its
/// processes one after the other).
const START_GAP_S: f64 = 1.0;
/// Copy-on-read: a worker's private memory rose by this much at least
/// (a worker's own buffers and imports come to a few MiB)...
const COPY_MIN_BYTES: f64 = 16.0 * MIB;
/// ... in a worker forked from its parent: most of its resident memory
/// shared with it at the first look (a process started afresh has little).
const FORKED_SHARED: f64 = 0.75;
/// ... while its resident memory rose by less than this share of it (new
/// pages raise both; a shared page copied raises only the private count).
const COPY_RSS_SHARE: f64 = 0.5;

/// One process of the tree as the samples saw it.
#[derive(Debug, Clone, Default)]
struct Life {
    ppid: u32,
    name: String,
    first_t: f64,
    last_t: f64,
    /// `(t, rss, uss, anon)` of the samples whose smaps_rollup was read.
    rollups: Vec<(f64, f64, f64, f64)>,
}

fn lives(trace: &Trace) -> BTreeMap<u32, Life> {
    let mut out: BTreeMap<u32, Life> = BTreeMap::new();
    for s in trace.samples() {
        for p in &s.procs {
            let l = out.entry(p.pid).or_insert_with(|| Life {
                ppid: p.ppid,
                name: p.name.clone(),
                first_t: s.t,
                ..Life::default()
            });
            l.last_t = s.t;
            if let Some(uss) = p.uss {
                l.rollups
                    .push((s.t, p.rss as f64, uss as f64, p.anon as f64));
            }
        }
    }
    out
}

/// How a process of the tree is named in reports: its role as the probe
/// told it (`DataLoader worker 1 of 2`), else its pid and name.
pub(crate) fn process_label(trace: &Trace, pid: u32) -> String {
    process_role(trace, pid).unwrap_or_else(|| {
        // The name it was last seen with: a child sampled between its fork and its exec
        // still has its parent's (`leakspy`, for the job `run` starts).
        let name = trace
            .samples()
            .flat_map(|s| s.procs.iter())
            .filter(|p| p.pid == pid && !p.name.is_empty())
            .last()
            .map(|p| p.name.clone())
            .unwrap_or_default();
        if name.is_empty() {
            format!("pid {pid}")
        } else {
            format!("pid {pid} ({name})")
        }
    })
}

/// A process's role as its probe told it, with its pid
/// (`DataLoader worker 1 of 2 (pid 4242)`).
fn process_role(trace: &Trace, pid: u32) -> Option<String> {
    let role = trace
        .census()
        .filter(|c| c.pid == pid)
        .filter_map(|c| c.role.clone())
        .last()
        .or_else(|| {
            trace
                .probes()
                .filter(|p| p.get("pid").and_then(serde_json::Value::as_u64) == Some(pid.into()))
                .filter_map(|p| p.get("role").and_then(|r| r.as_str()).map(str::to_string))
                .last()
        });
    role.map(|r| format!("{r} (pid {pid})"))
}

/// Names the process of each group that grows outside the job's main
/// process (`SpectrogramDataset.cache (dict) in DataLoader worker 1 of 2`).
pub(crate) fn label_groups(trace: &Trace, groups: &mut [crate::census::GrowthGroup]) {
    let Some(root) = trace.header.pid else {
        return;
    };
    for g in groups.iter_mut().filter(|g| g.pid != root) {
        g.process = process_role(trace, g.pid);
    }
}

/// Where the probe saw a process started (its `hello`'s `started_at`: the
/// line of the parent's code that forked it).
fn started_at(trace: &Trace, pid: u32) -> Option<Location> {
    trace
        .probes()
        .filter(|p| p.get("pid").and_then(serde_json::Value::as_u64) == Some(pid.into()))
        .find_map(|p| serde_json::from_value(p.get("started_at")?.clone()).ok())
}

/// The mechanisms the process tree shows, most telling first.
pub(crate) fn mechanisms(trace: &Trace, clock: &StepClock) -> Vec<Mechanism> {
    let lives = lives(trace);
    if lives.len() < 2 {
        return Vec::new();
    }
    let mut out = Vec::new();
    out.extend(pile_up(trace, clock, &lives));
    out.extend(copy_on_read(trace, &lives));
    out
}

/// Processes started during training that never ended: the count of live
/// processes is a series like memory, rising with the work done.
fn pile_up(trace: &Trace, clock: &StepClock, lives: &BTreeMap<u32, Life>) -> Option<Mechanism> {
    let root = trace.header.pid?;
    let (&t0, &t1) = (clock.t.first()?, clock.t.last()?);
    let mut piled: Vec<(u32, &Life)> = lives
        .iter()
        // (Alive at the end: in the samples of the loop's last second.)
        .filter(|(pid, l)| **pid != root && l.first_t > t0 && l.last_t + 1.0 >= t1)
        .map(|(pid, l)| (*pid, l))
        .collect();
    piled.sort_by(|a, b| a.1.first_t.total_cmp(&b.1.first_t));
    // Moments at which they were started: a pool's processes start
    // together; a process per epoch starts at a moment of its own.
    let mut moments: Vec<f64> = Vec::new();
    for (_, l) in &piled {
        if moments.last().is_none_or(|&m| l.first_t - m >= START_GAP_S) {
            moments.push(l.first_t);
        }
    }
    if piled.len() < PILE_UP_MIN || moments.len() < PILE_UP_MIN {
        return None;
    }
    let started_in_loop = lives
        .iter()
        .filter(|(pid, l)| **pid != root && l.first_t > t0)
        .count();
    let mut private: Vec<f64> = piled
        .iter()
        .filter_map(|(_, l)| l.rollups.last().map(|r| r.2))
        .collect();
    private.sort_by(f64::total_cmp);
    let each = private.get(private.len() / 2).copied();
    let step_at = |t: f64| -> Option<f64> {
        let (xs, _) = clock.map(&[t], &[0.0]);
        xs.first().copied()
    };
    let every = match (
        step_at(moments[0]),
        moments.last().and_then(|&m| step_at(m)),
    ) {
        (Some(a), Some(b)) if b > a => Some((b - a) / (moments.len() - 1) as f64),
        _ => None,
    };
    let names: Vec<String> = piled.iter().map(|(_, l)| l.name.clone()).collect();
    let name = most_common(&names).unwrap_or_default();
    let mut summary = format!(
        "processes pile up: {} started during training{}, {} still alive at its end",
        started_in_loop,
        every
            .map(|e| format!(" (a new one every ~{e:.0} steps)"))
            .unwrap_or_default(),
        piled.len()
    );
    if let Some(each) = each {
        summary.push_str(&format!(", each ~{} private", fmt_bytes(each)));
    }
    let location = piled.iter().find_map(|(pid, _)| started_at(trace, *pid));
    let mut evidence = vec![format!(
        "{} `{name}` processes (pids {}) started at {} moments of the training loop and were \
         alive when it ended: their count rises with the work done, like memory",
        piled.len(),
        piled
            .iter()
            .map(|(p, _)| p.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        moments.len()
    )];
    if let Some(loc) = &location {
        evidence.push(format!(
            "started at {}:{}{} (the probe in the new process)",
            loc.file,
            loc.line,
            loc.function
                .as_deref()
                .map(|f| format!(" in {f}()"))
                .unwrap_or_default()
        ));
    }
    let total_private: f64 = piled
        .iter()
        .filter_map(|(_, l)| l.rollups.last().map(|r| r.2))
        .sum();
    if total_private > 0.0 {
        evidence.push(format!(
            "together they hold {} of private memory (USS)",
            fmt_bytes(total_private)
        ));
    }
    Some(Mechanism {
        kind: MechanismKind::ProcessesPileUp,
        summary,
        evidence,
        fix: Some(
            "end each process when its work is done (`p.join()` after a stop signal, \
             `pool.close(); pool.join()` or `with Pool(...)`), or start one and reuse it"
                .to_string(),
        ),
        bound: None,
        pids: piled.iter().map(|(p, _)| *p).collect(),
        location,
    })
}

/// Forked workers whose private memory (USS) grows while their resident
/// memory (RSS) does not: pages they share with their parent become private
/// copies as they are touched. Python touches an object whenever it reads
/// it (its reference count), so a worker reading a data set of Python
/// objects copies the pages they sit on, up to all it shares.
fn copy_on_read(trace: &Trace, lives: &BTreeMap<u32, Life>) -> Option<Mechanism> {
    let root = trace.header.pid?;
    let mut workers = Vec::new();
    let (mut copied, mut bound) = (0f64, 0f64);
    for (&pid, l) in lives {
        if pid == root || !lives.contains_key(&l.ppid) || l.rollups.len() < 3 {
            continue;
        }
        let (_, r0, u0, a0) = l.rollups[0];
        let (_, r1, u1, _) = l.rollups[l.rollups.len() - 1];
        let du = u1 - u0;
        let dr = r1 - r0;
        let forked = r0 > 0.0 && (r0 - u0) >= FORKED_SHARED * r0;
        if forked && du >= COPY_MIN_BYTES && dr < COPY_RSS_SHARE * du {
            workers.push(pid);
            copied += du;
            // What it can still copy: the anonymous pages it shared with
            // its parent at its first look, plus what it had copied then.
            bound += (r0 - u0).max(0.0).min(a0) + u0;
        }
    }
    if workers.is_empty() {
        return None;
    }
    let labels: Vec<String> = workers.iter().map(|p| process_label(trace, *p)).collect();
    let held_inside = trace
        .suspects()
        .any(|s| workers.contains(&s.pid) && s.holder.as_ref().is_some_and(|h| h.is_named()));
    let looked = trace.census().any(|c| workers.contains(&c.pid));
    let mut evidence = vec![format!(
        "{}: private memory (USS) rose {} in all since their first moments while resident memory \
         (RSS) stayed within half of that: pages shared with the parent turned into private \
         copies, not new memory",
        labels.join(", "),
        fmt_bytes(copied)
    )];
    if looked && !held_inside {
        evidence.push(
            "the probe's censuses in these workers found no Python objects growing: they read \
             what the parent made, they do not add to it"
                .to_string(),
        );
    }
    Some(Mechanism {
        kind: MechanismKind::CopyOnRead,
        summary: format!(
            "copy-on-read: {} worker process{} copied {} of the memory {} share{} with the parent \
             by reading Python objects (each read writes the object's reference count)",
            workers.len(),
            if workers.len() == 1 { "" } else { "es" },
            fmt_bytes(copied),
            if workers.len() == 1 { "it" } else { "they" },
            if workers.len() == 1 { "s" } else { "" },
        ),
        evidence,
        fix: Some(
            "keep the data set as numpy arrays, tensors or Arrow/Parquet tables (one object, no \
             per-item reference counts) rather than lists of dicts, lists or strings; or load it \
             in each worker (worker_init_fn)"
                .to_string(),
        ),
        bound: Some(bound),
        pids: workers,
        location: None,
    })
}

fn most_common(v: &[String]) -> Option<String> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for s in v {
        *counts.entry(s.as_str()).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .map(|(s, _)| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"kind":"header","format":"leakspy-trace","version":1,"t":0.0,"started_at":0.0,"command":["python","train.py"],"cwd":"/tmp","pid":7,"sample_interval_s":0.1}"#;
    const MB: u64 = 1 << 20;

    fn proc_json(pid: u32, ppid: u32, rss: u64, uss: Option<u64>) -> String {
        format!(
            r#"{{"pid":{pid},"ppid":{ppid},"name":"python","rss":{rss},"anon":{rss},"uss":{}}}"#,
            uss.map_or("null".to_string(), |u| u.to_string())
        )
    }

    /// 60 s, 100 steps a second; `procs(t)` gives the processes of each sample.
    fn trace(procs: impl Fn(f64, bool) -> Vec<String>) -> Trace {
        let mut lines = vec![HEADER.to_string()];
        for i in 0..600 {
            let t = i as f64 * 0.1;
            let rollup = i % 5 == 0;
            let ps = procs(t, rollup);
            lines.push(format!(
                r#"{{"kind":"sample","t":{t},"procs":[{}],"total":{{"rss":1}}}}"#,
                ps.join(",")
            ));
            lines.push(format!(
                r#"{{"kind":"step","t":{},"step":{},"source":"optimizer","pid":7}}"#,
                t + 0.01,
                i * 10
            ));
        }
        leakspy_trace::parse_trace(&lines.join("\n")).unwrap()
    }

    #[test]
    fn a_process_is_named_as_last_seen() {
        // Sampled first between its fork and its exec, under its parent's name.
        let t = trace(|t, _| {
            let p = proc_json(7, 1, 500 * MB, None);
            vec![if t == 0.0 {
                p.replace("\"python\"", "\"leakspy\"")
            } else {
                p
            }]
        });
        assert_eq!(process_label(&t, 7), "pid 7 (python)");
        let two = trace(|t, _| {
            let child = proc_json(8, 7, 300 * MB, None);
            vec![
                proc_json(7, 1, 500 * MB, None),
                if t < 1.0 {
                    child.replace("\"python\"", "\"leakspy\"")
                } else {
                    child
                },
            ]
        });
        let series = crate::extract::memory_series(&two, 3);
        let child = series.iter().find(|s| s.key == "proc.8.rss").unwrap();
        assert_eq!(child.what, "RSS of process 8 (python)");
    }

    #[test]
    fn a_process_per_epoch_left_alive_piles_up() {
        // One more process every 6 s, none ever ends.
        let t = trace(|t, rollup| {
            let mut v = vec![proc_json(7, 1, 500 * MB, rollup.then_some(400 * MB))];
            for k in 1..=(t / 6.0) as u32 {
                v.push(proc_json(100 + k, 7, 300 * MB, rollup.then_some(80 * MB)));
            }
            v
        });
        let clock = StepClock::from_trace(&t);
        let m = mechanisms(&t, &clock);
        let p = m
            .iter()
            .find(|m| m.kind == MechanismKind::ProcessesPileUp)
            .expect("pile-up");
        assert_eq!(p.pids.len(), 9, "{p:?}");
        assert!(p.summary.contains("every ~600 steps"), "{}", p.summary);
        assert!(p.summary.contains("80.0 MiB private"), "{}", p.summary);
    }

    #[test]
    fn processes_that_pile_up_are_a_leak_though_the_memory_levels() {
        // Five processes started in the first half, none ending; the tree's
        // PSS rises 80 MiB with each, then stays flat for the second half.
        let mut lines = vec![HEADER.to_string()];
        for i in 0..600 {
            let t = i as f64 * 0.1;
            let n = (t.min(30.0) / 6.0) as u32;
            let mut ps = vec![proc_json(7, 1, 500 * MB, Some(400 * MB))];
            for k in 1..=n {
                ps.push(proc_json(100 + k, 7, 300 * MB, Some(80 * MB)));
            }
            let rss = 500 * MB + u64::from(n) * 300 * MB;
            let pss = 500 * MB + u64::from(n) * 80 * MB;
            lines.push(format!(
                r#"{{"kind":"sample","t":{t},"procs":[{}],"total":{{"rss":{rss},"anon":{rss},"pss":{pss},"uss":{pss}}}}}"#,
                ps.join(",")
            ));
            lines.push(format!(
                r#"{{"kind":"step","t":{},"step":{},"source":"optimizer","pid":7}}"#,
                t + 0.01,
                i * 10
            ));
        }
        lines.push(r#"{"kind":"exit","t":60.0,"code":0,"status":0}"#.to_string());
        let t = leakspy_trace::parse_trace(&lines.join("\n")).unwrap();
        let d = crate::diagnose(&t, &crate::DiagnoseOptions::default());
        assert_eq!(d.headline, "total.pss");
        assert_eq!(d.verdict, leakspy_stats::Verdict::Leak, "{}", d.summary);
        assert!(d.summary.contains("processes pile up"), "{}", d.summary);
        assert!(
            d.mechanisms
                .iter()
                .any(|m| m.kind == MechanismKind::ProcessesPileUp),
            "{:?}",
            d.mechanisms
        );
    }

    #[test]
    fn workers_restarted_every_epoch_do_not_pile_up() {
        // Two workers per 10-s epoch, the old ones gone when the new start.
        let t = trace(|t, rollup| {
            let epoch = (t / 10.0) as u32;
            vec![
                proc_json(7, 1, 500 * MB, rollup.then_some(400 * MB)),
                proc_json(100 + 2 * epoch, 7, 300 * MB, rollup.then_some(20 * MB)),
                proc_json(101 + 2 * epoch, 7, 300 * MB, rollup.then_some(20 * MB)),
            ]
        });
        let clock = StepClock::from_trace(&t);
        assert!(mechanisms(&t, &clock).is_empty());
    }

    #[test]
    fn private_memory_rising_under_flat_rss_is_copy_on_read() {
        // Two workers: RSS flat at 500 MiB, USS from 20 to 220 MiB over the
        // first 30 s, then flat.
        let t = trace(|t, rollup| {
            let uss = (20.0 + 200.0 * (t / 30.0).min(1.0)) as u64 * MB;
            vec![
                proc_json(7, 1, 520 * MB, rollup.then_some(100 * MB)),
                proc_json(8, 7, 500 * MB, rollup.then_some(uss)),
                proc_json(9, 7, 500 * MB, rollup.then_some(uss)),
            ]
        });
        let clock = StepClock::from_trace(&t);
        let m = mechanisms(&t, &clock);
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(m[0].kind, MechanismKind::CopyOnRead);
        assert_eq!(m[0].pids, vec![8, 9]);
        assert!(m[0].summary.contains("copied 400 MiB"), "{}", m[0].summary);
        // Each can copy all it shares: 500 MiB each.
        assert_eq!(m[0].bound, Some(1000.0 * MIB));
        // A worker whose RSS grows with its private memory makes new memory.
        let t = trace(|t, rollup| {
            let uss = (20.0 + 200.0 * (t / 30.0).min(1.0)) as u64 * MB;
            vec![
                proc_json(7, 1, 520 * MB, rollup.then_some(100 * MB)),
                proc_json(8, 7, 480 * MB + uss, rollup.then_some(uss)),
            ]
        });
        assert!(mechanisms(&t, &StepClock::from_trace(&t)).is_empty());
    }
}

//! /proc sampler: the child's process tree, per process RSS / anonymous RSS /
//! swap from `status` (cheap, every sample), PSS / USS from `smaps_rollup`
//! (milliseconds per GiB, so only when asked), and `MemAvailable`.

use std::collections::{BTreeSet, HashMap};

use leakspy_trace::{MemTotals, ProcSample};
use procfs::process::Process;
use procfs::Current;

const KIB: u64 = 1024;
/// The ppid scan reads a file of every process of the machine.
const SCAN_FACTOR: u64 = 4;

/// Finds the descendants of a root pid and samples them. The tree is
/// re-discovered only every `refresh` calls: walking it reads one file per
/// thread. Not much more rarely, though: a DataLoader worker reading a data
/// set of Python objects copies a hundred MiB from its parent in its first
/// second, and a first look after that sees no copy-on-read.
/// Scanning every process's ppid (no children files) costs more: that is
/// done `SCAN_FACTOR` times more rarely.
pub struct ProcSampler {
    root: u32,
    pids: Vec<u32>,
    calls: u64,
    refresh_every: u64,
    /// Whether /proc/PID/task/TID/children exists (CONFIG_PROC_CHILDREN);
    /// without it the tree is found by scanning every process's ppid.
    children_files: bool,
    /// smaps_rollup was unreadable for these pids (permissions, hidepid): not retried.
    smaps_denied: BTreeSet<u32>,
    /// Seconds the last smaps_rollup reads of the whole tree took.
    rollup_s: f64,
}

impl ProcSampler {
    pub fn new(root: u32, refresh_every: u64) -> Self {
        let children_files =
            std::path::Path::new(&format!("/proc/{root}/task/{root}/children")).exists();
        ProcSampler {
            root,
            pids: vec![root],
            calls: 0,
            refresh_every: if children_files {
                refresh_every.max(1)
            } else {
                refresh_every.max(1) * SCAN_FACTOR
            },
            children_files,
            smaps_denied: BTreeSet::new(),
            rollup_s: 0.0,
        }
    }

    /// The pids of the tree as last discovered (root first).
    pub fn pids(&self) -> &[u32] {
        &self.pids
    }

    /// Samples every live process of the tree. With `rollup`, also PSS/USS.
    /// Processes that vanish between discovery and reading are skipped.
    pub fn sample(&mut self, rollup: bool) -> (Vec<ProcSample>, MemTotals) {
        if self.calls.is_multiple_of(self.refresh_every) {
            self.pids = if self.children_files {
                tree_from_children_files(self.root)
            } else {
                tree_from_ppid_scan(self.root)
            };
        }
        self.calls += 1;
        let mut procs = Vec::with_capacity(self.pids.len());
        let started = rollup.then(std::time::Instant::now);
        for &pid in &self.pids {
            if let Some(mut p) = read_status(pid) {
                if rollup && !self.smaps_denied.contains(&pid) {
                    match read_rollup(pid) {
                        Some(r) => {
                            p.pss = Some(r.pss);
                            p.uss = Some(r.uss);
                            p.pss_file = r.pss_file;
                        }
                        None => {
                            self.smaps_denied.insert(pid);
                        }
                    }
                }
                // RssFile goes with the rollup it corrects (MemTotals::tree_pss):
                // alone it would only lengthen every sample.
                if p.pss.is_none() {
                    p.rss_file = None;
                }
                procs.push(p);
            }
        }
        if let Some(t0) = started {
            self.rollup_s = t0.elapsed().as_secs_f64();
        }
        // Drop pids that are gone so later samples do not keep trying them.
        self.pids.retain(|pid| procs.iter().any(|p| p.pid == *pid));
        let totals = totals(&procs);
        (procs, totals)
    }

    /// Seconds the last sample with smaps_rollup took (the whole tree).
    pub fn rollup_seconds(&self) -> f64 {
        self.rollup_s
    }

    /// Whether smaps_rollup could not be read for some process.
    pub fn rollup_denied(&self) -> bool {
        !self.smaps_denied.is_empty()
    }
}

/// Sums of a sample; PSS/USS only when known for every process.
pub fn totals(procs: &[ProcSample]) -> MemTotals {
    let sum_opt = |f: fn(&ProcSample) -> Option<u64>| -> Option<u64> {
        if procs.is_empty() {
            return None;
        }
        procs.iter().map(f).sum()
    };
    MemTotals {
        rss: procs.iter().map(|p| p.rss).sum(),
        anon: procs.iter().map(|p| p.anon).sum(),
        swap: procs.iter().map(|p| p.swap).sum(),
        pss: sum_opt(|p| p.pss),
        uss: sum_opt(|p| p.uss),
        pss_file: sum_opt(|p| p.pss_file),
        rss_file: sum_opt(|p| p.rss_file),
    }
}

/// The hot path, 10 times a second per process: /proc/PID/status read into
/// a buffer and scanned for the five fields needed. (procfs's `Status` parses
/// all ~55 fields into a hash map and strings each time, which was most of
/// the monitor's CPU.) `parse_status` is checked against procfs in the tests.
fn read_status(pid: u32) -> Option<ProcSample> {
    use std::io::Read;
    let mut buf = Vec::with_capacity(1536);
    std::fs::File::open(format!("/proc/{pid}/status"))
        .ok()?
        .read_to_end(&mut buf)
        .ok()?;
    let mut p = parse_status(pid, &String::from_utf8_lossy(&buf))?;
    buf.clear();
    if std::fs::File::open(format!("/proc/{pid}/stat"))
        .and_then(|mut f| f.read_to_end(&mut buf))
        .is_ok()
    {
        p.cpu_s = parse_stat_cpu(&String::from_utf8_lossy(&buf));
    }
    Some(p)
}

/// Clock ticks per second of `/proc/PID/stat`'s times.
fn clock_ticks() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        // SAFETY: sysconf reads a configuration value; no memory is touched.
        let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        if t > 0 {
            t as f64
        } else {
            100.0
        }
    })
}

/// utime + stime (fields 14 and 15) of a stat line, in seconds. The
/// command name (field 2) may hold spaces and parentheses: fields are
/// counted after its last `)`.
fn parse_stat_cpu(text: &str) -> Option<f64> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    // After `)`: state is field 3, so utime (14) is the 12th from here.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / clock_ticks())
}

/// Name, PPid, VmRSS, RssAnon, RssFile and VmSwap of a status file (kB → bytes).
fn parse_status(pid: u32, text: &str) -> Option<ProcSample> {
    let mut name = None;
    let mut ppid = 0;
    let mut rss = None;
    let mut anon = 0;
    let mut file = None;
    let mut swap = 0;
    let kib = |v: &str| {
        v.split_ascii_whitespace()
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .map(|n| n * KIB)
    };
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        match key {
            "Name" => name = Some(value.trim().to_string()),
            "PPid" => ppid = value.trim().parse().unwrap_or(0),
            "VmRSS" => rss = kib(value),
            "RssAnon" => anon = kib(value).unwrap_or(0),
            "RssFile" => file = kib(value),
            "VmSwap" => {
                swap = kib(value).unwrap_or(0);
                // The last of the fields needed: skip the rest of the file.
                break;
            }
            _ => {}
        }
    }
    // A zombie has no memory and no VmRSS line: it is not part of the live tree.
    Some(ProcSample {
        pid,
        ppid,
        name: name?,
        rss: rss?,
        anon,
        swap,
        pss: None,
        uss: None,
        pss_file: None,
        rss_file: file,
        cpu_s: None,
    })
}

/// What one smaps_rollup read gives, in bytes (procfs already converts
/// smaps' kB).
struct Rollup {
    pss: u64,
    uss: u64,
    /// `Pss_File`, on kernels that split PSS (5.8 and later).
    pss_file: Option<u64>,
}

fn read_rollup(pid: u32) -> Option<Rollup> {
    let rollup = Process::new(i32::try_from(pid).ok()?)
        .ok()?
        .smaps_rollup()
        .ok()?;
    let map = &rollup.memory_map_rollup.0.first()?.extension.map;
    let get = |k: &str| map.get(k).copied().unwrap_or(0);
    Some(Rollup {
        pss: *map.get("Pss")?,
        uss: get("Private_Clean") + get("Private_Dirty"),
        pss_file: map.get("Pss_File").copied(),
    })
}

/// The tree below `root` via the kernel's children lists (one file per thread,
/// because each thread lists the children it forked itself). Never the
/// monitor itself (nor what it started), as in [`descendants`].
fn tree_from_children_files(root: u32) -> Vec<u32> {
    let me = std::process::id();
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let pid = out[i];
        i += 1;
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Ok(text) = std::fs::read_to_string(task.path().join("children")) else {
                continue;
            };
            for child in text
                .split_ascii_whitespace()
                .filter_map(|s| s.parse::<u32>().ok())
                .filter(|&c| c != me)
            {
                if !out.contains(&child) {
                    out.push(child);
                }
            }
        }
    }
    out
}

/// The tree below `root` from every process's ppid (slower: reads all of /proc).
fn tree_from_ppid_scan(root: u32) -> Vec<u32> {
    let mut parent_of: HashMap<u32, u32> = HashMap::new();
    if let Ok(all) = procfs::process::all_processes() {
        for p in all.flatten() {
            if let Ok(stat) = p.stat() {
                if let (Ok(pid), Ok(ppid)) = (u32::try_from(stat.pid), u32::try_from(stat.ppid)) {
                    parent_of.insert(pid, ppid);
                }
            }
        }
    }
    descendants(root, &parent_of)
}

/// Root first, then descendants breadth-first, from a pid → ppid map. Never the monitor
/// itself (nor what it started): attached to the process that started it (a notebook kernel
/// watching itself), it is one of its descendants.
pub fn descendants(root: u32, parent_of: &HashMap<u32, u32>) -> Vec<u32> {
    let me = std::process::id();
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        i += 1;
        let mut kids: Vec<u32> = parent_of
            .iter()
            .filter(|&(&pid, &ppid)| ppid == parent && pid != parent && pid != me)
            .map(|(&pid, _)| pid)
            .collect();
        kids.sort_unstable();
        for k in kids {
            if !out.contains(&k) {
                out.push(k);
            }
        }
    }
    out
}

/// `MemAvailable` of /proc/meminfo, bytes.
pub fn mem_available() -> Option<u64> {
    procfs::Meminfo::current().ok()?.mem_available
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_read_past_a_name_with_parentheses_and_spaces() {
        let line = "4242 (python (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 \
                    100 1000 10 18446744073709551615";
        let s = parse_stat_cpu(line).unwrap();
        assert!((s - 300.0 / clock_ticks()).abs() < 1e-9, "{s}");
        assert_eq!(parse_stat_cpu("garbage"), None);
    }

    #[test]
    fn this_process_has_used_cpu_time() {
        let me = read_status(std::process::id()).unwrap();
        assert!(me.cpu_s.is_some_and(|s| s >= 0.0), "{me:?}");
    }

    #[test]
    fn status_parser_agrees_with_procfs() {
        let me = std::process::id();
        let ours = read_status(me).unwrap();
        let theirs = Process::myself().unwrap().status().unwrap();
        assert_eq!(ours.name, theirs.name);
        assert_eq!(i64::from(ours.ppid), i64::from(theirs.ppid));
        // RSS moves between the two reads; swap and anon are read the same way.
        assert!(ours.rss > 0 && theirs.vmrss.unwrap() > 0);
        assert!(ours.anon <= ours.rss);
        let fixed = "Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nPPid:\t42\nVmRSS:\t  2048 kB\nRssAnon:\t  1024 kB\nRssFile:\t  1000 kB\nVmSwap:\t 8 kB\n";
        let p = parse_status(7, fixed).unwrap();
        assert_eq!(
            (p.name.as_str(), p.ppid, p.rss, p.anon, p.rss_file, p.swap),
            ("python3", 42, 2 << 20, 1 << 20, Some(1000 << 10), 8192)
        );
        // A zombie: no VmRSS.
        assert!(parse_status(7, "Name:\tx\nState:\tZ (zombie)\nPPid:\t1\n").is_none());
    }

    #[test]
    fn descendants_follow_ppid_links_only() {
        let map: HashMap<u32, u32> = [(10, 1), (11, 10), (12, 10), (13, 11), (20, 1), (21, 20)]
            .into_iter()
            .collect();
        assert_eq!(descendants(10, &map), vec![10, 11, 12, 13]);
        assert_eq!(descendants(21, &map), vec![21]);
    }

    #[test]
    fn samples_a_real_tree_of_processes() {
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg("sleep 5 & sleep 5 & wait")
            .spawn()
            .unwrap();
        let root = child.id();
        // The shell forks its two sleeps right away, but give it a moment.
        let mut found = Vec::new();
        for _ in 0..250 {
            let mut s = ProcSampler::new(root, 1);
            let (procs, totals) = s.sample(true);
            // A forked child is named `sh` until it has exec'd `sleep`: wait for both.
            if procs.len() == 3 && procs[1..].iter().all(|p| p.name == "sleep") {
                found = procs;
                assert_eq!(totals.rss, found.iter().map(|p| p.rss).sum::<u64>());
                assert!(totals.rss > 0);
                assert!(totals.pss.is_some() && totals.uss.is_some());
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(found.len(), 3, "expected sh and two sleeps");
        assert_eq!(found[0].pid, root);
        assert!(found[1..]
            .iter()
            .all(|p| p.ppid == root && p.name == "sleep"));
        // Without the ppid scan fallback being exercised elsewhere, check it agrees.
        assert!(mem_available().unwrap() > 0);
    }

    /// A process that maps `file` and reads every page, then waits.
    fn mapping(file: &std::path::Path) -> std::process::Child {
        use std::io::BufRead;
        let script = "import mmap, sys, time\n\
            f = open(sys.argv[1], 'rb')\n\
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)\n\
            print(sum(m[i] for i in range(0, len(m), 4096)), flush=True)\n\
            time.sleep(60)\n";
        let mut child = std::process::Command::new("python3")
            .args(["-c", script])
            .arg(file)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(!line.is_empty(), "the mapping process did not start");
        child
    }

    #[test]
    fn the_trees_memory_does_not_move_when_a_process_outside_maps_its_files() {
        // Another torch job starting maps the same libtorch pages as the
        // watched one: plain PSS then falls by half of them without the
        // tree doing anything, and rises again when it exits.
        const MIB: u64 = 1 << 20;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("shared.bin");
        std::fs::write(&file, vec![1u8; 64 * MIB as usize]).unwrap();
        let mut inside = mapping(&file);
        let mut sampler = ProcSampler::new(inside.id(), 1);
        let (_, alone) = sampler.sample(true);
        let mut outside = mapping(&file);
        let (_, beside) = sampler.sample(true);
        outside.kill().unwrap();
        outside.wait().unwrap();
        inside.kill().unwrap();
        inside.wait().unwrap();
        let (pss_alone, pss_beside) = (alone.pss.unwrap(), beside.pss.unwrap());
        assert!(
            pss_alone >= pss_beside + 24 * MIB,
            "PSS did not split the file's pages: {alone:?} then {beside:?}"
        );
        let (tree_alone, tree_beside) = (alone.tree_pss().unwrap(), beside.tree_pss().unwrap());
        if alone.pss_file.is_none() {
            // A kernel before 5.8 does not split PSS: plain PSS is all there is.
            assert_eq!((tree_alone, tree_beside), (pss_alone, pss_beside));
            return;
        }
        assert!(
            tree_alone.abs_diff(tree_beside) < 4 * MIB,
            "the tree's memory moved with a process outside it: {alone:?} then {beside:?}"
        );
        assert!(alone.rss_file.unwrap() >= 64 * MIB, "{alone:?}");
    }

    #[test]
    fn the_monitor_is_never_in_the_tree_it_watches() {
        // Watching the process that started it (a notebook kernel watching
        // itself), the monitor is one of its descendants: it must not count
        // its own memory (nor make the tree look like several processes).
        let me = std::process::id();
        let parent = std::os::unix::process::parent_id();
        assert!(!tree_from_children_files(parent).contains(&me));
        assert!(!tree_from_ppid_scan(parent).contains(&me));
    }

    #[test]
    fn ppid_scan_finds_the_same_tree() {
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg("sleep 5 & wait")
            .spawn()
            .unwrap();
        let root = child.id();
        let mut ok = false;
        for _ in 0..50 {
            let a = tree_from_ppid_scan(root);
            let b = tree_from_children_files(root);
            if a.len() == 2 && b.len() == 2 {
                assert_eq!(a, b);
                ok = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(ok);
    }
}

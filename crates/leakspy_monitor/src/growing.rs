//! Which processes of the tree have memory of their own growing lately: a
//! burst of censuses goes to those, and to the process that steps. A census
//! lists every object (`gc.get_objects`), and listing one writes its reference
//! count: in a forked DataLoader worker whose memory stays flat, that would copy
//! every page it shares with the parent (80 MiB a worker in a small torch job),
//! memory the job never used, which the report would then have to call
//! copy-on-read.

use std::collections::{HashMap, VecDeque};

use leakspy_trace::Sample;

/// How far back a process's private memory is looked at.
const WINDOW_S: f64 = 10.0;
/// The least span of that window that tells anything (a process younger
/// than this is not known to grow).
const MIN_SPAN_S: f64 = 3.0;
/// Growth over the window that counts: above an allocator's churn in a
/// flat process, below a leak of a few KiB per step at a few steps a second.
const MIN_RISE: u64 = 1 << 20;

#[derive(Debug, Default)]
pub(crate) struct Growing {
    /// Per process: (t, USS) where smaps_rollup was read, and (t, anonymous
    /// resident memory) at every sample; the two are never mixed (a forked
    /// worker's anonymous memory counts the pages it shares, its USS not).
    recent: HashMap<u32, [VecDeque<(f64, u64)>; 2]>,
}

impl Growing {
    pub(crate) fn on_sample(&mut self, s: &Sample) {
        for p in &s.procs {
            let [uss, anon] = self.recent.entry(p.pid).or_default();
            if let Some(u) = p.uss {
                push(uss, s.t, u);
            }
            push(anon, s.t, p.anon);
        }
        self.recent
            .retain(|pid, _| s.procs.iter().any(|p| p.pid == *pid));
    }

    /// Whether `pid`'s private memory (its USS, where read; else its
    /// anonymous resident memory) rose by more than churn over the last few
    /// seconds.
    pub(crate) fn grows(&self, pid: u32) -> bool {
        let Some([uss, anon]) = self.recent.get(&pid) else {
            return false;
        };
        let q = if uss.len() >= 2 { uss } else { anon };
        let (Some(&(t0, _)), Some(&(t1, last))) = (q.front(), q.back()) else {
            return false;
        };
        let low = q.iter().map(|&(_, m)| m).min().unwrap_or(last);
        t1 - t0 >= MIN_SPAN_S && last.saturating_sub(low) >= MIN_RISE
    }
}

/// Adds a point, and lets go of those older than the window (but for the two
/// newest).
fn push(q: &mut VecDeque<(f64, u64)>, t: f64, m: u64) {
    q.push_back((t, m));
    while q.len() > 2 && q.front().is_some_and(|&(t0, _)| t - t0 > WINDOW_S) {
        q.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leakspy_trace::ProcSample;

    fn sample(t: f64, procs: &[(u32, u64)]) -> Sample {
        Sample {
            t,
            procs: procs
                .iter()
                .map(|&(pid, uss)| ProcSample {
                    pid,
                    ppid: 1,
                    name: "python".into(),
                    // A worker's anonymous memory counts what it shares.
                    rss: uss + 400 * (1 << 20),
                    anon: uss + 400 * (1 << 20),
                    swap: 0,
                    pss: None,
                    uss: (t as u64).is_multiple_of(2).then_some(uss),
                    pss_file: None,
                    rss_file: None,
                    cpu_s: None,
                })
                .collect(),
            total: leakspy_trace::MemTotals::default(),
            mem_available: None,
            cgroup: None,
        }
    }

    #[test]
    fn a_worker_flat_after_start_up_is_not_growing_and_a_filling_one_is() {
        const MIB: u64 = 1 << 20;
        let mut g = Growing::default();
        for i in 0..40 {
            let t = i as f64 * 0.5;
            // 7: started at 15 MiB, 22 after its start-up, then flat. 8: a
            // cache filling 300 KiB a second.
            let flat = if t < 2.0 { 15 * MIB } else { 22 * MIB };
            let filling = 20 * MIB + (t * 300.0 * 1024.0) as u64;
            g.on_sample(&sample(t, &[(7, flat), (8, filling)]));
        }
        assert!(!g.grows(7));
        assert!(g.grows(8));
        // Unknown, or too young to tell.
        assert!(!g.grows(9));
        g.on_sample(&sample(20.0, &[(7, 22 * MIB), (9, 10 * MIB)]));
        g.on_sample(&sample(21.0, &[(7, 22 * MIB), (9, 40 * MIB)]));
        assert!(!g.grows(9));
        // Gone from the tree: forgotten.
        assert!(!g.recent.contains_key(&8));
    }
}

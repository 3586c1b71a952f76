//! The allocators' part in what grows, each told by what the probe
//! measured: glibc's malloc keeping memory that was freed (the per-thread
//! arenas threads make, fragmentation), seen in `mallinfo2` and a
//! `malloc_trim(0)` at the end of the run; and torch's CUDA caching
//! allocator keeping freed blocks (reserved grows while allocated does
//! not), seen in its own counters and the GPU's used memory.

use std::collections::BTreeMap;

use leakspy_stats::{fmt_bytes, theil_sen};
use leakspy_trace::{Census, MallocCensus, Trace};

use crate::census::GrowthGroup;
use crate::model::{Growth, InUse, Mechanism, MechanismKind};
use crate::processes::process_label;

const MIB: f64 = 1024.0 * 1024.0;
/// Least rise of memory that malloc keeps free (or CUDA reserves) that is
/// worth a word: below it, allocator noise.
const MIN_RISE: f64 = 16.0 * MIB;
/// ... and of the level it rose from.
const MIN_RISE_REL: f64 = 0.05;
/// Memory in use may rise by at most this share of the rise of what is
/// kept free (reserved) for the rise to be the allocator's.
const IN_USE_SHARE: f64 = 0.25;

pub(crate) fn mechanisms(trace: &Trace, growth: &[GrowthGroup]) -> Vec<Mechanism> {
    let mut out = Vec::new();
    out.extend(glibc(trace, growth));
    out.extend(cuda(trace, growth));
    out
}

/// The census points of each process (warm-up and looks after the end left
/// out), in order.
fn points(trace: &Trace) -> BTreeMap<u32, Vec<&Census>> {
    let mut seen: BTreeMap<u32, usize> = BTreeMap::new();
    let mut out: BTreeMap<u32, Vec<&Census>> = BTreeMap::new();
    for c in trace.census() {
        let n = seen.entry(c.pid).or_default();
        *n += 1;
        if c.is_point(*n == 1) {
            out.entry(c.pid).or_default().push(c);
        }
    }
    out
}

/// Least census points of one process that a fit of its memory in use takes.
const IN_USE_POINTS: usize = 4;

/// What glibc's malloc holds allocated and not freed (`uordblks`, and the chunks it `mmap`s
/// apart, `hblkhd`) in the process with the most census readings of it, fitted over them: per
/// step where every reading has the process's step count, else per second. The memory malloc
/// keeps free does not move it, so it tells a fix apart from the allocator's noise.
pub(crate) fn in_use(trace: &Trace) -> Option<InUse> {
    let (pid, readings) = points(trace)
        .into_iter()
        .map(|(pid, cs)| {
            let m: Vec<(&Census, MallocCensus)> = cs
                .into_iter()
                .filter_map(|c| Some((c, c.malloc?)))
                .collect();
            (pid, m)
        })
        .filter(|(_, m)| m.len() >= IN_USE_POINTS)
        // The most readings; of equals, the process read first (the job's own).
        .min_by(|a, b| {
            b.1.len()
                .cmp(&a.1.len())
                .then(a.1[0].0.t.total_cmp(&b.1[0].0.t))
        })?;
    let per_step = readings.iter().all(|(c, _)| c.step.is_some());
    let x: Vec<f64> = readings
        .iter()
        .map(|(c, _)| match (per_step, c.step) {
            (true, Some(s)) => s as f64,
            _ => c.t,
        })
        .collect();
    let y: Vec<f64> = readings.iter().map(|(_, m)| m.in_use + m.mmapped).collect();
    let t = theil_sen(&x, &y, 0.95)?;
    let unit = if per_step { "step" } else { "s" };
    Some(InUse {
        pid,
        growth: Growth::of_bytes(&t, unit),
        points: readings.len(),
        readings: x.iter().copied().zip(y.iter().copied()).collect(),
        intercept: t.intercept,
    })
}

/// A held group of the user's in this process that grows: Python objects
/// explain its memory, not the allocator.
fn held_in(growth: &[GrowthGroup], pid: u32) -> bool {
    growth.iter().any(|g| {
        g.pid == pid
            && g.holder
                .as_ref()
                .is_some_and(|h| h.is_named() && !h.library)
    })
}

/// Each process whose glibc malloc came to hold much more freed memory
/// over the run (the memory it holds free rose by MIN_RISE and
/// MIN_RISE_REL of its level, and memory in use by at most IN_USE_SHARE of
/// that): its pid and its first and last census readings.
fn freed_rises(trace: &Trace) -> Vec<(u32, MallocCensus, MallocCensus)> {
    let mut out = Vec::new();
    for (pid, cs) in points(trace) {
        let m: Vec<_> = cs.iter().filter_map(|c| c.malloc).collect();
        if m.len() < 3 {
            continue;
        }
        let (first, last) = (m[0], m[m.len() - 1]);
        let free_rise = last.free - first.free;
        let used_rise = last.in_use - first.in_use;
        let level = first.heap + first.mmapped;
        if free_rise >= MIN_RISE.max(MIN_RISE_REL * level) && used_rise <= IN_USE_SHARE * free_rise
        {
            out.push((pid, first, last));
        }
    }
    out
}

/// glibc keeps what the job freed: the memory it holds free rises while
/// the memory in use does not.
fn glibc(trace: &Trace, growth: &[GrowthGroup]) -> Option<Mechanism> {
    let mut best: Option<(u32, f64, f64, Vec<String>)> = None;
    for (pid, first, last) in freed_rises(trace) {
        let free_rise = last.free - first.free;
        let used_rise = last.in_use - first.in_use;
        let mut evidence = vec![format!(
            "{}: glibc's malloc holds {} freed but not returned (mallinfo2 fordblks, {} at the \
             first census), while memory in use rose {}",
            process_label(trace, pid),
            fmt_bytes(last.free),
            fmt_bytes(first.free),
            fmt_bytes(used_rise.max(0.0))
        )];
        // (Arenas that did not multiply say nothing.)
        if let (Some(a0), Some(a1)) = (first.arenas, last.arenas) {
            if a1 > a0 {
                evidence.push(format!(
                "malloc arenas: {a0:.0} at the first census, {a1:.0} at the last (glibc makes one \
                 per thread that finds the others busy, up to 8 per core, each keeping its own \
                 free memory)"
                ));
            }
        }
        if let Some(t) = trace
            .costs()
            .filter(|c| c.pid == Some(pid))
            .filter_map(|c| c.malloc_trim)
            .last()
        {
            evidence.push(format!(
                "malloc_trim(0) at the end of the run returned {} to the system (resident memory \
                 {} before, {} after)",
                fmt_bytes((t.rss_before - t.rss_after).max(0.0)),
                fmt_bytes(t.rss_before),
                fmt_bytes(t.rss_after)
            ));
        }
        if best.as_ref().is_none_or(|b| free_rise > b.1) {
            best = Some((pid, free_rise, used_rise.max(0.0), evidence));
        }
    }
    let (pid, rise, used, evidence) = best?;
    // Objects of the user's that grow beside it: they are the leak, and
    // the freed memory kept between them (a small object kept from each
    // step among the step's freed temporaries) is what they cost beyond
    // their own size.
    let (summary, fix) = if held_in(growth, pid) {
        (
            format!(
                "the allocator: glibc's malloc kept {} more of freed memory in {} beside the \
                 objects that grow, while the memory in use rose {}: the heap keeps what each \
                 step frees between what it keeps, so the leak costs more than its objects",
                fmt_bytes(rise),
                process_label(trace, pid),
                fmt_bytes(used)
            ),
            "stop keeping the objects that grow (below): the freed memory kept between them \
             goes with them; jemalloc (`LD_PRELOAD=libjemalloc.so.2`) returns freed memory to \
             the system meanwhile"
                .to_string(),
        )
    } else {
        (
            format!(
                "the allocator: glibc's malloc kept {} more of freed memory in {} without Python \
                 objects or tensors growing (fragmentation, and per-thread arenas)",
                fmt_bytes(rise),
                process_label(trace, pid)
            ),
            "cap glibc's arenas (`MALLOC_ARENA_MAX=2` in the job's environment), or run with \
             jemalloc (`LD_PRELOAD=libjemalloc.so.2`), whose freed memory goes back to the system"
                .to_string(),
        )
    };
    Some(Mechanism {
        kind: MechanismKind::Allocator,
        summary,
        evidence,
        fix: Some(fix),
        bound: None,
        pids: vec![pid],
        location: None,
    })
}

/// torch's caching allocator keeps freed blocks for reuse: reserved memory
/// that grows while the memory allocated to tensors does not is blocks that
/// no new request fits (fragmentation), not tensors kept.
fn cuda(trace: &Trace, growth: &[GrowthGroup]) -> Option<Mechanism> {
    let mut best: Option<(u32, f64, Vec<String>)> = None;
    for (pid, cs) in points(trace) {
        let m: Vec<_> = cs.iter().filter_map(|c| c.cuda).collect();
        if m.len() < 3 {
            continue;
        }
        let kept_tensors = growth.iter().any(|g| {
            g.pid == pid
                && g.growers
                    .iter()
                    .any(|gr| gr.key.starts_with("tensors:cuda") || gr.key == "cuda.allocated")
        });
        let (first, last) = (m[0], m[m.len() - 1]);
        let reserved_rise = last.reserved - first.reserved;
        let allocated_rise = last.allocated - first.allocated;
        if kept_tensors
            || reserved_rise < MIN_RISE.max(MIN_RISE_REL * first.reserved)
            || allocated_rise > IN_USE_SHARE * reserved_rise
        {
            continue;
        }
        let mut evidence = vec![format!(
            "{}: CUDA memory reserved by the caching allocator rose {} ({} to {}) over {} censuses \
             while memory allocated to tensors rose {} ({} at the last)",
            process_label(trace, pid),
            fmt_bytes(reserved_rise),
            fmt_bytes(first.reserved),
            fmt_bytes(last.reserved),
            m.len(),
            fmt_bytes(allocated_rise.max(0.0)),
            fmt_bytes(last.allocated)
        )];
        if let Some(rise) = gpu_used_rise(trace, pid) {
            evidence.push(format!(
                "the GPU's used memory for this process (NVML) rose {}",
                fmt_bytes(rise)
            ));
        }
        if best.as_ref().is_none_or(|b| reserved_rise > b.1) {
            best = Some((pid, reserved_rise, evidence));
        }
    }
    let (pid, rise, evidence) = best?;
    Some(Mechanism {
        kind: MechanismKind::CudaCachingAllocator,
        summary: format!(
            "CUDA's caching allocator: {} more reserved while tensors' memory stayed flat — freed \
             blocks that new requests of other sizes do not fit (fragmentation), not a tensor leak",
            fmt_bytes(rise)
        ),
        evidence,
        fix: Some(
            "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` (segments that grow in place \
             rather than a new block per size); fewer distinct tensor sizes (pad variable-length \
             batches to a few lengths); torch.cuda.empty_cache() returns the cached blocks, at a \
             speed cost"
                .to_string(),
        ),
        bound: None,
        pids: vec![pid],
        location: None,
    })
}

/// The rise of one process's GPU memory as NVML saw it (from a quarter of
/// the run, past start-up, to the end).
fn gpu_used_rise(trace: &Trace, pid: u32) -> Option<f64> {
    let used: Vec<f64> = trace
        .gpu()
        .filter_map(|g| {
            let v: u64 = g
                .devices
                .iter()
                .flat_map(|d| &d.procs)
                .filter(|p| p.pid == pid)
                .map(|p| p.used)
                .sum();
            (v > 0).then_some(v as f64)
        })
        .collect();
    let n = used.len();
    (n >= 6)
        .then(|| used[n - 1] - used[n / 4])
        .filter(|r| *r > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"kind":"header","format":"leakspy-trace","version":1,"t":0.0,"started_at":0.0,"command":["python","train.py"],"cwd":"/tmp","pid":7,"sample_interval_s":0.1}"#;

    fn trace(extra: &[String]) -> Trace {
        let mut lines = vec![HEADER.to_string()];
        lines.extend(extra.iter().cloned());
        leakspy_trace::parse_trace(&lines.join("\n")).unwrap()
    }

    /// Eight censuses of a CUDA job: `cuda(i)` gives (allocated, reserved)
    /// in MiB; NVML's used memory follows reserved.
    fn cuda_run(cuda: impl Fn(u32) -> (f64, f64)) -> Vec<String> {
        let mut v = Vec::new();
        for i in 1..=8u32 {
            let (a, r) = cuda(i);
            v.push(format!(
                r#"{{"kind":"census","t":{},"pid":7,"step":{},"n":{i},"warmup":{},"cuda":{{"allocated":{},"reserved":{}}}}}"#,
                i * 5,
                i * 500,
                i == 1,
                a * MIB,
                r * MIB
            ));
            for k in 0..5 {
                v.push(format!(
                    r#"{{"kind":"gpu","t":{},"devices":[{{"index":0,"name":"H100","used":1,"total":2,"procs":[{{"pid":7,"used":{}}}]}}]}}"#,
                    f64::from(i * 5 + k),
                    ((r + 500.0) * MIB) as u64
                ));
            }
        }
        v
    }

    #[test]
    fn reserved_rising_over_flat_allocated_is_the_caching_allocator() {
        let t = trace(&cuda_run(|i| (800.0, 1000.0 + 150.0 * f64::from(i))));
        let m = mechanisms(&t, &[]);
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(m[0].kind, MechanismKind::CudaCachingAllocator);
        assert!(
            m[0].summary.contains("900 MiB more reserved"),
            "{}",
            m[0].summary
        );
        assert!(
            m[0].fix
                .as_deref()
                .unwrap()
                .contains("expandable_segments:True"),
            "{:?}",
            m[0].fix
        );
        assert!(
            m[0].evidence.iter().any(|e| e.contains("NVML")),
            "{:?}",
            m[0].evidence
        );
        // Tensors kept: allocated rises with reserved; a leak, not the allocator.
        let t = trace(&cuda_run(|i| {
            (800.0 + 140.0 * f64::from(i), 1000.0 + 150.0 * f64::from(i))
        }));
        assert!(mechanisms(&t, &[]).is_empty());
        // Flat: nothing to say.
        let t = trace(&cuda_run(|_| (800.0, 1000.0)));
        assert!(mechanisms(&t, &[]).is_empty());
    }

    #[test]
    fn malloc_keeping_freed_memory_is_the_allocator() {
        let censuses = |free: &dyn Fn(u32) -> f64, used: &dyn Fn(u32) -> f64| -> Vec<String> {
            (1..=6u32)
                .map(|i| {
                    format!(
                        r#"{{"kind":"census","t":{},"pid":7,"step":{},"n":{i},"warmup":{},"malloc":{{"heap":{},"mmapped":0,"in_use":{},"free":{},"arenas":{}}}}}"#,
                        i * 5,
                        i * 500,
                        i == 1,
                        (free(i) + used(i)) * MIB,
                        used(i) * MIB,
                        free(i) * MIB,
                        2 + i
                    )
                })
                .collect()
        };
        let mut lines = censuses(&|i| 10.0 + 40.0 * f64::from(i), &|_| 100.0);
        lines.push(r#"{"kind":"cost","t":40,"pid":7,"probe_s":0.1,"wall_s":40,"malloc_trim":{"rss_before":734003200,"rss_after":524288000}}"#.to_string());
        let t = trace(&lines);
        let m = mechanisms(&t, &[]);
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(m[0].kind, MechanismKind::Allocator);
        assert!(m[0].fix.as_deref().unwrap().contains("MALLOC_ARENA_MAX=2"));
        assert!(
            m[0].evidence
                .iter()
                .any(|e| e.contains("malloc_trim(0)") && e.contains("200 MiB")),
            "{:?}",
            m[0].evidence
        );
        assert!(
            m[0].evidence.iter().any(|e| e.contains("4 at the first")),
            "{:?}",
            m[0].evidence
        );
        // Beside a holder of the user's whose objects grow: the allocator
        // multiplies what they cost, and stopping them is the fix.
        let mut held =
            crate::census::tests::group_of("attribute", "MetricLog.losses", "tensors", 0.0);
        held.pid = 7;
        let m = mechanisms(&t, std::slice::from_ref(&held));
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(
            m[0].summary.contains("beside the objects that grow"),
            "{}",
            m[0].summary
        );
        assert!(m[0].fix.as_deref().unwrap().starts_with("stop keeping"));
        // Memory in use growing (arrays, tensors kept) is not the allocator's.
        let t = trace(&censuses(&|i| 10.0 + 40.0 * f64::from(i), &|i| {
            100.0 + 40.0 * f64::from(i)
        }));
        assert!(mechanisms(&t, &[]).is_empty());
    }
}

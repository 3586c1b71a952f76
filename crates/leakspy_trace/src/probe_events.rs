//! The in-process probe's events (`docs/probe.md`, "Messages"): the
//! contract between the Python probe and the report. Every field the
//! probe may leave out is optional; fields this version does not know are
//! kept in `extra` and written back unchanged, so a newer probe's additions
//! survive a trip through an older monitor.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Object census of one process at a step boundary (or on a timer in a
/// process that never steps).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Census {
    #[serde(default)]
    pub t: f64,
    pub pid: u32,
    /// Steps counted in this process when it ran (absent on a timer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    /// `optimizer`, `manual` or `timer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Number of the census in its process (1 for the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u64>,
    /// Wall seconds the census took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_s: Option<f64>,
    /// CPU seconds of the census's thread (what the budget is charged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_s: Option<f64>,
    /// The longest the job paused for one slice of it (wall seconds): a
    /// census is done in slices between steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_s: Option<f64>,
    /// How many slices it took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slices: Option<u64>,
    /// Messages the probe dropped since the last census (a full socket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped: Option<u64>,
    /// Whether it is warm-up (not a point of any series). Absent from older
    /// probes, whose first census was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<bool>,
    /// A last look: `exit` (after the program's own end: what its functions
    /// held is gone, so not a point of any series) or `detach`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub look: Option<String>,
    /// The number of the burst it was taken in, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    /// Objects the cyclic collector tracks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objects: Option<u64>,
    /// Objects per type (`module.qualname`).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub types: BTreeMap<String, f64>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub tensors: Vec<TensorGroup>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph: Option<GraphCensus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modules: Option<ModuleCensus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numpy: Option<NumpyCensus>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub containers: Vec<ContainerLen>,
    /// Containers bounded by construction (a `deque` with a `maxlen`),
    /// followed from their first rise: they fill, then stay flat.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_empty"
    )]
    pub bounded: Vec<BoundedLen>,
    /// Open matplotlib figures (pyplot imported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub figures: Option<f64>,
    /// torch's caching allocator (CUDA initialised).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<CudaCensus>,
    /// What the process is to the job, when the probe can tell
    /// (`DataLoader worker 1 of 2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// glibc's malloc in this process (`mallinfo2`), when readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub malloc: Option<MallocCensus>,
    /// Fields this version does not know.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Census {
    /// Whether this census is a point of the census series: not warm-up
    /// (`first`: whether it is its process's first, for older probes that
    /// did not say) and not a look after the program's end.
    pub fn is_point(&self, first: bool) -> bool {
        !self.warmup.unwrap_or(first) && self.look.as_deref() != Some("exit")
    }
}

/// Tensors of one device, dtype and kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TensorGroup {
    #[serde(default, deserialize_with = "null_as_empty")]
    pub device: String,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub dtype: String,
    #[serde(default)]
    pub requires_grad: bool,
    #[serde(default)]
    pub grad_fn: bool,
    #[serde(default)]
    pub count: f64,
    /// Storage bytes, each storage counted once.
    #[serde(default)]
    pub bytes: f64,
}

impl TensorGroup {
    /// `grad`, `leaf` or `plain`: the third part of its series key.
    pub fn kind(&self) -> &'static str {
        if self.grad_fn {
            "grad"
        } else if self.requires_grad {
            "leaf"
        } else {
            "plain"
        }
    }
}

/// The autograd graphs alive at the step boundary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GraphCensus {
    /// Tensors with a `grad_fn`.
    #[serde(default)]
    pub roots: f64,
    /// Distinct autograd nodes reachable from them (up to the walk's cap).
    #[serde(default)]
    pub nodes: f64,
    /// Bytes of the tensors those nodes saved for backward.
    #[serde(default)]
    pub saved_bytes: f64,
    /// Nodes of the largest one graph (below the cap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub largest: Option<f64>,
    /// The walk stopped at its cap: `nodes` is a lower bound.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub capped: bool,
    /// With `capped`: nodes made since the oldest node the graphs keep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<f64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub saved_partial: bool,
}

/// `nn.Module` instances.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModuleCensus {
    #[serde(default)]
    pub count: f64,
    #[serde(default)]
    pub param_bytes: f64,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub by_class: BTreeMap<String, f64>,
}

/// numpy arrays reached from the user's containers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct NumpyCensus {
    #[serde(default)]
    pub count: f64,
    #[serde(default)]
    pub bytes: f64,
}

/// One container followed by id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContainerLen {
    pub id: u64,
    #[serde(default, rename = "type", deserialize_with = "null_as_empty")]
    pub kind: String,
    #[serde(default)]
    pub len: f64,
    /// Where its rising series starts: its length at the census before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev: Option<f64>,
}

/// One bounded container (a `deque` with a `maxlen`) as it fills.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BoundedLen {
    pub id: u64,
    #[serde(default, rename = "type", deserialize_with = "null_as_empty")]
    pub kind: String,
    #[serde(default)]
    pub len: f64,
    /// The most it holds.
    #[serde(default)]
    pub maxlen: f64,
    /// What one item weighs with what it holds (the mean of the newest few).
    #[serde(default)]
    pub item_bytes: f64,
    /// Who holds it, once the probe has looked (`ReplayBuffer.memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<BoundedHolder>,
}

/// The holder of a bounded container: its name and where it was made.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BoundedHolder {
    #[serde(default, deserialize_with = "null_as_empty")]
    pub kind: String,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub path: String,
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub line: Option<u64>,
}

/// torch's caching allocator on the current device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CudaCensus {
    #[serde(default)]
    pub allocated: f64,
    #[serde(default)]
    pub reserved: f64,
}

/// glibc's malloc statistics (`mallinfo2`, summed over its arenas).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MallocCensus {
    /// Bytes malloc obtained from the system outside `mmap`ed chunks (`arena`).
    #[serde(default)]
    pub heap: f64,
    /// Bytes in `mmap`ed chunks (`hblkhd`).
    #[serde(default)]
    pub mmapped: f64,
    /// Bytes allocated and not freed (`uordblks`).
    #[serde(default)]
    pub in_use: f64,
    /// Bytes freed but kept by malloc (`fordblks`).
    #[serde(default)]
    pub free: f64,
    /// Arenas (the main one and one per thread that contended for it), when
    /// counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arenas: Option<f64>,
}

/// Resident memory of a process before and after `malloc_trim(0)`, bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MallocTrim {
    pub rss_before: f64,
    pub rss_after: f64,
}

/// Something that grew at every census lately, with who holds it. A later
/// suspect of the same process and key adds what was learnt (its creation
/// site).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Suspect {
    #[serde(default)]
    pub t: f64,
    pub pid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u64>,
    /// The census series (`graph`, `tensors:cpu/float32/grad`, `container:<id>`...).
    pub key: String,
    /// What grows, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what: Option<String>,
    /// Growth per census when it qualified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_census: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<Holder>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Location>,
    /// One instance, described (type, shape, dtype, grad_fn...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub example: Option<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The most holders named beside the one that leads (the probe's own cap, `MAX_ALSO` in
/// `_holders.py`, plus those earlier looks named).
pub const MAX_ALSO: usize = 4;

/// Who keeps the growing objects alive, as the probe named it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Holder {
    /// `attribute`, `global`, `closure`, `local`, `class_attribute`, `pyplot`, `unknown`.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub kind: String,
    /// `Trainer.losses`, `module.name`, `function:var`, ...
    #[serde(default, deserialize_with = "null_as_empty")]
    pub path: String,
    /// Type of the container that holds them (`list`, `dict`, ...).
    #[serde(default)]
    pub container: Option<String>,
    /// The id of that container in its process (its `container:<id>` series).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_id: Option<u64>,
    /// Where the growing object sits in what the holder names, when it is an
    /// entry of it: `['train']` of `Trainer.history`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub line: Option<u64>,
    /// Types from the object up to the root.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub chain: Vec<String>,
    /// A library's own root (a registry, a cache of an installed package),
    /// named for want of one of the user's code.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub library: bool,
    /// How to let go of what this holder keeps, when the probe knows a way particular to it
    /// (IPython's output history: `%reset -f out`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The census series (`type:functools.partial`, `numpy`) whose objects
    /// this holder keeps, found going down its references: the same leak
    /// counted in other series.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_empty"
    )]
    pub reaches: Vec<String>,
    /// The share of the objects the probe walked up from that reached this
    /// holder, when some reached another (`also`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
    /// The other holders those objects reached, by references too, each with
    /// its share: one series (all autograd graphs) fed by several leaks.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_empty"
    )]
    pub also: Vec<Holder>,
}

impl Holder {
    /// Whether the probe named a root (not `unknown`).
    pub fn is_named(&self) -> bool {
        self.kind != "unknown" && !self.path.is_empty()
    }

    /// This holder and the others its series' objects reached, the named
    /// ones, this one first.
    pub fn all_named(&self) -> impl Iterator<Item = &Holder> {
        std::iter::once(self)
            .chain(self.also.iter())
            .filter(|h| h.is_named())
    }

    /// Whether this is the same root as `other` (kind and path).
    pub fn same_root(&self, other: &Holder) -> bool {
        self.kind == other.kind && self.path == other.path
    }

    /// Takes in what a later look at the same series named: the later holder
    /// leads, and every other one named at any look stays among `also`. A
    /// series fed by several leaks names one or another at each look; each
    /// was reached from its objects by references.
    pub fn merge_later(&mut self, later: &Holder) {
        if !later.is_named() || !self.is_named() {
            self.clone_from(later);
            return;
        }
        let mut also: Vec<Holder> = Vec::new();
        let earlier = std::mem::take(self);
        *self = later.clone();
        let leader = self.clone();
        for h in later
            .also
            .iter()
            .cloned()
            .chain(std::iter::once(Holder {
                also: Vec::new(),
                ..earlier.clone()
            }))
            .chain(earlier.also.iter().cloned())
        {
            if also.len() < MAX_ALSO
                && h.is_named()
                && !h.same_root(&leader)
                && !also.iter().any(|a| a.same_root(&h))
            {
                also.push(Holder {
                    also: Vec::new(),
                    ..h
                });
            }
        }
        self.also = also;
    }
}

/// `null` reads as the default (the probe writes `null` for "not looked").
fn null_as_empty<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A source line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Location {
    #[serde(default, deserialize_with = "null_as_empty")]
    pub file: String,
    #[serde(default)]
    pub line: u64,
    #[serde(default)]
    pub function: Option<String>,
    /// The thread running that line when the probe looked, when it is not
    /// the job's main thread (a background thread that makes and keeps
    /// what grows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
}

/// The probe's own accounting in one process: each one sums up all before
/// it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    #[serde(default)]
    pub t: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// CPU seconds of probe work on the job's threads.
    #[serde(default)]
    pub probe_s: f64,
    /// Seconds since the probe started.
    #[serde(default)]
    pub wall_s: f64,
    /// The job's own time as the budget counts it (its CPU time, at most
    /// the wall clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub censuses: Option<u64>,
    /// `probe_s` by kind of work: `census`, `holders`, `sites`, `after`,
    /// `messages`, `last_look` (the step hook is `steps`).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub parts: BTreeMap<String, f64>,
    /// The step hook, counted at its measured cost per call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<f64>,
    /// Bursts the monitor asked for, and the probe work they took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bursts: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_budget: Option<f64>,
    /// Most optimizers seen stepping in one iteration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimizers: Option<u64>,
    /// At exit, where glibc's malloc held much freed memory: what
    /// `malloc_trim(0)` gave back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub malloc_trim: Option<MallocTrim>,
    /// The longest the job has waited for one slice of probe work so far
    /// (wall seconds): a piece of a census or of its holder search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_s: Option<f64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(path: &str) -> Holder {
        Holder {
            kind: "attribute".into(),
            path: path.into(),
            ..Holder::default()
        }
    }

    #[test]
    fn a_later_look_leads_and_every_holder_named_before_stays() {
        let mut h = Holder {
            also: vec![holder("Stats.total")],
            ..holder("Trainer.losses")
        };
        let later = Holder {
            also: vec![holder("Trainer.losses")],
            ..holder("Trainer.history")
        };
        h.merge_later(&later);
        assert_eq!(h.path, "Trainer.history");
        let also: Vec<&str> = h.also.iter().map(|a| a.path.as_str()).collect();
        assert_eq!(also, ["Trainer.losses", "Stats.total"]);
        assert!(h.also.iter().all(|a| a.also.is_empty()));
        let named: Vec<&str> = h.all_named().map(|a| a.path.as_str()).collect();
        assert_eq!(named, ["Trainer.history", "Trainer.losses", "Stats.total"]);
    }

    #[test]
    fn a_look_that_named_nobody_replaces_as_before() {
        let mut h = holder("Trainer.losses");
        let unknown = Holder {
            kind: "unknown".into(),
            ..Holder::default()
        };
        h.merge_later(&unknown);
        assert!(!h.is_named() && h.also.is_empty());
        h.merge_later(&holder("Trainer.losses"));
        assert_eq!(h.path, "Trainer.losses");
        assert!(h.also.is_empty());
    }

    #[test]
    fn the_others_read_from_the_probes_words() {
        let h: Holder = serde_json::from_str(
            r#"{"kind":"attribute","path":"A.x","share":0.6,
                "also":[{"kind":"attribute","path":"B.y","share":0.4,"file":"t.py","line":3}]}"#,
        )
        .unwrap();
        assert_eq!(h.share, Some(0.6));
        assert_eq!(h.also[0].path, "B.y");
        assert_eq!(h.also[0].line, Some(3));
        let old: Holder = serde_json::from_str(r#"{"kind":"attribute","path":"A.x"}"#).unwrap();
        assert!(old.also.is_empty() && old.share.is_none());
    }
}

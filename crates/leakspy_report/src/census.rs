//! What grows inside the processes: series of the probe's censuses (object
//! counts per type, tensors, autograd graphs, modules, arrays, containers,
//! figures, CUDA), each fitted per step, joined with the probe's suspects
//! (holder, creation site) and grouped by holder.

use std::collections::BTreeMap;

use leakspy_stats::{fmt_bytes, fmt_thousands, theil_sen, Trend};
use leakspy_trace::{Census, Suspect, Trace};
pub use leakspy_trace::{Holder, Location, StaticMatch};
use serde::Serialize;
use serde_json::Value;

/// One census series that grows step after step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Grower {
    pub pid: u32,
    /// Series key: `type:torch.Tensor`, `tensors:cpu/float32/grad`, `graph`,
    /// `container:<id>`, `modules:Agent`, `numpy`, `figures`, `cuda.allocated`.
    pub key: String,
    /// What it counts, in words.
    pub what: String,
    /// `objects`, `tensors`, `nodes`, `items`, `modules`, `arrays`, `figures`, `bytes`.
    pub unit: String,
    /// Growth per step (or per second without steps), with its 95 % interval.
    pub slope: f64,
    pub lo: f64,
    pub hi: f64,
    /// `step` or `s`.
    pub per: String,
    /// Bytes per step that come with it, when known (tensors, arrays).
    pub bytes_slope: Option<f64>,
    pub first: f64,
    pub last: f64,
    pub censuses: usize,
    pub holder: Option<Holder>,
    pub created_at: Option<Location>,
    pub example: Option<Value>,
    /// How the growth is known: `fit` (the census series, fitted here) or
    /// `probe` (the probe saw it rise at each of its last looks; too few
    /// censuses for a fit of its own).
    pub basis: &'static str,
}

/// Growers of one holder (or one lone grower), most important first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GrowthGroup {
    pub pid: u32,
    pub holder: Option<Holder>,
    pub created_at: Option<Location>,
    pub growers: Vec<Grower>,
    /// Findings of `check` on the lines named.
    pub static_findings: Vec<StaticMatch>,
    /// Where `created_at` comes from when the probe had none: the `check`
    /// finding that names the holder (`check LS002`), whose line keeps what
    /// grows.
    pub site_from: Option<String>,
    /// For a group whose holder the probe could not reach: what the `check`
    /// finding on the line that made its objects says keeps them
    /// (`self.hall_of_fame`, `pyplot`).
    pub static_holder: Option<String>,
    /// The process it grows in, when the job has several
    /// (`DataLoader worker 1 of 2 (pid 4242)`); the main process is unnamed.
    pub process: Option<String>,
}

impl GrowthGroup {
    /// One line: "+96 torch.Tensor/step (...), held by Trainer.losses".
    pub fn headline(&self) -> String {
        let g = &self.growers[0];
        let mut s = g.describe();
        if let Some(h) = &self.holder {
            s.push_str(&format!(", held by {}", h.describe()));
        }
        if let Some(p) = &self.process {
            s.push_str(&format!(" in {p}"));
        }
        if let Some(c) = &self.created_at {
            s.push_str(&format!(", made at {}", c.describe()));
        }
        s
    }
}

/// Words for the report.
pub trait Describe {
    fn describe(&self) -> String;
}

impl Describe for Grower {
    fn describe(&self) -> String {
        // A series the probe saw rise whose rate per step no census here can
        // tell (one value past the walk's cap): how many there are, and that
        // they rose, not a rate of zero.
        if self.basis == "probe" && self.slope == 0.0 {
            return format!(
                "{}: {} at the last look (rose at each of the probe's last {} looks)",
                self.what,
                fmt_thousands(self.last),
                self.censuses
            );
        }
        // One agent copy per generation of 400 steps reads "+2.50 ... per
        // 1,000 steps", not "+2.50e-3 ... per step".
        let scale = per_scale(self.slope);
        let per = if scale > 1.0 {
            format!("{} {}s", fmt_thousands(scale), self.per)
        } else {
            self.per.clone()
        };
        let mut s = format!("{} {} per {per}", fmt_count(self.slope * scale), self.what);
        if let Some(b) = self.bytes_slope.filter(|b| *b > 0.0) {
            let sep = if scale > 1.0 { " per " } else { "/" };
            // A 0-d tensor's 4 bytes of data are the least of what it costs: kept one a step,
            // a detached loss gains about 2 KiB of resident memory a step
            // (`bench/kept_scalars.py`), so its data alone would understate it.
            let small = self.key.starts_with("tensors:") && b < 64.0 * self.slope;
            let more = if small {
                " of data; each small tensor costs KiBs more"
            } else {
                ""
            };
            s.push_str(&format!(" ({}{sep}{per}{more})", fmt_bytes(b * scale)));
        }
        if self.basis == "probe" {
            s.push_str(&format!(
                " (rose at each of the probe's last {} looks)",
                self.censuses
            ));
        }
        s
    }
}

impl Describe for Holder {
    fn describe(&self) -> String {
        let mut s = self.path.clone();
        if let Some(c) = self.container.as_deref().filter(|c| !c.is_empty()) {
            s.push_str(&format!(" ({c})"));
        }
        if let Some(f) = &self.file {
            match self.line {
                Some(l) => s.push_str(&format!(" [{f}:{l}]")),
                None => s.push_str(&format!(" [{f}]")),
            }
        }
        s
    }
}

impl Describe for Location {
    fn describe(&self) -> String {
        match &self.thread {
            Some(t) => format!("{}:{} (thread {t})", self.file, self.line),
            None => format!("{}:{}", self.file, self.line),
        }
    }
}

fn fmt_count(v: f64) -> String {
    if v == 0.0 {
        "0".to_string()
    } else if v.abs() >= 10.0 {
        format!("{v:+.0}")
    } else if v.abs() >= 0.1 {
        format!("{v:+.2}")
    } else {
        format!("{v:+.2e}")
    }
}

/// The power of ten (up to a million) that brings a rate below 0.1 to 1 or
/// more.
fn per_scale(v: f64) -> f64 {
    let mut scale = 1.0;
    if v.abs() >= 0.1 {
        return scale;
    }
    while v.abs() > 0.0 && v.abs() * scale < 1.0 && scale < 1e6 {
        scale *= 10.0;
    }
    scale
}

/// One census series: x (step or seconds) and the value.
#[derive(Debug, Default, Clone)]
struct Track {
    what: String,
    unit: &'static str,
    /// Censuses whose count hit the probe's cap (left out of `y`).
    capped: usize,
    x: Vec<f64>,
    y: Vec<f64>,
    bytes: Vec<f64>,
}

impl Track {
    fn push(&mut self, x: f64, y: f64, bytes: Option<f64>) {
        self.x.push(x);
        self.y.push(y);
        if let Some(b) = bytes {
            self.bytes.push(b);
        }
    }
}

/// The probe's own bookkeeping is never the user's leak.
fn probes_own(h: &Holder) -> bool {
    h.path.starts_with("leakspy._")
        || h.file
            .as_deref()
            .is_some_and(|f| f.contains("/leakspy-probe-"))
}

/// The suspects of each process and key, later ones adding what was learnt
/// (a creation site).
fn merged_suspects(trace: &Trace) -> BTreeMap<(u32, String), Suspect> {
    let mut out: BTreeMap<(u32, String), Suspect> = BTreeMap::new();
    for s in trace.suspects() {
        if s.holder.as_ref().is_some_and(probes_own) {
            continue;
        }
        match out.get_mut(&(s.pid, s.key.clone())) {
            None => {
                out.insert((s.pid, s.key.clone()), s.clone());
            }
            Some(e) => {
                e.t = s.t;
                match (&mut e.holder, &s.holder) {
                    (Some(h), Some(later)) => h.merge_later(later),
                    (h, later @ Some(_)) => h.clone_from(later),
                    _ => {}
                }
                if s.created_at.is_some() {
                    e.created_at.clone_from(&s.created_at);
                }
                if s.example.is_some() {
                    e.example.clone_from(&s.example);
                }
                if s.what.is_some() {
                    e.what.clone_from(&s.what);
                }
                if s.per_census.is_some() {
                    e.per_census = s.per_census;
                }
            }
        }
    }
    out
}

/// Censuses of each process, in time order; the warm-up census (the first,
/// unless the probe says it came well into the job) is left out of the
/// fits, but for the autograd graphs alive at the step boundary, which
/// set-up does not make (a graph can outgrow the probe's walk within two
/// censuses); so is a last look after the program's own end.
pub fn growth_groups(trace: &Trace) -> Vec<GrowthGroup> {
    let mut by_pid: BTreeMap<u32, Vec<&Census>> = BTreeMap::new();
    for c in trace.census() {
        by_pid.entry(c.pid).or_default().push(c);
    }
    let suspects = merged_suspects(trace);
    let mut pids: Vec<u32> = by_pid.keys().copied().collect();
    for (pid, _) in suspects.keys() {
        if !pids.contains(pid) {
            pids.push(*pid);
        }
    }

    // The job's own steps: a process that never steps (a DataLoader
    // worker, a helper process) is fitted against them.
    let job = crate::extract::StepClock::from_trace(trace);
    let mut groups: Vec<GrowthGroup> = Vec::new();
    for pid in pids {
        let mut cs = by_pid.remove(&pid).unwrap_or_default();
        cs.sort_by(|a, b| a.t.total_cmp(&b.t));
        let first_t = cs.first().map(|c| c.t);
        // A last look after the program's own end sees what its functions
        // held already gone: it named holders, it is no point of a series.
        cs.retain(|c| c.look.as_deref() != Some("exit"));
        // Timer censuses come only before a process's first step: where it
        // steps, they are warm-up, and the growth is fitted per step.
        if cs.iter().filter(|c| c.step.is_some()).count() >= 2 {
            cs.retain(|c| c.step.is_some());
        }
        let stepped = !cs.is_empty() && cs.iter().all(|c| c.step.is_some());
        let job_steps = !stepped && cs.len() >= 2 && cs.iter().all(|c| job.step_at(c.t).is_some());
        let per = if stepped || job_steps { "step" } else { "s" };
        let x_of = |c: &Census| {
            if stepped {
                c.step.unwrap_or(0) as f64
            } else if job_steps {
                job.step_at(c.t).unwrap_or(0.0)
            } else {
                c.t
            }
        };
        let tracks = tracks_of(&cs, &x_of, first_t);
        let mut growers: Vec<Grower> = tracks
            .iter()
            .filter_map(|(key, tr)| fit(pid, key, tr, per))
            .collect();
        let held = |s: &Suspect| s.holder.as_ref().is_some_and(Holder::is_named);
        for g in &mut growers {
            if let Some(s) = suspects.get(&(pid, g.key.clone())) {
                join_suspect(g, s);
            }
        }
        // The container a named holder holds (`Trainer.losses`, a list) is
        // that holder's: its length is the same leak counted in items.
        let by_container: Vec<(u64, Holder, Option<Location>)> = suspects
            .iter()
            .filter(|((p, _), s)| *p == pid && held(s))
            .filter_map(|(_, s)| {
                let h = s.holder.clone()?;
                Some((h.container_id?, h, s.created_at.clone()))
            })
            .collect();
        for g in growers.iter_mut().filter(|g| g.holder.is_none()) {
            let id = g
                .key
                .strip_prefix("container:")
                .and_then(|i| i.parse::<u64>().ok());
            if let Some((_, h, c)) = id.and_then(|id| by_container.iter().find(|b| b.0 == id)) {
                g.holder = Some(h.clone());
                g.created_at = g.created_at.clone().or_else(|| c.clone());
            }
        }
        // A suspect keyed differently from the series (the probe searched
        // one tensor group, the fit found another of the same objects)
        // still names the holder of that family of series. Not across
        // containers or types: each of those series is one object or one
        // kind of object, and another's holder says nothing about it (a
        // list of losses held by a trainer does not hold the environment's
        // lists); what a holder does reach joins it by its references
        // (`reaches`, in `group`).
        //
        // Tensors of one kind are not the same objects as tensors of
        // another: a holder the probe found for one tensor series names
        // another only when it keeps those tensors (`keeps_tensors`).
        for g in growers.iter_mut().filter(|g| g.holder.is_none()) {
            let family = family_of(&g.key);
            if !SHARED_FAMILIES.contains(&family.as_str()) {
                continue;
            }
            let found = suspects.iter().find(|((p, k), s)| {
                *p == pid
                    && family_of(k) == family
                    && s.holder.as_ref().is_some_and(|h| {
                        h.is_named() && (family != "tensors" || keeps_tensors(&h.reaches, &g.key))
                    })
            });
            if let Some((_, s)) = found {
                g.holder.clone_from(&s.holder);
                g.created_at.clone_from(&s.created_at);
            }
        }
        // A holder the probe named is never lost: when its series has too
        // few censuses for a fit here (a short run, a graph past the walk's
        // cap), what the probe saw stands, said as such.
        for ((p, key), s) in &suspects {
            if *p != pid || !held(s) || growers.iter().any(|g| &g.key == key) {
                continue;
            }
            let path = s.holder.as_ref().map(|h| h.path.as_str());
            if growers
                .iter()
                .any(|g| g.holder.as_ref().map(|h| h.path.as_str()) == path)
            {
                continue; // the holder is named by another of its series
            }
            let tr = tracks.get(key);
            // More censuses than the probe had may tell otherwise: a series
            // that stopped rising, or fell, overrules its early call.
            let contradicted = tr.is_some_and(|tr| {
                tr.capped == 0
                    && tr.y.len() >= 2
                    && (tr.y.windows(2).any(|w| w[1] < w[0])
                        || tr.y[tr.y.len() - 1] <= tr.y[tr.y.len() - 2])
            });
            if !contradicted {
                growers.push(probe_grower(pid, key, s, tr, per));
            }
        }
        groups.extend(group(pid, growers));
    }
    groups.sort_by(|a, b| importance(b).total_cmp(&importance(a)));
    groups
}

/// Whether a holder that reaches the series `reaches` (the probe's walk
/// down from it) keeps the tensors of series `key`: it reaches them by
/// references, or it keeps tensors made by autograd (`/grad`) on the same
/// device and `key`'s are plain ones, which such a graph saves (its
/// activations) out of the walk's sight. Never a leaf that requires grad:
/// those are parameters, kept by their model, whatever graph also saves
/// them.
fn keeps_tensors(reaches: &[String], key: &str) -> bool {
    if reaches.iter().any(|r| r == key) {
        return true;
    }
    // `tensors:cuda:0/float32/plain` -> (`cuda:0`, `plain`).
    let device_and_kind = |k: &str| {
        let rest = k.strip_prefix("tensors:")?;
        let (device, _) = rest.split_once('/')?;
        Some((device.to_string(), rest.rsplit('/').next()?.to_string()))
    };
    let Some((device, kind)) = device_and_kind(key) else {
        return false;
    };
    kind == "plain"
        && reaches
            .iter()
            .filter_map(|r| device_and_kind(r))
            .any(|(d, k)| d == device && k == "grad")
}

/// The families whose series count the same objects from different sides
/// (a leak's tensors by dtype and grad, its graph by nodes and by history),
/// so that one series' holder is its family's.
const SHARED_FAMILIES: [&str; 2] = ["tensors", "graph"];

/// The family of a series key, for a suspect keyed differently: all
/// graphs' two series ("graph" and "graph.history") are one; the largest
/// graph is one tensor's, held on its own.
fn family_of(k: &str) -> String {
    match k {
        "graph.largest" => k.to_string(),
        _ => k.split([':', '.']).next().unwrap_or_default().to_string(),
    }
}

/// What the probe said about a series: who holds it, where it is made,
/// and its words (the container's item type, the graph's root).
fn join_suspect(g: &mut Grower, s: &Suspect) {
    g.holder.clone_from(&s.holder);
    g.created_at.clone_from(&s.created_at);
    g.example.clone_from(&s.example);
    let Some(w) = s.what.as_deref() else {
        return;
    };
    // The probe knows the container's item type and the graph's root: say
    // it instead of the generic label.
    let w = match w.rfind(" (len ") {
        Some(i) if w.ends_with(')') => &w[..i],
        _ => w,
    };
    if g.key.starts_with("container:") {
        g.what = match s
            .holder
            .as_ref()
            .and_then(|h| h.key.as_ref().map(|k| (h, k)))
        {
            // Two lists under one dict are told apart by their key.
            Some((h, k)) => format!("items in {}{k} (a {w})", h.path),
            None => format!("items in one {w}"),
        };
    } else if g.key.starts_with("graph") {
        let detail = w
            .strip_prefix("autograd graph nodes")
            .or_else(|| w.strip_prefix("autograd history"))
            .or_else(|| w.strip_prefix("autograd nodes of the largest graph"))
            .unwrap_or(w)
            .trim();
        if !detail.is_empty() {
            g.what = format!("{} {detail}", g.what);
        }
    }
}

/// A grower from the probe's own judgement: its series rose at each of the
/// probe's last looks, but the censuses here are too few to fit (or the
/// series left the census: a graph past the walk's cap).
fn probe_grower(pid: u32, key: &str, s: &Suspect, tr: Option<&Track>, per: &str) -> Grower {
    let what = s.what.clone().unwrap_or_else(|| key.to_string());
    let what = match what.rfind(" (len ") {
        Some(i) if what.ends_with(')') => what[..i].to_string(),
        _ => what,
    };
    let what = if key.starts_with("container:") {
        format!("items in one {what}")
    } else {
        what
    };
    // Per step where the track gives the steps between its points.
    let (slope, first, last, n) = match tr {
        Some(tr) if tr.x.len() >= 2 && tr.x[tr.x.len() - 1] > tr.x[0] => {
            let n = tr.x.len();
            (
                (tr.y[n - 1] - tr.y[0]) / (tr.x[n - 1] - tr.x[0]),
                tr.y[0],
                tr.y[n - 1],
                n,
            )
        }
        _ => (0.0, 0.0, s.count.unwrap_or(0.0), 0),
    };
    Grower {
        pid,
        key: key.to_string(),
        what,
        unit: "objects".to_string(),
        slope,
        lo: slope,
        hi: slope,
        per: per.to_string(),
        bytes_slope: None,
        first,
        last,
        censuses: n.max(3),
        holder: s.holder.clone(),
        created_at: s.created_at.clone(),
        example: s.example.clone(),
        basis: "probe",
    }
}

/// Each census count that rose over the run, from its first look to its
/// last (the exit look left out, as in `growth_groups`), by more than noise
/// (`min_rise`), by series key; counted in every process together.
pub fn risen(trace: &Trace) -> BTreeMap<String, (f64, f64)> {
    let mut by_pid: BTreeMap<u32, Vec<&Census>> = BTreeMap::new();
    for c in trace.census() {
        if c.look.as_deref() != Some("exit") {
            by_pid.entry(c.pid).or_default().push(c);
        }
    }
    let mut out: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for (_, mut cs) in by_pid {
        cs.sort_by(|a, b| a.t.total_cmp(&b.t));
        let first_t = cs.first().map(|c| c.t);
        for (key, tr) in tracks_of(&cs, &|c: &Census| c.t, first_t) {
            if let (Some(&a), Some(&b)) = (tr.y.first(), tr.y.last()) {
                if b - a >= min_rise(tr.unit, a) {
                    let e = out.entry(key).or_insert((0.0, 0.0));
                    e.0 += a;
                    e.1 += b;
                }
            }
        }
    }
    out
}

fn tracks_of(
    cs: &[&Census],
    x_of: &dyn Fn(&Census) -> f64,
    first_t: Option<f64>,
) -> BTreeMap<String, Track> {
    let mut tracks: BTreeMap<String, Track> = BTreeMap::new();
    let mut graph_capped = 0;
    // Containers whose series the probe started from the last census's
    // length (`prev`): (key, that census's x, the length, where it started).
    let mut starts: Vec<(String, f64, f64, f64)> = Vec::new();
    let mut last_x: Option<f64> = None;
    let mut last_warm = true;
    let mut put = |key: String, what: &dyn Fn() -> String, x, y, bytes| {
        let unit = unit_of(&key);
        let tr = tracks.entry(key).or_insert_with(|| Track {
            what: what(),
            unit,
            ..Track::default()
        });
        tr.push(x, y, bytes);
    };
    for c in cs {
        let x = x_of(c);
        // The first census is warm-up unless the probe says it came well
        // into the job (older probes did not say: it was).
        let warm = c.warmup.unwrap_or(Some(c.t) == first_t);
        // (A warm-up census is never a series' first point.)
        let before = last_x.replace(x).filter(|_| !last_warm);
        last_warm = warm;
        // The autograd graphs alive at the step boundary are not made by
        // set-up: their series start at the first census, as the probe's do
        // (a `total += loss` chain can pass the walk's cap by the third).
        if let Some(g) = &c.graph {
            // A walk that hit the probe's cap counted a lower bound: left
            // out, or a graph that kept growing past it would look flat.
            graph_capped += usize::from(g.capped);
            if !g.capped {
                put(
                    "graph".into(),
                    &|| "autograd graph nodes alive at the step boundary".into(),
                    x,
                    g.nodes,
                    Some(g.saved_bytes),
                );
                if let Some(n) = g.largest {
                    put(
                        "graph.largest".into(),
                        &|| "autograd nodes of the largest graph alive at the step boundary".into(),
                        x,
                        n,
                        None,
                    );
                }
            }
            // No cap to speak of: one hop per step chained.
            if let Some(n) = g.history {
                put(
                    "graph.history".into(),
                    &|| {
                        "autograd nodes of history kept at the step boundary \
                         (made since the oldest still alive)"
                            .into()
                    },
                    x,
                    n,
                    None,
                );
            }
        }
        if warm {
            continue; // warm-up: imports, the first step's allocations
        }
        for (name, &n) in &c.types {
            if name.starts_with("leakspy.") {
                continue;
            }
            put(
                format!("type:{name}"),
                &|| format!("{name} objects"),
                x,
                n,
                None,
            );
        }
        for t in &c.tensors {
            let kind = t.kind();
            let label = match kind {
                "grad" => "with a grad_fn",
                "leaf" => "requiring grad",
                _ => "without grad",
            };
            let (device, dtype) = (&t.device, &t.dtype);
            put(
                format!("tensors:{device}/{dtype}/{kind}"),
                &|| format!("{device} {dtype} tensors {label}"),
                x,
                t.count,
                Some(t.bytes),
            );
        }
        if let Some(m) = &c.modules {
            for (class, &n) in &m.by_class {
                put(
                    format!("modules:{class}"),
                    &|| format!("{class} modules (nn.Module)"),
                    x,
                    n,
                    None,
                );
            }
        }
        if let Some(a) = &c.numpy {
            put(
                "numpy".into(),
                &|| "numpy arrays".into(),
                x,
                a.count,
                Some(a.bytes),
            );
        }
        for k in &c.containers {
            let ty = if k.kind.is_empty() {
                "container"
            } else {
                k.kind.as_str()
            };
            if let (Some(bx), Some(p)) = (before, k.prev) {
                starts.push((format!("container:{}", k.id), bx, p, x));
            }
            put(
                format!("container:{}", k.id),
                &|| format!("items in one {ty}"),
                x,
                k.len,
                None,
            );
        }
        if let Some(n) = c.figures {
            put(
                "figures".into(),
                &|| "open matplotlib figures".into(),
                x,
                n,
                None,
            );
        }
        if let Some(cuda) = &c.cuda {
            for (k, what, v) in [
                (
                    "allocated",
                    "CUDA memory allocated by tensors",
                    cuda.allocated,
                ),
                (
                    "reserved",
                    "CUDA memory reserved by the caching allocator",
                    cuda.reserved,
                ),
            ] {
                put(format!("cuda.{k}"), &|| what.into(), x, v, None);
            }
        }
    }
    for (key, bx, p, x) in starts {
        if let Some(tr) = tracks.get_mut(&key) {
            if tr.x.first() == Some(&x) {
                tr.x.insert(0, bx);
                tr.y.insert(0, p);
            }
        }
    }
    if graph_capped > 0 {
        let tr = tracks.entry("graph".into()).or_insert_with(|| Track {
            what: "autograd graph nodes alive at the step boundary".into(),
            unit: unit_of("graph"),
            ..Track::default()
        });
        tr.capped = graph_capped;
    }
    tracks
}

/// Least growth over the fitted censuses that counts, per unit: a handful of
/// objects is noise (a lazily made cache entry), not a leak.
fn min_rise(unit: &str, level: f64) -> f64 {
    match unit {
        "bytes" => (4.0 * 1024.0 * 1024.0f64).max(0.02 * level),
        "figures" | "modules" => 2.0,
        _ => 8.0f64.max(0.01 * level),
    }
}

/// How a census series was counted, which sets the least rise that counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counting {
    /// By the probe in a running job, wherever a step ended: a step's own
    /// temporaries and lazily made caches come and go between censuses.
    Job,
    /// After a full collection at chosen calls of one function
    /// (`assert_no_leak`): every object counted is alive at the call
    /// boundary, so any steady rise is the function's own.
    Exact,
}

/// The unit of a census series, from its key.
pub fn unit_of(key: &str) -> &'static str {
    let head = key.split([':', '.']).next().unwrap_or_default();
    match head {
        "type" => "objects",
        "tensors" => "tensors",
        "graph" => "nodes",
        "modules" => "modules",
        "numpy" => "arrays",
        "container" => "items",
        "figures" => "figures",
        // `cuda.allocated`, and the byte sizes `assert_no_leak` follows
        // where a count stays flat (`bytes:tensors:cpu/float32/plain`).
        _ => "bytes",
    }
}

/// Whether a series (`y` at `x`, at least four points) grows all along:
/// significant overall (Theil–Sen's interval above zero, a rise worth
/// counting), still growing in its second half (a cache that filled early
/// and stopped is not a leak), and ending above its first half's top (a
/// list emptied now and then rises again, below where it was). The one rule
/// behind every verdict on what grows: `run`, `report`, `diff`, `attach`,
/// the notebook watch and `assert_no_leak` (`leakspy --judge-series`).
pub fn grows(x: &[f64], y: &[f64], unit: &str, counting: Counting) -> Option<Trend> {
    grows_on(x, y, unit, counting).or_else(|| {
        // Looks bunched together (a burst looks several times in a second or
        // two) weigh a few steps as much as the rest of the run: between two
        // copies kept once a generation they are all equal, and their ties
        // hide the trend. One look per stretch of steps says what they say.
        let (tx, ty) = thinned(x, y);
        (tx.len() < x.len())
            .then(|| grows_on(&tx, &ty, unit, counting))
            .flatten()
    })
}

/// The looks with at most one (the latest) in each stretch of a `2n`th of
/// the span; the first look stays. Evenly spaced looks stay as they are.
fn thinned(x: &[f64], y: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let n = x.len();
    let (mut tx, mut ty): (Vec<f64>, Vec<f64>) = (Vec::with_capacity(n), Vec::with_capacity(n));
    if n == 0 {
        return (tx, ty);
    }
    let gap = (x[n - 1] - x[0]) / (2 * n) as f64;
    // Where the current stretch began: a long dense stretch keeps a look per
    // gap, not one in all.
    let mut opened = f64::NEG_INFINITY;
    for (&a, &b) in x.iter().zip(y) {
        if tx.len() > 1 && a - opened < gap {
            let k = tx.len() - 1;
            tx[k] = a;
            ty[k] = b;
        } else {
            opened = a;
            tx.push(a);
            ty.push(b);
        }
    }
    (tx, ty)
}

fn grows_on(x: &[f64], y: &[f64], unit: &str, counting: Counting) -> Option<Trend> {
    let n = x.len();
    if n < 4 || y.len() != n {
        return None;
    }
    let t = theil_sen(x, y, 0.95)?;
    let span = x[n - 1] - x[0];
    if !(t.lo > 0.0 && span > 0.0) {
        return None;
    }
    let mut sorted = y.to_vec();
    sorted.sort_by(f64::total_cmp);
    let level = sorted[n / 2];
    let least = match counting {
        Counting::Job => min_rise(unit, level),
        Counting::Exact => EXACT_MIN_RISE,
    };
    if t.slope * span < least {
        return None;
    }
    let half = n / 2;
    let (lx, ly) = (&x[half..], &y[half..]);
    let still_growing = match theil_sen(lx, ly, 0.95) {
        Some(l) if lx.len() >= 4 => l.slope > 0.0 && l.hi >= 0.5 * t.slope,
        _ => ly[ly.len() - 1] > ly[0],
    };
    let top = y[..half].iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (still_growing && y[n - 1] > top).then_some(t)
}

/// Least rise of an exactly counted series: two more of anything over the
/// calls judged, steadily (one could be a lazily made cache entry).
const EXACT_MIN_RISE: f64 = 2.0;

/// The binary's internal argument that reads `{"x": [...], "series": {key:
/// [y or null, ...]}}` on stdin and writes `judge_exact`'s answer as JSON
/// (`python/leakspy/_assert.py` calls it; not a command users type).
pub const JUDGE_SERIES_ARG: &str = "__leakspy-judge-series";

/// The series of `series` that grow (`grows`, counted exactly), with their
/// fits: `assert_no_leak`'s verdict. Missing points (`None`: a container not
/// followed yet) are left out of their series.
pub fn judge_exact(
    x: &[f64],
    series: &BTreeMap<String, Vec<Option<f64>>>,
) -> BTreeMap<String, Trend> {
    let mut out = BTreeMap::new();
    for (key, ys) in series {
        let (px, py): (Vec<f64>, Vec<f64>) = x
            .iter()
            .zip(ys)
            .filter_map(|(&x, y)| y.map(|y| (x, y)))
            .unzip();
        if let Some(t) = grows(&px, &py, unit_of(key), Counting::Exact) {
            out.insert(key.clone(), t);
        }
    }
    out
}

/// A census series of a job that grows step after step (`grows`).
fn fit(pid: u32, key: &str, tr: &Track, per: &str) -> Option<Grower> {
    let n = tr.x.len();
    if n < 4 {
        // A graph's history is 0 at every census of a correct loop: two
        // rises in a row are a chain (the probe names it then too).
        if key == "graph.history" && n == 3 {
            return short_rise_fit(pid, key, tr, per, tr.what.clone(), n);
        }
        return capped_fit(pid, key, tr, per);
    }
    let t = grows(&tr.x, &tr.y, tr.unit, Counting::Job)?;
    let bytes_slope = (tr.bytes.len() == n)
        .then(|| theil_sen(&tr.x, &tr.bytes, 0.95))
        .flatten()
        .map(|b| b.slope);
    Some(Grower {
        pid,
        key: key.to_string(),
        what: tr.what.clone(),
        unit: tr.unit.to_string(),
        slope: t.slope,
        lo: t.lo,
        hi: t.hi,
        per: per.to_string(),
        bytes_slope,
        first: tr.y[0],
        last: tr.y[n - 1],
        censuses: n,
        holder: None,
        created_at: None,
        example: None,
        basis: "fit",
    })
}

/// A graph that grew past the probe's walk cap within a few censuses: the
/// censuses before the cap, rising at every one, and the cap reached, are
/// the evidence (a graph that big alive at a step boundary is no cache).
fn capped_fit(pid: u32, key: &str, tr: &Track, per: &str) -> Option<Grower> {
    if tr.capped == 0 || tr.x.len() < 2 {
        return None;
    }
    let what = format!(
        "{} (until the probe's walk cap, reached in {} censuses)",
        tr.what, tr.capped
    );
    short_rise_fit(pid, key, tr, per, what, tr.x.len() + tr.capped)
}

/// A few censuses rising at every one: the slope from the first to the
/// last, and the least and greatest slope between neighbours as its range.
fn short_rise_fit(
    pid: u32,
    key: &str,
    tr: &Track,
    per: &str,
    what: String,
    censuses: usize,
) -> Option<Grower> {
    let n = tr.x.len();
    if n < 2 || tr.y.windows(2).any(|w| w[1] <= w[0]) {
        return None;
    }
    let slopes: Vec<f64> =
        tr.x.windows(2)
            .zip(tr.y.windows(2))
            .filter(|(x, _)| x[1] > x[0])
            .map(|(x, y)| (y[1] - y[0]) / (x[1] - x[0]))
            .collect();
    if slopes.is_empty() {
        return None;
    }
    let slope = (tr.y[n - 1] - tr.y[0]) / (tr.x[n - 1] - tr.x[0]);
    Some(Grower {
        pid,
        key: key.to_string(),
        what,
        unit: tr.unit.to_string(),
        slope,
        lo: slopes.iter().copied().fold(f64::INFINITY, f64::min),
        hi: slopes.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        per: per.to_string(),
        bytes_slope: None,
        first: tr.y[0],
        last: tr.y[n - 1],
        censuses,
        holder: None,
        created_at: None,
        example: None,
        basis: "fit",
    })
}

/// The census's type keys of tensor objects (counted again by the tensor
/// groups).
const TENSOR_TYPES: [&str; 2] = ["type:torch.Tensor", "type:torch.nn.parameter.Parameter"];

/// Growers of the same holder form one group; the most telling grower of a
/// group leads (graph, tensors, containers before plain type counts).
fn group(pid: u32, mut growers: Vec<Grower>) -> Vec<GrowthGroup> {
    // A frame local named for a series is often the loop's newest object of
    // its kind (`pred`, this step's tensor), not what keeps the others: a
    // lasting holder of the user's that reaches that series by references
    // holds it.
    let lasting: Vec<Holder> = growers
        .iter()
        .filter_map(|g| g.holder.as_ref())
        .filter(|h| h.kind != "local" && !h.library && !h.reaches.is_empty())
        .cloned()
        .collect();
    for g in &mut growers {
        if g.holder.as_ref().is_some_and(|h| h.kind == "local") {
            if let Some(h) = lasting.iter().find(|h| h.reaches.contains(&g.key)) {
                g.holder = Some(h.clone());
            }
        }
    }
    let mut with: BTreeMap<String, Vec<Grower>> = BTreeMap::new();
    let mut without: Vec<Grower> = Vec::new();
    for g in growers {
        match g.holder.as_ref().map(|h| h.path.clone()) {
            Some(p) if !p.is_empty() => with.entry(p).or_default().push(g),
            _ => without.push(g),
        }
    }
    // A chain's largest graph and the history it keeps are one chain measured two ways (the
    // history once the chain outgrows the walk's cap): the holder named for either holds it,
    // and the series of all graphs, where it named nobody and rose no faster than the chain's
    // largest graph, is that chain's growth.
    let is_chain = |g: &Grower| matches!(g.key.as_str(), "graph.largest" | "graph.history");
    let chain_holders: Vec<&String> = with
        .iter()
        .filter(|(_, gs)| gs.iter().any(is_chain))
        .map(|(p, _)| p)
        .collect();
    if let [path] = chain_holders.as_slice() {
        let path = (*path).clone();
        let chain_hi = with[&path]
            .iter()
            .chain(&without)
            .filter(|g| g.key == "graph.largest")
            .map(|g| g.hi)
            .fold(f64::NEG_INFINITY, f64::max);
        let (chain, rest): (Vec<Grower>, Vec<Grower>) = without
            .into_iter()
            .partition(|g| is_chain(g) || (g.key == "graph" && g.lo <= chain_hi));
        without = rest;
        if let Some(gs) = with.get_mut(&path) {
            let holder = gs
                .iter()
                .find(|g| is_chain(g))
                .and_then(|g| g.holder.clone());
            gs.extend(chain.into_iter().map(|mut g| {
                g.holder = holder.clone();
                g
            }));
        }
    }
    let mut out = Vec::new();
    for (_, mut gs) in with {
        gs.sort_by(|a, b| rank(b).total_cmp(&rank(a)));
        // The group's holder is the whole of what it names, not one entry;
        // it keeps what each of its suspects found it keeps.
        let mut holder = gs[0].holder.clone().map(|mut h| {
            h.key = None;
            h
        });
        if let Some(h) = holder.as_mut() {
            let mut reaches: Vec<String> = gs
                .iter()
                .filter_map(|g| g.holder.as_ref())
                .flat_map(|h| h.reaches.iter().cloned())
                .collect();
            reaches.sort();
            reaches.dedup();
            h.reaches = reaches;
        }
        let created_at = gs.iter().find_map(|g| g.created_at.clone());
        out.push(GrowthGroup {
            pid,
            holder,
            created_at,
            growers: gs,
            static_findings: Vec::new(),
            site_from: None,
            static_holder: None,
            process: None,
        });
    }
    // A library's own root (pyplot's registry of figures) whose series a
    // named holder of the user's reaches by references keeps part of that
    // holder's leak: one leak, one group.
    let mut i = 0;
    while i < out.len() {
        let library = out[i].holder.as_ref().is_some_and(|h| h.library);
        let home = out.iter().position(|o| {
            library
                && o.holder.as_ref().is_some_and(|h| {
                    !h.library && out[i].growers.iter().any(|g| h.reaches.contains(&g.key))
                })
        });
        match home {
            Some(j) => {
                let grp = out.remove(i);
                let j = if j > i { j - 1 } else { j };
                out[j].growers.extend(grp.growers);
            }
            None => i += 1,
        }
    }
    // matplotlib's own objects multiply with the figures left open.
    if let Some(i) = out
        .iter()
        .position(|g| g.holder.as_ref().is_some_and(|h| h.kind == "pyplot"))
    {
        let (mpl, other): (Vec<Grower>, Vec<Grower>) = without
            .into_iter()
            .partition(|g| g.key.starts_with("type:matplotlib."));
        out[i].growers.extend(mpl);
        without = other;
    }
    // The CUDA allocator's totals are bytes, not objects: where one held
    // group keeps CUDA tensors, they are that leak seen from the device.
    let on_cuda: Vec<usize> = out
        .iter()
        .enumerate()
        .filter(|(_, grp)| {
            grp.growers
                .iter()
                .any(|g| g.key.starts_with("tensors:cuda"))
        })
        .map(|(i, _)| i)
        .collect();
    if let [i] = on_cuda[..] {
        let (cuda, other): (Vec<Grower>, Vec<Grower>) = without
            .into_iter()
            .partition(|g| g.key.starts_with("cuda."));
        out[i].growers.extend(cuda);
        without = other;
    }
    // What a named holder keeps, found by going down its references, is its
    // leak whatever series counts it (a figure's arrays, weak references
    // and partials are the figure's): one leak, one group.
    let mut rest_kept = Vec::new();
    for g in without {
        match out.iter_mut().find(|grp| {
            grp.holder
                .as_ref()
                .is_some_and(|h| h.reaches.contains(&g.key))
        }) {
            Some(grp) => grp.growers.push(g),
            None => rest_kept.push(g),
        }
    }
    let mut without = rest_kept;
    // The count of tensor objects by type is the tensors that the tensor
    // groups count: where every rising tensor group is held by one holder,
    // those objects are that holder's too (one leak, one group).
    let with_tensors: Vec<usize> = out
        .iter()
        .enumerate()
        .filter(|(_, grp)| grp.growers.iter().any(|g| g.key.starts_with("tensors:")))
        .map(|(i, _)| i)
        .collect();
    if let [i] = with_tensors[..] {
        if !without.iter().any(|g| g.key.starts_with("tensors:")) {
            let (objs, other): (Vec<Grower>, Vec<Grower>) = without
                .into_iter()
                .partition(|g| TENSOR_TYPES.contains(&g.key.as_str()));
            out[i].growers.extend(objs);
            without = other;
        }
    }
    // A series without a holder whose objects are made in the same function
    // as a held group's is the same leak seen from another side (the graph
    // behind the held losses, their tensors): it joins that group.
    let made_in = |c: &Option<Location>| {
        c.as_ref()
            .map(|c| (c.file.clone(), c.function.clone().unwrap_or_default()))
    };
    let mut rest = Vec::new();
    for g in without {
        let site = made_in(&g.created_at);
        let home = site.as_ref().and_then(|site| {
            out.iter_mut().find(|grp: &&mut GrowthGroup| {
                grp.growers
                    .iter()
                    .any(|h| made_in(&h.created_at).as_ref() == Some(site))
            })
        });
        match home {
            Some(grp) => {
                grp.growers.push(g);
                grp.growers.sort_by(|a, b| rank(b).total_cmp(&rank(a)));
            }
            None => rest.push(g),
        }
    }
    // Without a holder, show only the clearest series: plain type counts of
    // builtins move with everything and would drown the list. Those counts
    // (weak references, tuples, bound methods: what a leak's objects bring
    // along) are one group, not one "holder not found" each; a series of a
    // heavier kind (a graph, tensors, a container) stays a group of its own.
    rest.sort_by(|a, b| rank(b).total_cmp(&rank(a)));
    let mut lone: Vec<Vec<Grower>> = Vec::new();
    let mut counts: Vec<Grower> = Vec::new();
    for g in rest.into_iter().take(6) {
        if g.key.starts_with("type:") {
            counts.push(g);
        } else {
            lone.push(vec![g]);
        }
    }
    if !counts.is_empty() {
        lone.push(counts);
    }
    for growers in lone {
        out.push(GrowthGroup {
            pid,
            holder: None,
            created_at: growers.iter().find_map(|g| g.created_at.clone()),
            growers,
            static_findings: Vec::new(),
            site_from: None,
            static_holder: None,
            process: None,
        });
    }
    // The largest graph of a group whose graphs all grow says no more.
    for grp in &mut out {
        if grp.growers.iter().any(|g| g.key == "graph") {
            grp.growers.retain(|g| g.key != "graph.largest");
        }
    }
    out
}

fn rank(g: &Grower) -> f64 {
    let kind = if g.key == "graph" {
        6.0
    } else if g.key == "graph.largest" {
        5.95
    } else if g.key == "graph.history" {
        5.9
    } else if g.key.starts_with("tensors:") {
        5.0
    } else if g.key.starts_with("modules:") || g.key == "figures" {
        // Each one is heavy (parameters, a canvas): more telling than
        // items in a list.
        4.5
    } else if g.key.starts_with("container:") {
        4.0
    } else if g.key == "numpy" || g.key.starts_with("cuda.") {
        3.0
    } else if g.key.starts_with("type:builtins.") {
        1.0
    } else {
        2.0
    };
    kind * 1e12 + g.bytes_slope.unwrap_or(0.0).max(g.slope)
}

fn importance(g: &GrowthGroup) -> f64 {
    // A library's own root (pyplot's figure registry, a cache of an installed
    // package) comes after the user's: it is where the user's leak shows up
    // in someone else's bookkeeping, or that bookkeeping's own growth.
    let held = match &g.holder {
        Some(h) if !h.library => 2e15,
        Some(_) => 1e15,
        None => 0.0,
    };
    // Between holders whose best series are of the same kind, one that
    // outlives the loop (an attribute, a global) beats a frame local, which
    // is often a loop variable pointing into the real container. Smaller
    // than a step between kinds, so a local holding graphs still outranks an
    // attribute holding plain objects.
    let durable = match g.holder.as_ref().map(|h| h.kind.as_str()) {
        Some("local") | None => 0.0,
        Some(_) => 0.4e12,
    };
    held + durable + g.growers.iter().map(rank).fold(0.0, f64::max)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn group_of(kind: &str, path: &str, key: &str, bytes: f64) -> GrowthGroup {
        let holder = Holder {
            kind: kind.into(),
            path: path.into(),
            ..Holder::default()
        };
        GrowthGroup {
            pid: 1,
            holder: Some(holder.clone()),
            created_at: None,
            growers: vec![Grower {
                pid: 1,
                key: key.into(),
                what: key.into(),
                unit: "objects".into(),
                slope: 1.0,
                lo: 1.0,
                hi: 1.0,
                per: "step".into(),
                bytes_slope: Some(bytes),
                first: 0.0,
                last: 10.0,
                censuses: 6,
                holder: Some(holder),
                created_at: None,
                example: None,
                basis: "fit",
            }],
            static_findings: Vec::new(),
            site_from: None,
            static_holder: None,
            process: None,
        }
    }

    /// A trace of one process: a census per (step, graph) and a suspect
    /// of `key` held by `train:total`.
    const HEADER: &str = r#"{"kind":"header","format":"leakspy-trace","version":1,"leakspy_version":"0.1.0","t":0.0,"started_at":0.0,"command":["python","train.py"],"cwd":"/tmp","hostname":"h","pid":7,"sample_interval_s":0.1}"#;

    fn graph_trace(graphs: &[(u64, &str)], key: &str) -> Trace {
        let mut lines = vec![HEADER.to_string()];
        for (i, (step, graph)) in graphs.iter().enumerate() {
            lines.push(format!(
                r#"{{"kind":"census","pid":7,"t":{},"step":{step},"source":"optimizer","graph":{graph}}}"#,
                i + 1
            ));
        }
        lines.push(format!(
            r#"{{"kind":"suspect","pid":7,"t":9.0,"step":1,"key":"{key}","what":"autograd history (root AddBackward0, over 100000 nodes)","holder":{{"kind":"local","path":"train:total","chain":["Tensor","frame"]}}}}"#
        ));
        leakspy_trace::parse_trace(&lines.join("\n")).unwrap()
    }

    /// Censuses of growing graphs (all of them, and the largest one) with a
    /// suspect for each series, held by `all` and `largest`.
    fn two_graph_leaks(all: &str, largest: &str) -> Vec<GrowthGroup> {
        let mut lines = vec![HEADER.to_string()];
        for i in 1..=6u64 {
            lines.push(format!(
                r#"{{"kind":"census","pid":7,"t":{i},"step":{},"source":"optimizer","graph":{{"nodes":{},"roots":{},"largest":{}}}}}"#,
                i * 20,
                i * 20 * 246,
                i * 40,
                i * 20 * 82
            ));
        }
        for (key, path) in [("graph", all), ("graph.largest", largest)] {
            lines.push(format!(
                r#"{{"kind":"suspect","pid":7,"t":9.0,"step":100,"key":"{key}","what":"x","holder":{{"kind":"attribute","path":"{path}","chain":["Tensor","Trainer"]}}}}"#
            ));
        }
        growth_groups(&leakspy_trace::parse_trace(&lines.join("\n")).unwrap())
    }

    #[test]
    fn the_cuda_allocators_growth_joins_the_group_that_keeps_cuda_tensors() {
        let mut lines = vec![HEADER.to_string()];
        for i in 1..=6u64 {
            let mib = 1u64 << 20;
            lines.push(format!(
                r#"{{"kind":"census","pid":7,"t":{i},"step":{},"source":"optimizer","tensors":[{{"device":"cuda:0","dtype":"float32","requires_grad":true,"grad_fn":true,"count":{},"bytes":{}}}],"cuda":{{"allocated":{},"reserved":{}}}}}"#,
                i * 100,
                i * 100,
                i * 100 * mib,
                (64 + i * 100) * mib,
                (96 + i * 100) * mib
            ));
        }
        lines.push(
            r#"{"kind":"suspect","pid":7,"t":9.0,"step":600,"key":"tensors:cuda:0/float32/grad","what":"x","holder":{"kind":"attribute","path":"Trainer.kept","chain":["Tensor","list","Trainer"]}}"#
                .to_string(),
        );
        let groups = growth_groups(&leakspy_trace::parse_trace(&lines.join("\n")).unwrap());
        assert_eq!(groups.len(), 1, "{groups:#?}");
        let keys: Vec<&str> = groups[0].growers.iter().map(|g| g.key.as_str()).collect();
        assert!(
            keys.contains(&"cuda.allocated") && keys.contains(&"cuda.reserved"),
            "{keys:?}"
        );
    }

    /// Losses kept with their graphs (`/grad`, searched and held), the
    /// activations their graphs save (`/plain`) and copies of a model's
    /// parameters (`/leaf`) growing beside them.
    fn tensor_kinds_with_a_holder_reaching(reaches: &str) -> Vec<GrowthGroup> {
        let mut lines = vec![HEADER.to_string()];
        for i in 1..=6u64 {
            let t = |rg: bool, gf: bool, n: u64| {
                format!(
                    r#"{{"device":"cpu","dtype":"float32","requires_grad":{rg},"grad_fn":{gf},"count":{},"bytes":{}}}"#,
                    i * n,
                    i * n * 4096
                )
            };
            lines.push(format!(
                r#"{{"kind":"census","pid":7,"t":{i},"step":{},"source":"optimizer","tensors":[{},{},{}]}}"#,
                i * 100,
                t(true, true, 100),
                t(false, false, 300),
                t(true, false, 50)
            ));
        }
        lines.push(format!(
            r#"{{"kind":"suspect","pid":7,"t":9.0,"step":600,"key":"tensors:cpu/float32/grad","what":"x","holder":{{"kind":"attribute","path":"Trainer.losses","chain":["Tensor","list","Trainer"],"reaches":[{reaches}]}}}}"#
        ));
        growth_groups(&leakspy_trace::parse_trace(&lines.join("\n")).unwrap())
    }

    #[test]
    fn a_tensor_series_takes_a_holder_only_that_keeps_its_tensors() {
        let held_by = |groups: &[GrowthGroup], key: &str| {
            groups
                .iter()
                .find(|g| g.growers.iter().any(|gr| gr.key == key))
                .and_then(|g| g.holder.as_ref().map(|h| h.path.clone()))
        };
        // Kept through the losses' graphs: the saved activations are the
        // holder's; the parameters, a model's, are not.
        let groups = tensor_kinds_with_a_holder_reaching(
            r#""tensors:cpu/float32/grad","type:torch.Tensor""#,
        );
        let losses = Some("Trainer.losses".to_string());
        assert_eq!(held_by(&groups, "tensors:cpu/float32/grad"), losses);
        assert_eq!(held_by(&groups, "tensors:cpu/float32/plain"), losses);
        assert_eq!(
            held_by(&groups, "tensors:cpu/float32/leaf"),
            None,
            "{groups:#?}"
        );
        // A holder known to keep only detached tensors says nothing of
        // the others.
        let groups = tensor_kinds_with_a_holder_reaching(r#""tensors:cpu/float32/plain""#);
        assert_eq!(
            held_by(&groups, "tensors:cpu/float32/leaf"),
            None,
            "{groups:#?}"
        );
        // A graph keeps the activations of its own device only.
        let groups = tensor_kinds_with_a_holder_reaching(r#""tensors:cuda:0/float32/grad""#);
        assert_eq!(
            held_by(&groups, "tensors:cpu/float32/plain"),
            None,
            "{groups:#?}"
        );
        // Reached by references: held, whatever the kind.
        let groups = tensor_kinds_with_a_holder_reaching(
            r#""tensors:cpu/float32/grad","tensors:cpu/float32/leaf""#,
        );
        assert_eq!(
            held_by(&groups, "tensors:cpu/float32/leaf"),
            Some("Trainer.losses".into())
        );
    }

    #[test]
    fn a_chain_past_the_walks_cap_is_one_group_with_its_history() {
        // The chain rises through four censuses, then outgrows the walk's
        // cap: the series of all graphs named nobody, the history named the
        // global that holds the chain.
        let mut lines = vec![HEADER.to_string()];
        for i in 1..=4u64 {
            lines.push(format!(
                r#"{{"kind":"census","pid":7,"t":{i},"step":{},"source":"optimizer","graph":{{"nodes":{},"roots":3,"largest":{}}}}}"#,
                i * 300,
                i * 10_000 + 129,
                i * 10_000
            ));
        }
        lines.push(
            r#"{"kind":"census","pid":7,"t":5,"step":1500,"source":"optimizer","graph":{"nodes":100000,"roots":3,"capped":true,"history":540000}}"#
                .to_string(),
        );
        lines.push(
            r#"{"kind":"suspect","pid":7,"t":4.5,"step":1200,"key":"graph","what":"x","holder":{"kind":"unknown","path":"","chain":[]}}"#
                .to_string(),
        );
        lines.push(
            r#"{"kind":"suspect","pid":7,"t":5.5,"step":1500,"key":"graph.history","what":"x","per_census":10000,"count":540000,"holder":{"kind":"global","path":"__main__.history","chain":["Tensor","module"]}}"#
                .to_string(),
        );
        let groups = growth_groups(&leakspy_trace::parse_trace(&lines.join("\n")).unwrap());
        assert_eq!(groups.len(), 1, "{groups:#?}");
        let holder = groups[0].holder.as_ref().map(|h| h.path.as_str());
        assert_eq!(holder, Some("__main__.history"), "{groups:#?}");
        let keys: Vec<&str> = groups[0].growers.iter().map(|g| g.key.as_str()).collect();
        assert!(keys.contains(&"graph.history"), "{keys:?}");
        // One value past the cap tells no rate: the count is said, not "0 per step".
        let history = groups[0].growers.iter().find(|g| g.key == "graph.history");
        let told = history.map(|g| g.describe()).unwrap_or_default();
        assert!(told.contains("540,000 at the last look"), "{told}");
    }

    #[test]
    fn a_chain_beside_kept_graphs_is_a_group_of_its_own() {
        let groups = two_graph_leaks("Trainer.losses", "Trainer.total");
        let by = |path: &str| {
            groups
                .iter()
                .find(|g| g.holder.as_ref().is_some_and(|h| h.path == path))
                .unwrap_or_else(|| panic!("{path}: {groups:?}"))
        };
        assert_eq!(by("Trainer.losses").growers[0].key, "graph");
        let chain = &by("Trainer.total").growers[0];
        assert_eq!(chain.key, "graph.largest");
        assert!((chain.slope - 82.0).abs() < 1e-6, "{}", chain.slope);
    }

    #[test]
    fn the_largest_graph_of_a_holder_whose_graphs_all_grow_is_not_repeated() {
        let groups = two_graph_leaks("Trainer.total", "Trainer.total");
        assert_eq!(groups.len(), 1, "{groups:?}");
        let keys: Vec<&str> = groups[0].growers.iter().map(|g| g.key.as_str()).collect();
        assert_eq!(keys, ["graph"]);
    }

    /// Five censuses of a list that grows by 40 items a census and is
    /// listed from the third on (the first where the probe counts a
    /// container's rise), with the length it had at the second when
    /// `prev` says so; a suspect for it after the fifth.
    fn container_groups(with_prev: bool) -> Vec<GrowthGroup> {
        let mut lines = vec![HEADER.to_string()];
        for i in 1..=5u64 {
            let listed = if i < 3 {
                String::new()
            } else if i == 3 && with_prev {
                format!(
                    r#"{{"id":5,"type":"list","len":{},"prev":{}}}"#,
                    i * 40,
                    (i - 1) * 40
                )
            } else {
                format!(r#"{{"id":5,"type":"list","len":{}}}"#, i * 40)
            };
            lines.push(format!(
                r#"{{"kind":"census","pid":7,"t":{i},"step":{},"source":"optimizer","containers":[{listed}]}}"#,
                i * 40
            ));
        }
        lines.push(
            r#"{"kind":"suspect","pid":7,"t":9.0,"step":200,"key":"container:5","what":"list of dict (len 200)","holder":{"kind":"attribute","path":"Env.episodes","chain":["list","Env"]}}"#
                .to_string(),
        );
        growth_groups(&leakspy_trace::parse_trace(&lines.join("\n")).unwrap())
    }

    #[test]
    fn a_container_series_starts_where_the_probe_started_it() {
        let groups = container_groups(true);
        let g = groups
            .iter()
            .find(|g| g.holder.as_ref().is_some_and(|h| h.path == "Env.episodes"))
            .unwrap_or_else(|| panic!("{groups:?}"));
        assert_eq!(g.growers[0].censuses, 4, "{:?}", g.growers[0]);
        assert!(
            (g.growers[0].slope - 1.0).abs() < 1e-9,
            "{:?}",
            g.growers[0]
        );
        // Without the earlier length, three points are too few to fit: the
        // probe's word stands, said as such.
        let groups = container_groups(false);
        assert_eq!(groups.len(), 1, "{groups:?}");
        assert_eq!(groups[0].growers[0].basis, "probe");
        assert_eq!(groups[0].holder.as_ref().unwrap().path, "Env.episodes");
    }

    #[test]
    fn one_lists_holder_is_not_lent_to_another_list_or_type() {
        // The trainer's list of losses is searched and named; the
        // environment's list of rewards and a count of tuples grow beside
        // it, unsearched. Holding one list does not make a holder of the
        // others: they stay without one.
        let mut lines = vec![HEADER.to_string()];
        for i in 1..=6u64 {
            lines.push(format!(
                r#"{{"kind":"census","pid":7,"t":{i},"step":{},"source":"optimizer","containers":[{{"id":11,"type":"list","len":{}}},{{"id":22,"type":"list","len":{}}}],"types":{{"builtins.tuple":{}}}}}"#,
                i * 100,
                i * 100,
                i * 500,
                1000 + i * 90
            ));
        }
        lines.push(r#"{"kind":"suspect","pid":7,"t":9.0,"step":600,"key":"container:11","what":"list of Tensor (len 600)","holder":{"kind":"attribute","path":"Trainer.losses","container_id":11,"chain":["list","Trainer"],"reaches":["container:11","type:torch.Tensor"]}}"#.to_string());
        let groups = growth_groups(&leakspy_trace::parse_trace(&lines.join("\n")).unwrap());
        let held_by = |key: &str| {
            groups
                .iter()
                .find(|g| g.growers.iter().any(|x| x.key == key))
                .unwrap_or_else(|| panic!("{key}: {groups:?}"))
                .holder
                .as_ref()
                .map(|h| h.path.clone())
        };
        assert_eq!(held_by("container:11").as_deref(), Some("Trainer.losses"));
        assert_eq!(held_by("container:22"), None);
        assert_eq!(held_by("type:builtins.tuple"), None);
    }

    #[test]
    fn a_local_pointing_at_the_newest_object_yields_to_the_holder_that_reaches_them() {
        // The probe searched the tensor objects from one that was this
        // step's `pred`, a frame local; the trainer's list, named for its
        // graphs, reaches the tensors by references.
        let mut lines = vec![HEADER.to_string()];
        for i in 1..=6u64 {
            lines.push(format!(
                r#"{{"kind":"census","pid":7,"t":{i},"step":{},"source":"optimizer","containers":[{{"id":11,"type":"list","len":{}}}],"types":{{"torch.Tensor":{}}}}}"#,
                i * 100,
                i * 100,
                i * 600
            ));
        }
        lines.push(r#"{"kind":"suspect","pid":7,"t":9.0,"step":600,"key":"container:11","what":"list of tuple (len 600)","holder":{"kind":"attribute","path":"Trainer.losses","container_id":11,"chain":["list","Trainer"],"reaches":["container:11","type:torch.Tensor"]}}"#.to_string());
        lines.push(r#"{"kind":"suspect","pid":7,"t":9.0,"step":600,"key":"type:torch.Tensor","what":"torch.Tensor","holder":{"kind":"local","path":"Trainer.train_step:pred","chain":["Tensor","frame"]}}"#.to_string());
        let groups = growth_groups(&leakspy_trace::parse_trace(&lines.join("\n")).unwrap());
        assert_eq!(groups.len(), 1, "{groups:?}");
        assert_eq!(groups[0].holder.as_ref().unwrap().path, "Trainer.losses");
        assert_eq!(groups[0].growers.len(), 2, "{groups:?}");
    }

    #[test]
    fn slow_rates_read_per_thousands_of_steps() {
        let g = |slope: f64, bytes: Option<f64>| Grower {
            pid: 1,
            key: "modules:Actor".into(),
            what: "Actor modules (nn.Module)".into(),
            unit: "count".into(),
            slope,
            lo: slope,
            hi: slope,
            per: "step".into(),
            bytes_slope: bytes,
            first: 0.0,
            last: 1.0,
            censuses: 5,
            holder: None,
            created_at: None,
            example: None,
            basis: "fit",
        };
        assert_eq!(
            g(2.5e-3, Some(37.0)).describe(),
            "+2.50 Actor modules (nn.Module) per 1,000 steps (36.1 KiB per 1,000 steps)"
        );
        assert_eq!(
            g(0.25, None).describe(),
            "+0.25 Actor modules (nn.Module) per step"
        );
        assert_eq!(
            g(0.05, None).describe(),
            "+5.00 Actor modules (nn.Module) per 100 steps"
        );
        assert_eq!(
            g(96.0, None).describe(),
            "+96 Actor modules (nn.Module) per step"
        );
    }

    #[test]
    fn a_timer_census_before_the_first_step_leaves_the_fit_per_step() {
        let mut trace = graph_trace(
            &[
                (100, r#"{"nodes":1000}"#),
                (200, r#"{"nodes":2000}"#),
                (300, r#"{"nodes":3000}"#),
                (400, r#"{"nodes":4000}"#),
            ],
            "graph",
        );
        let timer = r#"{"kind":"census","pid":7,"t":0.5,"source":"timer","graph":{"nodes":10}}"#;
        let timer = leakspy_trace::parse_trace(&format!("{}\n{timer}", HEADER)).unwrap();
        trace.events.extend(timer.events);
        let g = &growth_groups(&trace)[0].growers[0];
        assert_eq!((g.key.as_str(), g.per.as_str()), ("graph", "step"), "{g:?}");
        assert!((g.slope - 10.0).abs() < 1e-6, "{}", g.slope);
    }

    #[test]
    fn looks_bunched_at_the_end_do_not_hide_a_leak_or_make_one() {
        // A copy kept every 60 steps (6 modules each); the last four looks
        // are a burst's, 10 steps apart, between two copies.
        let x = [100.0, 250.0, 400.0, 550.0, 700.0, 710.0, 720.0, 730.0];
        let y = [6.0, 18.0, 30.0, 42.0, 60.0, 60.0, 60.0, 60.0];
        assert!(grows(&x, &y, "modules", Counting::Job).is_some());
        // The same looks on a buffer that filled by step 400 and held:
        // the last level has held for most of the span.
        let y = [6.0, 30.0, 60.0, 60.0, 60.0, 60.0, 60.0, 60.0];
        assert!(grows(&x, &y, "modules", Counting::Job).is_none());
        // Evenly spaced looks that end flat for the last half: a plateau.
        let x = [100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0, 800.0];
        let y = [6.0, 18.0, 30.0, 42.0, 60.0, 60.0, 60.0, 60.0];
        assert!(grows(&x, &y, "modules", Counting::Job).is_none());
        // A long dense stretch keeps a look per stretch of steps.
        let x: Vec<f64> = (0..40).map(|i| f64::from(i) * 10.0).collect();
        let (tx, _) = thinned(&x, &x);
        assert_eq!(tx.len(), x.len(), "evenly spaced looks stay");
        let mut x = vec![0.0, 300.0, 600.0];
        x.extend((0..30).map(|i| 900.0 + f64::from(i)));
        let (tx, _) = thinned(&x, &x);
        assert!(tx.len() > 3 && tx.len() < x.len(), "{tx:?}");
    }

    #[test]
    fn a_chain_past_the_walk_cap_grows_by_the_history_it_keeps() {
        let capped = |h: u64| format!(r#"{{"nodes":100000,"capped":true,"history":{h}}}"#);
        let graphs: Vec<(u64, String)> = (1..=5)
            .map(|i| (i * 100, capped(80_000 + i * 40_000)))
            .collect();
        let graphs: Vec<(u64, &str)> = graphs.iter().map(|(s, g)| (*s, g.as_str())).collect();
        let groups = growth_groups(&graph_trace(&graphs, "graph.history"));
        let held = groups
            .iter()
            .find(|g| g.holder.as_ref().is_some_and(|h| h.path == "train:total"))
            .expect("the chain's holder");
        let g = &held.growers[0];
        assert_eq!(g.key, "graph.history");
        assert!((g.slope - 400.0).abs() < 1e-6, "{}", g.slope);
        // The node count was at the cap from the first census: nothing to fit.
        assert!(!groups
            .iter()
            .flat_map(|g| &g.growers)
            .any(|g| g.key == "graph"));
    }

    #[test]
    fn three_censuses_of_a_rising_history_suffice() {
        let capped = |h: u64| format!(r#"{{"nodes":100000,"capped":true,"history":{h}}}"#);
        let graphs: Vec<(u64, String)> = (1..=3).map(|i| (i * 100, capped(i * 50_000))).collect();
        let graphs: Vec<(u64, &str)> = graphs.iter().map(|(s, g)| (*s, g.as_str())).collect();
        let groups = growth_groups(&graph_trace(&graphs, "graph.history"));
        let g = &groups[0].growers[0];
        assert_eq!((g.key.as_str(), g.censuses), ("graph.history", 3));
        assert!((g.slope - 500.0).abs() < 1e-6, "{}", g.slope);
        // Two censuses are not enough for a fit (the probe's word stands,
        // as its own), nor three that do not rise at each.
        let two = &graphs[..2];
        let groups = growth_groups(&graph_trace(two, "graph.history"));
        assert!(
            groups
                .iter()
                .flat_map(|g| &g.growers)
                .all(|g| g.basis == "probe"),
            "{groups:?}"
        );
        let flat = [(100, graphs[0].1), (200, graphs[1].1), (300, graphs[1].1)];
        assert!(growth_groups(&graph_trace(&flat, "graph.history")).is_empty());
    }

    #[test]
    fn a_big_graph_made_anew_each_step_keeps_no_history() {
        let capped = r#"{"nodes":100000,"capped":true,"history":0}"#;
        let first = r#"{"nodes":100000,"capped":true,"history":123000}"#;
        let graphs = [
            (100, first),
            (200, capped),
            (300, capped),
            (400, capped),
            (500, capped),
        ];
        let groups = growth_groups(&graph_trace(&graphs, "graph.history"));
        assert!(groups.is_empty(), "{groups:?}");
    }

    #[test]
    fn a_graph_reaching_the_cap_at_the_third_census_counts_its_first() {
        // The first census is warm-up for every other series; the graph's
        // nodes alive at it are the rise's first point.
        let graphs = [
            (100, r#"{"nodes":500}"#),
            (200, r#"{"nodes":50000}"#),
            (300, r#"{"nodes":100000,"capped":true}"#),
            (400, r#"{"nodes":100000,"capped":true}"#),
        ];
        let groups = growth_groups(&graph_trace(&graphs, "graph"));
        let g = &groups[0].growers[0];
        assert_eq!((g.key.as_str(), g.censuses), ("graph", 4), "{groups:?}");
        assert!(
            g.what.contains("walk cap, reached in 2 censuses"),
            "{}",
            g.what
        );
        assert_eq!(groups[0].holder.as_ref().unwrap().path, "train:total");
    }

    #[test]
    fn an_attribute_outranks_a_local_pointing_into_it() {
        // grad_replay: `old_q` (a loop variable) and `ReplayBuffer.storage`
        // both reach the growing tensors; the local even sees more bytes.
        let local = group_of("local", "main:old_q", "tensors:cpu/float32/grad", 4096.0);
        let attr = group_of(
            "attribute",
            "ReplayBuffer.storage",
            "tensors:cpu/float32/grad",
            1024.0,
        );
        assert!(importance(&attr) > importance(&local));
    }

    #[test]
    fn a_local_holding_graphs_outranks_an_attribute_holding_plain_objects() {
        let local = group_of("local", "main:losses", "graph", 512.0);
        let attr = group_of("attribute", "Logger.lines", "type:builtins.str", 4096.0);
        assert!(importance(&local) > importance(&attr));
    }

    #[test]
    fn one_rule_judges_job_and_exact_series_alike_but_for_the_least_rise() {
        let x: Vec<f64> = (0..12).map(|i| 10.0 + 6.0 * f64::from(i)).collect();
        // 16 B per call: exact counts take it, a job's tensor bytes need MiB.
        let bytes: Vec<f64> = x.iter().map(|x| 16.0 * x).collect();
        assert!(grows(&x, &bytes, "bytes", Counting::Exact).is_some());
        assert!(grows(&x, &bytes, "bytes", Counting::Job).is_none());
        let per_call = grows(&x, &x, "objects", Counting::Job).unwrap();
        assert_eq!(per_call.slope, 1.0);
        // A list emptied at 45 items rises again in its last half, below
        // its earlier top: no leak.
        let saw: Vec<f64> = x.iter().map(|x| x % 45.0).collect();
        assert!(grows(&x, &saw, "items", Counting::Exact).is_none());
        // A bounded history full by the middle: not still growing.
        let full: Vec<f64> = x.iter().map(|x| x.min(40.0)).collect();
        assert!(grows(&x, &full, "items", Counting::Exact).is_none());
    }

    #[test]
    fn exact_series_with_points_missing_are_judged_on_the_rest() {
        let x: Vec<f64> = (0..8).map(f64::from).collect();
        let mut series = BTreeMap::new();
        let followed_late = [
            None,
            None,
            Some(3.0),
            Some(4.0),
            Some(5.0),
            Some(6.0),
            Some(7.0),
            Some(8.0),
        ];
        series.insert("container:7".to_string(), followed_late.to_vec());
        series.insert("type:Flat".to_string(), vec![Some(1.0); 8]);
        let out = judge_exact(&x, &series);
        assert_eq!(out.keys().collect::<Vec<_>>(), ["container:7"]);
        assert_eq!(out["container:7"].slope, 1.0);
        assert_eq!(unit_of("container:7"), "items");
        assert_eq!(unit_of("bytes:tensors:cpu/float32/plain"), "bytes");
        assert_eq!(unit_of("graph.history"), "nodes");
    }

    #[test]
    fn counts_of_builtins_without_a_holder_are_one_group_not_one_each() {
        let held = group_of("attribute", "Trainer.hall_of_fame", "modules:Actor", 0.0);
        let mut growers = held.growers.clone();
        for (key, slope) in [
            ("type:weakref.ReferenceType", 1.1),
            ("type:builtins.tuple", 1.6),
            ("type:builtins.builtin_function_or_method", 1.0),
            ("container:42", 5.0),
        ] {
            let mut g = held.growers[0].clone();
            g.key = key.into();
            g.what = key.into();
            g.slope = slope;
            g.holder = None;
            growers.push(g);
        }
        let groups = group(1, growers);
        assert_eq!(groups.len(), 3, "{groups:#?}");
        let counts = groups
            .iter()
            .find(|g| g.holder.is_none() && g.growers[0].key.starts_with("type:"))
            .unwrap();
        assert_eq!(counts.growers.len(), 3);
        assert!(groups.iter().any(|g| g.holder.is_none()
            && g.growers.len() == 1
            && g.growers[0].key == "container:42"));
    }

    #[test]
    fn a_librarys_root_that_a_named_holder_reaches_is_part_of_its_leak() {
        let mut figures = group_of("pyplot", "matplotlib.pyplot", "figures", 0.0);
        figures.growers[0].holder.as_mut().unwrap().reaches = vec!["container:9".into()];
        let registry = group_of("class_attribute", "Gcf.figs", "container:9", 0.0);
        let cache = group_of("attribute", "_cache.__defaults__", "container:8", 0.0);
        let mut growers = figures.growers.clone();
        for grp in [registry, cache] {
            let mut g = grp.growers[0].clone();
            g.holder.as_mut().unwrap().library = true;
            growers.push(g);
        }
        let groups = group(1, growers);
        let sizes: Vec<(&str, usize)> = groups
            .iter()
            .map(|g| (g.holder.as_ref().unwrap().path.as_str(), g.growers.len()))
            .collect();
        // The registry the figures' holder reaches joins it; a cache it
        // does not reach stays apart.
        assert_eq!(
            sizes,
            [("_cache.__defaults__", 1), ("matplotlib.pyplot", 2)],
            "{groups:#?}"
        );
    }
}

//! Tolerant reader. It skips what a crash or a newer writer leaves behind (a
//! torn last line, garbage lines, unknown kinds) and says so in `warnings`,
//! but refuses a file without a header, which is not a trace at all.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde_json::Value;

use crate::{
    Detach, Event, Exit, GpuSample, Header, Note, Sample, Step, TraceError, FORMAT_NAME,
    FORMAT_VERSION,
};

/// Past this many, warnings are counted instead of listed: a file of garbage
/// must not make a report of garbage.
const MAX_WARNINGS: usize = 50;

/// A trace read back: the header, the events in file order (header excluded),
/// and what the reader had to skip.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    pub header: Header,
    pub events: Vec<Event>,
    /// Lines skipped, one message each ("line 7: torn last line ...").
    pub warnings: Vec<String>,
    /// Events of kinds this version does not know, by kind.
    pub unknown_kinds: BTreeMap<String, usize>,
    /// Set when the reader thinned a long trace to bound its memory (see [`ReadOptions`]).
    pub downsampled: Option<Downsampling>,
}

/// Limits that keep a long trace's memory bounded. A 24-hour run at 10 Hz
/// has 864 000 samples; held whole that is hundreds of MB. Past the limits
/// the reader keeps, per window of consecutive samples, the one with the
/// lowest and the one with the highest total RSS (trends are fitted on
/// windowed minima; peaks are shown), plus the first with PSS; and every
/// k-th step (step numbers carry the count). Short traces are read whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    /// Most samples kept (0: no limit).
    pub max_samples: usize,
    /// Most step events kept (0: no limit). The last step is always kept.
    pub max_steps: usize,
    /// Most GPU events kept (0: no limit).
    pub max_gpu: usize,
    /// Most census events kept (0: no limit): a day-long run's censuses
    /// would otherwise take hundreds of MB to hold.
    pub max_census: usize,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            max_samples: 30_000,
            max_steps: 30_000,
            max_gpu: 10_000,
            max_census: 3_000,
        }
    }
}

impl ReadOptions {
    /// Keep every event.
    pub fn unlimited() -> Self {
        ReadOptions {
            max_samples: 0,
            max_steps: 0,
            max_gpu: 0,
            max_census: 0,
        }
    }
}

/// How a long trace was thinned while reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Downsampling {
    /// Samples in the file, and samples per window at the end of reading.
    pub samples_in_file: usize,
    pub sample_window: usize,
    /// Step events in the file, and one kept in `step_stride`.
    pub steps_in_file: usize,
    pub step_stride: usize,
    pub gpu_in_file: usize,
    pub gpu_stride: usize,
    pub census_in_file: usize,
    pub census_stride: usize,
}

impl Trace {
    pub fn samples(&self) -> impl Iterator<Item = &Sample> + '_ {
        self.events.iter().filter_map(|e| match e {
            Event::Sample(s) => Some(s),
            _ => None,
        })
    }

    pub fn steps(&self) -> impl Iterator<Item = &Step> + '_ {
        self.events.iter().filter_map(|e| match e {
            Event::Step(s) => Some(s),
            _ => None,
        })
    }

    pub fn gpu(&self) -> impl Iterator<Item = &GpuSample> + '_ {
        self.events.iter().filter_map(|e| match e {
            Event::Gpu(g) => Some(g),
            _ => None,
        })
    }

    pub fn notes(&self) -> impl Iterator<Item = &Note> + '_ {
        self.events.iter().filter_map(|e| match e {
            Event::Note(n) => Some(n),
            _ => None,
        })
    }

    /// Probe `hello` events (one per process where the probe started), raw.
    pub fn probes(&self) -> impl Iterator<Item = &serde_json::Map<String, Value>> + '_ {
        self.events.iter().filter_map(|e| match e {
            Event::Probe(m) => Some(m),
            _ => None,
        })
    }

    /// Census events of the probe.
    pub fn census(&self) -> impl Iterator<Item = &crate::Census> + '_ {
        self.events.iter().filter_map(|e| match e {
            Event::Census(m) => Some(m),
            _ => None,
        })
    }

    /// The probe's last accounting of each process (`cost` events).
    pub fn costs(&self) -> impl Iterator<Item = &crate::Cost> + '_ {
        self.events.iter().filter_map(|e| match e {
            Event::Cost(m) => Some(m),
            _ => None,
        })
    }

    /// Suspect events of the probe.
    pub fn suspects(&self) -> impl Iterator<Item = &crate::Suspect> + '_ {
        self.events.iter().filter_map(|e| match e {
            Event::Suspect(m) => Some(m),
            _ => None,
        })
    }

    /// How the child ended; `None` when the monitor itself died before it could say.
    pub fn exit(&self) -> Option<&Exit> {
        self.events.iter().rev().find_map(|e| match e {
            Event::Exit(x) => Some(x),
            _ => None,
        })
    }

    /// How an attached recording ended (`leakspy attach`); `None` for runs.
    pub fn detach(&self) -> Option<&Detach> {
        self.events.iter().rev().find_map(|e| match e {
            Event::Detach(d) => Some(d),
            _ => None,
        })
    }

    /// What `check` said of the job's sources when the run ended (the last
    /// such record); `None` for traces written before it was recorded.
    pub fn static_record(&self) -> Option<&crate::StaticRecord> {
        self.events.iter().rev().find_map(|e| match e {
            Event::Static(s) => Some(s),
            _ => None,
        })
    }

    /// Time of the last event, in seconds since start.
    pub fn duration(&self) -> f64 {
        self.events.iter().map(Event::t).fold(0.0, f64::max)
    }

    /// Samples in the file (more than `samples()` yields when downsampled).
    pub fn sample_count(&self) -> usize {
        match self.downsampled {
            Some(d) => d.samples_in_file,
            None => self.samples().count(),
        }
    }

    /// Whether `other` is a recording of the same run: the same header, and
    /// the events of one are those of the other or their beginning (a copy
    /// taken while the run was still being written). Two runs never share a
    /// header: it holds the start time, host and pid.
    pub fn is_same_run(&self, other: &Trace) -> bool {
        if self.header != other.header {
            return false;
        }
        let n = self.events.len().min(other.events.len());
        self.events[..n] == other.events[..n]
    }

    /// Step events in the file (more than `steps()` yields when downsampled).
    pub fn step_count(&self) -> usize {
        match self.downsampled {
            Some(d) => d.steps_in_file,
            None => self.steps().count(),
        }
    }
}

/// Reads a trace file, streaming (the file is never held whole in memory),
/// with the default [`ReadOptions`] limits.
pub fn read_trace(path: impl AsRef<Path>) -> Result<Trace, TraceError> {
    read_trace_with(path, &ReadOptions::default())
}

/// Reads a trace file with explicit limits.
pub fn read_trace_with(path: impl AsRef<Path>, opts: &ReadOptions) -> Result<Trace, TraceError> {
    let path = path.as_ref();
    let read_err = |source| TraceError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(read_err)?;
    let reader = BufReader::with_capacity(1 << 16, file);
    read_trace_from_with(reader, &path.display().to_string(), opts).map_err(|e| match e {
        // Re-attach the path to I/O errors raised while streaming.
        TraceError::Read { source, .. } => read_err(source),
        other => other,
    })
}

/// Parses a whole trace held in a string.
pub fn parse_trace(text: &str) -> Result<Trace, TraceError> {
    parse_trace_bytes(text.as_bytes())
}

/// Parses a trace held in bytes (lines that are not UTF-8 are skipped with a warning).
pub fn parse_trace_bytes(bytes: &[u8]) -> Result<Trace, TraceError> {
    read_trace_from(bytes, "<trace>")
}

/// Reads a trace from any buffered reader; `origin` names it in messages.
pub fn read_trace_from(input: impl BufRead, origin: &str) -> Result<Trace, TraceError> {
    read_trace_from_with(input, origin, &ReadOptions::default())
}

/// [`read_trace_from`] with explicit limits.
pub fn read_trace_from_with(
    mut input: impl BufRead,
    origin: &str,
    opts: &ReadOptions,
) -> Result<Trace, TraceError> {
    let mut state = ReadState::new(*opts);
    let mut header: Option<Header> = None;
    let mut buf = Vec::with_capacity(1024);
    let mut line_no = 0usize;
    loop {
        buf.clear();
        let n = input
            .read_until(b'\n', &mut buf)
            .map_err(|source| TraceError::Read {
                path: origin.into(),
                source,
            })?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let complete = buf.last() == Some(&b'\n');
        let raw = trim_ascii(&buf);
        if raw.is_empty() {
            continue;
        }
        match header {
            None => match parse_header(raw, line_no, origin) {
                Ok(h) => header = Some(h),
                Err(e) => return Err(explain_bad_start(e, raw, &mut input, origin)),
            },
            Some(_) => state.line(raw, line_no, complete),
        }
    }
    let header = header.ok_or_else(|| TraceError::Empty {
        origin: origin.to_string(),
    })?;
    if state.suppressed > 0 {
        state
            .warnings
            .push(format!("... and {} more skipped lines", state.suppressed));
    }
    let (events, downsampled) = state.finish();
    Ok(Trace {
        header,
        events,
        warnings: state.warnings,
        unknown_kinds: state.unknown_kinds,
        downsampled,
    })
}

/// Largest rest of a file read to tell a JSON document from a cut header.
const MAX_DOCUMENT: u64 = 16 << 20;

/// A first line that is not a header, looked at again with the rest of the
/// file: a JSON document spread over lines (a report written with
/// `--report-json`), or a header cut short. Other errors pass unchanged.
fn explain_bad_start(
    err: TraceError,
    first: &[u8],
    rest: &mut impl BufRead,
    origin: &str,
) -> TraceError {
    let TraceError::MissingHeader { line, .. } = &err else {
        return err;
    };
    let line = *line;
    // Only an unfinished JSON value can be either.
    let unfinished = matches!(serde_json::from_slice::<Value>(first), Err(e) if e.is_eof());
    if !unfinished {
        return err;
    }
    let mut document = first.to_vec();
    document.push(b'\n');
    let complete = rest
        .take(MAX_DOCUMENT)
        .read_to_end(&mut document)
        .is_ok_and(|n| (n as u64) < MAX_DOCUMENT);
    if complete {
        if let Ok(value) = serde_json::from_slice::<Value>(&document) {
            let keys = match &value {
                Value::Object(map) => map.keys().cloned().collect(),
                _ => Vec::new(),
            };
            return TraceError::JsonDocument {
                origin: origin.to_string(),
                keys,
            };
        }
    }
    // What the writer puts first; a cut can fall anywhere in it.
    const HEADER_START: &[u8] = br#"{"kind":"header","format":"leakspy-trace""#;
    let cut_header = (first.len() >= 2 && HEADER_START.starts_with(first))
        || first.starts_with(HEADER_START)
        || contains(first, br#""leakspy-trace""#);
    if !cut_header {
        return err;
    }
    TraceError::TruncatedHeader {
        origin: origin.to_string(),
        line,
        bytes: first.len(),
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn trim_ascii(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |i| i + 1);
    &bytes[start..end]
}

fn snippet(raw: &[u8]) -> String {
    let head = &raw[..raw.len().min(60)];
    let text = std::str::from_utf8(head).map_or_else(
        // A cut in the middle of a character is still text.
        |e| (e.error_len().is_none()).then(|| &head[..e.valid_up_to()]),
        |_| Some(head),
    );
    if text.is_none_or(|t| t.iter().any(|&b| b < 0x20 && b != b'\t')) {
        return "binary data, not text".to_string();
    }
    let text = String::from_utf8_lossy(&raw[..raw.len().min(60)]);
    if raw.len() > 60 {
        format!("{text:?}...")
    } else {
        format!("{text:?}")
    }
}

fn parse_header(raw: &[u8], line: usize, origin: &str) -> Result<Header, TraceError> {
    let missing = |found: String| TraceError::MissingHeader {
        origin: origin.to_string(),
        line,
        found,
    };
    let value: Value = serde_json::from_slice(raw).map_err(|_| missing(snippet(raw)))?;
    let kind = value.get("kind").and_then(Value::as_str);
    let format = value.get("format").and_then(Value::as_str);
    if kind != Some("header") || format != Some(FORMAT_NAME) {
        let found = match kind {
            Some(k) => format!("an event of kind {k:?}"),
            None => snippet(raw),
        };
        return Err(missing(found));
    }
    let version = value.get("version").and_then(Value::as_u64).unwrap_or(0);
    if version == 0 || version > u64::from(FORMAT_VERSION) {
        return Err(TraceError::UnsupportedVersion {
            origin: origin.to_string(),
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    match serde_json::from_value::<Event>(value) {
        Ok(Event::Header(h)) => Ok(h),
        Ok(_) => unreachable!("kind was checked to be header"),
        Err(e) => Err(missing(format!("a header that does not parse ({e})"))),
    }
}

struct ReadState {
    opts: ReadOptions,
    /// Events other than samples, steps and GPU, with their line numbers.
    others: Vec<(usize, Event)>,
    samples: SampleThinner,
    steps: Thinner,
    gpu: Thinner,
    census: Thinner,
    warnings: Vec<String>,
    suppressed: usize,
    unknown_kinds: BTreeMap<String, usize>,
    /// The latest `cost` event of each process: each one sums up all before
    /// it, so a long run keeps one per process, not one per census.
    costs: BTreeMap<Option<u64>, (usize, Event)>,
}

impl ReadState {
    fn new(opts: ReadOptions) -> Self {
        ReadState {
            opts,
            others: Vec::new(),
            samples: SampleThinner::new(opts.max_samples),
            steps: Thinner::new(opts.max_steps),
            gpu: Thinner::new(opts.max_gpu),
            census: Thinner::new(opts.max_census),
            warnings: Vec::new(),
            suppressed: 0,
            unknown_kinds: BTreeMap::new(),
            costs: BTreeMap::new(),
        }
    }

    fn warn(&mut self, message: String) {
        if self.warnings.len() < MAX_WARNINGS {
            self.warnings.push(message);
        } else {
            self.suppressed += 1;
        }
    }

    fn line(&mut self, raw: &[u8], line: usize, complete: bool) {
        // The common case first: a well-formed event of a known kind.
        if let Ok(event) = serde_json::from_slice::<Event>(raw) {
            match event {
                Event::Header(_) => self.warn(format!("line {line}: a second header, skipped")),
                Event::Sample(s) => self.samples.push(line, s),
                e @ Event::Step(_) => self.steps.push(line, e),
                e @ Event::Gpu(_) => self.gpu.push(line, e),
                e @ Event::Census(_) => self.census.push(line, e),
                Event::Cost(c) => {
                    let pid = c.pid.map(u64::from);
                    self.costs.insert(pid, (line, Event::Cost(c)));
                }
                e => self.others.push((line, e)),
            }
            return;
        }
        if std::str::from_utf8(raw).is_err() {
            self.warn(format!("line {line}: not valid UTF-8, skipped"));
            return;
        }
        let value: Value = match serde_json::from_slice(raw) {
            Ok(v) => v,
            Err(_) if !complete => {
                self.warn(format!(
                    "line {line}: torn last line (the run was probably killed while writing it), skipped"
                ));
                return;
            }
            Err(e) => {
                self.warn(format!("line {line}: not valid JSON ({e}), skipped"));
                return;
            }
        };
        let Some(kind) = value.get("kind").and_then(Value::as_str) else {
            self.warn(format!("line {line}: no \"kind\" field, skipped"));
            return;
        };
        if !Event::is_known_kind(kind) {
            *self.unknown_kinds.entry(kind.to_string()).or_default() += 1;
            return;
        }
        let err = serde_json::from_value::<Event>(value.clone())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        self.warn(format!(
            "line {line}: invalid {kind} event ({err}), skipped"
        ));
    }

    /// All kept events in file order, and how they were thinned.
    fn finish(&mut self) -> (Vec<Event>, Option<Downsampling>) {
        let samples_in_file = self.samples.seen;
        let sample_window = self.samples.window;
        let (steps_in_file, step_stride) = (self.steps.seen, self.steps.stride);
        let (gpu_in_file, gpu_stride) = (self.gpu.seen, self.gpu.stride);
        let (census_in_file, census_stride) = (self.census.seen, self.census.stride);
        let mut all: Vec<(usize, Event)> = std::mem::take(&mut self.others);
        all.extend(
            std::mem::replace(&mut self.samples, SampleThinner::new(self.opts.max_samples))
                .into_kept()
                .into_iter()
                .map(|(l, s)| (l, Event::Sample(s))),
        );
        all.extend(std::mem::replace(&mut self.steps, Thinner::new(0)).into_kept());
        all.extend(std::mem::replace(&mut self.gpu, Thinner::new(0)).into_kept());
        all.extend(std::mem::replace(&mut self.census, Thinner::new(0)).into_kept());
        all.extend(std::mem::take(&mut self.costs).into_values());
        all.sort_by_key(|(line, _)| *line);
        let thinned = sample_window > 1 || step_stride > 1 || gpu_stride > 1 || census_stride > 1;
        let info = thinned.then_some(Downsampling {
            samples_in_file,
            sample_window,
            steps_in_file,
            step_stride,
            gpu_in_file,
            gpu_stride,
            census_in_file,
            census_stride,
        });
        (all.into_iter().map(|(_, e)| e).collect(), info)
    }
}

/// Keeps one event in `stride`, doubling the stride whenever more than `cap`
/// are kept; the last event seen is always kept.
struct Thinner {
    cap: usize,
    stride: usize,
    seen: usize,
    kept: Vec<(usize, usize, Event)>,
    last: Option<(usize, usize, Event)>,
}

impl Thinner {
    fn new(cap: usize) -> Self {
        Thinner {
            cap,
            stride: 1,
            seen: 0,
            kept: Vec::new(),
            last: None,
        }
    }

    fn push(&mut self, line: usize, event: Event) {
        let index = self.seen;
        self.seen += 1;
        if !index.is_multiple_of(self.stride) {
            self.last = Some((index, line, event));
            return;
        }
        self.last = None;
        self.kept.push((index, line, event));
        if self.cap > 0 && self.kept.len() > self.cap {
            self.stride *= 2;
            let stride = self.stride;
            self.kept.retain(|(i, _, _)| i.is_multiple_of(stride));
        }
    }

    fn into_kept(mut self) -> Vec<(usize, Event)> {
        if let Some(last) = self.last.take() {
            self.kept.push(last);
        }
        self.kept.into_iter().map(|(_, l, e)| (l, e)).collect()
    }
}

/// One window of consecutive samples reduced to its extremes.
struct Bucket {
    len: usize,
    min: (usize, Sample),
    max: Option<(usize, Sample)>,
    /// First sample of the window with PSS/USS (read only every few seconds).
    pss: Option<(usize, Sample)>,
}

impl Bucket {
    fn one(line: usize, s: Sample) -> Self {
        Bucket {
            len: 1,
            min: (line, s),
            max: None,
            pss: None,
        }
    }

    fn samples(self) -> impl Iterator<Item = (usize, Sample)> {
        std::iter::once(self.min).chain(self.max).chain(self.pss)
    }

    fn merge(self, other: Bucket) -> Bucket {
        let len = self.len + other.len;
        let mut all: Vec<(usize, Sample)> = self.samples().chain(other.samples()).collect();
        all.sort_by_key(|(l, _)| *l);
        let rss = |s: &Sample| s.total.rss;
        let imin = (0..all.len()).min_by_key(|&i| rss(&all[i].1)).unwrap_or(0);
        let imax = (0..all.len()).max_by_key(|&i| rss(&all[i].1)).unwrap_or(0);
        let ipss = (0..all.len()).find(|&i| all[i].1.total.pss.is_some());
        let mut take = |i: usize| std::mem::replace(&mut all[i], (usize::MAX, placeholder()));
        let min = take(imin);
        let max = (imax != imin).then(|| take(imax));
        let pss = ipss.filter(|&i| i != imin && i != imax).map(&mut take);
        Bucket { len, min, max, pss }
    }
}

fn placeholder() -> Sample {
    Sample {
        t: 0.0,
        procs: Vec::new(),
        total: Default::default(),
        mem_available: None,
        cgroup: None,
    }
}

/// Streaming reduction of samples to at most `cap` (about: up to 3 per
/// window), doubling the window when over.
struct SampleThinner {
    cap: usize,
    window: usize,
    seen: usize,
    kept_samples: usize,
    buckets: Vec<Bucket>,
}

impl SampleThinner {
    fn new(cap: usize) -> Self {
        SampleThinner {
            cap,
            window: 1,
            seen: 0,
            kept_samples: 0,
            buckets: Vec::new(),
        }
    }

    fn count(b: &Bucket) -> usize {
        1 + usize::from(b.max.is_some()) + usize::from(b.pss.is_some())
    }

    fn push(&mut self, line: usize, s: Sample) {
        self.seen += 1;
        let new = Bucket::one(line, s);
        match self.buckets.pop() {
            Some(open) if open.len < self.window => {
                self.kept_samples -= Self::count(&open);
                let merged = open.merge(new);
                self.kept_samples += Self::count(&merged);
                self.buckets.push(merged);
            }
            Some(full) => {
                self.buckets.push(full);
                self.kept_samples += 1;
                self.buckets.push(new);
            }
            None => {
                self.kept_samples += 1;
                self.buckets.push(new);
            }
        }
        if self.cap > 0 && self.kept_samples > self.cap {
            self.window *= 2;
            let old = std::mem::take(&mut self.buckets);
            let mut it = old.into_iter();
            self.kept_samples = 0;
            while let Some(a) = it.next() {
                let b = match it.next() {
                    Some(b) => a.merge(b),
                    None => a,
                };
                self.kept_samples += Self::count(&b);
                self.buckets.push(b);
            }
        }
    }

    fn into_kept(self) -> Vec<(usize, Sample)> {
        let mut out: Vec<(usize, Sample)> =
            self.buckets.into_iter().flat_map(Bucket::samples).collect();
        out.sort_by_key(|(l, _)| *l);
        out
    }
}

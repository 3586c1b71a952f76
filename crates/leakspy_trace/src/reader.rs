//! Tolerant reader. It skips what a crash or a newer writer leaves behind (a
//! torn last line, garbage lines, unknown kinds) and says so in `warnings`,
//! but refuses a file without a header, which is not a trace at all.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use serde_json::Value;

use crate::{
    Event, Exit, GpuSample, Header, Note, Sample, Step, TraceError, FORMAT_NAME, FORMAT_VERSION,
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

    /// Census events as raw JSON objects (without `kind`).
    pub fn census(&self) -> impl Iterator<Item = &serde_json::Map<String, Value>> + '_ {
        self.events.iter().filter_map(|e| match e {
            Event::Census(m) => Some(m),
            _ => None,
        })
    }

    /// Suspect events as raw JSON objects (without `kind`).
    pub fn suspects(&self) -> impl Iterator<Item = &serde_json::Map<String, Value>> + '_ {
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

    /// Time of the last event, in seconds since start.
    pub fn duration(&self) -> f64 {
        self.events.iter().map(Event::t).fold(0.0, f64::max)
    }

    pub fn sample_count(&self) -> usize {
        self.samples().count()
    }

    pub fn step_count(&self) -> usize {
        self.steps().count()
    }
}

/// Reads a trace file, streaming (the file is never held whole in memory).
pub fn read_trace(path: impl AsRef<Path>) -> Result<Trace, TraceError> {
    let path = path.as_ref();
    let read_err = |source| TraceError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(read_err)?;
    read_trace_from(BufReader::new(file), &path.display().to_string()).map_err(|e| match e {
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
pub fn read_trace_from(mut input: impl BufRead, origin: &str) -> Result<Trace, TraceError> {
    let mut state = ReadState::default();
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
            None => header = Some(parse_header(raw, line_no, origin)?),
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
    Ok(Trace {
        header,
        events: state.events,
        warnings: state.warnings,
        unknown_kinds: state.unknown_kinds,
    })
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

#[derive(Default)]
struct ReadState {
    events: Vec<Event>,
    warnings: Vec<String>,
    suppressed: usize,
    unknown_kinds: BTreeMap<String, usize>,
}

impl ReadState {
    fn warn(&mut self, message: String) {
        if self.warnings.len() < MAX_WARNINGS {
            self.warnings.push(message);
        } else {
            self.suppressed += 1;
        }
    }

    fn line(&mut self, raw: &[u8], line: usize, complete: bool) {
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
        if kind == "header" {
            self.warn(format!("line {line}: a second header, skipped"));
            return;
        }
        let kind = kind.to_string();
        match serde_json::from_value::<Event>(value) {
            Ok(event) => self.events.push(event),
            Err(e) => self.warn(format!("line {line}: invalid {kind} event ({e}), skipped")),
        }
    }
}

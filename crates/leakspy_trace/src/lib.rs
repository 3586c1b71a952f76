//! The leakspy trace format (version 1): JSON Lines, one event per line, the
//! first line a versioned header. See `docs/trace-format.md`.
//!
//! The writer flushes every event so that a run killed by the OOM killer still
//! leaves everything up to its death; the reader tolerates exactly the damage
//! such a death causes (a torn last line) plus events from newer writers
//! (unknown kinds are counted and skipped).

mod error;
mod event;
mod joined;
mod probe_events;
mod reader;
mod writer;

pub use error::TraceError;
pub use event::{
    AttachInfo, CgroupSample, Detach, Event, Exit, GpuDevice, GpuProc, GpuSample, Header,
    MemTotals, Note, NoteLevel, ProcSample, Sample, Step, StepSource, TreeMemory, FORMAT_NAME,
    FORMAT_VERSION,
};
pub use joined::{CheckedFile, StaticMatch, StaticRecord};
pub use probe_events::{
    BoundedHolder, BoundedLen, Census, ContainerLen, Cost, CudaCensus, GraphCensus, Holder,
    Location, MallocCensus, MallocTrim, ModuleCensus, NumpyCensus, Suspect, TensorGroup,
};
pub use reader::{
    parse_trace, parse_trace_bytes, read_trace, read_trace_from, read_trace_from_with,
    read_trace_with, Downsampling, ReadOptions, Trace,
};
pub use writer::TraceWriter;

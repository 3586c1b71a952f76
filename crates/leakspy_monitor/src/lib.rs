//! leakspy's monitor: spawns a command, forwards signals to it, samples the
//! memory of its whole process tree (/proc, cgroup, NVML) on a jittered clock
//! and streams everything to a trace. One sampler source per file.

mod attach;
mod cgroup;
mod child;
mod error;
mod gpu;
mod growing;
mod inject;
mod jitter;
mod live;
mod metrics;
mod monitor;
mod probe;
mod proc;
mod relay;
mod steps;

pub use attach::{
    check_trace_permission, inspect, still_running, AttachConfig, AttachError, ProcessInfo, Python,
};
pub use cgroup::CgroupSampler;
pub use child::{signal_name, ChildExit};
pub use error::MonitorError;
pub use gpu::{GpuSampler, NO_GPU_NOTE};
pub use inject::{inject, InjectError, InjectMethod, Injected, Loader};
pub use jitter::Jitter;
pub use live::{theil_sen, LiveLeak, LiveStatus};
pub use metrics::{
    parse_metrics_addr, render as render_metrics, MetricsLabels, MetricsServer,
    DEFAULT_METRICS_ADDR,
};
pub use monitor::{
    probe_absent_reason, AttachOutcome, DetachReason, Monitor, MonitorConfig, RunOutcome,
};
pub use probe::{Inbound, ProbeConfig, ProbeMessage, ProbeServer, DEFAULT_PROBE_BUDGET};
pub use proc::{mem_available, ProcSampler};
pub use relay::{relay_main, StderrMute, RELAY_ARG};
pub use steps::{StepMark, StepMatcher};

//! Traces of `leakspy attach`: how an attached recording ended (the job's
//! own exit status belongs to its parent), and what a report must say
//! about a job joined halfway.

use leakspy_trace::Trace;

use crate::model::ExitInfo;

/// Trace notes of the attach itself that the report repeats.
const ATTACH_NOTES: [&str; 4] = [
    "probe injected",
    "probe not injected",
    "the probe was scheduled",
    "cannot hand the probe's folder",
];

/// How an attached recording ended; `None` for a run, or when the monitor
/// died before it could say (the run's own message covers that).
pub(crate) fn detach_exit(trace: &Trace) -> Option<ExitInfo> {
    let attach = trace.header.attach.as_ref()?;
    let d = trace.detach()?;
    let pid = attach.pid;
    let message = match d.reason.as_str() {
        "duration" => format!("attached to pid {pid}, detached after --duration; the job goes on"),
        "interrupted" => {
            format!("attached to pid {pid}, stopped by an interrupt to leakspy; the job goes on")
        }
        "ended" => format!(
            "attached to pid {pid}, which ended during the recording (its exit status goes to its parent)"
        ),
        other => format!("attached to pid {pid}, recording stopped ({other})"),
    };
    Some(ExitInfo {
        recorded: true,
        code: None,
        signal: None,
        status: None,
        oom_killed: false,
        killed: false,
        message,
    })
}

/// When the job started, whether the probe went in.
pub(crate) fn attach_notes(trace: &Trace) -> Vec<String> {
    let Some(attach) = trace.header.attach.as_ref() else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    if let Some(age) = attach
        .process_started_at
        .map(|s| trace.header.started_at - s)
        .filter(|a| *a >= 1.0)
    {
        notes.push(format!(
            "attached to pid {} {} after it started: memory before that is not in the trace",
            attach.pid,
            fmt_age(age)
        ));
    }
    notes.extend(
        trace
            .notes()
            .filter(|n| ATTACH_NOTES.iter().any(|p| n.message.starts_with(p)))
            .map(|n| n.message.clone()),
    );
    notes
}

/// `3 h 12 min`, `4 min 10 s`, `12 s`.
fn fmt_age(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_well() {
        assert_eq!(fmt_age(12.4), "12 s");
        assert_eq!(fmt_age(250.0), "4 min 10 s");
        assert_eq!(fmt_age(11_520.0), "3 h 12 min");
    }
}

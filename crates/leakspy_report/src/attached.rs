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
        "watched" => format!(
            "watched from within pid {pid} (`leakspy.watch()` or `%leakspy watch`), which goes on"
        ),
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

    const HEADER: &str = r#"{"kind":"header","format":"leakspy-trace","version":1,"t":0.0,"started_at":10000.0,"command":["python","t.py"],"pid":7,"sample_interval_s":0.1,"attach":{"pid":7,"cmdline":["python","t.py"],"process_started_at":2800.0,"python":"3.11"}}"#;

    fn trace(lines: &[&str]) -> Trace {
        let mut text = format!("{HEADER}\n");
        for l in lines {
            text.push_str(l);
            text.push('\n');
        }
        leakspy_trace::parse_trace(&text).unwrap()
    }

    #[test]
    fn how_an_attached_recording_ended() {
        let t = trace(&[r#"{"kind":"detach","t":5.0,"reason":"duration","alive":true}"#]);
        let x = detach_exit(&t).unwrap();
        assert!(!x.killed && x.recorded && x.status.is_none());
        assert_eq!(
            x.message,
            "attached to pid 7, detached after --duration; the job goes on"
        );
        let t = trace(&[r#"{"kind":"detach","t":5.0,"reason":"ended","alive":false}"#]);
        assert!(detach_exit(&t)
            .unwrap()
            .message
            .contains("ended during the recording"));
        // No detach event: the monitor died; the run's own message says so.
        assert!(detach_exit(&trace(&[])).is_none());
    }

    #[test]
    fn notes_say_how_late_the_attach_came_and_what_became_of_the_probe() {
        let t = trace(&[
            r#"{"kind":"note","t":0.0,"level":"info","message":"no NVIDIA GPU/driver"}"#,
            r#"{"kind":"note","t":0.1,"level":"warn","message":"probe not injected: the process is not Python; memory from /proc only"}"#,
        ]);
        assert_eq!(
            attach_notes(&t),
            [
                "attached to pid 7 2 h 0 min after it started: memory before that is not in the trace",
                "probe not injected: the process is not Python; memory from /proc only",
            ]
        );
    }

    #[test]
    fn ages_read_well() {
        assert_eq!(fmt_age(12.4), "12 s");
        assert_eq!(fmt_age(250.0), "4 min 10 s");
        assert_eq!(fmt_age(11_520.0), "3 h 12 min");
    }
}

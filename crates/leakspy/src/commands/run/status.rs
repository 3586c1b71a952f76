//! The live status line of `leakspy run`.

use leakspy_monitor::LiveStatus;

/// Bytes in binary units, 3 significant figures ("1.23 GiB", "512 KiB").
pub fn bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b.abs();
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    let sign = if b < 0.0 { "-" } else { "" };
    if u == 0 {
        format!("{sign}{v:.0} B")
    } else if v < 10.0 {
        format!("{sign}{v:.2} {}", UNITS[u])
    } else if v < 100.0 {
        format!("{sign}{v:.1} {}", UNITS[u])
    } else {
        format!("{sign}{v:.0} {}", UNITS[u])
    }
}

/// "1:02:03" / "2:03" style durations, "3d04h" past a day.
pub fn duration(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}d{h:02}h")
    } else if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// One line, no newline: elapsed, steps, memory, growth, time to OOM.
pub fn line(st: &LiveStatus) -> String {
    let mut parts = vec![format!("leakspy {}", duration(st.elapsed))];
    if st.steps > 0 {
        let step = st.last_step.unwrap_or(st.steps);
        match st.steps_per_s {
            Some(r) => parts.push(format!("step {step} ({r:.1}/s)")),
            None => parts.push(format!("step {step}")),
        }
    }
    let procs = if st.procs > 1 {
        format!(" in {} procs", st.procs)
    } else {
        String::new()
    };
    parts.push(format!("RSS {}{procs}", bytes(st.rss as f64)));
    if let Some(gpu) = st.gpu_used {
        parts.push(format!("GPU {}", bytes(gpu as f64)));
    }
    if let Some(g) = st.growth_per_s {
        let per_min = g * 60.0;
        let sign = if per_min >= 0.0 { "+" } else { "" };
        parts.push(format!("{sign}{}/min", bytes(per_min)));
    }
    match st.time_to_oom_s {
        Some(t) => parts.push(format!("OOM in ~{}", duration(t))),
        None if st.growth_per_s.is_some() => parts.push("no OOM in sight".into()),
        None => {}
    }
    if let Some(l) = &st.suspected {
        let sign = if l.slope >= 0.0 { "+" } else { "" };
        parts.push(format!(
            "leak suspected: {sign}{}/{}",
            bytes(l.slope),
            l.per
        ));
    }
    // A holder is news only beside a suspected leak.
    if let (Some(h), Some(_)) = (&st.holder, &st.suspected) {
        parts.push(format!("held by {h}"));
    }
    // So is a bounded buffer filling: growth that stops when it is full
    // (the report takes it out before its verdict).
    if let (Some(b), Some(_)) = (&st.filling, &st.suspected) {
        parts.push(format!("bounded buffer filling: {b}"));
    }
    parts.join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        let start = LiveStatus {
            elapsed: 0.4,
            rss: 12 << 20,
            procs: 1,
            ..Default::default()
        };
        let leaking = LiveStatus {
            elapsed: 3723.0,
            rss: (5u64 << 30) + (300 << 20),
            anon: 4 << 30,
            procs: 5,
            steps: 1200,
            last_step: Some(1250),
            steps_per_s: Some(14.23),
            growth_per_s: Some(215_000.0),
            headroom: Some(3 << 30),
            time_to_oom_s: Some(14_981.0),
            gpu_used: Some(2 << 30),
            suspected: Some(leakspy_monitor::LiveLeak {
                slope: 60.0 * 1024.0,
                per: "step",
                since: 12.0,
                settled: true,
            }),
            holder: Some("Trainer.losses (list)".into()),
            ..Default::default()
        };
        let flat = LiveStatus {
            elapsed: 95.0,
            rss: 700 << 20,
            procs: 1,
            steps: 30,
            last_step: Some(30),
            steps_per_s: None,
            growth_per_s: Some(-10.0),
            ..Default::default()
        };
        let filling = LiveStatus {
            holder: None,
            filling: Some("ReplayBuffer.memory 21 % of 75000".into()),
            ..leaking.clone()
        };
        let text = [&start, &leaking, &flat, &filling].map(line).join("\n");
        insta::assert_snapshot!(text);
    }

    #[test]
    fn a_holder_shows_only_beside_a_suspected_leak() {
        let named = LiveStatus {
            elapsed: 30.0,
            rss: 900 << 20,
            procs: 1,
            steps: 300,
            last_step: Some(300),
            growth_per_s: Some(0.0),
            holder: Some("Trainer.losses (list)".into()),
            ..Default::default()
        };
        assert!(!line(&named).contains("held by"), "{}", line(&named));
    }

    #[test]
    fn units() {
        assert_eq!(bytes(0.0), "0 B");
        assert_eq!(bytes(1536.0), "1.50 KiB");
        assert_eq!(bytes(-50.0 * 1048576.0), "-50.0 MiB");
        assert_eq!(duration(90_000.0), "1d01h");
    }
}

use std::io::Write;

use leakspy_trace::{
    parse_trace, parse_trace_bytes, read_trace, CgroupSample, Event, Exit, Header, MemTotals, Note,
    NoteLevel, ProcSample, Sample, Step, StepSource, TraceError, TraceWriter,
};

fn header() -> Header {
    let mut h = Header::new(
        vec!["python".into(), "train.py".into()],
        Some(42),
        1.7e9,
        0.1,
    );
    h.cwd = "/tmp".into();
    h.hostname = "box".into();
    h
}

fn sample(t: f64, rss: u64) -> Event {
    Event::Sample(Sample {
        t,
        procs: vec![ProcSample {
            pid: 42,
            ppid: 1,
            name: "python".into(),
            rss,
            anon: rss / 2,
            swap: 0,
            pss: None,
            uss: None,
            pss_file: None,
            rss_file: None,
            cpu_s: None,
        }],
        total: MemTotals {
            rss,
            anon: rss / 2,
            swap: 0,
            pss: None,
            uss: None,
            pss_file: None,
            rss_file: None,
        },
        mem_available: Some(8 << 30),
        cgroup: Some(CgroupSample {
            limit: None,
            usage: rss,
            oom_kill: 0,
        }),
    })
}

const HEADER_LINE: &str = r#"{"kind":"header","format":"leakspy-trace","version":1,"leakspy_version":"0.1.0","t":0.0,"started_at":1.0,"command":["python"],"cwd":"/","hostname":"h","pid":7,"sample_interval_s":0.1}"#;
const SAMPLE_LINE: &str = r#"{"kind":"sample","t":0.1,"procs":[{"pid":7,"ppid":1,"name":"python","rss":100,"anon":50,"swap":0,"pss":null,"uss":null}],"total":{"rss":100,"anon":50,"swap":0,"pss":null,"uss":null},"mem_available":null,"cgroup":null}"#;

#[test]
fn written_events_read_back_equal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let mut w = TraceWriter::create(&path).unwrap();
    w.write_header(&header()).unwrap();
    let events = vec![
        sample(0.1, 1000),
        Event::Step(Step {
            t: 0.15,
            step: 1,
            source: StepSource::Regex,
            pid: None,
        }),
        sample(0.2, 2000),
        Event::Note(Note {
            t: 0.2,
            level: NoteLevel::Info,
            message: "no NVIDIA GPU/driver: GPU memory not sampled".into(),
        }),
        Event::Census(leakspy_trace::Census {
            t: 0.3,
            pid: 7,
            objects: Some(1000),
            types: [("torch.Tensor".to_string(), 3.0)].into_iter().collect(),
            ..Default::default()
        }),
        Event::Exit(Exit {
            t: 0.4,
            code: None,
            signal: Some(9),
            status: 137,
            oom_killed: false,
        }),
    ];
    for e in &events {
        w.write(e).unwrap();
    }
    drop(w);
    let trace = read_trace(&path).unwrap();
    assert_eq!(trace.header, header());
    assert_eq!(trace.events, events);
    assert!(trace.warnings.is_empty(), "{:?}", trace.warnings);
    assert_eq!(trace.sample_count(), 2);
    assert_eq!(trace.step_count(), 1);
    assert_eq!(trace.exit().unwrap().status, 137);
    assert_eq!(trace.census().count(), 1);
    assert_eq!(trace.census().next().unwrap().types["torch.Tensor"], 3.0);
    assert_eq!(trace.duration(), 0.4);
}

#[test]
fn probe_events_keep_fields_they_do_not_know_and_write_kind_once() {
    // A newer probe's field, and the null an older one writes for "not
    // looked at", read without loss.
    let text = r#"{"kind":"census","t":1.0,"pid":7,"n":2,"tensors":null,"graph":{"nodes":5,"roots":1,"saved_bytes":0,"spin":3},"new_field":{"a":1}}"#;
    let trace = parse_trace(&format!("{HEADER_LINE}\n{text}\n")).unwrap();
    assert!(trace.warnings.is_empty(), "{:?}", trace.warnings);
    let c = trace.census().next().unwrap();
    assert_eq!((c.n, c.tensors.len()), (Some(2), 0));
    assert_eq!(c.graph.as_ref().unwrap().nodes, 5.0);
    assert_eq!(c.extra["new_field"]["a"], 1);
    assert!(!c.extra.contains_key("kind"));
    let line = serde_json::to_string(&Event::Census(c.clone())).unwrap();
    assert_eq!(line.matches("\"kind\"").count(), 1, "{line}");
    assert!(line.contains("\"new_field\":{\"a\":1}"), "{line}");
    let suspect = r#"{"kind":"suspect","t":2.0,"pid":7,"key":"graph","holder":{"kind":"unknown","path":null,"container":null,"file":null,"line":null,"chain":[]},"created_at":null}"#;
    let trace = parse_trace(&format!("{HEADER_LINE}\n{suspect}\n")).unwrap();
    let s = trace.suspects().next().expect("the suspect reads");
    assert!(!s.holder.as_ref().unwrap().is_named());
}

#[test]
fn only_the_latest_cost_of_each_process_is_kept() {
    let cost = |t: f64, pid: u32, probe_s: f64| {
        format!(
            "{{\"kind\":\"cost\",\"t\":{t},\"pid\":{pid},\"probe_s\":{probe_s},\"wall_s\":{t}}}"
        )
    };
    let text = format!(
        "{HEADER_LINE}\n{}\n{}\n{SAMPLE_LINE}\n{}\n{}\n",
        cost(1.0, 7, 0.01),
        cost(1.5, 8, 0.02),
        cost(2.0, 7, 0.03),
        cost(3.0, 8, 0.04)
    );
    let trace = parse_trace(&text).unwrap();
    let kept: Vec<(u64, f64)> = trace
        .costs()
        .map(|c| (u64::from(c.pid.unwrap()), c.probe_s))
        .collect();
    assert_eq!(kept, [(7, 0.03), (8, 0.04)]);
    assert!(trace.warnings.is_empty() && trace.unknown_kinds.is_empty());
}

#[test]
fn torn_last_line_is_skipped_with_a_warning() {
    let torn = &SAMPLE_LINE[..SAMPLE_LINE.len() / 2];
    let trace = parse_trace(&format!("{HEADER_LINE}\n{SAMPLE_LINE}\n{torn}")).unwrap();
    assert_eq!(trace.sample_count(), 1);
    assert_eq!(trace.warnings.len(), 1);
    assert!(
        trace.warnings[0].contains("line 3: torn last line"),
        "{:?}",
        trace.warnings
    );
}

#[test]
fn complete_last_line_without_newline_is_kept() {
    let trace = parse_trace(&format!("{HEADER_LINE}\n{SAMPLE_LINE}")).unwrap();
    assert_eq!(trace.sample_count(), 1);
    assert!(trace.warnings.is_empty());
}

#[test]
fn unknown_kinds_are_counted_not_failed() {
    let text = format!(
        "{HEADER_LINE}\n{{\"kind\":\"future\",\"t\":1}}\n{SAMPLE_LINE}\n{{\"kind\":\"future\",\"t\":2}}\n{{\"kind\":\"other\"}}\n"
    );
    let trace = parse_trace(&text).unwrap();
    assert_eq!(trace.sample_count(), 1);
    assert_eq!(trace.unknown_kinds.get("future"), Some(&2));
    assert_eq!(trace.unknown_kinds.get("other"), Some(&1));
    assert!(trace.warnings.is_empty());
}

#[test]
fn non_utf8_garbage_in_the_middle_is_skipped_with_a_warning() {
    let mut bytes = Vec::new();
    writeln!(bytes, "{HEADER_LINE}").unwrap();
    writeln!(bytes, "{SAMPLE_LINE}").unwrap();
    bytes.extend_from_slice(&[0xff, 0xfe, 0x00, 0x80, b'{', b'\n']);
    writeln!(bytes, "{SAMPLE_LINE}").unwrap();
    let trace = parse_trace_bytes(&bytes).unwrap();
    assert_eq!(trace.sample_count(), 2);
    assert_eq!(
        trace.warnings,
        vec!["line 3: not valid UTF-8, skipped".to_string()]
    );
}

#[test]
fn invalid_json_and_invalid_event_in_the_middle_are_skipped() {
    let text = format!("{HEADER_LINE}\nnot json\n{{\"kind\":\"sample\",\"t\":1}}\n{SAMPLE_LINE}\n");
    let trace = parse_trace(&text).unwrap();
    assert_eq!(trace.sample_count(), 1);
    assert_eq!(trace.warnings.len(), 2, "{:?}", trace.warnings);
    assert!(trace.warnings[0].starts_with("line 2: not valid JSON"));
    assert!(trace.warnings[1].starts_with("line 3: invalid sample event"));
}

#[test]
fn missing_header_is_an_error() {
    let err = parse_trace(&format!("{SAMPLE_LINE}\n")).unwrap_err();
    assert!(
        matches!(err, TraceError::MissingHeader { line: 1, .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("found an event of kind \"sample\""),
        "{err}"
    );
    let err = parse_trace("hello world\n").unwrap_err();
    assert!(matches!(err, TraceError::MissingHeader { .. }), "{err}");
}

#[test]
fn empty_file_is_an_error() {
    let err = parse_trace("\n\n").unwrap_err();
    assert!(matches!(err, TraceError::Empty { .. }), "{err}");
}

#[test]
fn newer_version_is_refused() {
    let text = HEADER_LINE.replace("\"version\":1", "\"version\":2");
    let err = parse_trace(&text).unwrap_err();
    assert!(
        matches!(err, TraceError::UnsupportedVersion { found: 2, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("upgrade leakspy"));
}

#[test]
fn unknown_step_source_and_missing_optional_fields_read() {
    let text = format!(
        "{HEADER_LINE}\n{{\"kind\":\"step\",\"t\":1.0,\"step\":5,\"source\":\"telepathy\"}}\n{{\"kind\":\"sample\",\"t\":1.0,\"total\":{{\"rss\":9}}}}\n"
    );
    let trace = parse_trace(&text).unwrap();
    let step = trace.steps().next().unwrap();
    assert_eq!(step.source, StepSource::Other);
    assert_eq!(step.pid, None);
    let s = trace.samples().next().unwrap();
    assert_eq!(s.total.rss, 9);
    assert!(s.procs.is_empty());
}

#[test]
fn unwritable_path_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no-such-folder").join("t.jsonl");
    let err = TraceWriter::create(&path).err().unwrap();
    let msg = err.to_string();
    assert!(msg.contains("cannot create trace file"), "{msg}");
    assert!(msg.contains("no-such-folder"), "{msg}");
}

#[test]
fn unreadable_path_is_a_clear_error() {
    let err = read_trace("/nonexistent/trace.jsonl").unwrap_err();
    assert!(err
        .to_string()
        .contains("cannot read trace file /nonexistent/trace.jsonl"));
}

#[test]
fn a_header_cut_short_is_called_truncated() {
    // Cut anywhere in the header line, with or without what followed it.
    for cut in [2, 20, 45, HEADER_LINE.len() - 1] {
        for rest in ["", "\n"] {
            let text = format!("{}{rest}", &HEADER_LINE[..cut]);
            let err = parse_trace(&text).unwrap_err();
            assert!(
                matches!(err, TraceError::TruncatedHeader { line: 1, bytes, .. } if bytes == cut),
                "cut at {cut}: {err}"
            );
            assert!(err.to_string().contains("is truncated"), "{err}");
        }
    }
    // Not a trace at all is still said to be that.
    let err = parse_trace("{\"name\": \"x\", \"ver").unwrap_err();
    assert!(matches!(err, TraceError::MissingHeader { .. }), "{err}");
}

#[test]
fn a_json_document_is_named_with_its_keys() {
    let err = parse_trace("{\n  \"verdict\": \"leak\",\n  \"summary\": \"...\"\n}\n").unwrap_err();
    match &err {
        TraceError::JsonDocument { keys, .. } => assert_eq!(keys, &["summary", "verdict"]),
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("one JSON document"), "{err}");
}

#[test]
fn binary_garbage_is_not_quoted() {
    let err = parse_trace_bytes(b"\x7fELF\x02\x01\x01\0\0\0\n").unwrap_err();
    assert!(
        err.to_string().ends_with("found binary data, not text"),
        "{err}"
    );
}

#[test]
fn the_same_run_is_told_from_another() {
    let full = format!("{HEADER_LINE}\n{SAMPLE_LINE}\n{SAMPLE_LINE}\n");
    let a = parse_trace(&full).unwrap();
    // A copy taken while the run was still writing it.
    let part = parse_trace(&format!("{HEADER_LINE}\n{SAMPLE_LINE}\n")).unwrap();
    assert!(a.is_same_run(&a));
    assert!(a.is_same_run(&part) && part.is_same_run(&a));
    // Another run: another start time.
    let other =
        parse_trace(&full.replacen("\"started_at\":1.0", "\"started_at\":99.5", 1)).unwrap();
    assert_ne!(other.header, a.header);
    assert!(!a.is_same_run(&other));
}

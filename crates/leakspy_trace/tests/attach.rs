//! Traces of `leakspy attach`: the header's `attach` object and the closing
//! `detach` event, added without a version change (old traces still read).

use leakspy_trace::{parse_trace, AttachInfo, Detach, Event, Header, TraceWriter};

#[test]
fn an_attach_header_and_a_detach_event_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let mut header = Header::new(
        vec!["python".into(), "train.py".into()],
        Some(42),
        1.7e9,
        0.1,
    );
    header.attach = Some(AttachInfo {
        pid: 42,
        cmdline: vec!["python".into(), "train.py".into()],
        exe: Some("/usr/bin/python3.11".into()),
        process_started_at: Some(1.7e9 - 3600.0),
        python: Some("3.11".into()),
    });
    let detach = Event::Detach(Detach {
        t: 12.5,
        reason: "duration".into(),
        alive: true,
    });
    let mut w = TraceWriter::create(&path).unwrap();
    w.write_header(&header).unwrap();
    w.write(&detach).unwrap();
    drop(w);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(r#""kind":"detach""#), "{text}");
    let t = parse_trace(&text).unwrap();
    assert_eq!(t.header, header);
    assert_eq!(t.detach().unwrap().reason, "duration");
    assert!(t.exit().is_none());
    assert_eq!(t.duration(), 12.5);
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
}

#[test]
fn a_run_header_has_no_attach_field_and_reads_as_before() {
    let header = Header::new(vec!["python".into()], Some(7), 1.0, 0.1);
    let line = serde_json::to_string(&Event::Header(header)).unwrap();
    assert!(!line.contains("attach"), "{line}");
    let old = r#"{"kind":"header","format":"leakspy-trace","version":1,"leakspy_version":"0.1.0","t":0.0,"started_at":1.0,"command":["python"],"cwd":"/","hostname":"h","pid":7,"sample_interval_s":0.1}"#;
    let t = parse_trace(&format!("{old}\n")).unwrap();
    assert!(t.header.attach.is_none());
    assert!(t.detach().is_none());
}

#[test]
fn an_unknown_detach_reason_still_reads() {
    let old = r#"{"kind":"header","format":"leakspy-trace","version":1,"t":0.0,"command":["x"],"pid":7,"attach":{"pid":7}}"#;
    let t = parse_trace(&format!(
        "{old}\n{{\"kind\":\"detach\",\"t\":1.0,\"reason\":\"future\"}}\n"
    ))
    .unwrap();
    assert_eq!(t.header.attach.as_ref().unwrap().pid, 7);
    let d = t.detach().unwrap();
    assert_eq!((d.reason.as_str(), d.alive), ("future", false));
}

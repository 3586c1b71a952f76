//! The trace reader and everything downstream of it: any bytes are read
//! (torn lines, garbage, wrong types), and a trace that reads is diagnosed
//! and rendered as text, JSON and HTML. Nothing may panic.
#![no_main]

use leakspy_report::{diagnose, render_html, render_json, render_text, DiagnoseOptions};
use leakspy_trace::parse_trace_bytes;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(trace) = parse_trace_bytes(data) else {
        return;
    };
    let d = diagnose(&trace, &DiagnoseOptions::default());
    let _ = render_text(&d, &trace);
    let _ = render_json(&d);
    let _ = render_html(&d, &trace);
});

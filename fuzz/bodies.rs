// The fuzz targets' bodies, shared by fuzz/fuzz_targets/*.rs (libFuzzer) and
// crates/leakspy/tests/fuzz_regressions.rs (stable, CI) through `include!`.

/// The front end of `check`: any bytes that are UTF-8 are parsed and every
/// rule runs; fixes applied to a file that parsed must leave a file that
/// still parses. Nothing may panic.
#[allow(dead_code)]
fn check_source_body(data: &[u8]) {
    use leakspy_lint::{apply_fixes, check_source, Applicability, RuleSet};
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let rules = RuleSet::default();
    let checked = check_source(source, &rules);
    if checked.syntax_error.is_some() {
        return;
    }
    let fixed = apply_fixes(source, &checked.diagnostics, Applicability::Unsafe);
    if fixed.applied > 0 {
        let again = check_source(&fixed.source, &rules);
        assert!(
            again.syntax_error.is_none(),
            "a fix broke the file: {:?}",
            again.syntax_error
        );
    }
}

/// The trace reader and everything downstream of it: any bytes are read
/// (torn lines, garbage, wrong types), and a trace that reads is diagnosed
/// and rendered as text, JSON and HTML. Nothing may panic.
#[allow(dead_code)]
fn trace_reader_body(data: &[u8]) {
    use leakspy_report::{diagnose, render_html, render_json, render_text, DiagnoseOptions};
    let Ok(trace) = leakspy_trace::parse_trace_bytes(data) else {
        return;
    };
    let d = diagnose(&trace, &DiagnoseOptions::default());
    let _ = render_text(&d, &trace);
    let _ = render_json(&d);
    let _ = render_html(&d, &trace);
}

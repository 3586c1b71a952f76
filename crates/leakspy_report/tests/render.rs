//! The diagnosis and its renderers on fixed replay traces (tests/fixtures,
//! written by tests/fixtures/make.py).

use std::path::PathBuf;

use leakspy_report::{diagnose, render_html, render_json, render_text, DiagnoseOptions};
use leakspy_stats::Verdict;
use leakspy_trace::{read_trace, Trace};

fn fixture(name: &str) -> Trace {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    read_trace(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn text_of(name: &str) -> String {
    let t = fixture(name);
    render_text(&diagnose(&t, &DiagnoseOptions::default()), &t)
}

#[test]
fn leak_per_step_text() {
    insta::assert_snapshot!(text_of("leak_steps.jsonl"));
}

#[test]
fn leak_per_step_json() {
    let t = fixture("leak_steps.jsonl");
    let d = diagnose(&t, &DiagnoseOptions::default());
    assert_eq!(d.verdict, Verdict::Leak);
    let g = d.growth_per_step.as_ref().expect("per-step growth");
    let mib = 1024.0 * 1024.0;
    assert!(g.lo <= mib && mib <= g.hi, "{g:?}");
    insta::assert_snapshot!(render_json(&d));
}

#[test]
fn warm_up_then_flat_text() {
    insta::assert_snapshot!(text_of("flat_after_warmup.jsonl"));
}

#[test]
fn killed_with_a_torn_line_text() {
    insta::assert_snapshot!(text_of("killed_torn.jsonl"));
}

#[test]
fn sigkill_text() {
    insta::assert_snapshot!(text_of("sigkill.jsonl"));
}

#[test]
fn several_processes_and_gpu_text() {
    insta::assert_snapshot!(text_of("hostile.jsonl"));
}

#[test]
fn falling_throughput_text() {
    let t = fixture("slowing.jsonl");
    let d = diagnose(&t, &DiagnoseOptions::default());
    assert!(
        d.throughput.as_ref().is_some_and(|t| t.falling),
        "{:?}",
        d.throughput
    );
    insta::assert_snapshot!(render_text(&d, &t));
}

#[test]
fn fixed_run_json() {
    let t = fixture("fixed.jsonl");
    let d = diagnose(&t, &DiagnoseOptions::default());
    assert_eq!(d.verdict, Verdict::NoLeak);
    insta::assert_snapshot!(render_json(&d));
}

#[test]
fn json_has_the_contract_fields() {
    let t = fixture("leak_steps.jsonl");
    let v: serde_json::Value =
        serde_json::from_str(&render_json(&diagnose(&t, &DiagnoseOptions::default()))).unwrap();
    assert_eq!(v["verdict"], "leak");
    for k in ["slope", "lo", "hi", "unit"] {
        assert!(v["growth_per_step"][k].is_number() || v["growth_per_step"][k].is_string());
        assert!(v["growth_per_second"][k].is_number() || v["growth_per_second"][k].is_string());
    }
    assert_eq!(v["growth_per_step"]["unit"], "bytes/step");
    let f = &v["findings"][0];
    for k in [
        "what",
        "per_step",
        "per_second",
        "evidence",
        "holder",
        "location",
    ] {
        assert!(f.get(k).is_some(), "finding lacks {k}: {f}");
    }
    assert!(v["notes"].is_array());
    assert_eq!(v["killed"], false);
    assert_eq!(v["exit"]["code"], 0);
}

#[test]
fn html_escapes_every_string_from_the_trace() {
    let t = fixture("hostile.jsonl");
    let html = render_html(&diagnose(&t, &DiagnoseOptions::default()), &t);
    for bad in ["<script", "<img", "<svg onload", "<i>GPU", "<b>bold"] {
        assert!(!html.contains(bad), "unescaped {bad:?} in the HTML");
    }
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;.py"));
    assert!(html.contains("&quot;&gt;&lt;img src=x onerror=alert(2)&gt;"));
    // Self-contained: nothing to fetch.
    for external in [
        "src=\"http",
        "href=\"http",
        "@import",
        "url(",
        "<link",
        "<script",
    ] {
        assert!(!html.contains(external), "external reference {external:?}");
    }
    assert!(html.contains("<svg class=\"chart\""));
}

#[test]
fn html_structure() {
    let t = fixture("leak_steps.jsonl");
    let html = render_html(&diagnose(&t, &DiagnoseOptions::default()), &t);
    // The page's outline: headings, chart titles and legends, without the
    // path data (which the chart unit tests cover).
    let outline: Vec<String> = html
        .split('<')
        .filter_map(|tag| {
            let name: String = tag
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            matches!(name.as_str(), "h1" | "h2" | "svg" | "title" | "th" | "li").then(|| {
                let text = tag.split_once('>').map_or("", |(_, t)| t);
                format!("{name}: {}", text.trim())
            })
        })
        .collect();
    insta::assert_snapshot!(outline.join("\n"));
}

/// A real 16 MiB/s leak whose last four samples are the interpreter's exit teardown (RSS fell
/// from 94 MiB to 13 MiB in 0.3 s): the teardown must not hide the leak.
#[test]
fn exit_teardown_does_not_hide_a_leak() {
    let t = fixture("leak_with_exit_teardown.jsonl");
    let d = diagnose(&t, &DiagnoseOptions::default());
    assert_eq!(d.verdict, Verdict::Leak);
    let g = d.growth_per_second.as_ref().expect("a rate per second");
    let mib = 1024.0 * 1024.0;
    assert!(
        g.slope > 15.0 * mib && g.slope < 17.5 * mib,
        "{}",
        g.slope / mib
    );
}

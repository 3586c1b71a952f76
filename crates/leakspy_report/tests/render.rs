//! The diagnosis and its renderers on fixed replay traces (tests/fixtures,
//! written by tests/fixtures/make.py; probe_loss_list.jsonl is a recorded
//! `leakspy run` of examples/zoo/loss_list.py; ddp_node0/1.jsonl are the two
//! nodes of a recorded two-node torchrun of examples/ddp/rank0_metrics.py).

use std::path::PathBuf;

use leakspy_report::{
    diagnose, merge_rank_rows, rank_rows, render_html, render_json, render_ranks_html,
    render_ranks_json, render_ranks_text, render_text, DiagnoseOptions, Diagnosis,
};
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

#[test]
fn probe_trace_names_what_grows_and_its_holder_text() {
    insta::assert_snapshot!(text_of("probe_loss_list.jsonl"));
}

#[test]
fn probe_trace_growth_groups_in_json() {
    let t = fixture("probe_loss_list.jsonl");
    let d = diagnose(&t, &DiagnoseOptions::default());
    assert_eq!(d.verdict, Verdict::Leak);
    let top = &d.growth[0];
    let holder = top.holder.as_ref().expect("holder");
    assert_eq!(
        (holder.kind.as_str(), holder.path.as_str()),
        ("attribute", "Trainer.losses")
    );
    // The graph, the tensors with a grad_fn and the list's items all grow
    // per step with it.
    let keys: Vec<&str> = top.growers.iter().map(|g| g.key.as_str()).collect();
    assert!(keys.contains(&"graph"), "{keys:?}");
    assert!(keys.contains(&"tensors:cpu/float32/grad"), "{keys:?}");
    assert!(top.growers.iter().all(|g| g.per == "step" && g.lo > 0.0));
    // The leak finding carries the holder for the JSON report's readers.
    assert_eq!(
        d.findings[0].holder.as_ref().unwrap()["path"],
        "Trainer.losses"
    );
    let v: serde_json::Value = serde_json::from_str(&render_json(&d)).unwrap();
    assert_eq!(v["growth"][0]["holder"]["path"], "Trainer.losses");
    assert!(v["probe"]["censuses"].as_u64().unwrap() >= 5);
}

#[test]
fn html_escapes_what_the_probe_reports() {
    // Type, attribute and file names come from the user's process.
    let mut text = String::from(
        r#"{"kind":"header","format":"leakspy-trace","version":1,"t":0,"command":["python"],"pid":7,"sample_interval_s":0.1}
"#,
    );
    for i in 0..8 {
        text.push_str(&format!(
            r#"{{"kind":"census","t":{t},"pid":7,"step":{s},"types":{{"<img src=x onerror=alert(1)>":{n}}},"containers":[{{"id":1,"type":"list","len":{n}}}]}}
"#,
            t = i as f64,
            s = i * 100,
            n = 100 + i * 500
        ));
    }
    text.push_str(r#"{"kind":"suspect","t":8,"pid":7,"step":700,"key":"container:1","what":"list of <b>x</b> (len 3)","holder":{"kind":"attribute","path":"<script>alert(2)</script>.x","container":"list","file":"/tmp/\"><svg onload=alert(3)>.py","line":3},"created_at":{"file":"/tmp/<i>made</i>.py","line":4,"function":"<u>f</u>"}}
"#);
    let t = leakspy_trace::read_trace_from(text.as_bytes(), "hostile").unwrap();
    let d = diagnose(&t, &DiagnoseOptions::default());
    assert!(!d.growth.is_empty(), "{:#?}", d.growth);
    let html = render_html(&d, &t);
    for bad in ["<img", "<script", "<svg onload", "<b>x", "<i>made", "<u>f"] {
        assert!(!html.contains(bad), "unescaped {bad:?} in the HTML");
    }
    assert!(html.contains("&lt;script&gt;alert(2)&lt;/script&gt;.x"));
}

#[test]
fn worker_rss_rising_over_flat_uss_is_explained_as_shared_pages() {
    let mut text = String::from(
        r#"{"kind":"header","format":"leakspy-trace","version":1,"t":0,"command":["python","train.py"],"pid":10,"sample_interval_s":0.1}
"#,
    );
    let mib = 1u64 << 20;
    for i in 0..100u64 {
        // Every 10th sample has smaps_rollup figures, as the monitor reads them.
        let (pss, uss) = if i % 10 == 0 {
            (format!("{}", 60 * mib), format!("{}", 20 * mib))
        } else {
            ("null".into(), "null".into())
        };
        let worker_rss = 200 * mib + i * mib;
        text.push_str(&format!(
            r#"{{"kind":"sample","t":{t},"procs":[{{"pid":10,"ppid":1,"name":"python","rss":{main},"anon":{main}}},{{"pid":11,"ppid":10,"name":"python","rss":{w},"anon":{anon},"pss":{pss},"uss":{uss}}}],"total":{{"rss":{tot},"anon":{main}}}}}
"#,
            t = i as f64 * 0.1,
            main = 500 * mib,
            w = worker_rss,
            anon = 20 * mib,
            tot = 500 * mib + worker_rss,
        ));
    }
    let t = leakspy_trace::read_trace_from(text.as_bytes(), "cow").unwrap();
    let d = diagnose(&t, &DiagnoseOptions::default());
    assert!(
        d.notes
            .iter()
            .any(|n| n.starts_with("1 worker process(es): RSS rose")
                && n.contains("shared with the parent")),
        "{:#?}",
        d.notes
    );
}

fn ddp_nodes() -> (Vec<(String, Diagnosis)>, Vec<leakspy_report::RankRow>) {
    let opts = DiagnoseOptions::default();
    let mut traces = Vec::new();
    let mut rows = Vec::new();
    // Given in the wrong order: the table is by rank.
    for name in ["ddp_node1.jsonl", "ddp_node0.jsonl"] {
        let t = fixture(name);
        let d = diagnose(&t, &opts);
        rows.extend(rank_rows(&t, &d, name, &opts));
        traces.push((name.to_string(), d));
    }
    (traces, merge_rank_rows(rows))
}

#[test]
fn ranks_of_two_traces_side_by_side_text() {
    let (traces, rows) = ddp_nodes();
    insta::assert_snapshot!(render_ranks_text(&traces, &rows));
}

#[test]
fn ranks_of_two_traces_json_and_html() {
    let (traces, rows) = ddp_nodes();
    let v: serde_json::Value = serde_json::from_str(&render_ranks_json(&traces, &rows)).unwrap();
    assert_eq!(v["traces"][0]["trace"], "ddp_node1.jsonl");
    assert_eq!(v["ranks"][0]["rank"], 0);
    assert_eq!(v["ranks"][0]["verdict"], "leak");
    assert_eq!(v["ranks"][1]["rank"], 1);
    assert_eq!(v["ranks"][1]["verdict"], "no-leak");
    let html = render_ranks_html(&traces, &rows);
    assert!(html.contains("<section id=\"ranks\">"), "{html}");
    assert!(html.contains("ProgressLog.losses"));
    assert!(html.trim_end().ends_with("</html>"));
}

#[test]
fn one_trace_of_a_ranked_job_has_its_rank_row() {
    let t = fixture("ddp_node0.jsonl");
    let d = diagnose(&t, &DiagnoseOptions::default());
    assert_eq!(d.ranks.len(), 1);
    assert_eq!(d.ranks[0].rank, Some(0));
    assert_eq!(d.ranks[0].world_size, Some(2));
    assert!(render_text(&d, &t).contains("ranks (each fitted on its own RSS and steps):"));
    assert!(render_html(&d, &t).contains("<section id=\"ranks\">"));
    // A job without ranks has no table.
    let plain = fixture("probe_loss_list.jsonl");
    assert!(diagnose(&plain, &DiagnoseOptions::default())
        .ranks
        .is_empty());
}

#[test]
fn held_heavy_growth_through_the_last_census_outweighs_a_flat_rss_tail() {
    // RSS alone: flat for the last third of the run.
    let unheld = fixture("probe_flat_tail_unheld.jsonl");
    let d = diagnose(&unheld, &DiagnoseOptions::default());
    assert_ne!(d.verdict, Verdict::Leak, "{}", render_text(&d, &unheld));
    let rss = d.series.iter().find(|s| s.key == "total.rss").unwrap();
    assert_ne!(rss.verdict, Verdict::Leak);

    // The same run with the probe's holders: the graph held by
    // Trainer.losses grows through the last census.
    let held = fixture("probe_flat_tail.jsonl");
    let d = diagnose(&held, &DiagnoseOptions::default());
    assert_eq!(d.verdict, Verdict::Leak, "{}", render_text(&d, &held));
    let f = &d.findings[0];
    assert_eq!(f.series, "total.rss");
    assert_eq!(f.holder.as_ref().unwrap()["path"], "Trainer.losses");
    assert!(
        f.evidence
            .iter()
            .any(|e| e.starts_with("in-process census:")),
        "{:?}",
        f.evidence
    );
    // No "not a leak" note contradicts the verdict.
    assert!(
        d.notes.iter().all(|n| !n.contains("not a leak")),
        "{:?}",
        d.notes
    );
}

/// The probe's own accounting: the last `cost` event of each process makes
/// the report's "probe" line (an earlier one is superseded), in every format.
#[test]
fn the_probe_line_reads_the_last_account_of_its_work() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/probe_loss_list.jsonl");
    let mut text = std::fs::read_to_string(path).unwrap();
    let exit = text.rfind("{\"kind\":\"exit\"").unwrap();
    text.insert_str(
        exit,
        "{\"kind\":\"cost\",\"t\":6.0,\"pid\":26893,\"probe_s\":0.9,\"wall_s\":5.0,\"budget\":0.2,\"censuses\":3}\n\
         {\"kind\":\"cost\",\"t\":11.7,\"pid\":26893,\"probe_s\":1.5,\"wall_s\":11.5,\"budget\":0.2,\"censuses\":6}\n",
    );
    let t = leakspy_trace::parse_trace(&text).unwrap();
    let d = diagnose(&t, &DiagnoseOptions::default());
    let cost = d.probe.cost.as_ref().expect("a probe cost");
    assert_eq!(cost.probe_s, 1.5);
    assert!((cost.share - 1.5 / 10.0).abs() < 1e-12, "{cost:?}");
    let line = render_text(&d, &t)
        .lines()
        .find(|l| l.trim_start().starts_with("probe:"))
        .map(str::to_string);
    insta::assert_snapshot!(line.unwrap_or_default(), @"  probe: 6 censuses, 1.50 s of probe work on the job's threads: 15 % of the job's own time (budget 20 %)");
    assert!(render_html(&d, &t).contains(
        "<section id=\"probe-cost\"><h2>What watching cost</h2><p>6 censuses, 1.50 s of probe work on the job&#39;s threads"
    ));
    assert!(render_json(&d).contains("\"cost\": {"));
}

/// `leakspy fix`'s proof of two replay runs: a leak, then the same job fixed.
fn proof_of(before: &str, after: &str, after_stopped: bool) -> leakspy_report::FixProof {
    let opts = DiagnoseOptions::default();
    let (tb, ta) = (fixture(before), fixture(after));
    let (db, da) = (diagnose(&tb, &opts), diagnose(&ta, &opts));
    leakspy_report::prove(
        &leakspy_report::Leg {
            label: "before",
            trace: &tb,
            diagnosis: &db,
            stopped: true,
        },
        &leakspy_report::Leg {
            label: "after",
            trace: &ta,
            diagnosis: &da,
            stopped: after_stopped,
        },
    )
}

#[test]
fn a_fix_proven_text() {
    let p = proof_of("leak_steps.jsonl", "fixed.jsonl", true);
    assert_eq!(p.verdict, leakspy_report::FixVerdict::Fixed);
    insta::assert_snapshot!(leakspy_report::render_proof_text(&p));
}

#[test]
fn a_fixed_run_that_failed_proves_nothing() {
    // Killed by SIGKILL, not by leakspy at its bound.
    let p = proof_of("leak_steps.jsonl", "sigkill.jsonl", false);
    assert_eq!(p.verdict, leakspy_report::FixVerdict::NotComparable);
    let text = leakspy_report::render_proof_text(&p);
    assert!(text.starts_with("NOT PROVEN: "), "{text}");
    assert!(text.contains("the fixed run failed"), "{text}");
}

#[test]
fn the_fix_report_draws_both_runs_on_one_chart() {
    let opts = DiagnoseOptions::default();
    let (tb, ta) = (fixture("leak_steps.jsonl"), fixture("fixed.jsonl"));
    let (db, da) = (diagnose(&tb, &opts), diagnose(&ta, &opts));
    let p = proof_of("leak_steps.jsonl", "fixed.jsonl", true);
    let patch = "diff --git a/t.py b/t.py\n--- a/t.py\n+++ b/t.py\n@@ -1 +1 @@\n-x.append(loss)\n+x.append(loss.detach())\n<script>\n";
    let page = leakspy_report::render_fix_html(&p, (&tb, &db), (&ta, &da), patch);
    let chart = page
        .split("id=\"before-after\"")
        .nth(1)
        .and_then(|s| s.split("</section>").next())
        .expect("the before/after chart");
    // Two runs, each with its samples and its fitted trend.
    assert_eq!(chart.matches("<path ").count(), 4, "{chart}");
    assert!(chart.contains("before the fixes") && chart.contains("after the fixes"));
    assert!(page.contains("<span class=\"add\">+x.append(loss.detach())</span>"));
    assert!(page.contains("&lt;script&gt;") && !page.contains("<script>"));
    assert!(page.contains("<span class=\"badge\">FIXED</span>"));
}

#[test]
fn a_fixed_run_that_rises_and_flattens_says_no_leak_before_its_fit() {
    // Warm-up, then flat: the fit over the whole run rises, and the proof
    // leads with why that is no leak, not with the rising rate.
    let p = proof_of("leak_steps.jsonl", "fixed_filling.jsonl", true);
    let text = leakspy_report::render_proof_text(&p);
    let headline = text.lines().next().unwrap();
    let after = headline.split(" → ").nth(1).unwrap();
    if p.comparison.after.verdict == Verdict::NoLeak
        && p.comparison
            .after
            .growth
            .as_ref()
            .is_some_and(|g| g.lo > 0.0)
    {
        assert!(after.starts_with("no leak, "), "{headline}");
        assert!(after.contains("(fitted over the run +"), "{headline}");
    } else {
        panic!("the fixture should rise and flatten: {headline}");
    }
}

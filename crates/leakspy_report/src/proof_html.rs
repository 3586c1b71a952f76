//! The HTML report of `leakspy fix`: the proof, both runs' memory on one
//! chart (before and after the fixes, with their fitted trends), what became
//! of each holder, and the patch. Self-contained and escaped like the
//! diagnosis's report (`html.rs`).

use std::fmt::Write;

use leakspy_trace::Trace;

use crate::chart::{Chart, Line, XAxis, YAxis};
use crate::diagnose::fmt_rate;
use crate::extract::{memory_series, StepClock};
use crate::html::{escape, prose, STYLE};
use crate::model::{Basis, Diagnosis};
use crate::proof::{FixProof, FixVerdict};
use crate::text::{render_proof_text, shell_words};

const BEFORE_COLOR: &str = "#cf222e";
const AFTER_COLOR: &str = "#1a7f37";

/// The proof of a fix as one self-contained HTML page.
pub fn render_fix_html(
    proof: &FixProof,
    before: (&Trace, &Diagnosis),
    after: (&Trace, &Diagnosis),
    patch: &str,
) -> String {
    let mut out = String::with_capacity(64 * 1024);
    let (class, badge) = match proof.verdict {
        FixVerdict::Fixed => ("no-leak", "FIXED"),
        FixVerdict::Improved => ("inconclusive", "IMPROVED"),
        FixVerdict::NotFixed => ("leak", "NOT FIXED"),
        FixVerdict::NotComparable => ("inconclusive", "NOT PROVEN"),
    };
    let cmd = shell_words(&before.0.header.command);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>leakspy fix: {badge} &#8212; {}</title><style>{STYLE}{PATCH_STYLE}</style></head><body><main>\n",
        escape(&cmd)
    );
    let proof_text = render_proof_text(proof);
    let headline = proof_text.lines().next().unwrap_or_default();
    // The badge says the verdict; what it was told on stays with the figures.
    let headline = match headline.split_once(": ") {
        Some((verdict, rest)) => match verdict.split_once(" (on ") {
            Some((_, on)) => format!("on {}: {rest}", on.trim_end_matches(')')),
            None => rest.to_string(),
        },
        None => headline.to_string(),
    };
    let _ = writeln!(
        out,
        "<header class=\"verdict {class}\"><span class=\"badge\">{badge}</span><h1>{}</h1>\
         <p class=\"cmd\"><code>{}</code></p></header>",
        escape(&headline),
        escape(&cmd)
    );
    chart(&mut out, proof, before, after);
    holders(&mut out, proof);
    if !proof.not_comparable.is_empty() {
        out.push_str("<section><h2>Why the runs cannot be compared</h2><ul>");
        for why in &proof.not_comparable {
            let _ = write!(out, "<li>{}</li>", prose(why));
        }
        out.push_str("</ul></section>\n");
    } else if matches!(proof.verdict, FixVerdict::NotFixed | FixVerdict::Improved) {
        let _ = write!(
            out,
            "<section><h2>What still grows</h2><p>{} ({})</p><ul>",
            prose(&proof.comparison.reason),
            escape(proof.comparison.verdict.as_str())
        );
        for g in &proof.still_grows {
            let _ = write!(out, "<li>{}</li>", prose(g));
        }
        out.push_str("</ul></section>\n");
    }
    let title = if proof.verdict == FixVerdict::Fixed {
        "The patch"
    } else if proof.verdict == FixVerdict::Improved {
        "The patch (it reduces the growth; what still grows is above)"
    } else {
        "The fixes tried (not written: not proven)"
    };
    let _ = write!(out, "<section><h2>{title}</h2><pre class=\"patch\">");
    for line in patch.lines() {
        let class =
            if line.starts_with("+++") || line.starts_with("---") || line.starts_with("diff ") {
                "file"
            } else if line.starts_with('+') {
                "add"
            } else if line.starts_with('-') {
                "del"
            } else if line.starts_with("@@") {
                "hunk"
            } else {
                "ctx"
            };
        // One block per line: a newline between them inside <pre> would show
        // as an empty line after each.
        let _ = write!(out, "<span class=\"{class}\">{}</span>", escape(line));
    }
    out.push_str("</pre></section>\n");
    let _ = write!(
        out,
        "<footer>leakspy {} &#183; leakspy fix</footer>\n</main></body></html>\n",
        env!("CARGO_PKG_VERSION"),
    );
    out
}

const PATCH_STYLE: &str = "
pre.patch{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px;overflow-x:auto;background:var(--code);padding:10px;border-radius:6px;margin:0}
pre.patch span{display:block;white-space:pre;min-height:1.3em}
pre.patch .add{background:#dafbe1}.patch .del{background:#ffebe9}.patch .hunk{color:#8250df}.patch .file{font-weight:700}
";

/// Both runs' total RSS on one chart, over steps when both counted them,
/// with the trend each verdict rests on.
fn chart(
    out: &mut String,
    proof: &FixProof,
    before: (&Trace, &Diagnosis),
    after: (&Trace, &Diagnosis),
) {
    let basis = proof.comparison.basis;
    let key = &proof.comparison.series;
    let mut lines = Vec::new();
    for (label, color, (trace, d), side) in [
        (
            "before the fixes",
            BEFORE_COLOR,
            before,
            &proof.comparison.before,
        ),
        (
            "after the fixes",
            AFTER_COLOR,
            after,
            &proof.comparison.after,
        ),
    ] {
        let rate = side.growth.as_ref().map(fmt_rate).unwrap_or_default();
        // Told on malloc's memory in use: its census readings, and the line fitted to them.
        if key == crate::diff::IN_USE_SERIES {
            let Some(u) = &d.in_use else { continue };
            let (Some(first), Some(last)) = (u.readings.first(), u.readings.last()) else {
                continue;
            };
            let at = |x: f64| (x, u.intercept + u.growth.slope * x);
            lines.push(Line {
                label: format!("memory in use by malloc {label}, at each census ({rate})"),
                color,
                points: u.readings.clone(),
                width: 2.0,
                dashed: false,
            });
            lines.push(Line {
                label: format!("fitted trend {label}: {rate}"),
                color,
                points: vec![at(first.0), at(last.0)],
                width: 2.2,
                dashed: true,
            });
            continue;
        }
        let Some(series) = memory_series(trace, 0).into_iter().find(|s| &s.key == key) else {
            continue;
        };
        let points: Vec<(f64, f64)> = match basis {
            Basis::Step => {
                let (xs, ys) = StepClock::from_trace(trace).map(&series.t, &series.y);
                xs.into_iter().zip(ys).collect()
            }
            Basis::Second => series
                .t
                .iter()
                .copied()
                .zip(series.y.iter().copied())
                .collect(),
        };
        lines.push(Line {
            label: format!("{} {label} ({rate})", series.what),
            color,
            points,
            width: 2.0,
            dashed: false,
        });
        if let Some(f) = d
            .series
            .iter()
            .find(|s| &s.key == key && s.basis == basis)
            .and_then(|s| s.fit)
        {
            lines.push(Line {
                label: format!("fitted trend {label}: {rate}"),
                color,
                points: vec![
                    (f.x_start, f.intercept + f.slope * f.x_start),
                    (f.x_end, f.intercept + f.slope * f.x_end),
                ],
                width: 2.2,
                dashed: true,
            });
        }
    }
    let title = match (basis, key == crate::diff::IN_USE_SERIES) {
        (Basis::Step, false) => "Memory before and after the fixes, over training steps",
        (Basis::Second, false) => "Memory before and after the fixes, over time",
        (Basis::Step, true) => {
            "Memory in use by malloc before and after the fixes, over training steps"
        }
        (Basis::Second, true) => "Memory in use by malloc before and after the fixes, over time",
    };
    let chart = Chart {
        title: title.to_string(),
        x: match basis {
            Basis::Step => XAxis::Steps,
            Basis::Second => XAxis::Seconds,
        },
        y: YAxis::Bytes,
        lines,
        shade: None,
        markers: Vec::new(),
    };
    let _ = writeln!(
        out,
        "<section id=\"before-after\"><h2>{}</h2>{}<div class=\"chart-box\">{}</div>\
         <p class=\"caption\">Both runs of the same command for as many steps: solid lines are \
         {}, dashed the robust trends the verdicts rest on.</p>\
         <table class=\"facts\"><tr><td>before</td><td>{} steps in {:.1} s: {}</td></tr>\
         <tr><td>after</td><td>{} steps in {:.1} s: {}</td></tr></table></section>",
        escape(title),
        chart.legend(),
        chart.svg(),
        if key == crate::diff::IN_USE_SERIES {
            "the probe's readings of malloc at each census (resident memory grew in what \
             malloc keeps free, which varies from run to run)"
        } else {
            "samples"
        },
        proof.before.steps,
        proof.before.duration_s,
        escape(&proof.comparison.before.shape_text),
        proof.after.steps,
        proof.after.duration_s,
        escape(&proof.comparison.after.shape_text),
    );
}

fn holders(out: &mut String, proof: &FixProof) {
    if proof.comparison.holders.is_empty() {
        return;
    }
    out.push_str(
        "<section><h2>Who held what grew</h2><div class=\"scroll\"><table>\
         <tr><th>holder</th><th>before the fixes</th><th>after</th></tr>",
    );
    for h in &proof.comparison.holders {
        // The same three answers as the proof's text (`HolderChange::describe`).
        let after = match (&h.after, &h.unseen) {
            (None, None) => "<span class=\"v-no-leak\">gone</span>".to_string(),
            (None, Some(why)) => format!(
                "<span class=\"v-inconclusive\">not seen growing</span>: {}",
                escape(why)
            ),
            (Some(what), _) => format!(
                "<span class=\"v-leak\">still grows</span>: {}",
                escape(what)
            ),
        };
        let _ = write!(
            out,
            "<tr><td><code>{}</code></td><td>{}</td><td>{after}</td></tr>",
            escape(&h.holder),
            escape(&h.before)
        );
    }
    out.push_str("</table></div></section>\n");
}

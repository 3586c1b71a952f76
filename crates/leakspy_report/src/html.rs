//! HTML renderer: one self-contained file (inline CSS and SVG, no scripts,
//! fonts or images to fetch). Every string that comes from the trace —
//! command line, process names, paths, notes — is escaped, and a
//! Content-Security-Policy forbids scripts as a second line of defence.

use std::fmt::Write;

use leakspy_stats::{fmt_bytes, fmt_value, step_rates, ValueUnit, Verdict};
use leakspy_trace::Trace;

use crate::census::Describe;
use crate::chart::{Chart, Line, XAxis, YAxis};
use crate::diagnose::{fmt_rate, fmt_rate_value};
use crate::extract::{memory_series, Series, StepClock};
use crate::model::{Basis, Diagnosis, Growth, SeriesReport};
use crate::ranks::RankRow;
use crate::text::shell_words;

pub(crate) const STYLE: &str = "
:root{color-scheme:light;--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--bg:#f6f8fa;--code:#eff2f5}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.5 system-ui,-apple-system,'Segoe UI',Roboto,'Helvetica Neue',Arial,sans-serif}
main{max-width:1600px;margin:0 auto;padding:24px clamp(10px,2.5vw,32px) 40px}
header.verdict{background:#fff;border:1px solid var(--line);border-left:8px solid var(--accent);border-radius:8px;padding:16px 20px;margin-bottom:18px}
.leak{--accent:#cf222e}.no-leak{--accent:#1a7f37}.inconclusive{--accent:#9a6700}
.badge{display:inline-block;font-weight:700;letter-spacing:.04em;color:#fff;background:var(--accent);border-radius:4px;padding:1px 9px;font-size:13px}
h1{font-size:20px;margin:8px 0 4px;line-height:1.35}
h2{font-size:16px;margin:0 0 10px}
h3{font-size:15px;margin:0;line-height:1.4}
h4{font-size:13px;color:var(--muted);font-weight:600;margin:0 0 2px}
section{background:#fff;border:1px solid var(--line);border-radius:8px;padding:14px 18px;margin-bottom:16px}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px}
code{background:var(--code);border-radius:4px;padding:0 4px;overflow-wrap:anywhere}
.cmd code{background:none;padding:0}
.loc,.loc code{white-space:nowrap}
.loc{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px}
.cmd{margin:4px 0 0;color:var(--muted);overflow-wrap:anywhere}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:600;color:var(--muted);font-size:13px}
td.num{font-variant-numeric:tabular-nums;white-space:nowrap}
.facts td:first-child{color:var(--muted);width:170px}
ul,ol{margin:4px 0;padding-left:22px}
li{margin:3px 0}
.evidence{color:var(--muted);font-size:14px}
.v-leak{color:#cf222e;font-weight:600}.v-no-leak{color:#1a7f37;font-weight:600}.v-inconclusive{color:#9a6700;font-weight:600}
.group{border-top:1px solid var(--line);padding:12px 0 4px}
.group:first-of-type{border-top:0;padding-top:0}
.group .sub{color:var(--muted);font-size:13px;margin:0 0 8px}
.group .grid p{margin:0}
.group .grid{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,2fr);gap:4px 28px}
.group ul{margin:0 0 8px}
.check{border-left:3px solid var(--line);padding:2px 0 2px 12px;margin:6px 0 10px}
.check p{margin:0 0 4px}
.check .rule{font-weight:700;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px}
.fix{font-weight:500}
.fix strong{color:#1a7f37}.fix.unsafe strong{color:#9a6700}
svg.chart{width:100%;height:auto;display:block}
svg.chart .plot{fill:#fff;stroke:#afb8c1}
svg.chart .grid{stroke:#eaeef2;stroke-width:1}
svg.chart .tick{fill:#59636e;font-size:12px;font-family:system-ui,sans-serif}
svg.chart .axis{fill:#1f2328;font-size:13px;font-family:system-ui,sans-serif}
svg.chart .shade{fill:#eaeef2;opacity:.8}
svg.chart .shade-label,svg.chart .marker-label{fill:#59636e;font-size:12px;font-family:system-ui,sans-serif}
svg.chart .marker{stroke:#8c959f;stroke-dasharray:4 4}
.legend{display:flex;flex-wrap:wrap;gap:6px 18px;margin:2px 0 8px;font-size:13px}
.legend .key{display:inline-flex;align-items:center;gap:6px}
.caption{color:var(--muted);font-size:13px;margin:6px 0 0}
footer{color:var(--muted);font-size:12px;text-align:center}
@media (max-width:700px){
section{padding:12px}
.group .grid{grid-template-columns:minmax(0,1fr)}
.facts td:first-child{width:110px}
.chart-box{overflow-x:auto}
.chart-box svg.chart{min-width:700px}
}
";

const COLORS: [&str; 5] = ["#0969da", "#bc4c00", "#8250df", "#1a7f37", "#6e7781"];
const FIT_COLOR: &str = "#cf222e";

/// The diagnosis as one self-contained HTML page.
pub fn render_html(d: &Diagnosis, trace: &Trace) -> String {
    let mut out = String::with_capacity(64 * 1024);
    let tag = verdict_tag(d.verdict);
    let cmd = shell_words(&trace.header.command);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>leakspy: {} &#8212; {}</title><style>{STYLE}</style></head><body><main>\n",
        tag.1,
        escape(if cmd.is_empty() { "report" } else { &cmd })
    );
    let _ = writeln!(
        out,
        "<header class=\"verdict {}\"><span class=\"badge\">{}</span><h1>{}</h1>\
         <p class=\"cmd\"><code>{}</code></p></header>",
        tag.0,
        tag.1,
        escape(
            d.summary
                .split_once(": ")
                .map_or(d.summary.as_str(), |(_, rest)| rest)
        ),
        escape(&cmd)
    );

    facts(&mut out, d, trace);
    growth_table(&mut out, d);

    let clock = StepClock::from_trace(trace);
    let all = memory_series(trace, usize::MAX);
    let memory: Vec<(&Series, &SeriesReport)> = all
        .iter()
        .filter(|s| !s.key.starts_with("gpu."))
        .filter_map(|s| d.series.iter().find(|r| r.key == s.key).map(|r| (s, r)))
        .collect();
    let gpu: Vec<(&Series, &SeriesReport)> = all
        .iter()
        .filter(|s| s.key.starts_with("gpu."))
        .filter_map(|s| d.series.iter().find(|r| r.key == s.key).map(|r| (s, r)))
        .collect();
    let axis_title = match d.basis {
        Basis::Step => "over training steps",
        Basis::Second => "over time",
    };
    if !memory.is_empty() {
        chart_section(
            &mut out,
            &format!("Memory {axis_title}"),
            d,
            &memory,
            &clock,
        );
    }
    if !gpu.is_empty() {
        chart_section(
            &mut out,
            &format!("GPU memory {axis_title}"),
            d,
            &gpu,
            &clock,
        );
    }

    if !d.findings.is_empty() {
        out.push_str("<section><h2>Findings</h2><ol>");
        for f in &d.findings {
            let rate = f
                .per_step
                .as_ref()
                .or(f.per_second.as_ref())
                .map(fmt_rate)
                .unwrap_or_default();
            let _ = write!(
                out,
                "<li><strong>{}</strong> grows <strong class=\"mono\">{}</strong><ul class=\"evidence\">",
                escape(&f.what),
                escape(&rate)
            );
            for e in &f.evidence {
                let _ = write!(out, "<li>{}</li>", prose(e));
            }
            out.push_str("</ul></li>");
        }
        out.push_str("</ol></section>\n");
    } else if let Some(s) = d.series.iter().find(|s| s.key == d.headline) {
        let _ = write!(
            out,
            "<section><h2>Evidence: {}</h2><ul class=\"evidence\">",
            escape(&s.what)
        );
        for e in &s.evidence {
            let _ = write!(out, "<li>{}</li>", prose(e));
        }
        out.push_str("</ul></section>\n");
    }
    mechanisms_section(&mut out, d);
    growth_section(&mut out, d);
    if !d.ranks.is_empty() {
        out.push_str("<section id=\"ranks\"><h2>Ranks (each fitted on its own RSS and steps)</h2>");
        rank_table_html(&mut out, &d.ranks, false);
        out.push_str("</section>\n");
    }
    if !d.notes.is_empty() {
        out.push_str("<section><h2>Notes</h2><ul>");
        for n in &d.notes {
            let _ = write!(out, "<li>{}</li>", prose(n));
        }
        out.push_str("</ul></section>\n");
    }
    series_table(&mut out, d);
    throughput_section(&mut out, d, &clock);
    if let Some(c) = &d.probe.cost {
        let _ = writeln!(
            out,
            "<section id=\"probe-cost\"><h2>What watching cost</h2><p>{}</p></section>",
            escape(&c.describe())
        );
    }
    let _ = write!(
        out,
        "<footer>leakspy {} &#183; trace format v{} &#183; written by leakspy {}</footer>\n</main></body></html>\n",
        env!("CARGO_PKG_VERSION"),
        trace.header.version,
        escape(&trace.header.leakspy_version)
    );
    out
}

/// What makes memory grow outside Python objects (processes, the
/// allocators): each with its evidence, bound and fix.
fn mechanisms_section(out: &mut String, d: &Diagnosis) {
    if d.mechanisms.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "<section id=\"mechanisms\"><h2>How memory grows ({})</h2>",
        crate::model::mechanisms_topic(&d.mechanisms)
    );
    for m in &d.mechanisms {
        let _ = write!(
            out,
            "<article class=\"group\"><h3>{}</h3><ul>",
            prose(&m.summary)
        );
        for e in &m.evidence {
            let _ = write!(out, "<li class=\"evidence\">{}</li>", prose(e));
        }
        if let Some(b) = m.bound {
            let _ = write!(
                out,
                "<li>bound: at most {} in all</li>",
                escape(&fmt_bytes(b))
            );
        }
        if let Some(f) = &m.fix {
            let _ = write!(out, "<li>fix: {}</li>", prose(f));
        }
        out.push_str("</ul></article>");
    }
    out.push_str("</section>\n");
}

/// What grows inside the processes, by holder: every name in it came from
/// the user's process (types, attributes, paths), so all of it is escaped.
/// One block per holder, across the page's width: what grows and where it
/// was made side by side, then the `check` findings on those lines, each
/// with its fix on a line of its own.
fn growth_section(out: &mut String, d: &Diagnosis) {
    if d.growth.is_empty() {
        if let Some(why) = &d.no_holder {
            let _ = writeln!(
                out,
                "<section id=\"growth\"><h2>What grows (in-process probe)</h2><p>Holder not found: {}</p></section>",
                escape(why)
            );
        }
        return;
    }
    out.push_str("<section id=\"growth\"><h2>What grows (in-process probe)</h2>");
    for (i, g) in d.growth.iter().enumerate() {
        let (who, sub) = match (&g.holder, &g.static_holder) {
            (Some(h), _) if h.is_named() => {
                let container = h
                    .container
                    .as_deref()
                    .filter(|c| !c.is_empty())
                    .map(|c| format!(" ({})", escape(c)))
                    .unwrap_or_default();
                let at = h
                    .file
                    .as_deref()
                    .map(|f| format!(" &#183; {}", loc(f, h.line)))
                    .unwrap_or_default();
                let hint = h
                    .hint
                    .as_deref()
                    .map(|t| format!(" &#183; free it: {}", prose(t)))
                    .unwrap_or_default();
                let library = if h.library { ", a library's own" } else { "" };
                let also: Vec<String> = h
                    .also
                    .iter()
                    .filter(|a| a.is_named())
                    .map(|a| {
                        let at = a
                            .file
                            .as_deref()
                            .map(|f| format!(" ({})", loc(f, a.line)))
                            .unwrap_or_default();
                        format!("<code>{}</code>{at}", escape(&a.path))
                    })
                    .collect();
                let also = if also.is_empty() {
                    String::new()
                } else {
                    format!("; also held by {}", also.join(", "))
                };
                (
                    format!(
                        "held by <code>{}</code>{container}{at}{also}",
                        escape(&h.path)
                    ),
                    format!(
                        "{}{library} &#183; {}{hint}",
                        escape(&h.kind),
                        escape(
                            &g.process
                                .clone()
                                .unwrap_or_else(|| format!("pid {}", g.pid))
                        )
                    ),
                )
            }
            (_, Some(kept)) => (
                format!(
                    "kept by <code>{}</code> on the line that made them",
                    escape(kept)
                ),
                format!(
                    "the probe found no root; the static check names it &#183; pid {}",
                    g.pid
                ),
            ),
            _ => ("holder not found".to_string(), format!("pid {}", g.pid)),
        };
        let _ = write!(
            out,
            "<article class=\"group\"><h3>{}. {who}</h3><p class=\"sub\">{sub}</p><div class=\"grid\"><div><h4>What grows</h4><ul>",
            i + 1
        );
        for gr in g.growers.iter().take(MAX_GROWERS) {
            let _ = write!(out, "<li>{}</li>", escape(&gr.describe()));
        }
        if g.growers.len() > MAX_GROWERS {
            let _ = write!(
                out,
                "<li class=\"evidence\">and {} more series (JSON report)</li>",
                g.growers.len() - MAX_GROWERS
            );
        }
        out.push_str("</ul></div><div>");
        if let Some(c) = &g.created_at {
            let func = c
                .function
                .as_deref()
                .map(|f| format!(" in <code>{}()</code>", escape(f)))
                .unwrap_or_default();
            let kept = g
                .site_from
                .as_deref()
                .map(|f| {
                    format!(
                        " <span class=\"evidence\">(kept there: {})</span>",
                        escape(f)
                    )
                })
                .unwrap_or_default();
            let _ = write!(
                out,
                "<h4>Made at</h4><p>{}{func}{kept}</p>",
                loc(&c.file, Some(c.line))
            );
        }
        out.push_str("</div></div>");
        for m in &g.static_findings {
            let _ = write!(
                out,
                "<div class=\"check\"><p><span class=\"rule\">{}</span> {} &#8212; {}</p>",
                escape(&m.rule),
                match m.cell {
                    Some(c) => loc(&format!("{}:cell {c}:line", m.file), Some(m.line)),
                    None => loc(&m.file, Some(m.line)),
                },
                prose(&m.message)
            );
            if let Some(fix) = &m.fix {
                let (class, label) = if m.safe_fix {
                    ("fix", "Fix")
                } else {
                    (
                        "fix unsafe",
                        "Fix (unsafe: it changes behaviour, review it)",
                    )
                };
                let _ = write!(
                    out,
                    "<p class=\"{class}\"><strong>{label}:</strong> {}</p>",
                    prose(fix)
                );
            }
            out.push_str("</div>");
        }
        out.push_str("</article>");
    }
    out.push_str("</section>\n");
}

/// A source location, `path:line`, that never breaks inside the file name
/// or the line number: only after a `/` of its folders.
fn loc(file: &str, line: Option<u64>) -> String {
    let mut parts: Vec<String> = file.split_inclusive('/').map(escape).collect();
    if let (Some(last), Some(l)) = (parts.last_mut(), line) {
        last.push_str(&format!(":{l}"));
    }
    let joined: Vec<String> = parts
        .iter()
        .map(|p| format!("<span class=\"loc\">{p}</span>"))
        .collect();
    format!("<span class=\"path\">{}</span>", joined.join("<wbr>"))
}

/// leakspy's own prose (rule messages, fixes, notes, evidence), escaped,
/// with its `inline code` set as code. An unpaired backtick stays as it is.
pub(crate) fn prose(text: &str) -> String {
    let parts: Vec<&str> = text.split('`').collect();
    if parts.len() < 3 {
        return escape(text);
    }
    let mut out = String::with_capacity(text.len() + 32);
    let paired = if parts.len() % 2 == 1 {
        parts.len()
    } else {
        parts.len() - 1
    };
    for (i, part) in parts.iter().enumerate() {
        if i >= paired {
            out.push('`');
            out.push_str(&escape(part));
        } else if i % 2 == 1 {
            out.push_str("<code>");
            out.push_str(&escape(part));
            out.push_str("</code>");
        } else {
            out.push_str(&escape(part));
        }
    }
    out
}

/// Series shown per holder; the JSON report has them all.
const MAX_GROWERS: usize = 6;

fn verdict_tag(v: Verdict) -> (&'static str, &'static str) {
    match v {
        Verdict::Leak => ("leak", "LEAK"),
        Verdict::NoLeak => ("no-leak", "NO LEAK"),
        Verdict::Inconclusive => ("inconclusive", "INCONCLUSIVE"),
    }
}

fn facts(out: &mut String, d: &Diagnosis, trace: &Trace) {
    out.push_str("<section class=\"facts\"><h2>Run</h2><div class=\"scroll\"><table>");
    let mut row = |k: &str, v: String| {
        let _ = write!(out, "<tr><td>{k}</td><td>{}</td></tr>", escape(&v));
    };
    if !trace.header.cwd.is_empty() {
        row("working directory", trace.header.cwd.clone());
    }
    if !trace.header.hostname.is_empty() {
        row("host", trace.header.hostname.clone());
    }
    row(
        "duration",
        format!(
            "{:.1} s, {} samples every {:.2} s",
            d.run.duration_s, d.run.samples, d.run.sample_interval_s
        ),
    );
    row("steps", d.run.steps.to_string());
    row("processes", d.run.processes.to_string());
    row(
        "RSS",
        format!(
            "peak {}, at the end {}",
            fmt_bytes(d.run.peak_rss as f64),
            fmt_bytes(d.run.last_rss as f64)
        ),
    );
    row("end", d.exit.message.clone());
    out.push_str("</table></div></section>\n");
}

fn growth_table(out: &mut String, d: &Diagnosis) {
    if d.growth_per_step.is_none() && d.growth_per_second.is_none() {
        return;
    }
    let what = d
        .series
        .iter()
        .find(|s| s.key == d.headline)
        .map(|s| s.what.as_str())
        .unwrap_or("memory");
    let _ = write!(
        out,
        "<section><h2>Growth of {}</h2><div class=\"scroll\"><table><tr><th>per</th><th>slope</th><th>interval</th><th>R²</th><th>points</th></tr>",
        escape(what)
    );
    for (label, g) in [
        ("step", &d.growth_per_step),
        ("second", &d.growth_per_second),
    ] {
        if let Some(g) = g {
            growth_row(out, label, g);
        }
    }
    out.push_str("</table></div></section>\n");
}

fn growth_row(out: &mut String, label: &str, g: &Growth) {
    let _ = write!(
        out,
        "<tr><td>{label}</td><td class=\"num\"><strong>{}</strong></td><td class=\"num\">{:.0}%: {} .. {}</td><td class=\"num\">{:.2}</td><td class=\"num\">{}</td></tr>",
        escape(&fmt_rate(g)),
        g.confidence * 100.0,
        escape(&fmt_rate_value(g.lo, g)),
        escape(&fmt_rate_value(g.hi, g)),
        g.r2,
        g.n
    );
}

fn chart_section(
    out: &mut String,
    title: &str,
    d: &Diagnosis,
    series: &[(&Series, &SeriesReport)],
    clock: &StepClock,
) {
    let basis = d.basis;
    let xy = |s: &Series| -> Vec<(f64, f64)> {
        match basis {
            Basis::Step => {
                let (xs, ys) = clock.map(&s.t, &s.y);
                xs.into_iter().zip(ys).collect()
            }
            Basis::Second => s.t.iter().copied().zip(s.y.iter().copied()).collect(),
        }
    };
    let mut lines = Vec::new();
    for (i, (s, _)) in series.iter().enumerate() {
        lines.push(Line {
            label: s.what.clone(),
            color: COLORS[i % COLORS.len()],
            points: xy(s),
            width: if i == 0 { 2.4 } else { 1.5 },
            dashed: false,
        });
    }
    // The fitted trend over the analysed window of the series the verdict
    // rests on (else the chart's first, e.g. on the GPU chart): one trend per
    // chart keeps it readable.
    let mut shade = None;
    let mut markers = Vec::new();
    for (i, (_, r)) in series.iter().enumerate() {
        let headline =
            r.key == d.headline || (i == 0 && !series.iter().any(|(_, r)| r.key == d.headline));
        if !headline || r.basis != basis {
            continue;
        }
        if let Some(f) = r.fit {
            let g = r
                .per_step
                .as_ref()
                .filter(|_| basis == Basis::Step)
                .or(r.per_second.as_ref());
            let rate = g.map(fmt_rate).unwrap_or_default();
            lines.push(Line {
                label: format!("fitted trend of {}: {rate}", short(&r.what)),
                color: if r.verdict == Verdict::Leak {
                    FIT_COLOR
                } else {
                    "#1f2328"
                },
                points: vec![
                    (f.x_start, f.intercept + f.slope * f.x_start),
                    (f.x_end, f.intercept + f.slope * f.x_end),
                ],
                width: 2.2,
                dashed: true,
            });
        }
        if headline {
            if let (Some(end), Some(first)) = (r.warmup_end, lines[i].points.first()) {
                if end > first.0 {
                    shade = Some((first.0, end, "warm-up (not fitted)".to_string()));
                }
            }
            if let Some(x) = r.flat_since {
                if r.shape == leakspy_stats::Shape::Saturating {
                    markers.push((x, "flat since here".to_string()));
                }
            }
        }
    }
    let chart = Chart {
        title: title.to_string(),
        x: match basis {
            Basis::Step => XAxis::Steps,
            Basis::Second => XAxis::Seconds,
        },
        y: YAxis::Bytes,
        lines,
        shade,
        markers,
    };
    let _ = write!(
        out,
        "<section><h2>{}</h2>{}<div class=\"chart-box\">{}</div>",
        escape(title),
        chart.legend(),
        chart.svg()
    );
    out.push_str(
        "<p class=\"caption\">Solid lines: samples. Dashed: the robust trend (Theil–Sen on per-window minima) over the analysed part, after the warm-up.</p></section>\n",
    );
}

fn short(what: &str) -> &str {
    what.split(" of the process tree").next().unwrap_or(what)
}

fn series_table(out: &mut String, d: &Diagnosis) {
    out.push_str("<section><h2>Every series</h2><div class=\"scroll\"><table><tr><th>series</th><th>verdict</th><th>shape</th><th>per step</th><th>per second</th></tr>");
    for s in &d.series {
        let cell = |g: &Option<Growth>| {
            g.as_ref()
                .map(|g| {
                    format!(
                        "{}<br><span class=\"evidence\">{} .. {}</span>",
                        escape(&fmt_rate(g)),
                        escape(&fmt_rate_value(g.lo, g)),
                        escape(&fmt_rate_value(g.hi, g))
                    )
                })
                .unwrap_or_else(|| "&#8212;".to_string())
        };
        let (ps, pt) = (cell(&s.per_step), cell(&s.per_second));
        let verdict = s.diagnosed();
        let by = match (&s.leak_by, &s.explained) {
            (Some(by), _) => format!(
                "<br><span class=\"evidence\">with {}; alone {}</span>",
                escape(by),
                s.verdict.as_str()
            ),
            (None, Some(e)) => format!(
                "<br><span class=\"evidence\">{}; alone {}</span>",
                escape(&e.by),
                s.verdict.as_str()
            ),
            (None, None) => String::new(),
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"v-{}\">{}{by}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            escape(&s.what),
            verdict.as_str(),
            verdict.as_str(),
            escape(&s.shape_text),
            ps,
            pt,
        );
    }
    out.push_str("</table></div></section>\n");
}

fn throughput_section(out: &mut String, d: &Diagnosis, clock: &StepClock) {
    let Some(t) = &d.throughput else { return };
    let (ts, rates) = step_rates(&clock.events());
    if ts.len() < 2 {
        return;
    }
    let chart = Chart {
        title: "Training speed".to_string(),
        x: XAxis::Seconds,
        y: YAxis::StepsPerSecond,
        lines: vec![
            Line {
                label: "steps per second".to_string(),
                color: COLORS[0],
                points: ts.into_iter().zip(rates).collect(),
                width: 2.0,
                dashed: false,
            },
            Line {
                label: format!(
                    "fitted trend: {} to {} ({:+.0}%)",
                    fmt_value(t.start_rate, ValueUnit::StepsPerSecond),
                    fmt_value(t.end_rate, ValueUnit::StepsPerSecond),
                    t.change * 100.0
                ),
                color: if t.falling { FIT_COLOR } else { "#1f2328" },
                points: vec![(t.t_start, t.start_rate), (t.t_end, t.end_rate)],
                width: 2.0,
                dashed: true,
            },
        ],
        shade: None,
        markers: Vec::new(),
    };
    let _ = writeln!(
        out,
        "<section><h2>Training speed</h2>{}<div class=\"chart-box\">{}</div></section>",
        chart.legend(),
        chart.svg()
    );
}

/// Escapes text for HTML element content and quoted attribute values.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Several traces: each one's verdict, then every rank side by side.
pub fn render_ranks_html(traces: &[(String, Diagnosis)], rows: &[RankRow]) -> String {
    let mut out = String::with_capacity(16 * 1024);
    let leaks = traces
        .iter()
        .filter(|(_, d)| d.verdict == Verdict::Leak)
        .count();
    let tag = verdict_tag(if leaks > 0 {
        Verdict::Leak
    } else if traces.iter().all(|(_, d)| d.verdict == Verdict::NoLeak) {
        Verdict::NoLeak
    } else {
        Verdict::Inconclusive
    });
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>leakspy: {} &#8212; {} traces</title><style>{STYLE}</style></head><body><main>\n\
         <header class=\"verdict {}\"><span class=\"badge\">{}</span><h1>{} traces, {} with a leak</h1></header>\n",
        tag.1,
        traces.len(),
        tag.0,
        tag.1,
        traces.len(),
        leaks
    );
    out.push_str("<section><h2>Traces</h2><div class=\"scroll\"><table><tr><th>trace</th><th>verdict</th></tr>");
    for (name, d) in traces {
        let _ = write!(
            out,
            "<tr><td class=\"mono\">{}</td><td>{}</td></tr>",
            escape(name),
            escape(&d.summary)
        );
    }
    out.push_str("</table></div></section>\n<section id=\"ranks\"><h2>Ranks side by side</h2>");
    rank_table_html(&mut out, rows, true);
    out.push_str("</section>\n</main></body></html>\n");
    out
}

fn rank_table_html(out: &mut String, rows: &[RankRow], with_trace: bool) {
    out.push_str("<div class=\"scroll\"><table style=\"table-layout:fixed;width:100%;overflow-wrap:anywhere\"><tr><th>rank</th><th>host · pid</th><th>steps</th><th>peak RSS</th><th>growth</th><th>verdict</th><th>what grows</th>");
    if with_trace {
        out.push_str("<th>trace</th>");
    }
    out.push_str("</tr>");
    for r in rows {
        let rank = match (r.rank, r.world_size) {
            (Some(k), Some(w)) => format!("{k} of {w}"),
            (Some(k), None) => k.to_string(),
            (None, _) => "&#8212;".to_string(),
        };
        let growth = r
            .growth_per_step
            .as_ref()
            .or(r.growth_per_second.as_ref())
            .map(fmt_rate)
            .unwrap_or_default();
        let class = verdict_tag(r.verdict).0;
        let _ = write!(
            out,
            "<tr class=\"{class}\"><td>{rank}</td><td class=\"mono\">{} · {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"mono\">{}</td>",
            escape(&r.host),
            r.pid.map_or_else(String::new, |p| p.to_string()),
            r.steps,
            fmt_bytes(r.peak_rss as f64),
            escape(&growth),
            escape(&r.shape),
            escape(r.grows.as_deref().unwrap_or(""))
        );
        if with_trace {
            let _ = write!(out, "<td class=\"mono\">{}</td>", escape(&r.trace));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table></div>");
}

#[cfg(test)]
mod tests {
    use super::{escape, loc, prose};

    #[test]
    fn inline_code_is_code_and_still_escaped() {
        assert_eq!(
            prose("Store `loss.item()` for a <number>"),
            "Store <code>loss.item()</code> for a &lt;number&gt;"
        );
        assert_eq!(prose("`<b>`"), "<code>&lt;b&gt;</code>");
        // An unpaired backtick is text.
        assert_eq!(prose("a `b` c ` d"), "a <code>b</code> c ` d");
        assert_eq!(prose("no code"), "no code");
    }

    #[test]
    fn a_location_breaks_only_between_folders() {
        assert_eq!(
            loc("examples/leaky_train.py", Some(115)),
            "<span class=\"path\"><span class=\"loc\">examples/</span><wbr><span class=\"loc\">leaky_train.py:115</span></span>"
        );
        assert_eq!(
            loc("<x>.py", None),
            "<span class=\"path\"><span class=\"loc\">&lt;x&gt;.py</span></span>"
        );
    }

    #[test]
    fn escapes_markup() {
        assert_eq!(
            escape("<script>alert(1)</script>\"><img onerror='x'>&"),
            "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&gt;&lt;img onerror=&#39;x&#39;&gt;&amp;"
        );
    }
}

//! Inline SVG line charts with human axis units: no scripts, no fonts or
//! images to load, every label escaped.

use std::fmt::Write;

use crate::html::escape;

/// One polyline of a chart.
pub(crate) struct Line {
    pub label: String,
    pub color: &'static str,
    pub points: Vec<(f64, f64)>,
    pub width: f64,
    pub dashed: bool,
}

/// What the x axis counts.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum XAxis {
    Steps,
    Seconds,
}

/// What the y axis measures.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum YAxis {
    Bytes,
    StepsPerSecond,
}

pub(crate) struct Chart {
    pub title: String,
    pub x: XAxis,
    pub y: YAxis,
    pub lines: Vec<Line>,
    /// Shaded x range with a label (the trimmed warm-up).
    pub shade: Option<(f64, f64, String)>,
    /// Vertical markers with labels (where a series went flat).
    pub markers: Vec<(f64, String)>,
}

const W: f64 = 1120.0;
const H: f64 = 400.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 22.0;
const BOTTOM: f64 = 46.0;
/// Points per polyline at most; longer lines keep each bucket's min and max.
const MAX_POINTS: usize = 1600;

impl Chart {
    pub fn svg(&self) -> String {
        let pts = self.lines.iter().flat_map(|l| l.points.iter());
        let (mut x0, mut x1, mut y0, mut y1) = (
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::INFINITY,
            f64::NEG_INFINITY,
        );
        for &(x, y) in pts {
            if x.is_finite() && y.is_finite() {
                x0 = x0.min(x);
                x1 = x1.max(x);
                y0 = y0.min(y);
                y1 = y1.max(y);
            }
        }
        let mut out = String::new();
        let _ = write!(
            out,
            "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {H}\" \
             role=\"img\" aria-label=\"{}\">",
            escape(&self.title)
        );
        if !x0.is_finite() {
            let _ = write!(
                out,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" class=\"empty\">no data</text></svg>",
                W / 2.0,
                H / 2.0
            );
            return out;
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        // Memory rarely starts at zero; pad the data range so the lines do not
        // touch the frame, and show the whole range on the labelled axis.
        let pad = ((y1 - y0) * 0.08).max(y1.abs() * 0.01).max(1.0);
        // Rates start at zero so that a steady rate looks steady.
        let (ylo, yhi) = match self.y {
            YAxis::Bytes => ((y0 - pad).max(0.0), y1 + pad),
            YAxis::StepsPerSecond => (0.0, y1 + pad),
        };
        let yt = ticks(ylo, yhi, self.y, 5.0);
        let xt = ticks(x0, x1, YAxis::StepsPerSecond, 8.0);
        let (ylo, yhi) = (
            ylo.min(yt.first().copied().unwrap_or(ylo)),
            yhi.max(yt.last().copied().unwrap_or(yhi)),
        );
        let pw = W - LEFT - RIGHT;
        let ph = H - TOP - BOTTOM;
        let sx = |x: f64| LEFT + (x - x0) / (x1 - x0) * pw;
        let sy = |y: f64| TOP + ph - (y - ylo) / (yhi - ylo) * ph;

        let _ = write!(
            out,
            "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{pw}\" height=\"{ph}\" class=\"plot\"/>"
        );
        if let Some((a, b, label)) = &self.shade {
            let (a, b) = (a.max(x0), b.min(x1));
            if b > a {
                let _ = write!(
                    out,
                    "<rect x=\"{:.1}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{ph}\" class=\"shade\"/>\
                     <text x=\"{:.1}\" y=\"{:.1}\" class=\"shade-label\">{}</text>",
                    sx(a),
                    sx(b) - sx(a),
                    sx(a) + 4.0,
                    TOP + 14.0,
                    escape(label)
                );
            }
        }
        for &v in &yt {
            if v < ylo || v > yhi {
                continue;
            }
            let y = sy(v);
            let _ = write!(
                out,
                "<line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" class=\"grid\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" class=\"tick\">{}</text>",
                LEFT + pw,
                LEFT - 6.0,
                y + 4.0,
                escape(&fmt_tick(v, &yt, self.y)),
            );
        }
        for &v in &xt {
            if v < x0 || v > x1 {
                continue;
            }
            let _ = write!(
                out,
                "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{TOP}\" y2=\"{:.1}\" class=\"grid\"/>\
                 <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" class=\"tick\">{}</text>",
                TOP + ph,
                TOP + ph + 16.0,
                escape(&fmt_tick(v, &xt, YAxis::StepsPerSecond)),
                x = sx(v)
            );
        }
        for (x, label) in &self.markers {
            if *x < x0 || *x > x1 {
                continue;
            }
            let _ = write!(
                out,
                "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{TOP}\" y2=\"{:.1}\" class=\"marker\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" class=\"marker-label\">{}</text>",
                TOP + ph,
                sx(*x) + 4.0,
                TOP + 28.0,
                escape(label),
                x = sx(*x)
            );
        }
        for line in &self.lines {
            let pts = thin(&line.points);
            if pts.is_empty() {
                continue;
            }
            let mut d = String::with_capacity(pts.len() * 14);
            for (i, (x, y)) in pts.iter().enumerate() {
                let _ = write!(
                    d,
                    "{}{:.1},{:.1}",
                    if i == 0 { "M" } else { " L" },
                    sx(*x),
                    sy(*y)
                );
            }
            let _ = write!(
                out,
                "<path d=\"{d}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"{} \
                 stroke-linejoin=\"round\" stroke-linecap=\"round\"><title>{}</title></path>",
                line.color,
                line.width,
                if line.dashed {
                    " stroke-dasharray=\"7 5\""
                } else {
                    ""
                },
                escape(&line.label)
            );
        }
        let x_label = match self.x {
            XAxis::Steps => "training step",
            XAxis::Seconds => "time since start (s)",
        };
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" class=\"axis\">{x_label}</text>",
            LEFT + pw / 2.0,
            H - 8.0
        );
        let y_label = match self.y {
            YAxis::Bytes => "memory",
            YAxis::StepsPerSecond => "steps/s",
        };
        let _ = write!(
            out,
            "<text transform=\"translate(14 {:.1}) rotate(-90)\" text-anchor=\"middle\" \
             class=\"axis\">{y_label}</text></svg>",
            TOP + ph / 2.0
        );
        out
    }

    /// The legend as HTML (wraps nicely, unlike SVG text).
    pub fn legend(&self) -> String {
        let mut out = String::from("<div class=\"legend\">");
        for l in &self.lines {
            let _ = write!(
                out,
                "<span class=\"key\"><svg width=\"28\" height=\"10\" aria-hidden=\"true\">\
                 <line x1=\"1\" y1=\"5\" x2=\"27\" y2=\"5\" stroke=\"{}\" stroke-width=\"{}\"{}/>\
                 </svg>{}</span>",
                l.color,
                l.width.max(2.0),
                if l.dashed {
                    " stroke-dasharray=\"6 3\""
                } else {
                    ""
                },
                escape(&l.label)
            );
        }
        out.push_str("</div>");
        out
    }
}

/// Keeps at most [`MAX_POINTS`] points: the min and max of each bucket, in x order.
fn thin(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let pts: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    if pts.len() <= MAX_POINTS {
        return pts;
    }
    let buckets = MAX_POINTS / 2;
    let per = pts.len().div_ceil(buckets);
    let mut out = Vec::with_capacity(MAX_POINTS);
    for chunk in pts.chunks(per) {
        let lo = chunk.iter().min_by(|a, b| a.1.total_cmp(&b.1)).copied();
        let hi = chunk.iter().max_by(|a, b| a.1.total_cmp(&b.1)).copied();
        if let (Some(lo), Some(hi)) = (lo, hi) {
            if lo.0 <= hi.0 {
                out.push(lo);
                out.push(hi);
            } else {
                out.push(hi);
                out.push(lo);
            }
        }
    }
    out
}

/// Round tick values covering `lo..hi`: 1, 2, 5 times a power of ten (of
/// 1024-based units for bytes, so ticks read "512 MiB", "1.5 GiB").
fn ticks(lo: f64, hi: f64, y: YAxis, target: f64) -> Vec<f64> {
    let span = (hi - lo).max(f64::MIN_POSITIVE);
    let unit = match y {
        YAxis::Bytes => byte_unit(hi.abs().max(lo.abs())).1,
        YAxis::StepsPerSecond => 1.0,
    };
    let raw = span / unit / target;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
        * unit;
    let first = (lo / step + 1e-9).floor() as i64;
    let last = (hi / step - 1e-9).ceil() as i64;
    (first..=last.max(first))
        .take(50)
        .map(|i| i as f64 * step)
        .collect()
}

fn byte_unit(v: f64) -> (&'static str, f64) {
    const K: f64 = 1024.0;
    if v >= K * K * K * K {
        ("TiB", K * K * K * K)
    } else if v >= K * K * K {
        ("GiB", K * K * K)
    } else if v >= K * K {
        ("MiB", K * K)
    } else if v >= K {
        ("KiB", K)
    } else {
        ("B", 1.0)
    }
}

/// A tick label with as many decimals as the tick spacing needs.
fn fmt_tick(v: f64, all: &[f64], y: YAxis) -> String {
    let step = if all.len() >= 2 { all[1] - all[0] } else { 1.0 };
    match y {
        YAxis::Bytes => {
            let top = all.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let (mut name, mut unit) = byte_unit(top);
            // Ticks stepped in MiB that round up past 1 GiB read "1025 MiB",
            // not "1.0010 GiB": the larger unit only when the step is round in it.
            if unit > 1.0 && !round_in(step / unit, 2) {
                (name, unit) = byte_unit(top / 1024.0);
            }
            format!("{} {name}", decimals(v / unit, step / unit))
        }
        YAxis::StepsPerSecond => decimals(v, step),
    }
}

/// Whether `step` is written exactly with `places` decimals.
fn round_in(step: f64, places: i32) -> bool {
    let scaled = step * 10f64.powi(places);
    (scaled.round() - scaled).abs() <= 1e-6 * scaled.abs().max(1.0)
}

fn decimals(v: f64, step: f64) -> String {
    let mut d = 0;
    while d < 4 {
        let scaled = step * 10f64.powi(d);
        if (scaled.round() - scaled).abs() <= 1e-6 * scaled.abs().max(1.0) {
            break;
        }
        d += 1;
    }
    let s = format!("{v:.prec$}", prec = d as usize);
    // "-0.0" is zero.
    if s.starts_with('-') && s[1..].chars().all(|c| c == '0' || c == '.') {
        s[1..].to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_ticks_are_round() {
        let mib = 1024.0 * 1024.0;
        let t = ticks(100.0 * mib, 180.0 * mib, YAxis::Bytes, 5.0);
        let labels: Vec<String> = t.iter().map(|v| fmt_tick(*v, &t, YAxis::Bytes)).collect();
        assert_eq!(
            labels,
            ["100 MiB", "120 MiB", "140 MiB", "160 MiB", "180 MiB"]
        );
        let g = 1024.0 * mib;
        let t = ticks(1.2 * g, 2.1 * g, YAxis::Bytes, 5.0);
        let labels: Vec<String> = t.iter().map(|v| fmt_tick(*v, &t, YAxis::Bytes)).collect();
        assert_eq!(
            labels,
            ["1.2 GiB", "1.4 GiB", "1.6 GiB", "1.8 GiB", "2.0 GiB", "2.2 GiB"]
        );
    }

    #[test]
    fn ticks_crossing_into_the_next_unit_stay_round() {
        let mib = 1024.0 * 1024.0;
        let t = ticks(900.0 * mib, 1015.0 * mib, YAxis::Bytes, 5.0);
        let labels: Vec<String> = t.iter().map(|v| fmt_tick(*v, &t, YAxis::Bytes)).collect();
        assert_eq!(
            labels,
            ["900 MiB", "925 MiB", "950 MiB", "975 MiB", "1000 MiB", "1025 MiB"]
        );
        // A step that is round in GiB is said in GiB.
        let g = 1024.0 * mib;
        let t = ticks(0.8 * g, 1.15 * g, YAxis::Bytes, 5.0);
        let labels: Vec<String> = t.iter().map(|v| fmt_tick(*v, &t, YAxis::Bytes)).collect();
        assert!(labels.iter().all(|l| l.ends_with(" GiB")), "{labels:?}");
    }

    #[test]
    fn step_ticks() {
        let t = ticks(0.0, 120.0, YAxis::StepsPerSecond, 5.0);
        assert_eq!(t, [0.0, 25.0, 50.0, 75.0, 100.0, 125.0]);
        assert_eq!(fmt_tick(2.5, &[0.0, 2.5], YAxis::StepsPerSecond), "2.5");
        assert_eq!(fmt_tick(0.25, &[0.0, 0.25], YAxis::StepsPerSecond), "0.25");
    }

    #[test]
    fn thinning_keeps_extremes() {
        let pts: Vec<(f64, f64)> = (0..10_000)
            .map(|i| (f64::from(i), f64::from(i % 100)))
            .collect();
        let t = thin(&pts);
        assert!(t.len() <= MAX_POINTS);
        assert!(t.iter().any(|p| p.1 == 99.0));
        assert!(t.iter().any(|p| p.1 == 0.0));
    }
}

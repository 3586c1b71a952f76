//! The HTML report rendered by a real browser: headless Chromium loads the
//! file written by `leakspy report --format html`, dumps its DOM and takes a
//! screenshot. Skipped (with the reason printed) only when no Chromium is
//! installed and the CI variable is unset; in CI it always runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("LEAKSPY_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in [
            "chromium",
            "chromium-browser",
            "google-chrome",
            "google-chrome-stable",
        ] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Chromium, or None with the reason printed for `test` to skip; in CI
/// (the variable CI set) a missing Chromium fails instead.
fn browser_or_skip(test: &str) -> Option<PathBuf> {
    let browser = chromium();
    if browser.is_none() {
        if std::env::var_os("CI").is_some() {
            panic!("chromium is not installed, and CI is set: the HTML report must be checked in a browser (apt-get install -y chromium)");
        }
        eprintln!("SKIPPED {test}: no chromium on PATH (install it with `apt-get install -y chromium`, or set LEAKSPY_CHROMIUM)");
    }
    browser
}

/// Runs Chromium headless with the flags that keep it off the network.
fn headless(browser: &Path, profile: &Path, extra: &[String], url: &str) -> std::process::Output {
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    // Read both pipes while waiting: a DOM larger than a pipe's buffer
    // would otherwise block Chromium on its write, and the test with it.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    // A browser that hangs must not hang the test suite.
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 180 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    std::process::Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

#[test]
fn html_report_renders_in_headless_chromium() {
    let Some(browser) = browser_or_skip("html_report_renders_in_headless_chromium") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../leakspy_report/tests/fixtures/hostile.jsonl");
    let status = assert_cmd::Command::cargo_bin("leakspy")
        .unwrap()
        .args(["report", "--format", "html", "-o"])
        .arg(&html)
        .arg(&fixture)
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    let url = format!("file://{}", html.display());

    let dom = headless(
        &browser,
        &dir.path().join("profile-dom"),
        &["--dump-dom".to_string()],
        &url,
    );
    let dom_text = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom_text.contains("<svg class=\"chart\""),
        "no chart in the DOM:\n{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    assert!(
        dom_text.contains("<path d=\"M"),
        "no plotted line in the DOM"
    );
    // The hostile strings of the trace stayed text: no element came from them.
    assert!(
        !dom_text.contains("<script"),
        "a script element made it into the DOM"
    );
    assert!(
        !dom_text.contains("<img"),
        "an img element made it into the DOM"
    );
    assert!(dom_text.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));

    let png = dir.path().join("report.png");
    let shot = headless(
        &browser,
        &dir.path().join("profile-shot"),
        &[
            format!("--screenshot={}", png.display()),
            "--window-size=1000,1600".to_string(),
        ],
        &url,
    );
    let bytes = std::fs::read(&png).unwrap_or_else(|e| {
        panic!(
            "no screenshot ({e}): {}",
            String::from_utf8_lossy(&shot.stderr)
        )
    });
    let decoder = png::Decoder::new(std::io::Cursor::new(&bytes));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (1000, 1600));
    let channels = info.line_size / info.width as usize;
    let pixels = &buf[..info.buffer_size()];
    let mut colors = std::collections::HashSet::new();
    let mut red = 0usize;
    for px in pixels.chunks(channels) {
        colors.insert((px[0], px[1], px[2]));
        // The leak badge and the fitted trend are drawn in #cf222e.
        if px[0] > 180 && px[1] < 80 && px[2] < 80 {
            red += 1;
        }
    }
    assert!(
        colors.len() > 200,
        "screenshot looks blank: {} colours",
        colors.len()
    );
    assert!(
        red > 500,
        "no leak-red pixels ({red}): the verdict or trend is not drawn"
    );
    if let Ok(keep) = std::env::var("LEAKSPY_KEEP_SCREENSHOT") {
        std::fs::copy(&png, keep).unwrap();
    }
}

/// A project whose leak the report explains: a file a few folders down (a
/// trainer and the loop that steps it: `check` reports only what runs every
/// step), a trace whose probe names its holder there, and the `check` finding
/// (with its fix) that the report joins to it.
fn leaking_project(dir: &Path) -> PathBuf {
    let src = dir.join("src/models/distributed_training_loop.py");
    std::fs::create_dir_all(src.parent().unwrap()).unwrap();
    std::fs::write(
        &src,
        "import torch\nimport torch.nn.functional as F\n\n\nclass Trainer:\n    def __init__(self, model, optimizer):\n        self.model = model\n        self.optimizer = optimizer\n        self.losses = []\n\n    def train_step(self, x, y):\n        loss = F.mse_loss(self.model(x), y)\n        self.optimizer.zero_grad()\n        loss.backward()\n        self.optimizer.step()\n        self.losses.append(loss)\n\n\ndef train(model, optimizer, loader):\n    trainer = Trainer(model, optimizer)\n    for x, y in loader:\n        trainer.train_step(x, y)\n",
    )
    .unwrap();
    let file = src.display().to_string();
    let mut trace = format!(
        r#"{{"kind":"header","format":"leakspy-trace","version":1,"t":0,"command":["python","-m","src.models.distributed_training_loop","--epochs","3"],"cwd":{cwd:?},"hostname":"box","pid":7,"sample_interval_s":0.1}}
"#,
        cwd = dir.display().to_string()
    );
    let mib = 1u64 << 20;
    for i in 0..60u64 {
        let rss = 200 * mib + i * mib;
        trace.push_str(&format!(
            r#"{{"kind":"sample","t":{t},"procs":[{{"pid":7,"ppid":1,"name":"python","rss":{rss},"anon":{rss},"swap":0,"pss":null,"uss":null}}],"total":{{"rss":{rss},"anon":{rss},"swap":0,"pss":null,"uss":null}},"mem_available":null,"cgroup":null}}
{{"kind":"step","t":{t},"step":{step},"source":"optimizer","pid":7}}
"#,
            t = i as f64 * 0.1,
            step = i * 10
        ));
    }
    for i in 0..8u64 {
        trace.push_str(&format!(
            r#"{{"kind":"census","t":{t},"pid":7,"step":{s},"types":{{"torch.Tensor":{n}}},"containers":[{{"id":1,"type":"list","len":{n}}}]}}
"#,
            t = i as f64 * 0.7,
            s = i * 70,
            n = 100 + i * 70
        ));
    }
    trace.push_str(&format!(
        r#"{{"kind":"suspect","t":5.6,"pid":7,"step":560,"key":"container:1","what":"list of Tensor (len 590)","holder":{{"kind":"attribute","path":"Trainer.losses","container":"list","file":{file:?},"line":9}},"created_at":{{"file":{file:?},"line":12,"function":"Trainer.train_step"}}}}
"#
    ));
    let path = dir.join("run.jsonl");
    std::fs::write(&path, trace).unwrap();
    path
}

/// Layout facts measured by the browser itself: the report is loaded into
/// two frames, one as wide as a desktop window (1400 px) and one as narrow
/// as a phone (390 px), and a script of this test page (the report has
/// none, and its policy forbids them) measures them.
#[test]
fn html_report_layout_uses_the_width_and_keeps_locations_whole() {
    let Some(browser) =
        browser_or_skip("html_report_layout_uses_the_width_and_keeps_locations_whole")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let trace = leaking_project(dir.path());
    let html = dir.path().join("report.html");
    let out = assert_cmd::Command::cargo_bin("leakspy")
        .unwrap()
        .args(["report", "--format", "html", "-o"])
        .arg(&html)
        .arg(&trace)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let report = std::fs::read_to_string(&html).unwrap();
    // The location is the job's: relative to its working directory.
    assert!(
        report.contains("<span class=\"loc\">distributed_training_loop.py:16</span></span>"),
        "no check finding joined at the file's line"
    );

    let page = format!(
        r#"<!DOCTYPE html><html><body style="margin:0"><pre id="facts"></pre>
<iframe id="desktop" style="border:0;width:1400px;height:900px"></iframe>
<iframe id="phone" style="border:0;width:390px;height:844px"></iframe>
<script>
const report = {report};
const facts = {{}};
function measure(w) {{
  const d = w.document;
  const rect = e => e.getBoundingClientRect();
  const fixes = [...d.querySelectorAll('.fix')].map(f => ({{
    text: f.textContent,
    code: f.querySelectorAll('code').length,
    ownLine: f.previousElementSibling !== null && rect(f).top >= rect(f.previousElementSibling).bottom - 1
      && Math.abs(rect(f).left - rect(f.previousElementSibling).left) < 1,
  }}));
  return {{
    width: w.innerWidth,
    sectionWidth: Math.min(...[...d.querySelectorAll('section')].map(s => rect(s).width)),
    pageWidth: d.documentElement.scrollWidth,
    // Each segment (a folder, or file:line) on one line; whole paths too
    // where the window is wide.
    segments: [...d.querySelectorAll('.loc')].map(e => [e.textContent, e.getClientRects().length]),
    paths: [...d.querySelectorAll('.path')].map(e => [e.textContent, new Set([...e.querySelectorAll('.loc')].map(s => Math.round(rect(s).top))).size]),
    backticks: d.querySelector('main').innerText.split('`').length - 1,
    codes: d.querySelectorAll('#growth .check code').length,
    fixes,
  }};
}}
let loaded = 0;
for (const id of ['desktop', 'phone']) {{
  const frame = document.getElementById(id);
  frame.onload = () => {{
    facts[id] = measure(frame.contentWindow);
    if (++loaded === 2) document.getElementById('facts').textContent = JSON.stringify(facts);
  }};
  frame.srcdoc = report;
}}
</script></body></html>"#,
        report = serde_json::Value::String(report.clone())
    );
    let measure = dir.path().join("measure.html");
    std::fs::write(&measure, page).unwrap();
    let dom = headless(
        &browser,
        &dir.path().join("profile-measure"),
        &[
            "--dump-dom".to_string(),
            "--window-size=1900,1000".to_string(),
        ],
        &format!("file://{}", measure.display()),
    );
    let dom_text = String::from_utf8_lossy(&dom.stdout);
    let json = dom_text
        .split_once("<pre id=\"facts\">")
        .and_then(|(_, rest)| rest.split_once("</pre>"))
        .map(|(j, _)| {
            j.replace("&amp;", "&")
                .replace("&lt;", "<")
                .replace("&gt;", ">")
        })
        .unwrap_or_default();
    let facts: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| {
        panic!(
            "no layout facts ({e}): {json:?}\n{}",
            String::from_utf8_lossy(&dom.stderr)
        )
    });
    for (frame, width) in [("desktop", 1400.0), ("phone", 390.0)] {
        let f = &facts[frame];
        assert_eq!(f["width"].as_f64(), Some(width), "{f}");
        // Nothing wider than the window: no sideways scrolling of the page.
        assert!(f["pageWidth"].as_f64().unwrap() <= width, "{frame}: {f}");
        // Every file:line on one line (a path may break only between
        // folders, and at desktop width not at all).
        let segments = f["segments"].as_array().unwrap();
        assert!(
            segments
                .iter()
                .any(|l| l[0] == "distributed_training_loop.py:16"),
            "{frame}: {f}"
        );
        for l in segments {
            assert_eq!(l[1], 1, "{frame}: `{}` is broken across lines: {f}", l[0]);
        }
        let paths = f["paths"].as_array().unwrap();
        assert!(
            paths
                .iter()
                .any(|p| p[0] == "src/models/distributed_training_loop.py:16"),
            "{frame}: {f}"
        );
        if frame == "desktop" {
            for p in paths {
                assert_eq!(p[1], 1, "`{}` is broken across lines: {f}", p[0]);
            }
        }
        // Inline code is code, not backticks.
        assert_eq!(f["backticks"], 0, "{frame}: raw backticks: {f}");
        assert!(f["codes"].as_u64().unwrap() >= 3, "{frame}: {f}");
        // The fix on a line of its own, its code as code.
        let fixes = f["fixes"].as_array().unwrap();
        assert_eq!(fixes.len(), 1, "{frame}: {f}");
        let fix = &fixes[0];
        assert_eq!(
            fix["text"], "Fix: Store loss.item(): nothing reads self.losses but to print, log or count it, so numbers serve",
            "{frame}: {f}"
        );
        assert_eq!(fix["code"], 2, "{frame}: {f}");
        assert_eq!(fix["ownLine"], true, "{frame}: {f}");
    }
    // The desktop window's width is used: sections span it but for the margins.
    let desktop = facts["desktop"]["sectionWidth"].as_f64().unwrap();
    assert!(desktop >= 1300.0, "content only {desktop} px wide of 1400");
    let phone = facts["phone"]["sectionWidth"].as_f64().unwrap();
    assert!(phone >= 350.0, "content only {phone} px wide of 390");

    // Screenshots at both widths, for people (LEAKSPY_KEEP_SCREENSHOT=DIR).
    for (name, size) in [("desktop", "1400,2200"), ("phone", "390,2600")] {
        let png = dir.path().join(format!("layout-{name}.png"));
        headless(
            &browser,
            &dir.path().join(format!("profile-{name}")),
            &[
                format!("--screenshot={}", png.display()),
                format!("--window-size={size}"),
            ],
            &format!("file://{}", html.display()),
        );
        assert!(png.is_file(), "no {name} screenshot");
        if let Some(keep) = std::env::var_os("LEAKSPY_KEEP_SCREENSHOT_DIR") {
            std::fs::copy(&png, Path::new(&keep).join(format!("layout-{name}.png"))).unwrap();
        }
    }
}

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
    // A browser that hangs must not hang the test suite.
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if start.elapsed() > Duration::from_secs(180) {
            let _ = child.kill();
            panic!("chromium did not finish within 180 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn html_report_renders_in_headless_chromium() {
    let Some(browser) = chromium() else {
        if std::env::var_os("CI").is_some() {
            panic!("chromium is not installed, and CI is set: the HTML report must be checked in a browser (apt-get install -y chromium)");
        }
        eprintln!("SKIPPED html_report_renders_in_headless_chromium: no chromium on PATH (install it with `apt-get install -y chromium`, or set LEAKSPY_CHROMIUM)");
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

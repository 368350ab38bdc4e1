//! The HTML report in a real browser: a run of the documented minimal driver
//! written as JSON and HTML, the page loaded in headless Chromium (Debian's
//! package; scripts/test.sh installs it), and what the browser shows checked
//! against the JSON: every cell with its status, the seed, no console errors.

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn chromium() -> &'static str {
    let found = ["chromium", "chromium-browser"].into_iter().find(|name| {
        Command::new(name)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    found.expect("chromium is missing (apt-get install chromium; scripts/test.sh does)")
}

#[test]
fn the_html_report_shows_what_the_json_says_in_a_browser() {
    let browser = chromium();
    let dir = tempfile::tempdir().unwrap();
    let doc = std::fs::read_to_string(repo().join("docs/driver-protocol.md")).unwrap();
    let driver = doc
        .split("## A minimal driver")
        .nth(1)
        .and_then(|s| s.split("```python\n").nth(1))
        .and_then(|s| s.split("```").next())
        .unwrap();
    std::fs::write(dir.path().join("my_driver.py"), driver).unwrap();
    let (json, html) = (dir.path().join("r.json"), dir.path().join("r.html"));
    let out = Command::new(env!("CARGO_BIN_EXE_slowfs-conformance"))
        .args([
            "run",
            "--seed",
            "7",
            "--engine",
            "cmd:python3 my_driver.py",
            "--json",
        ])
        .arg(&json)
        .arg("--html")
        .arg(&html)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let cells = report["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 7);

    let dom = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
        ])
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&dom.stdout);
    let logged = String::from_utf8_lossy(&dom.stderr);
    assert!(dom.status.success(), "{logged}");
    assert!(
        !logged.lines().any(|l| l.contains("CONSOLE")),
        "console messages: {logged}"
    );
    assert!(shown.contains("seed <code>7</code>"), "{shown}");
    for cell in cells {
        let marker = format!(
            "data-engine=\"{}\" data-suite=\"{}\" data-status=\"{}\"",
            cell["engine"].as_str().unwrap(),
            cell["suite"].as_str().unwrap(),
            cell["status"].as_str().unwrap()
        );
        assert!(shown.contains(&marker), "the page lacks {marker}");
        // As the browser serializes text: only &, < and > escaped.
        let replay = cell["replay"]
            .as_str()
            .unwrap()
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        assert!(
            shown.contains(&replay),
            "the page lacks the replay {replay}"
        );
    }
    assert!(shown.contains("as expected (7 cells)"), "{shown}");

    // A screenshot, for people (docs/results/ keeps one made this way).
    let shot = dir.path().join("r.png");
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1200,900",
        ])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        std::fs::metadata(&shot).unwrap().len() > 10_000,
        "an empty screenshot"
    );
    if let Ok(keep) = std::env::var("SLOWFS_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}

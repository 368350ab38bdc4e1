//! The HTML report in a real browser: a run of the documented minimal driver
//! written as JSON and HTML, the page loaded in headless Chromium (Debian's
//! package; scripts/test.sh installs it), and what the browser shows checked
//! against the JSON: every cell with its status, the seed, no console errors.

use std::path::PathBuf;
use std::process::Command;

use slowfs::browser::Chromium;

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

#[test]
fn the_html_report_shows_what_the_json_says_in_a_browser() {
    let browser = Chromium::find().unwrap();
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

    let page = browser.render(&html, 1200).unwrap();
    let shown = &page.dom;
    assert!(
        page.console_messages().is_empty(),
        "console messages: {}",
        page.log
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
    browser.screenshot(&html, (1200, 900), &shot).unwrap();
    assert!(
        std::fs::metadata(&shot).unwrap().len() > 10_000,
        "an empty screenshot"
    );
    if let Ok(keep) = std::env::var("SLOWFS_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}

/// A report with what a page must tell apart: a new failure (unexpected), a
/// known finding (an expected failure), passes, an unsupported cell, and the
/// nine negative controls, one of which went uncaught; six engines under test.
fn mixed_report() -> slowfs_conformance::report::Report {
    let cell = |engine: &str, suite: &str, status: &str, extra: serde_json::Value| {
        let mut c = serde_json::json!({
            "engine": engine, "suite": suite, "status": status, "cases": 64,
            "seconds": 1.5, "detail": format!("{suite} on {engine}"),
            "replay": format!("slowfs-conformance run --engine {engine} --suite {suite}"),
        });
        c.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        c
    };
    let none = serde_json::json!({});
    let mut cells = vec![
        cell("rust:std", "short-io", "pass", none.clone()),
        cell("py:aiofiles", "short-io", "pass", none.clone()),
        cell("py:aiofile-thread", "short-io", "pass", none.clone()),
        cell("rust:std", "errors", "pass", none.clone()),
        cell(
            "py:aiofile-thread",
            "errors",
            "fail",
            serde_json::json!({"expected": "finding 3: the thread pool drops the errno"}),
        ),
        cell("py:aiofiles", "errors", "pass", none.clone()),
        cell("rust:std", "durability", "pass", none.clone()),
        cell(
            "py:aiofiles",
            "durability",
            "fail",
            serde_json::json!({"unexpected": "expected pass, got fail"}),
        ),
        cell(
            "py:aiofile-thread",
            "durability",
            "unsupported",
            none.clone(),
        ),
    ];
    let controls = [
        ("claims-full-writes", "short-io"),
        ("swallows-write-errors", "errors"),
        ("moves-cursor-on-read-at", "short-io"),
        ("touches-buffer-after-cancel", "cancellation"),
        ("skips-dir-fsync", "durability"),
        ("skips-fsync", "durability"),
        ("retries-fsync", "errors"),
        ("fakes-io", "short-io"),
        ("claims-full-reads", "short-io"),
    ];
    for (i, (control, suite)) in controls.iter().enumerate() {
        let (status, extra) = if i == 5 {
            (
                "fail",
                serde_json::json!({"unexpected": "the negative control went uncaught"}),
            )
        } else {
            ("caught", none.clone())
        };
        cells.push(cell(&format!("broken:{control}"), suite, status, extra));
    }
    // More engines under test, as a real run has (after the controls, so
    // that the cells above keep their numbers).
    for engine in ["rust:tokio", "rust:async-fs", "py:anyio"] {
        for suite in ["short-io", "errors", "durability"] {
            cells.push(cell(engine, suite, "pass", none.clone()));
        }
    }
    serde_json::from_value(serde_json::json!({"seed": 11, "cells": cells})).unwrap()
}

/// The page as Chromium lays it out in a window `width` px wide: its DOM,
/// with the document's scroll width written into `<body data-width>` by a
/// script the test adds to its copy (the page itself has none).
fn laid_out(page: &str, width: u32) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("page.html");
    let measured = page.replace(
        "</body>",
        "<script>document.body.dataset.width = document.documentElement.scrollWidth;</script></body>",
    );
    std::fs::write(&file, measured).unwrap();
    let page = Chromium::find().unwrap().render(&file, width).unwrap();
    page.dom
}

#[test]
fn known_findings_new_failures_and_controls_read_apart_in_a_browser() {
    let report = mixed_report();
    let page = slowfs_conformance::html::page(&report);
    let shown = laid_out(&page, 1400);
    // A screenshot, for people (docs/results/ keeps one made this way).
    if let Ok(keep) = std::env::var("SLOWFS_KEEP_FINDINGS_SCREENSHOT") {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("findings.html");
        std::fs::write(&file, &page).unwrap();
        Chromium::find()
            .unwrap()
            .screenshot(&file, (1400, 1100), std::path::Path::new(&keep))
            .unwrap();
    }
    // The known finding is marked as the terminal marks it, apart from the
    // new failure, and a legend says what each look means.
    let known = "data-engine=\"py:aiofile-thread\" data-suite=\"errors\" data-status=\"fail\" data-expected=\"true\"";
    let new = "data-engine=\"py:aiofiles\" data-suite=\"durability\" data-status=\"fail\" data-expected=\"false\"";
    assert!(shown.contains(known), "{shown}");
    assert!(shown.contains(new), "{shown}");
    let td = |marker: &str| {
        let at = shown.find(marker).unwrap();
        let start = shown[..at].rfind("<td").unwrap();
        shown[start..shown[at..].find("</td>").unwrap() + at].to_string()
    };
    assert!(
        td(known).contains("class=\"fail expected\"") && td(known).contains(">fail*<"),
        "{}",
        td(known)
    );
    assert!(
        td(new).contains("class=\"fail unexpected\"") && td(new).contains(">fail<"),
        "{}",
        td(new)
    );
    let legend = &shown[shown.find("class=\"legend\"").expect("a legend")..];
    for entry in [
        "pass",
        "fail*",
        "caught",
        "unsupported",
        "timeout",
        "a known finding",
        "a new failure",
    ] {
        assert!(legend.contains(entry), "the legend lacks {entry}");
    }
    // The nine controls are in a table of their own, not columns of the
    // matrix, and the page fits a 1400 px window.
    let matrix = &shown[shown.find("class=\"matrix\"").unwrap()..];
    let matrix = &matrix[..matrix.find("</table>").unwrap()];
    assert!(
        !matrix.contains("broken:"),
        "controls in the matrix: {matrix}"
    );
    let controls = &shown[shown.find("class=\"controls\"").expect("a controls table")..];
    let controls = &controls[..controls.find("</table>").unwrap()];
    assert_eq!(
        controls.matches("data-engine=\"broken:").count(),
        9,
        "{controls}"
    );
    let width: u32 = shown
        .split("data-width=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .and_then(|w| w.parse().ok())
        .expect("the measured width");
    assert!(width <= 1400, "the page is {width} px wide");
    // Unexpected cells first in the details, then the known finding, then
    // the rest; and in the matrix, the suite with the new failure first.
    let at = |id: usize| shown.find(&format!("<section id=\"cell-{id}\"")).unwrap();
    let (new_failure, uncaught, finding, a_pass) = (at(7), at(14), at(4), at(0));
    assert!(new_failure < finding && uncaught < finding && finding < a_pass);
    let first_row = matrix[matrix.find("<tbody>").unwrap() + "<tbody>".len()..].trim_start();
    assert!(
        first_row.starts_with("<tr><th>durability</th>"),
        "{first_row}"
    );
    // The uncaught control leads its table.
    assert!(
        controls.find("skips-fsync").unwrap() < controls.find("claims-full-writes").unwrap(),
        "{controls}"
    );

    // The control: the same cells with the controls as engines under test
    // (the old layout: nine more matrix columns) are measured wider than the
    // window, so the width check measures.
    let mut as_columns = serde_json::to_value(&report).unwrap();
    for cell in as_columns["cells"].as_array_mut().unwrap() {
        let engine = cell["engine"]
            .as_str()
            .unwrap()
            .replace("broken:", "control-");
        cell["engine"] = engine.into();
    }
    let as_columns: slowfs_conformance::report::Report =
        serde_json::from_value(as_columns).unwrap();
    let wide = laid_out(&slowfs_conformance::html::page(&as_columns), 1400);
    let width: u32 = wide
        .split("data-width=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .and_then(|w| w.parse().ok())
        .unwrap();
    assert!(width > 1400, "{width}");
}

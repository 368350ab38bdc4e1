//! `slowfs explore --html` in a real browser: the quickstart's export (write a
//! temporary file and rename it over the document, after a `sync` of the first
//! version) explored with --json and --html; the page loaded in headless
//! Chromium (Debian's package; scripts/test.sh installs it) must show what the
//! JSON says: every group with its models and replay command, the crash points
//! that failed marked on the timeline, the sync visible, no console messages.

use std::process::Command;

use slowfs::browser::Chromium;

#[test]
fn the_explore_html_report_shows_what_the_json_says_in_a_browser() {
    let browser = Chromium::find().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("saved");
    std::fs::create_dir(&backing).unwrap();
    std::fs::write(backing.join("doc"), "version 1\n").unwrap();
    let (json, html) = (dir.path().join("r.json"), dir.path().join("r.html"));
    let out = Command::new(env!("CARGO_BIN_EXE_slowfs"))
        .args(["explore", "--backing"])
        .arg(&backing)
        .args([
            "--check",
            "grep -qx 'version [12]' doc || { echo \"doc is '$(cat doc)'\"; exit 1; }",
            "--json",
        ])
        .arg(&json)
        .arg("--html")
        .arg(&html)
        .args([
            "--",
            "sh",
            "-c",
            "cd \"$SLOWFS_MOUNT\" && sync && printf 'version 2\\n' > doc.tmp && mv doc.tmp doc",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "a violation is the expected verdict: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let groups = report["groups"].as_array().unwrap();
    assert!(!groups.is_empty());

    let page = browser.render(&html, 1200).unwrap();
    let shown = &page.dom;
    assert!(
        page.console_messages().is_empty(),
        "console messages: {}",
        page.log
    );
    assert!(
        shown.contains(report["verdict"].as_str().unwrap()),
        "the verdict: {shown}"
    );
    assert!(
        shown.contains("<li class=\"op sync\""),
        "the sync is shown: {shown}"
    );
    // Files by the names the text and JSON use, never by inode number.
    assert!(
        shown.contains(">write doc.tmp [0..10)</li>"),
        "the timeline names doc.tmp: {shown}"
    );
    assert!(
        !shown.contains("(#") && !shown.contains(" #4"),
        "an inode number in the page: {shown}"
    );
    assert!(shown.contains("Legend"), "a legend for the colours");
    assert!(
        shown.contains(&format!("data-exit-code=\"{}\"", report["exit_code"])),
        "the exit code the JSON says"
    );
    assert!(
        shown.contains("Likely fix: fsync doc.tmp before the rename"),
        "the fix the violation suggests: {shown}"
    );
    assert!(
        shown.contains("keep it as a CI artifact"),
        "where the saved run is"
    );
    // Every example the JSON has.
    let examples: usize = groups
        .iter()
        .map(|g| g["examples"].as_array().unwrap().len())
        .sum();
    assert_eq!(
        shown.matches("example: crash after").count(),
        examples,
        "every example: {shown}"
    );
    for (i, group) in groups.iter().enumerate() {
        let models: Vec<&str> = group["models"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.as_str().unwrap())
            .collect();
        let unknown: Vec<&str> = group["unknown"]
            .as_array()
            .map(|u| u.iter().map(|m| m.as_str().unwrap()).collect())
            .unwrap_or_default();
        let marker = format!(
            "data-group=\"{}\" data-models=\"{}\" data-unknown=\"{}\"",
            i + 1,
            models.join(", "),
            unknown.join(", ")
        );
        assert!(shown.contains(&marker), "the page lacks {marker}");
        let example = &group["examples"][0];
        let point = example["point"].as_u64().unwrap();
        assert!(
            shown.contains(&format!("<li class=\"crash\" data-point=\"{point}\"")),
            "crash point {point} is marked"
        );
        let replay = example["replay"]
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

//! Docs that cannot drift: every ```sh block in README.md, docs/,
//! python/README.md and the drivers' READMEs (drivers/go, drivers/jvm) runs
//! here exactly as written, each in a fresh directory with the built `slowfs`
//! and `slowfs-conformance` first on PATH, and must exit 0. A block that is not meant to be pasted as it stands says so in its
//! info string (```sh no-run: why); one that needs a file the doc tells the
//! reader to make or copy names it (```sh needs=my_driver.py), and the file
//! is made here from the doc that holds it, or copied from this repository
//! to the same path (```sh needs=drivers/jvm/SlowfsDriver.java).
//!
//! What a doc says a block prints is checked too: a fenced block with the
//! info string `output` after a ```sh block (prose may stand between them,
//! no other fenced block) holds lines the block must print, each (trimmed)
//! a substring of what the block wrote to stdout or stderr. Show only the
//! parts that do not change from run to run (no seeds, times or paths);
//! output a reader should not expect verbatim goes in a ```text block.
//!
//! `SLOWFS_DOCS=quickstart cargo test --test docs` runs the docs whose path
//! contains `quickstart` only.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// One fenced shell block.
struct Block {
    file: String,
    line: usize,
    info: String,
    text: String,
    /// The lines of the ```output blocks that follow it (with their line).
    expect: Vec<(usize, String)>,
}

fn blocks(file: &Path) -> Vec<Block> {
    let doc = std::fs::read_to_string(file).unwrap();
    let shown = file
        .strip_prefix(repo())
        .unwrap_or(file)
        .display()
        .to_string();
    let mut found: Vec<Block> = Vec::new();
    // The fenced block being read: its first line, info string and text.
    let mut open: Option<(usize, String, String)> = None;
    // Whether the last fenced block closed was a ```sh block (or its output).
    let mut after_sh = false;
    for (i, line) in doc.lines().enumerate() {
        match &mut open {
            None => {
                if let Some(info) = line.strip_prefix("```") {
                    open = Some((i + 1, info.trim().to_string(), String::new()));
                }
            }
            Some((_, _, text)) if line != "```" => {
                text.push_str(line);
                text.push('\n');
            }
            Some(_) => {
                let (line, info, text) = open.take().unwrap();
                let at = format!("{shown}:{line}");
                if info == "output" {
                    let owner = found.last_mut().filter(|_| after_sh).unwrap_or_else(|| {
                        panic!("{at}: an ```output block follows the ```sh block whose output it shows")
                    });
                    assert!(
                        !owner.info.starts_with("no-run"),
                        "{at}: the ```sh block before this ```output block is no-run, so nothing checks it: show it as ```text"
                    );
                    for (k, expected) in text.lines().enumerate() {
                        if !expected.trim().is_empty() {
                            owner
                                .expect
                                .push((line + 1 + k, expected.trim().to_string()));
                        }
                    }
                    continue;
                }
                after_sh = info == "sh" || info.starts_with("sh ");
                if after_sh {
                    found.push(Block {
                        file: shown.clone(),
                        line,
                        info: info["sh".len()..].trim().to_string(),
                        text,
                        expect: Vec::new(),
                    });
                }
            }
        }
    }
    assert!(open.is_none(), "{shown}: a fenced block is never closed");
    found
}

/// The lines of `expect` that `said` does not contain, as a message.
fn missing_output(file: &str, expect: &[(usize, String)], said: &str) -> Option<String> {
    let missing: Vec<String> = expect
        .iter()
        .filter(|(_, line)| !said.contains(line.as_str()))
        .map(|(at, line)| format!("  {file}:{at}: {line}"))
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "the doc says it prints these lines, and it did not:\n{}",
            missing.join("\n")
        )
    })
}

/// The minimal driver of docs/driver-protocol.md, for blocks that need `my_driver.py`.
fn minimal_driver() -> String {
    let doc = std::fs::read_to_string(repo().join("docs/driver-protocol.md")).unwrap();
    doc.split("## A minimal driver")
        .nth(1)
        .and_then(|s| s.split("```python\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("docs/driver-protocol.md has its minimal driver")
        .to_string()
}

#[test]
fn every_shell_block_in_the_docs_runs_as_written() {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_slowfs-conformance"))
        .parent()
        .unwrap()
        .to_path_buf();
    assert!(
        bin.join("slowfs").is_file(),
        "{} is missing: build it first (cargo build --release -p slowfs)",
        bin.join("slowfs").display()
    );
    let mut files = vec![
        repo().join("README.md"),
        repo().join("python/README.md"),
        repo().join("drivers/go/README.md"),
        repo().join("drivers/jvm/README.md"),
    ];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    // SLOWFS_DOCS=quickstart runs only the docs whose path contains it.
    let only = std::env::var("SLOWFS_DOCS").ok();
    if let Some(only) = &only {
        files.retain(|f| f.display().to_string().contains(only.as_str()));
        assert!(!files.is_empty(), "SLOWFS_DOCS={only} names no doc");
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let (mut ran, mut skipped, mut checked, mut failures) = (0, 0, 0, Vec::new());
    for block in files.iter().flat_map(|f| blocks(f)) {
        let at = format!("{}:{}", block.file, block.line);
        if block.info.starts_with("no-run") {
            assert!(
                block.info.len() > "no-run: ".len(),
                "{at}: a no-run block says why (```sh no-run: REASON)"
            );
            skipped += 1;
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        for need in block.info.split_whitespace() {
            match need.strip_prefix("needs=") {
                Some("my_driver.py") => {
                    std::fs::write(dir.path().join("my_driver.py"), minimal_driver()).unwrap()
                }
                // A file of this repository the doc tells the reader to copy,
                // or runs from a checkout.
                Some(file) if repo().join(file).is_file() => {
                    let to = dir.path().join(file);
                    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                    std::fs::copy(repo().join(file), to).unwrap();
                }
                Some(other) => panic!("{at}: no recipe for needs={other}"),
                None => panic!("{at}: unknown word in the info string: {need}"),
            }
        }
        let started = Instant::now();
        let out = Command::new("timeout")
            .args(["300", "bash", "-e", "-o", "pipefail", "-c"])
            .arg(&block.text)
            .current_dir(dir.path())
            .env("PATH", &path)
            .output()
            .unwrap();
        let took = started.elapsed();
        println!("{at}: exit {:?} in {took:.1?}", out.status.code());
        ran += 1;
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let wrong = if out.status.success() {
            missing_output(&block.file, &block.expect, &said)
        } else {
            Some(format!("exit {:?}", out.status.code()))
        };
        checked += block.expect.len();
        if let Some(wrong) = wrong {
            failures.push(format!(
                "{at} ({wrong}):\n{}\n--- said:\n{said}",
                block.text
            ));
        }
        assert!(took < Duration::from_secs(300), "{at} took {took:?}");
    }
    println!("{ran} blocks ran, {skipped} marked no-run; {checked} output lines checked");
    assert!(
        only.is_some() || ran >= 4,
        "only {ran} blocks ran: the quickstart's own must be among them"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

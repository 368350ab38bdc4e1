//! `run --shard K/N` + `merge`: the shards of a run, merged, give the
//! unsharded run's report (same cells, statuses and exit status), and merge
//! refuses what is not every shard of one run.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_slowfs-conformance");

/// A run with a failing cell (a negative control as an engine of its own), so
/// the exit status is not the trivial one.
const RUN: &[&str] = &[
    "run",
    "--engine",
    "threadpool",
    "--engine",
    "broken:claims-full-writes",
    "--suite",
    "positioned",
    "--suite",
    "short-io",
    "--suite",
    "errors",
    "--cases",
    "4",
    "--seed",
    "2026",
];

/// The runner in a scratch directory (where failed cells' fault traces are kept).
fn run(args: &[&str], extra: &[&str]) -> Output {
    let scratch = tempfile::tempdir().unwrap();
    Command::new(BIN)
        .args(args)
        .args(extra)
        .current_dir(scratch.path())
        .output()
        .unwrap()
}

fn cells(path: &Path) -> Vec<(String, String, String, u64)> {
    let report: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["engine"].as_str().unwrap().to_string(),
                c["suite"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
                c["cases"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn merged_shards_equal_the_unsharded_run() {
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole.json");
    let out = run(RUN, &["--json", whole.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "the broken engine fails a cell");
    let mut shard_files = Vec::new();
    for k in [3, 1, 2] {
        let file = dir.path().join(format!("shard{k}.json"));
        let shard = format!("{k}/3");
        let out = run(RUN, &["--shard", &shard, "--json", file.to_str().unwrap()]);
        assert!(out.status.code().is_some(), "{out:?}");
        assert_eq!(cells(&file).len(), 2, "6 cells over 3 shards");
        shard_files.push(file);
    }
    let merged = dir.path().join("merged.json");
    let out = Command::new(BIN)
        .arg("merge")
        .args(&shard_files)
        .arg("--json")
        .arg(&merged)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let whole_cells = cells(&whole);
    assert_eq!(whole_cells.len(), 6);
    assert!(whole_cells.iter().any(|c| c.2 == "fail"), "{whole_cells:?}");
    assert_eq!(cells(&merged), whole_cells);

    // Not every shard: refused, exit 2, saying which is missing.
    let out = Command::new(BIN)
        .arg("merge")
        .args(&shard_files[..2])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("missing shard(s): 2/3"),
        "{out:?}"
    );
}

#[test]
fn a_shard_needs_a_seed_and_a_report() {
    let out = run(&["run", "--engine", "threadpool", "--shard", "1/2"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("--seed") && said.contains("--json"), "{said}");
    let out = run(
        &[
            "run",
            "--shard",
            "3/2",
            "--seed",
            "1",
            "--json",
            "/dev/null",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("K/N"),
        "{out:?}"
    );
}

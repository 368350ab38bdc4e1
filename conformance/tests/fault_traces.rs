//! A cell that fails the run keeps the faults its slowfs mounts fired, says
//! where beside the seed, and its replay command (`--replay-faults DIR`)
//! fails the same way; a cell that passes, or fails as expected, keeps
//! nothing.

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_slowfs-conformance");

fn run_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// The line after the cell's FAIL heading: why it failed.
fn reason(stdout: &str) -> String {
    let mut lines = stdout.lines();
    lines
        .find(|l| l.ends_with(": FAIL"))
        .expect("a failed cell");
    lines.next().unwrap().trim().to_string()
}

#[test]
fn a_failed_cell_keeps_its_fault_traces_and_replays_with_them() {
    let scratch = tempfile::tempdir().unwrap();
    // async-fs fails short-io (a known finding, kept nothing: see below); an
    // expectations file that wants it to pass makes the failure the run's.
    let wants_pass = scratch.path().join("wants-pass.toml");
    std::fs::write(
        &wants_pass,
        "[[expect]]\nengine = \"async-fs\"\nsuite = \"short-io\"\nstatus = \"pass\"\nwhy = \"a test\"\n",
    )
    .unwrap();
    let args = [
        "run",
        "--engine",
        "async-fs",
        "--suite",
        "short-io",
        "--seed",
        "5",
        "--cases",
        "8",
        "--expectations",
        wants_pass.to_str().unwrap(),
    ];
    let out = run_in(scratch.path(), &args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "an unexpected failure: {stdout}"
    );
    let kept = scratch
        .path()
        .join("slowfs-conformance-faults/async-fs--short-io");
    assert!(
        stdout.contains(&format!("fault traces: {}", kept.display())),
        "{stdout}"
    );
    let traces: Vec<_> = std::fs::read_dir(&kept).unwrap().flatten().collect();
    assert!(!traces.is_empty());
    let faults: usize = traces
        .iter()
        .map(|t| std::fs::read_to_string(t.path()).unwrap().lines().count())
        .sum();
    assert!(faults > 0, "the traces hold the short writes that fired");
    let replay = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay: slowfs-conformance "))
        .expect("a replay command");
    assert!(replay.ends_with(&format!("--replay-faults {}", kept.display())));

    let again = run_in(
        scratch.path(),
        &replay.split_whitespace().collect::<Vec<_>>(),
    );
    let again_out = String::from_utf8_lossy(&again.stdout).into_owned();
    assert_eq!(reason(&again_out), reason(&stdout), "{again_out}");

    // A replay needs one cell: refused, with the fix.
    let many = run_in(
        scratch.path(),
        &[
            "run",
            "--engine",
            "async-fs",
            "--suite",
            "short-io",
            "--suite",
            "errors",
            "--seed",
            "5",
            "--replay-faults",
            kept.to_str().unwrap(),
        ],
    );
    assert_eq!(many.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&many.stderr).contains("replays one cell"));
}

#[test]
fn passing_cells_and_known_findings_keep_no_traces() {
    let scratch = tempfile::tempdir().unwrap();
    let out = run_in(
        scratch.path(),
        &[
            "run",
            "--engine",
            "threadpool",
            "--suite",
            "short-io",
            "--cases",
            "4",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = run_in(
        scratch.path(),
        &[
            "run", "--engine", "async-fs", "--suite", "short-io", "--cases", "4",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("FAIL"), "the known finding: {stdout}");
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(!scratch.path().join("slowfs-conformance-faults").exists());
}

/// scripts/ci/conformance.sh (docs/ci.md's workflow) keeps a failed cell's
/// fault traces under $SLOWFS_OUT, which CI uploads, not in the current
/// directory, and the cell's replay command names them there.
#[test]
fn the_ci_script_keeps_fault_traces_under_slowfs_out() {
    let scratch = tempfile::tempdir().unwrap();
    let wants_pass = scratch.path().join("wants-pass.toml");
    std::fs::write(
        &wants_pass,
        "[[expect]]\nengine = \"async-fs\"\nsuite = \"short-io\"\nstatus = \"pass\"\nwhy = \"a test\"\n",
    )
    .unwrap();
    let bin = Path::new(BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/ci/conformance.sh");
    let out = Command::new("bash")
        .arg(&script)
        .args(["shard", "1", "1", "async-fs"])
        .current_dir(scratch.path())
        .env("PATH", path)
        .env("SLOWFS_OUT", "ci-out")
        .env("SLOWFS_EXPECTATIONS", &wants_pass)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "the unexpected failure: {stdout}"
    );
    let kept = scratch
        .path()
        .join("ci-out/fault-traces/async-fs--short-io");
    assert!(
        std::fs::read_dir(&kept).is_ok_and(|d| d.count() > 0),
        "no traces in {}: {stdout}",
        kept.display()
    );
    assert!(
        stdout.contains(&format!("--replay-faults {}", kept.display())),
        "{stdout}"
    );
    let mut left: Vec<_> = std::fs::read_dir(scratch.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["ci-out", "wants-pass.toml"],
        "only $SLOWFS_OUT is written"
    );
}

//! `slowfs explore` on the shipped export examples: it must tell the broken
//! exports from the correct one, in shell and in Python.

use std::path::Path;
use std::process::Command;

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/export");

/// Runs explore on a fresh backing dir holding the old export; returns (exit code, stdout).
fn explore(check: &str, workload: &[&str], torn: bool, logs: &Path) -> (i32, String) {
    let backing = tempfile::tempdir().unwrap();
    std::fs::write(backing.path().join("config.json"), vec![b'o'; 6000]).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_slowfs"));
    cmd.arg("explore")
        .arg("--backing")
        .arg(backing.path())
        .arg("--check")
        .arg(check)
        .arg("--log-dir")
        .arg(logs);
    if torn {
        cmd.arg("--torn");
    }
    let out = cmd.arg("--").args(workload).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    println!(
        "{check} / {workload:?}:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), stdout)
}

fn violations(stdout: &str) -> usize {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("violations: "))
        .and_then(|n| n.trim().parse().ok())
        .expect("a summary line")
}

fn sh(name: &str) -> String {
    Path::new(EXAMPLES).join(name).display().to_string()
}

#[test]
fn shell_exports_are_told_apart() {
    let logs = tempfile::tempdir().unwrap();
    let check = sh("check.sh");
    let check_new = sh("check-new.sh");
    for (workload, check, expect_violations) in [
        ("in-place.sh", &check, true),
        ("tmp-rename.sh", &check, true),
        ("tmp-fsync-rename.sh", &check, false),
        ("tmp-fsync-rename.sh", &check_new, true),
        ("tmp-fsync-rename-dirsync.sh", &check_new, false),
    ] {
        let (code, out) = explore(check, &[&sh(workload)], true, logs.path());
        let found = violations(&out);
        if expect_violations {
            assert!(
                code == 1 && found > 0,
                "{workload} with {check}: expected violations, got {found} (exit {code})"
            );
        } else {
            assert!(
                code == 0 && found == 0,
                "{workload} with {check}: expected none, got {found} (exit {code})"
            );
        }
    }
}

#[test]
fn python_exports_are_told_apart() {
    let logs = tempfile::tempdir().unwrap();
    let export = sh("export.py");
    let check = format!("python3 {} --new-after-success", sh("check.py"));
    for (mode, expect_violations) in [
        ("in-place", true),
        ("tmp-rename", true),
        ("tmp-fsync-rename", true),
        ("tmp-fsync-rename-dirsync", false),
    ] {
        let (code, out) = explore(&check, &["python3", &export, mode], false, logs.path());
        assert_eq!(violations(&out) > 0, expect_violations, "{mode}: {out}");
        assert_eq!(code, if expect_violations { 1 } else { 0 }, "{mode}");
    }
}

#[test]
fn a_violation_replays_exactly() {
    let logs = tempfile::tempdir().unwrap();
    let (code, out) = explore(&sh("check.sh"), &[&sh("tmp-rename.sh")], false, logs.path());
    assert_eq!(code, 1);
    let replay = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay: slowfs "))
        .expect("a replay line");
    let args: Vec<&str> = replay.split_whitespace().collect();
    let status = Command::new(env!("CARGO_BIN_EXE_slowfs"))
        .args(&args)
        .status()
        .unwrap();
    assert_eq!(
        status.code(),
        Some(1),
        "the replayed state must be rejected again"
    );
}

#[test]
fn a_failing_workload_is_not_a_violation() {
    let logs = tempfile::tempdir().unwrap();
    let (code, out) = explore("true", &["sh", "-c", "exit 3"], false, logs.path());
    assert_eq!(code, 2);
    assert!(!out.contains("violations"));
    let (code, _) = explore(
        "/nonexistent/checker",
        &[&sh("in-place.sh")],
        false,
        logs.path(),
    );
    assert_eq!(
        code, 2,
        "a checker that cannot start is an error, not a violation"
    );
}

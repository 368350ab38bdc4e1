//! `slowfs explore` on real applications' save paths (the examples in
//! `examples/apps`), each with its expected verdict: SQLite at every
//! `synchronous` level in both journal modes, git commits, LevelDB.

use std::path::Path;
use std::process::Command;

const APPS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/apps");
const VENV_PYTHON: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv/bin/python3");

fn app(name: &str) -> String {
    Path::new(APPS).join(name).display().to_string()
}

/// Runs explore; returns (exit code, number of violations, stdout).
fn explore(
    backing: Option<&Path>,
    args: &[&str],
    check: &str,
    workload: &[&str],
) -> (i32, usize, String) {
    let logs = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_slowfs"));
    cmd.arg("explore").arg("--log-dir").arg(logs.path());
    if let Some(backing) = backing {
        cmd.arg("--backing").arg(backing);
    }
    let out = cmd
        .args(args)
        .args(["--check", check, "--"])
        .args(workload)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    println!(
        "{workload:?}:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let violations = stdout
        .lines()
        .find_map(|l| l.strip_prefix("violations: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no summary: {stdout}"));
    (out.status.code().unwrap_or(-1), violations, stdout)
}

#[test]
fn sqlite_is_crash_safe_where_its_documentation_says() {
    let save = app("sqlite_save.py");
    let prefix = format!("python3 {} --persistent", app("sqlite_check.py"));
    let complete = format!(
        "python3 {} --persistent --complete 3",
        app("sqlite_check.py")
    );
    let base = ["--persistent", "--ignore", "*-shm", "--max-states", "3000"];
    // (journal, synchronous, checker, per-point, violations expected)
    for (journal, sync, check, per_point, expected) in [
        // Every crash state holds whole transactions 1..m.
        ("rollback", "FULL", &prefix, false, false),
        ("wal", "FULL", &prefix, false, false),
        // synchronous=OFF never fsyncs: torn and malformed databases.
        ("rollback", "OFF", &prefix, false, true),
        // Once the save returned, all 3 transactions: in rollback mode at FULL
        // the last one may roll back (the journal's unlink is not made durable
        // until the next transaction; EXTRA fsyncs the directory for it).
        ("rollback", "FULL", &complete, true, true),
        ("rollback", "EXTRA", &complete, true, false),
        ("wal", "FULL", &complete, true, false),
    ] {
        let mut args = base.to_vec();
        if per_point {
            args.push("--per-point");
        }
        let (code, found, out) = explore(
            None,
            &args,
            check,
            &["python3", &save, journal, sync, "3", "50"],
        );
        assert_eq!(found > 0, expected, "{journal} {sync} {check}: {out}");
        assert_eq!(code, if expected { 1 } else { 0 }, "{journal} {sync}");
        assert!(out.contains("crash points: 0..="), "{out}");
    }
}

#[test]
fn git_commits_lose_objects_under_the_strict_model() {
    for fsync in ["", "fsync"] {
        let backing = tempfile::tempdir().unwrap();
        let status = Command::new("sh")
            .arg(app("git_setup.sh"))
            .arg(backing.path())
            .arg(fsync)
            .status()
            .unwrap();
        assert!(status.success());
        let (code, found, out) = explore(
            Some(backing.path()),
            &["--max-states", "600"],
            &format!("sh {}", app("git_check.sh")),
            &["sh", &app("git_commits.sh")],
        );
        // Without core.fsync nothing is synced; with core.fsync=all git fsyncs
        // files but never a directory, so a new objects/xx/ directory is lost.
        assert_eq!(code, 1, "git {fsync}: {out}");
        assert!(found > 0);
        assert!(out.contains("git fsck"), "{out}");
    }
}

#[test]
fn leveldb_loses_its_manifest() {
    assert!(
        Path::new(VENV_PYTHON).exists(),
        "{VENV_PYTHON} is missing: scripts/test.sh makes .venv with plyvel"
    );
    let (code, found, out) = explore(
        None,
        &["--max-states", "2000"],
        &format!("{VENV_PYTHON} {}", app("leveldb_check.py")),
        &[VENV_PYTHON, &app("leveldb_save.py")],
    );
    assert_eq!(code, 1, "{out}");
    assert!(found > 0);
    assert!(out.contains("MANIFEST"), "{out}");
}

/// LMDB (py-lmdb 1.6.2) creating a new environment writes its meta pages
/// without an fsync; a crash before the first commit is durable can leave a
/// data file with pages but no meta pages, which LMDB refuses to open
/// (MDB_INVALID) though no committed data existed. With writes whole
/// (`--whole-writes`) on every model but btrfs, whose file size covers
/// written data only (pages past the lost meta pages cannot persist); with
/// the default block tears btrfs too (the 8 KiB meta-page write persisting
/// as its first 4 KiB page, the size over it). With MDB_WRITEMAP the file
/// is grown by ftruncate first, so even ext4's journal (the truncate
/// persists, the delayed meta-page write not) leaves it: every model.
#[test]
fn lmdb_creation_can_leave_an_environment_it_cannot_open() {
    assert!(
        Path::new(VENV_PYTHON).exists(),
        "{VENV_PYTHON} is missing: scripts/test.sh makes .venv with lmdb"
    );
    let every = "can happen on: strict, xfs, ext4-ordered, btrfs (every model)";
    for (mode, extra, models) in [
        (
            "--plain",
            "--whole-writes",
            "can happen on: strict, xfs, ext4-ordered; never on: btrfs",
        ),
        ("--plain", "--seed=1", every),
        ("--writemap", "--seed=1", every),
    ] {
        let (code, found, out) = explore(
            None,
            &["--max-states", "2000", extra],
            &format!("{VENV_PYTHON} {}", app("lmdb_check.py")),
            &[VENV_PYTHON, &app("lmdb_save.py"), mode],
        );
        assert_eq!(code, 1, "{mode}: {out}");
        assert!(found > 0);
        assert!(out.contains("MDB_INVALID"), "{mode}: {out}");
        assert!(out.contains(models), "{mode}: {out}");
        // Only around the first commit's sync: every later state opens.
        let last_point: usize = out
            .lines()
            .find_map(|l| {
                l.split_once("violation(s) at crash points ")
                    .map(|(_, p)| p)
            })
            .and_then(|p| p.rsplit("..").next())
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("no crash points: {out}"));
        assert!(last_point <= 7, "{mode}: {out}");
    }
}

/// `--fsync-fails`: an export that retries a failed fsync (the retry succeeds,
/// the data is gone) is caught; one that treats the failure as fatal and keeps
/// the old file passes.
#[test]
fn fsync_fails_catches_an_export_that_retries_fsync() {
    let check = format!("python3 {}", app("export_check.py"));
    let save = app("export_save.py");
    let run = |mode: &str, extra: &[&str]| {
        let logs = tempfile::tempdir().unwrap();
        let json = logs.path().join("violations.json");
        let out = Command::new(env!("CARGO_BIN_EXE_slowfs"))
            .args(["explore", "--fsync-fails"])
            .args(extra)
            .arg("--log-dir")
            .arg(logs.path())
            .arg("--json")
            .arg(&json)
            .args([
                "--check",
                &check,
                "--",
                "python3",
                &save,
                "--on-fsync-error",
                mode,
            ])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        println!("{mode}:\n{stdout}{}", String::from_utf8_lossy(&out.stderr));
        let failing_runs = stdout.matches("== fsync #").count();
        let violations: usize = stdout
            .lines()
            .find_map(|l| l.strip_prefix("fsync-fails violations: "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no --fsync-fails summary: {stdout}"));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let in_json: usize = report["fsync_fails"]
            .as_array()
            .expect("--json holds the --fsync-fails runs")
            .iter()
            .map(|run| run["report"]["violations"].as_u64().unwrap() as usize)
            .sum();
        assert_eq!(in_json, violations, "--json and the summary agree");
        // One verdict: the JSON's outcome, its exit code, the printed line
        // and the process's exit code (the JSON once said "clean" here
        // while the run exited 1).
        let verdict = report["verdict"].as_str().unwrap();
        assert!(stdout.contains(verdict), "the printed verdict: {stdout}");
        assert_eq!(
            report["exit_code"].as_i64().map(|c| c as i32),
            out.status.code(),
            "JSON exit code: {verdict}"
        );
        assert_eq!(
            report["outcome"]["kind"] == "violations",
            violations + report["violations"].as_u64().unwrap() as usize > 0,
            "JSON outcome: {}",
            report["outcome"]
        );
        (out.status.code(), failing_runs, violations, stdout)
    };
    let (code, runs, violations, stdout) = run("retry", &[]);
    assert!(
        stdout.contains("kept in the cache as clean pages"),
        "{stdout}"
    );
    assert_eq!(runs, 2, "one run per fsync of the export");
    assert!(violations > 0, "the retrying export must be caught");
    assert!(
        stdout.contains("report.json is not a whole export"),
        "{stdout}"
    );
    assert_eq!(code, Some(1));
    let (code, runs, violations, _) = run("fatal", &[]);
    assert_eq!((runs, violations, code), (2, 0, Some(0)));
    // On btrfs the failed fsync also evicts the pages; the retry loses the
    // export all the same.
    let (code, _, violations, stdout) = run("retry", &["--fs-model", "btrfs"]);
    assert!(
        stdout.contains("evicted from the cache as btrfs does"),
        "{stdout}"
    );
    assert!(violations > 0 && code == Some(1), "{stdout}");
}

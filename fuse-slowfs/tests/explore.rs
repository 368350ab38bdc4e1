//! `slowfs explore` on the shipped export examples: it must tell the broken
//! exports from the correct one, in shell and in Python.

mod common;

use std::path::Path;
use std::process::Command;

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/export");

/// Runs explore on a fresh backing dir holding the old export; returns (exit code, stdout).
fn explore(check: &str, workload: &[&str], torn: bool, logs: &Path) -> (i32, String) {
    explore_with(check, workload, torn, logs, &[])
}

/// As [`explore`], with extra `slowfs explore` arguments.
fn explore_with(
    check: &str,
    workload: &[&str],
    torn: bool,
    logs: &Path,
    extra: &[&str],
) -> (i32, String) {
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
    cmd.args(extra);
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
        // check-new.sh reads SLOWFS_CRASH_POINT: it needs --per-point.
        let per_point: &[&str] = if check == &check_new {
            &["--per-point"]
        } else {
            &[]
        };
        let (code, out) = explore_with(check, &[&sh(workload)], true, logs.path(), per_point);
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
        let (code, out) = explore_with(
            &check,
            &["python3", &export, mode],
            false,
            logs.path(),
            &["--per-point"],
        );
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

/// The checker of the sync tests: once the workload has finished, `a` holds hello.
const DONE_MEANS_HELLO: &str =
    r#"[ "$SLOWFS_CRASH_POINT" != "$SLOWFS_OPS" ] || grep -q hello "$SLOWFS_STATE/a""#;

#[test]
fn sync_makes_everything_durable() {
    let logs = tempfile::tempdir().unwrap();
    for (workload, expect) in [
        ("echo hello > \"$SLOWFS_MOUNT/a\"; sync", 0),
        (
            "echo hello > \"$SLOWFS_MOUNT/a\"; python3 -c 'import os; os.sync()'",
            0,
        ),
        ("echo hello > \"$SLOWFS_MOUNT/a\"", 1),
    ] {
        let (code, out) = explore_with(
            DONE_MEANS_HELLO,
            &["sh", "-c", workload],
            false,
            logs.path(),
            &["--per-point"],
        );
        assert_eq!(code, expect, "{workload}: {out}");
    }
}

#[test]
fn the_budget_reaches_every_crash_point_and_says_what_it_covered() {
    let logs = tempfile::tempdir().unwrap();
    // 60 unsynced files: 120 operations, 121 crash points.
    let workload = "for i in $(seq 60); do echo $i > \"$SLOWFS_MOUNT/f$i\"; done";
    let (code, out) = explore_with(
        "true",
        &["sh", "-c", workload],
        false,
        logs.path(),
        &["--max-states", "400"],
    );
    // Clean so far is not clean: exit 3, with what was not covered and the fix.
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("crash points: 0..=120"), "{out}");
    assert!(
        out.contains("stopped early: --max-states was reached"),
        "{out}"
    );
    assert!(out.contains("skipped as already checked"), "{out}");
    assert!(out.contains("CLEAN SO FAR, NOT CLEAN"), "{out}");
    assert!(
        out.contains("To finish: run again with --max-states"),
        "{out}"
    );
    let (code, _) = explore_with(
        "true",
        &["sh", "-c", workload],
        false,
        logs.path(),
        &["--max-states", "400", "--partial-ok"],
    );
    assert_eq!(code, 0, "--partial-ok accepts a partial run");
    // Without a cut, the high-yield states of every point are checked first: a
    // checker that fails only at the last crash point is reached.
    let last = r#"[ "$SLOWFS_CRASH_POINT" != 120 ]"#;
    let (code, out) = explore_with(
        last,
        &["sh", "-c", workload],
        false,
        logs.path(),
        &["--max-states", "400", "--per-point"],
    );
    assert_eq!(code, 1, "the last crash point is reached: {out}");
    let (code, out) = explore_with(
        last,
        &["sh", "-c", workload],
        false,
        logs.path(),
        &["--crash-points", "0..10", "--per-point"],
    );
    assert_eq!(code, 0, "--crash-points 0..10 stays there: {out}");
    assert!(out.contains("crash points: 0..=10"), "{out}");
}

#[test]
fn replay_refuses_impossible_states_with_a_reason() {
    let logs = tempfile::tempdir().unwrap();
    let (_, out) = explore(&sh("check.sh"), &[&sh("tmp-rename.sh")], false, logs.path());
    let log = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay: slowfs explore --replay "))
        .and_then(|l| l.split_whitespace().next())
        .expect("a replay line")
        .to_string();
    for (state, says) in [
        ("999", "past the log"),
        ("3/999", "not pending"),
        ("x/1", "bad state"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_slowfs"))
            .args([
                "explore", "--replay", &log, "--state", state, "--check", "true",
            ])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{state}: {said}");
        assert!(said.contains(says), "{state}: {said}");
    }
    let keep = tempfile::tempdir().unwrap();
    let kept = keep.path().join("state");
    let out = Command::new(env!("CARGO_BIN_EXE_slowfs"))
        .args([
            "explore",
            "--replay",
            &log,
            "--state",
            "0",
            "--check",
            "true",
            "--keep-state",
        ])
        .arg(&kept)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(kept.join("config.json").exists(), "the state is kept");
}

#[test]
fn parallel_persistent_and_one_shot_checkers_agree() {
    let logs = tempfile::tempdir().unwrap();
    let persistent = r#"python3 -c '
import sys, os
for line in sys.stdin:
    state = line.split("\t")[0]
    size = os.path.getsize(os.path.join(state, "config.json")) if os.path.exists(os.path.join(state, "config.json")) else -1
    print("ok" if size in (6000, 10000) else f"config.json has {size} bytes", flush=True)
'"#;
    let one_shot = r#"s=$(stat -c %s config.json 2>/dev/null || echo -1); [ "$s" = 6000 ] || [ "$s" = 10000 ]"#;
    let workload = sh("tmp-rename.sh");
    let (code_a, out_a) = explore_with(one_shot, &[&workload], true, logs.path(), &["-j", "1"]);
    let (code_b, out_b) = explore_with(one_shot, &[&workload], true, logs.path(), &["-j", "3"]);
    let (code_c, out_c) = explore_with(
        persistent,
        &[&workload],
        true,
        logs.path(),
        &["-j", "2", "--persistent"],
    );
    assert_eq!(code_a, 1, "{out_a}");
    assert_eq!(
        (violations(&out_a), code_a),
        (violations(&out_b), code_b),
        "{out_b}"
    );
    assert_eq!(
        (violations(&out_a), code_a),
        (violations(&out_c), code_c),
        "{out_c}"
    );
    assert!(
        out_c.contains("config.json has"),
        "the persistent checker's words: {out_c}"
    );
}

#[test]
fn ignored_paths_timeouts_and_json() {
    let logs = tempfile::tempdir().unwrap();
    let json = logs.path().join("violations.json");
    // The workload leaves a scratch file behind that the checker would reject.
    let workload = "echo x > \"$SLOWFS_MOUNT/db-shm\"; echo data > \"$SLOWFS_MOUNT/db\"";
    let (code, out) = explore_with(
        "[ ! -e db-shm ]",
        &["sh", "-c", workload],
        false,
        logs.path(),
        &["--ignore", "*-shm"],
    );
    assert_eq!(code, 0, "--ignore leaves db-shm out of every state: {out}");
    let (code, out) = explore_with(
        "[ ! -e db-shm ]",
        &["sh", "-c", workload],
        false,
        logs.path(),
        &["--json", json.to_str().unwrap()],
    );
    assert_eq!(code, 1, "{out}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(
        report["violations"].as_u64().unwrap() as usize,
        violations(&out)
    );
    let examples: usize = report["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["examples"].as_array().unwrap().len())
        .sum();
    assert!(examples <= 3 * report["groups"].as_array().unwrap().len());
    assert!(report["groups"][0]["examples"][0]["replay"]
        .as_str()
        .unwrap()
        .contains("--replay"));
    assert_eq!(report["coverage"]["complete"], true);
    let (code, out) = explore_with(
        "sleep 5",
        &["sh", "-c", workload],
        false,
        logs.path(),
        &["--timeout", "200ms", "--crash-points", "4..4"],
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("timed out"), "{out}");
}

/// Ctrl-C while checking prints the summary of what was found so far and leaves
/// no temporary directory behind.
/// A terminal's Ctrl-C ends a child whose SIGINT is at its default; a test run
/// started in the background by a shell (`nohup`, `cmd &`) ignores SIGINT, and
/// children inherit that, so the Ctrl-C tests give the child the default back.
fn default_sigint(cmd: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: signal(2) is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        })
    }
}

#[test]
fn an_interrupted_exploration_reports_and_cleans_up() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let child = default_sigint(&mut Command::new(env!("CARGO_BIN_EXE_slowfs")))
        .env("TMPDIR", tmp.path())
        .args(["explore", "-j", "1", "--log-dir"])
        .arg(logs.path())
        .args(["--check", "sleep 0.2", "--", "sh", "-c"])
        .arg("for i in $(seq 20); do echo $i > \"$SLOWFS_MOUNT/f$i\"; done")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupted while checking: once the progress says checking has begun
    // (a fixed time fell into the workload on a loaded machine).
    let mut child = child;
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in stderr.lines().map_while(Result::ok) {
            if line.contains("checking crash states") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(std::time::Duration::from_secs(120))
        .expect("explore began checking");
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(130), "{stdout}");
    assert!(stdout.contains("stopped early: interrupted"), "{stdout}");
    assert!(stdout.contains("states checked: "), "{stdout}");
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "temporary directories left: {left:?}");
}

/// A terminal's Ctrl-C reaches the whole process group: the checkers it kills
/// are not counted (they said nothing about their states), the summary is
/// printed, exit 130.
#[test]
fn ctrl_c_to_the_process_group_counts_no_killed_checker() {
    use std::os::unix::process::CommandExt;
    let tmp = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let child = default_sigint(&mut Command::new(env!("CARGO_BIN_EXE_slowfs")))
        .env("TMPDIR", tmp.path())
        .args(["explore", "-j", "2", "--log-dir"])
        .arg(logs.path())
        .args(["--check", "sleep 1", "--", "sh", "-c"])
        .arg("for i in $(seq 20); do echo $i > \"$SLOWFS_MOUNT/f$i\"; done")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(3500));
    // SAFETY: signalling our own child's process group, as a terminal does.
    unsafe { libc::kill(-(child.id() as i32), libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(130), "{stdout}");
    assert_eq!(
        violations(&stdout),
        0,
        "a killed checker is no violation: {stdout}"
    );
    assert!(stdout.contains("verdict: INTERRUPTED"), "{stdout}");
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "temporary directories left: {left:?}");
}

/// Memory stays bounded with a huge state space: a workload whose operations
/// all stay pending (2^48 states at its last crash point) is explored to its
/// budget under a 2 GiB address-space limit, with progress shown.
#[test]
fn a_huge_state_space_runs_in_bounded_memory() {
    use std::os::unix::process::CommandExt;
    let logs = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_slowfs"));
    cmd.args(["explore", "--max-states", "3000", "--log-dir"])
        .arg(logs.path())
        .args(["--check", "true", "--", "sh", "-c"])
        .arg("cd \"$SLOWFS_MOUNT\"; for i in $(seq 12); do echo x > j; echo y >> j; rm j; done");
    // SAFETY: setrlimit is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 2 << 30,
                rlim_max: 2 << 30,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let started = std::time::Instant::now();
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(0 | 3)), "{stdout}{stderr}");
    assert_eq!(violations(&stdout), 0);
    assert!(
        stderr.contains("states checked"),
        "progress from the start: {stderr}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(240));
}

/// `--replay` checks a flagged state exactly as the run did: here with a
/// persistent checker (states on stdin), which a one-shot run would not feed
/// and so would wrongly accept.
#[test]
fn replay_runs_the_checker_as_the_run_did() {
    let logs = tempfile::tempdir().unwrap();
    let persistent = r#"python3 -c '
import sys, os
for line in sys.stdin:
    state = line.split("\t")[0]
    ok = os.path.exists(os.path.join(state, "done"))
    print("ok" if ok else "no done file", flush=True)
'"#;
    let (code, out) = explore_with(
        persistent,
        &["sh", "-c", "echo 1 > \"$SLOWFS_MOUNT/done\""],
        false,
        logs.path(),
        &["--persistent"],
    );
    assert_eq!(code, 1, "{out}");
    let replay = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay: "))
        .expect("a replay command")
        .to_string();
    let args: Vec<&str> = replay.split_whitespace().skip(1).collect();
    let out = Command::new(env!("CARGO_BIN_EXE_slowfs"))
        .args(&args)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("rejects it") && said.contains("no done file"),
        "{said}"
    );
}

/// A full temp directory is explore's own problem, not a violation nor a
/// workload failure: retried, then reported (exit 4) with the summary so far.
#[test]
fn a_full_temp_directory_is_reported_as_such() {
    let tmp = tempfile::tempdir().unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(tmp.path())
        .status()
        .unwrap();
    assert!(
        mounted.success(),
        "mounting a small tmpfs (this test runs as root)"
    );
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let _unmount = Unmount(tmp.path());
    let logs = tempfile::tempdir().unwrap();
    let backing = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_slowfs"))
        .env("TMPDIR", tmp.path())
        .args(["explore", "--backing"])
        .arg(backing.path())
        .arg("--log-dir")
        .arg(logs.path())
        .args(["--check", "true", "--", "sh", "-c"])
        .arg("head -c 200000 /dev/zero > \"$SLOWFS_MOUNT/big\"")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("explore's own temporary space failed"),
        "{stdout}"
    );
    assert!(stdout.contains("No space left on device"), "{stdout}");
    assert!(
        stdout.contains("states checked: "),
        "the summary so far: {stdout}"
    );
}

/// `--shard K/N` then `--merge`: the shards' joined report is the unsharded
/// run's (same states, coverage, violation groups and examples), also when a
/// budget cuts the run; a missing shard or a workload that records
/// differently each time is refused, not merged.
#[test]
fn shards_merge_into_the_unsharded_run() {
    let logs = tempfile::tempdir().unwrap();
    let dir = logs.path();
    let json = |name: &str| dir.join(name).display().to_string();
    let read = |name: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap()
    };
    // What may differ: timings and where each run saved its log.
    let comparable = |mut v: serde_json::Value| {
        for key in ["seconds", "high_yield_seconds", "saved_run", "shard_report"] {
            v.as_object_mut().unwrap().remove(key);
        }
        for group in v["groups"].as_array_mut().unwrap() {
            for example in group["examples"].as_array_mut().unwrap() {
                example.as_object_mut().unwrap().remove("replay");
            }
        }
        v
    };
    // Eight files, each created then written: a crash may keep a file's name
    // without its line (hundreds of distinct states).
    let check = "for f in f*; do [ ! -e \"$f\" ] || [ -s \"$f\" ] || { echo \"$f is empty\"; exit 1; }; done";
    let workload = "for i in 1 2 3 4 5 6 7 8; do echo \"line $i\" > \"$SLOWFS_MOUNT/f$i\"; done";
    let workload = ["sh", "-c", workload];
    for budget in ["100000", "40"] {
        let (whole_code, out) = explore_with(
            check,
            &workload,
            false,
            dir,
            &["--max-states", budget, "--json", &json("whole.json")],
        );
        assert_eq!(whole_code, 1, "unsynced files are found empty");
        if budget == "40" {
            assert!(out.contains("--max-states was reached"), "{out}");
        }
        let mut shards = Vec::new();
        for k in 1..=3 {
            let name = format!("shard{k}.json");
            let shard = format!("{k}/3");
            let (_, out) = explore_with(
                check,
                &workload,
                false,
                dir,
                &[
                    "--max-states",
                    budget,
                    "--shard",
                    &shard,
                    "--json",
                    &json(&name),
                ],
            );
            assert!(out.contains(&format!("shard {k}/3:")), "{out}");
            shards.push(json(&name));
        }
        let merge = |files: &[String]| {
            let out = Command::new(env!("CARGO_BIN_EXE_slowfs"))
                .args(["explore", "--json", &json("merged.json"), "--merge"])
                .args(files)
                .output()
                .unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            println!("merge {files:?}:\n{text}");
            (out.status.code().unwrap_or(-1), text)
        };
        let reversed: Vec<String> = shards.iter().rev().cloned().collect();
        let (code, _) = merge(&reversed);
        assert_eq!(code, whole_code, "the merged run exits as the whole one");
        let (whole, merged) = (read("whole.json"), read("merged.json"));
        assert!(whole["violations"].as_u64().unwrap() > 0);
        assert_eq!(
            comparable(merged),
            comparable(whole),
            "--max-states {budget}: merged shards differ from the unsharded run"
        );
        let (code, text) = merge(&shards[..2]);
        assert_ne!(code, 0);
        assert!(text.contains("missing shard(s): 3/3"), "{text}");
    }
    // A workload whose writes differ run to run explored different programs.
    let mut shards = Vec::new();
    for k in 1..=2 {
        let name = format!("random{k}.json");
        explore_with(
            "true",
            &["sh", "-c", "date +%s%N > \"$SLOWFS_MOUNT/stamp\""],
            false,
            dir,
            &["--shard", &format!("{k}/2"), "--json", &json(&name)],
        );
        shards.push(json(&name));
    }
    let out = Command::new(env!("CARGO_BIN_EXE_slowfs"))
        .args(["explore", "--merge"])
        .args(&shards)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(text.contains("not deterministic"), "{text}");
}

/// Stores through a shared mapping reach the recording mount as the kernel's
/// write-back of the dirty pages and become durable at msync (FUSE_FSYNC):
/// explore tells a program that msyncs before marking its data done from one
/// that does not.
#[test]
fn stores_through_mmap_are_durable_at_msync_and_not_before() {
    const PROGRAM: &str = r#"
import mmap, os, sys
mount = os.environ["SLOWFS_MOUNT"]
fd = os.open(os.path.join(mount, "data"), os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, 4096)
os.fsync(fd)
d = os.open(mount, os.O_RDONLY)
os.fsync(d)
m = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[0:4] = b"AAAA"
if sys.argv[1] == "msync":
    m.flush()
done = os.open(os.path.join(mount, "done"), os.O_WRONLY | os.O_CREAT, 0o644)
os.fsync(done)
os.fsync(d)
m.close()
"#;
    let check = "[ ! -e done ] || [ \"$(head -c 4 data)\" = AAAA ] || { echo 'done, but the mapped store is lost'; exit 1; }";
    let logs = tempfile::tempdir().unwrap();
    for (mode, expect_violations) in [("msync", false), ("no-msync", true)] {
        let (code, out) = explore(check, &["python3", "-c", PROGRAM, mode], false, logs.path());
        assert!(out.contains("ops recorded: "), "{out}");
        if expect_violations {
            assert!(
                code == 1 && violations(&out) > 0,
                "{mode}: expected a violation:\n{out}"
            );
            assert!(out.contains("the mapped store is lost"), "{out}");
        } else {
            assert!(
                code == 0 && violations(&out) == 0,
                "{mode}: expected none:\n{out}"
            );
        }
    }
}

/// Persistence models: replace-via-rename without fsync loses the file under
/// strict POSIX, on XFS and on btrfs but not on ext4's data=ordered journal (a rename
/// over a file allocates the file's data first, so it is never empty); the
/// same file at its size with zeros is unknown on ext4 (`auto_da_alloc`
/// does not wait for unwritten extents: an approximate rule, never a
/// "never"); truncate-and-rewrite in place loses it on every model. The
/// strict run says so per group, `--fs-model` checks only what the model
/// can leave or cannot rule out.
#[test]
fn violations_say_under_which_filesystem_models_they_happen() {
    let logs = tempfile::tempdir().unwrap();
    let check = sh("check.sh");
    let (code, out) = explore(&check, &[&sh("tmp-rename.sh")], false, logs.path());
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("can happen on: strict, xfs, btrfs; unknown on: ext4-ordered"),
        "{out}"
    );
    // Whole writes: only the empty config, which ext4 surely never leaves.
    let whole = ["--whole-writes"];
    let (code, out) = explore_with(&check, &[&sh("tmp-rename.sh")], false, logs.path(), &whole);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("can happen on: strict, xfs, btrfs; never on: ext4-ordered"),
        "{out}"
    );
    let (_, out) = explore(&check, &[&sh("tmp-rename.sh")], false, logs.path());
    // Coverage per model: every state checked is a strict one; each model
    // leaves a subset of the one before it.
    let per_model: Vec<usize> = out
        .lines()
        .find_map(|l| l.strip_prefix("states checked that each model can leave: "))
        .expect("the per-model line")
        .split(", ")
        .map(|part| part.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    let checked: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("states checked: "))
        .and_then(|l| l.split(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    // strict, xfs, ext4-ordered, btrfs: ext4-ordered refines xfs, the
    // others strict.
    assert_eq!(per_model.len(), 4, "{out}");
    assert_eq!(per_model[0], checked, "{out}");
    assert!(
        per_model[0] > per_model[2] && per_model[1] >= per_model[2] && per_model[0] >= per_model[3],
        "{out}"
    );
    let xfs = ["--fs-model", "xfs"];
    let (code, out) = explore_with(&check, &[&sh("tmp-rename.sh")], false, logs.path(), &xfs);
    assert_eq!(code, 1, "unsafe on xfs: {out}");
    let btrfs = ["--fs-model", "btrfs"];
    let (code, out) = explore_with(&check, &[&sh("tmp-rename.sh")], false, logs.path(), &btrfs);
    assert_eq!(
        code, 1,
        "unsafe on btrfs (the rename's writeback is not waited for): {out}"
    );
    let ext4 = ["--fs-model", "ext4-ordered"];
    // The zero-filled config is unknown on ext4: checked, and found.
    let (code, out) = explore_with(&check, &[&sh("tmp-rename.sh")], false, logs.path(), &ext4);
    assert_eq!(code, 1, "unknown on ext4 data=ordered: {out}");
    let ext4_whole = ["--fs-model", "ext4-ordered", "--whole-writes"];
    let (code, out) = explore_with(
        &check,
        &[&sh("tmp-rename.sh")],
        false,
        logs.path(),
        &ext4_whole,
    );
    assert_eq!(code, 0, "safe on ext4 data=ordered: {out}");
    assert!(out.contains("cannot leave, skipped: "), "{out}");
    let (code, out) = explore_with(&check, &[&sh("in-place.sh")], false, logs.path(), &ext4);
    assert_eq!(code, 1, "in-place rewrites lose data on ext4 too: {out}");
    assert!(out.contains("(every model)"), "{out}");
    let (_, out) = explore_with(
        &check,
        &[&sh("in-place.sh")],
        false,
        logs.path(),
        &["--fs-model", "ext5"],
    );
    assert!(
        out.is_empty(),
        "a bad model is refused before anything runs: {out}"
    );
}

/// A log whose states are nearly all duplicates, each costly to build: 60
/// identical 4 MiB writes never synced (two distinct contents, thousands of
/// subsets, each a 4 MiB build and hash).
fn duplicate_heavy_log() -> slowfs_faults::durability::Log {
    let mut log = slowfs_faults::durability::LogBuilder::new();
    log.create("f", 2);
    for _ in 0..60 {
        log.write(2, 0, vec![7; 4 << 20]);
    }
    log.build()
}

#[test]
fn the_budget_and_a_stop_end_a_run_of_duplicates_within_seconds() {
    use slowfs::explore::{explore, Cut, ExploreConfig};
    use std::sync::atomic::Ordering;
    use std::time::{Duration, Instant};
    let log = duplicate_heavy_log();

    let mut config = ExploreConfig::new("true");
    config.time_budget = Some(Duration::from_secs(1));
    let started = Instant::now();
    let found = explore(&log, &config, |_| {}).unwrap();
    let took = started.elapsed();
    println!("budget 1 s: {took:?}, {} duplicates", found.duplicates);
    assert_eq!(found.cut, Some(Cut::TimeBudget));
    assert!(took < Duration::from_secs(8), "took {took:?}");
    assert!(!found.coverage.complete(), "a partial report says so");

    // A stop (what SIGTERM and Ctrl-C set) from outside after 1 s.
    let config = ExploreConfig::new("true");
    let stop = std::sync::Arc::clone(&config.stop);
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(1));
        stop.store(true, Ordering::SeqCst);
    });
    let started = Instant::now();
    let found = explore(&log, &config, |_| {}).unwrap();
    let took = started.elapsed();
    stopper.join().unwrap();
    println!("stop after 1 s: {took:?}, {} duplicates", found.duplicates);
    assert_eq!(found.cut, Some(Cut::Interrupted));
    assert!(took < Duration::from_secs(8), "took {took:?}");
}

/// Loop devices attached to files of a recording mount made in `tmp` (the
/// TMPDIR given to [`explore_sh`]): this test's, not another run's on the
/// machine.
fn loop_devices_on_recording_mounts(tmp: &Path) -> Vec<String> {
    let tmp = tmp.canonicalize().unwrap();
    std::fs::read_dir("/sys/block")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("loop/backing_file")).ok())
        .filter(|backing| {
            backing.contains("slowfs-mnt-") && Path::new(backing.trim_end()).starts_with(&tmp)
        })
        .collect()
}

/// `slowfs explore` of a shell workload on an empty backing directory, with
/// TMPDIR `tmp` (where its recording mount is made): exit code, stdout + stderr.
fn explore_sh(tmp: &Path, workload: &str) -> (i32, String) {
    let backing = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_slowfs"))
        .env("TMPDIR", tmp)
        .args(["explore", "--check", "true", "--backing"])
        .arg(backing.path())
        .args(["--", "sh", "-c", workload])
        .output()
        .unwrap();
    let text = common::text(&out);
    println!("{workload}:\n{text}");
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn a_workload_that_leaves_the_recording_mount_in_use_gets_an_error_not_clean() {
    let tmp = tempfile::tempdir().unwrap();
    // A loop device left attached to an image on the mount.
    let (code, text) = explore_sh(
        tmp.path(),
        r#"truncate -s 8M "$SLOWFS_MOUNT/image" && losetup --find --show "$SLOWFS_MOUNT/image""#,
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("left the recording mount in use"), "{text}");
    assert!(text.contains("loop device /dev/loop"), "{text}");
    assert!(
        loop_devices_on_recording_mounts(tmp.path()).is_empty(),
        "explore detaches the loop device it found"
    );

    // A process still holding a file open.
    let pidfile = tempfile::NamedTempFile::new().unwrap();
    let (code, text) = explore_sh(
        tmp.path(),
        &format!(
            r#"echo x > "$SLOWFS_MOUNT/f"; (exec 3<"$SLOWFS_MOUNT/f"; exec sleep 30) >/dev/null 2>&1 & echo $! > {}"#,
            pidfile.path().display()
        ),
    );
    let pid = std::fs::read_to_string(pidfile.path()).unwrap();
    let _ = Command::new("kill").arg(pid.trim()).status();
    assert_eq!(code, 2, "{text}");
    assert!(
        // Named "sh" or "sleep", whether or not the subshell has exec'd yet.
        text.contains(&format!("process {} (", pid.trim())),
        "{text}"
    );
}

/// A workload that writes nothing on the mount (here: into its own directory)
/// gets no verdict: "clean" would be about nothing.
#[test]
fn a_workload_that_changes_nothing_on_the_mount_is_an_error_not_clean() {
    let logs = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_slowfs"))
        .args(["explore", "--log-dir"])
        .arg(logs.path())
        .args(["--check", "true", "--", "sh", "-c", "echo x > /dev/null"])
        .current_dir(logs.path())
        .output()
        .unwrap();
    let text = common::text(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("changed nothing on the recording mount"),
        "{text}"
    );
    assert!(text.contains("cd \"$SLOWFS_MOUNT\""), "{text}");
    assert!(!text.contains("clean"), "{text}");
}

//! The `slowfs` command line, end to end.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn slowfs() -> Command {
    Command::new(env!("CARGO_BIN_EXE_slowfs"))
}

fn mounts() -> Vec<std::path::PathBuf> {
    slowfs::mount::slowfs_mounts()
}

#[test]
fn run_exports_the_mount_and_exits_with_the_commands_status() {
    let out = slowfs()
        .args(["run", "--seed", "3", "--set", "fsync delay=1ms", "--"])
        .args(["sh", "-c", "echo hi > \"$SLOWFS_MOUNT/f\" && grep -q \" $SLOWFS_MOUNT fuse.slowfs \" /proc/mounts && exit 7"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "{stderr}");
    assert!(
        stderr.contains("slowfs stats"),
        "stats summary on stderr: {stderr}"
    );
    let mountpoint = stderr
        .lines()
        .find_map(|l| l.strip_prefix("slowfs: mounted "))
        .and_then(|l| l.split(' ').next())
        .unwrap()
        .to_string();
    assert!(
        !mounts().iter().any(|m| m.to_str() == Some(&mountpoint)),
        "left mounted"
    );
}

#[test]
fn run_reports_a_command_killed_by_a_signal() {
    let out = slowfs()
        .args(["run", "--quiet", "--", "sh", "-c", "kill -SEGV $$"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(128 + libc::SIGSEGV));
}

#[test]
fn sigterm_to_run_ends_the_command_and_unmounts() {
    let mut child = slowfs()
        .args([
            "run",
            "--",
            "sh",
            "-c",
            "touch \"$SLOWFS_MOUNT/ready\"; echo \"$SLOWFS_MOUNT\"; sleep 30",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let mountpoint = std::path::PathBuf::from(line.trim());
    assert!(mounts().contains(&mountpoint));
    let start = Instant::now();
    // SAFETY: plain kill of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(start.elapsed() < Duration::from_secs(10));
    assert_eq!(status.code(), Some(128 + libc::SIGTERM));
    assert!(
        !mounts().contains(&mountpoint),
        "left mounted after SIGTERM"
    );
}

#[test]
fn mount_exits_when_unmounted_from_outside() {
    let dirs = tempfile::tempdir().unwrap();
    let (backing, mountpoint) = (dirs.path().join("b"), dirs.path().join("m"));
    std::fs::create_dir_all(&backing).unwrap();
    std::fs::create_dir_all(&mountpoint).unwrap();
    let mut daemon = slowfs()
        .arg("mount")
        .arg("--backing")
        .arg(&backing)
        .arg(&mountpoint)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mountpoint = mountpoint.canonicalize().unwrap();
    let start = Instant::now();
    while !mounts().contains(&mountpoint) {
        assert!(start.elapsed() < Duration::from_secs(10), "never mounted");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = slowfs().arg("umount").arg(&mountpoint).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = daemon.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(10) {
            daemon.kill().unwrap();
            panic!("the daemon kept running after its mount was gone");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut daemon.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("was unmounted, exiting"), "{stderr}");
}

#[test]
fn a_bad_rule_is_refused_with_where_and_what() {
    let out = slowfs()
        .args(["run", "--set", "read,write delay=5ms..1ms", "--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr.contains("--set #1"), "{stderr}");
    assert!(stderr.contains("runs backwards"), "{stderr}");
    assert!(stderr.contains("^"), "points at the word: {stderr}");
}

#[test]
fn profiles_and_check() {
    let out = slowfs().arg("profiles").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for name in [
        "nfs",
        "slow-fsync",
        "throttled-volume",
        "flaky",
        "full-disk",
        "short-io",
        "hdd",
    ] {
        assert!(text.contains(name), "{name} missing from:\n{text}");
    }
    let out = slowfs().args(["profiles", "nfs"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("where the numbers come from"));

    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.toml");
    std::fs::write(
        &good,
        "seed = 1\nprofile = \"slow-fsync\"\n[[rule]]\nops = \"read\"\ndelay = \"1ms\"\n",
    )
    .unwrap();
    let out = slowfs().arg("check").arg(&good).output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("read delay=1ms"));
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[rule]]\nops = \"raed\"\ndelay = \"1ms\"\n").unwrap();
    let out = slowfs().arg("check").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown operation 'raed'"));
}

/// Two threads write two files with random pauses, so their requests reach
/// the rules in a different order every run. The same seed then fails
/// different writes; a recorded fault trace fails the same ones.
#[test]
fn a_fault_trace_replays_what_the_seed_alone_cannot() {
    const PROGRAM: &str = r#"
import os, random, threading
mount = os.environ["SLOWFS_MOUNT"]
failed = []
def writer(name):
    fd = os.open(os.path.join(mount, name), os.O_WRONLY | os.O_CREAT, 0o644)
    for i in range(1, 41):
        try:
            os.pwrite(fd, b"x" * 512, i * 512)
        except OSError:
            failed.append(f"{name}#{i}")
        threading.Event().wait(random.random() / 1000)
    os.close(fd)
threads = [threading.Thread(target=writer, args=(n,)) for n in ("a", "b")]
for t in threads: t.start()
for t in threads: t.join()
print("FAILED " + " ".join(sorted(failed)))
"#;
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("faults.jsonl");
    // The runs mount in a TMPDIR of the test's own: the check at the end sees
    // their mounts, not other tests' or runs' on the machine.
    let tmp = tempfile::tempdir().unwrap();
    let tmp_path = tmp.path().canonicalize().unwrap();
    let ours = || -> Vec<std::path::PathBuf> {
        mounts()
            .into_iter()
            .filter(|m| m.starts_with(&tmp_path))
            .collect()
    };
    let run = |extra: &[&std::ffi::OsStr]| -> String {
        let out = slowfs()
            .env("TMPDIR", tmp.path())
            .args(["run", "--seed", "7", "--set", "write error=EIO p=0.15"])
            .args(extra)
            .args(["--", "python3", "-c", PROGRAM])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
            .lines()
            .find_map(|l| l.strip_prefix("FAILED "))
            .expect("the program's report")
            .to_string()
    };
    let recorded = run(&["--record-faults".as_ref(), trace.as_os_str()]);
    assert!(!recorded.is_empty(), "p=0.15 over 80 writes fails some");
    let lines = std::fs::read_to_string(&trace).unwrap().lines().count();
    assert_eq!(
        lines,
        recorded.split(' ').count(),
        "one trace line per fault"
    );
    // The seed alone: the order differs, so (within a few runs) the failures do.
    let differs = (0..5).any(|_| run(&[]) != recorded);
    assert!(
        differs,
        "five seed-only runs all failed {recorded}: no race to show"
    );
    for _ in 0..3 {
        assert_eq!(
            run(&["--replay-faults".as_ref(), trace.as_os_str()]),
            recorded,
            "a replay fails the recorded writes"
        );
    }
    // The trace alone is enough: a replay needs no rules (the mount finds the
    // traced paths and sends their writes to the daemon as the rule did).
    let out = slowfs()
        .env("TMPDIR", tmp.path())
        .args(["run", "--replay-faults"])
        .arg(&trace)
        .args(["--", "python3", "-c", PROGRAM])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.lines().find_map(|l| l.strip_prefix("FAILED ")),
        Some(recorded.as_str()),
        "a replay without the rules: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        ours(),
        Vec::<std::path::PathBuf>::new(),
        "every run unmounted"
    );
}

/// The write end of a pipe whose read end is already closed: every write to
/// it fails with EPIPE, as `| head -1`'s does once head has its line.
fn closed_pipe() -> std::os::fd::OwnedFd {
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    write
}

#[test]
fn run_into_a_closed_pipe_exits_with_the_commands_status() {
    let dir = tempfile::tempdir().unwrap();
    let said = dir.path().join("mountpoint");
    for code in [7, 0] {
        let pipe = closed_pipe();
        // `slowfs run ... 2>&1 | head -1`, with head long gone: the
        // announcement and the summary have nowhere to go.
        let status = slowfs()
            .args(["run", "--set", "fsync delay=1ms", "--", "sh", "-c"])
            .arg(format!(
                "echo \"$SLOWFS_MOUNT\" > {}; echo data > \"$SLOWFS_MOUNT/f\"; exit {code}",
                said.display()
            ))
            .stdout(Stdio::from(pipe.try_clone().unwrap()))
            .stderr(Stdio::from(pipe))
            .status()
            .unwrap();
        assert_eq!(
            status.code(),
            Some(code),
            "not the command's status (101: a panic)"
        );
        let mountpoint = std::fs::read_to_string(&said).unwrap();
        assert!(
            !mounts().contains(&std::path::PathBuf::from(mountpoint.trim())),
            "left mounted"
        );
    }
    // The control: into a pipe that is read, the same run prints its
    // announcement and summary, and exits with the command's status too.
    let out = slowfs()
        .args(["run", "--", "sh", "-c", "exit 7"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("slowfs: mounted") && stderr.contains("slowfs stats"),
        "{stderr}"
    );
}

#[test]
fn the_literal_head_pipeline_gets_the_commands_status() {
    // The issue's own command line, in bash for PIPESTATUS: head ends after
    // slowfs's first line, and the summary, 200 ms later, meets a closed pipe
    // (the command itself writes nothing: a write would kill it by SIGPIPE).
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "{} run -- sh -c 'sleep 0.2; exit 5' 2>&1 | head -1; echo \"status ${{PIPESTATUS[0]}}\"",
            env!("CARGO_BIN_EXE_slowfs")
        ))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("status 5"), "{stdout}");
    // The control: without head, the same pipeline passes everything on.
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "{} run -- sh -c 'echo first; exit 5' 2>&1 | cat; echo \"status ${{PIPESTATUS[0]}}\"",
            env!("CARGO_BIN_EXE_slowfs")
        ))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("status 5") && stdout.contains("slowfs stats"),
        "{stdout}"
    );
}

/// `slowfs explore ... | head -1` with head gone: the verdict's exit code,
/// not a panic (101) at the report's first line; the control, into a read
/// pipe, prints the report and exits the same.
#[test]
fn explore_into_a_closed_pipe_exits_with_the_verdicts_code() {
    let args = [
        "explore",
        "--check",
        "test ! -e \"$SLOWFS_MOUNT/out\" || grep -q done \"$SLOWFS_MOUNT/out\"",
        "--",
        "sh",
        "-c",
        "printf done > \"$SLOWFS_MOUNT/out\"",
    ];
    let pipe = closed_pipe();
    let status = slowfs()
        .args(args)
        .stdout(Stdio::from(pipe.try_clone().unwrap()))
        .stderr(Stdio::from(pipe))
        .status()
        .unwrap();
    let out = slowfs().args(args).output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("violation"), "{report}");
    assert_ne!(out.status.code(), Some(101), "{report}");
    assert_eq!(
        status.code(),
        out.status.code(),
        "into a closed pipe (101: a panic)"
    );
}

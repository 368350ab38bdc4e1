//! `slowfs explore --fs`: workloads on real ext4, XFS and btrfs in a recorded
//! image, each crash state a block-level image mounted by the kernel (its own
//! recovery) and checked. Each filesystem must catch an unsafe workload (the
//! negative control) and pass the safe export; nothing is left attached or
//! mounted, also when explore is killed mid-run. Needs root, loop devices and
//! mkfs.ext4, mkfs.xfs, mkfs.btrfs (scripts/test.sh installs them): without
//! them the tests fail and say what is missing.

mod common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/realfs");

fn script(name: &str) -> String {
    format!("{DATA}/{name}")
}

/// A TMPDIR of the test's own, given to every explore it runs: explore makes
/// its images and state directories there, so the loop devices and mounts
/// checked below are this test's own, not those of another run on the machine
/// (an `ace` run, another test binary) that happens to be going at the time.
struct Scope(tempfile::TempDir);

impl Scope {
    fn new() -> Scope {
        Scope(tempfile::tempdir().unwrap())
    }

    /// The directory, as the kernel names the files in it (loop devices'
    /// backing files and mountpoints are canonical paths).
    fn path(&self) -> std::path::PathBuf {
        self.0.path().canonicalize().unwrap()
    }

    /// `slowfs` with this scope's TMPDIR.
    fn slowfs(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_slowfs"));
        command.env("TMPDIR", self.path());
        command
    }

    /// `slowfs explore --fs FS` with `extra` arguments; prints and returns its output.
    fn explore(&self, fs: &str, extra: &[&str], check: &str, workload: &str) -> (Output, String) {
        // Saved runs (with violations) go to a temporary directory, not the crate's.
        let scratch = tempfile::tempdir().unwrap();
        let out = self
            .slowfs()
            .args(["explore", "--fs", fs, "--max-states", "150", "--check"])
            .arg(script(check))
            .args(extra)
            .current_dir(scratch.path())
            .arg("--")
            .arg(script(workload))
            .output()
            .unwrap();
        let text = common::text(&out);
        println!("--fs {fs} {extra:?} {check} {workload}:\n{text}");
        (out, text)
    }

    /// Loop devices attached to files in this scope (explore's recording and
    /// states, removed or not: a removed one's name ends in " (deleted)").
    fn loop_devices(&self) -> Vec<String> {
        let scope = self.path();
        std::fs::read_dir("/sys/block")
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let backing = std::fs::read_to_string(e.path().join("loop/backing_file")).ok()?;
                Path::new(backing.trim_end()).starts_with(&scope).then(|| {
                    format!(
                        "{}: {}",
                        e.file_name().to_string_lossy(),
                        backing.trim_end()
                    )
                })
            })
            .collect()
    }

    /// Mounts in this scope (explore's recording mount, its states).
    fn mounts(&self) -> Vec<String> {
        let scope = self.path();
        std::fs::read_to_string("/proc/mounts")
            .unwrap()
            .lines()
            .filter(|l| {
                l.split(' ')
                    .nth(1)
                    .is_some_and(|m| Path::new(m).starts_with(&scope))
            })
            .map(str::to_string)
            .collect()
    }

    /// Processes whose working directory is in this scope.
    fn processes_inside(&self) -> usize {
        let scope = self.path();
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_link(e.path().join("cwd")).ok())
            .filter(|cwd| cwd.starts_with(&scope))
            .count()
    }

    /// explore's scratch directories in this scope.
    fn scratch_dirs(&self) -> Vec<String> {
        let mut dirs: Vec<String> = std::fs::read_dir(self.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("slowfs-"))
            .collect();
        dirs.sort();
        dirs
    }

    fn assert_nothing_left(&self) {
        // A killed explore's recording mount is detached by its guard process,
        // and its loop devices are released, a moment after it dies.
        let deadline = Instant::now() + Duration::from_secs(10);
        while (!self.loop_devices().is_empty() || !self.mounts().is_empty())
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(
            self.loop_devices(),
            Vec::<String>::new(),
            "loop devices left attached"
        );
        assert_eq!(self.mounts(), Vec::<String>::new(), "mounts left");
    }
}

fn preflight() {
    for tool in ["mkfs.ext4", "mkfs.xfs", "mkfs.btrfs", "losetup", "unshare"] {
        let found = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
            .iter()
            .any(|dir| Path::new(dir).join(tool).exists());
        assert!(
            found,
            "{tool} is missing: apt install e2fsprogs xfsprogs btrfs-progs util-linux"
        );
    }
    assert!(
        Path::new("/dev/loop-control").exists(),
        "no loop devices (/dev/loop-control)"
    );
}

/// Serialises these tests: each mounts loop devices, and two at once only
/// make each other slow.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn caught(scope: &Scope, fs: &str, extra: &[&str], check: &str, workload: &str, message: &str) {
    let (out, text) = scope.explore(fs, extra, check, workload);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains(message), "{text}");
    assert!(text.contains(&format!("observed on real {fs}")), "{text}");
    assert_lost_writes_are_named(&text);
    scope.assert_nothing_left();
}

/// Every lost write of the report says what its blocks hold (a file, the
/// journal, metadata), not only its byte range.
fn assert_lost_writes_are_named(text: &str) {
    let writes: Vec<&str> = text
        .lines()
        .flat_map(|l| l.split("write image [").skip(1))
        .collect();
    assert!(!writes.is_empty(), "no lost write shown: {text}");
    for write in writes {
        let (_, after) = write.split_once(')').expect("a byte range");
        assert!(
            after.starts_with(": ") && after.len() > 2,
            "a lost write without a name ({write}): {text}"
        );
    }
}

fn clean(scope: &Scope, fs: &str, check: &str, workload: &str) {
    let (out, text) = scope.explore(fs, &[], check, workload);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("verdict: clean"), "{text}");
    let checked: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("states checked: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(checked >= 20, "a clean verdict on {checked} states: {text}");
    scope.assert_nothing_left();
}

#[test]
fn ext4_catches_the_export_without_fsync_under_noauto_da_alloc_and_passes_the_safe_one() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    preflight();
    let scope = Scope::new();
    caught(
        &scope,
        "ext4",
        &["--mount-options", "commit=1,noauto_da_alloc"],
        "check_config.sh",
        "export_nofsync.sh",
        "config is ''",
    );
    clean(&scope, "ext4", "check_config.sh", "export_fsync.sh");
}

#[test]
fn xfs_catches_the_export_without_fsync_and_passes_the_safe_one() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    preflight();
    let scope = Scope::new();
    caught(
        &scope,
        "xfs",
        &[],
        "check_config.sh",
        "export_nofsync.sh",
        "config is ''",
    );
    clean(&scope, "xfs", "check_config.sh", "export_fsync.sh");
    let xfssyncd = std::fs::read_to_string("/proc/sys/fs/xfs/xfssyncd_centisecs").unwrap();
    assert_eq!(xfssyncd.trim(), "3000", "the XFS sync interval is put back");
}

#[test]
fn btrfs_catches_an_fsync_of_one_file_taken_for_both_and_passes_the_safe_export() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    preflight();
    let scope = Scope::new();
    caught(
        &scope,
        "btrfs",
        &[],
        "check_two_files.sh",
        "two_files.sh",
        "b is saved but a is",
    );
    clean(&scope, "btrfs", "check_config.sh", "export_fsync.sh");
}

#[test]
fn real_groups_are_judged_against_a_model_run_and_a_wrong_model_is_caught() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    preflight();
    let scope = Scope::new();
    let dir = tempfile::tempdir().unwrap();
    let model_run = dir.path().join("model.json");
    let out = scope
        .slowfs()
        .args(["explore", "--json"])
        .arg(&model_run)
        .arg("--check")
        .arg(script("check_config.sh"))
        .arg("--")
        .arg(script("export_nofsync.sh"))
        .current_dir(dir.path())
        .output()
        .unwrap();
    let text = common::text(&out);
    assert_eq!(out.status.code(), Some(1), "the model run: {text}");
    // The empty config is never on ext4-ordered, the zero-filled one only
    // unknown (auto_da_alloc does not wait for unwritten extents).
    assert!(text.contains("unknown on: ext4-ordered"), "{text}");
    let model = model_run.to_str().unwrap();
    // Without auto_da_alloc ext4 orders no data before a rename: the xfs
    // model stands for it, and allows the empty config.
    let ext4 = [
        "--mount-options",
        "commit=1,noauto_da_alloc",
        "--compare-with",
        model,
    ];
    let (out, text) = scope.explore("ext4", &ext4, "check_config.sh", "export_nofsync.sh");
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("predicted by the xfs model (the model run's group 1)"),
        "{text}"
    );
    assert!(!text.contains("MODEL SAYS NEVER"), "{text}");
    // Negative control: a model run whose labels rule the group out on xfs
    // (a wrong model) is caught.
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&model_run).unwrap()).unwrap();
    json["groups"][0]["models"] = serde_json::json!(["strict"]);
    std::fs::write(&model_run, json.to_string()).unwrap();
    let real_run = dir.path().join("real.json");
    let with_json = [&ext4[..], &["--json", real_run.to_str().unwrap()]].concat();
    let (out, text) = scope.explore("ext4", &with_json, "check_config.sh", "export_nofsync.sh");
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("MODEL SAYS NEVER"), "{text}");
    assert!(
        text.contains("the xfs model says never happen: the model is wrong there"),
        "{text}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&real_run).unwrap()).unwrap();
    assert_eq!(report["groups"][0]["model"]["prediction"], "said_never");
    // A real filesystem's groups were observed: no model labels them.
    assert_eq!(report["groups"][0]["models"], serde_json::json!([]));
    assert!(report["groups"][0].get("unknown").is_none(), "{report}");
    // A report of an --fs run is not a model run.
    let (out, text) = scope.explore(
        "xfs",
        &["--compare-with", real_run.to_str().unwrap()],
        "check_config.sh",
        "export_nofsync.sh",
    );
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("not of a model run"), "{text}");
    scope.assert_nothing_left();
}

#[test]
fn a_real_fs_violation_replays_from_the_saved_run_and_its_base_image() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    preflight();
    let scope = Scope::new();
    let logs = tempfile::tempdir().unwrap();
    let log_dir = logs.path().to_str().unwrap();
    let (out, text) = scope.explore(
        "ext4",
        &[
            "--mount-options",
            "commit=1,noauto_da_alloc",
            "--log-dir",
            log_dir,
            "--fsck",
        ],
        "check_config.sh",
        "export_nofsync.sh",
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    let replay = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay: "))
        .expect("a replay command");
    let out = Command::new("sh")
        .arg("-c")
        .arg(replay.replacen("slowfs", env!("CARGO_BIN_EXE_slowfs"), 1))
        .output()
        .unwrap();
    let replayed = String::from_utf8_lossy(&out.stdout);
    println!(
        "{replay}:\n{replayed}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(replayed.contains("checker rejects it"), "{replayed}");
    assert!(replayed.contains("config is ''"), "{replayed}");
    // A base image changed since the run is refused, not replayed.
    let base = std::fs::read_dir(logs.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "img"))
        .expect("the base image beside the run");
    let file = std::fs::OpenOptions::new().write(true).open(&base).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, b"changed", 1 << 20).unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(replay.replacen("slowfs", env!("CARGO_BIN_EXE_slowfs"), 1))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("has changed since the run"), "{stderr}");
    scope.assert_nothing_left();
}

#[test]
fn explore_killed_while_checking_leaves_no_loop_device_or_mount() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    preflight();
    let scope = Scope::new();
    // A SIGKILLed explore cannot remove its temporary images and state
    // directories: they go to the scope's directory, removed with it.
    let mut child = scope
        .slowfs()
        .args(["explore", "--fs", "btrfs", "--check"])
        .arg(format!("{} && sleep 0.2", script("check_config.sh")))
        .arg("--")
        .arg(script("export_fsync.sh"))
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed once checking has begun (the progress line says so).
    use std::io::BufRead;
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    for line in stderr.lines() {
        let line = line.unwrap();
        println!("{line}");
        if line.contains("states checked") {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    scope.assert_nothing_left();

    // What it left (its base image, its states) the next explore removes,
    // once its checkers (not killed with it) have left the scope.
    let deadline = Instant::now() + Duration::from_secs(10);
    while scope.processes_inside() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let left = scope.scratch_dirs();
    assert!(
        left.iter().any(|d| d.starts_with("slowfs-fs-")),
        "the killed run left no image directory to sweep: {left:?}"
    );
    let next = tempfile::tempdir().unwrap();
    let out = scope
        .slowfs()
        .args([
            "explore",
            "--check",
            "true",
            "--",
            "sh",
            "-c",
            "cd \"$SLOWFS_MOUNT\" && echo a > f",
        ])
        .current_dir(next.path())
        .output()
        .unwrap();
    let text = common::text(&out);
    println!("the next explore:\n{text}");
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!("removed {} scratch director", left.len())),
        "{text}"
    );
    assert_eq!(scope.scratch_dirs(), Vec::<String>::new());
}

/// Processes whose command line starts with `needle`.
fn processes_running(needle: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.starts_with(needle))
        .collect()
}

/// `slowfs explore --fs ext4` of `workload` (which ends in `sleep TAG`),
/// returned once the sleep runs.
fn explore_until_sleeping(
    scope: &Scope,
    dir: &Path,
    workload: &str,
    tag: &str,
) -> std::process::Child {
    explore_on_until_sleeping(scope, "ext4", dir, workload, tag)
}

/// [`explore_until_sleeping`] on filesystem `fs`.
fn explore_on_until_sleeping(
    scope: &Scope,
    fs: &str,
    dir: &Path,
    workload: &str,
    tag: &str,
) -> std::process::Child {
    let mut child = scope
        .slowfs()
        .args([
            "explore", "--fs", fs, "--check", "true", "--", "sh", "-c", workload,
        ])
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while processes_running(&format!("sleep {tag}")).is_empty() {
        assert!(Instant::now() < deadline, "the workload never started");
        assert!(child.try_wait().unwrap().is_none(), "explore ended early");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

#[test]
fn explore_killed_while_recording_leaves_no_workload_loop_device_or_mount() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    preflight();
    let scope = Scope::new();
    // A workload that writes, then waits far longer than the test.
    let tag = "3617.25";
    let scratch = tempfile::tempdir().unwrap();
    let mut child = explore_until_sleeping(
        &scope,
        scratch.path(),
        &format!("echo data > f && sync && exec sleep {tag}"),
        tag,
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_running(&format!("sleep {tag}")).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        processes_running(&format!("sleep {tag}")),
        Vec::<String>::new(),
        "the workload outlived explore"
    );
    scope.assert_nothing_left();
}

#[test]
fn a_filesystem_that_is_not_there_is_named_with_the_choices() {
    let out = Command::new(env!("CARGO_BIN_EXE_slowfs"))
        .args(["explore", "--fs", "zfs", "--check", "true", "--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("ext4, xfs, btrfs"), "{stderr}");
}

/// SIGTERM to explore while an `--fs` workload runs reaches the workload at
/// once (it runs under `unshare --fork`, which blocks SIGTERM while it
/// waits: explore once heard it only when a 25 s sleep ended), and the run
/// ends as interrupted with nothing left behind.
#[test]
fn sigterm_during_an_fs_workload_ends_it_at_once() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    preflight();
    let scope = Scope::new();
    let tag = "2519.5";
    let scratch = tempfile::tempdir().unwrap();
    let mut child = explore_until_sleeping(
        &scope,
        scratch.path(),
        &format!("echo data > f && sleep {tag}"),
        tag,
    );
    let sent = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    // The settle pause (2 s) and the unmount follow the workload's end.
    let deadline = sent + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("explore still running 15 s after SIGTERM (the workload sleeps for 2519 s)");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    let text = common::text(&out);
    println!("after {:?}: {status}\n{text}", sent.elapsed());
    assert_eq!(status.code(), Some(130), "{text}");
    assert!(text.contains("INTERRUPTED during the workload"), "{text}");
    assert!(processes_running(&format!("sleep {tag}")).is_empty());
    scope.assert_nothing_left();
}

/// A workload that writes nothing in the filesystem gets no verdict (the
/// filesystem's own journal writes at mount are not the workload's), as
/// without --fs; one that writes a file (the control) is checked.
#[test]
fn an_fs_workload_that_changes_nothing_is_refused_not_clean() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    preflight();
    let scope = Scope::new();
    let run = |workload: &str| {
        let scratch = tempfile::tempdir().unwrap();
        let json = scratch.path().join("r.json");
        let out = scope
            .slowfs()
            .args(["explore", "--fs", "ext4", "--check", "true", "--json"])
            .arg(&json)
            .args(["--", "sh", "-c", workload])
            .current_dir(scratch.path())
            .output()
            .unwrap();
        let text = common::text(&out);
        println!("{workload}:\n{text}");
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        (out.status.code(), text, report)
    };
    let (code, text, report) = run("echo x > /dev/null; ls > /dev/null");
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("changed nothing in the ext4 filesystem"),
        "{text}"
    );
    assert!(!text.contains("verdict: clean"), "{text}");
    assert_eq!(report["outcome"]["kind"], "refused", "{report}");
    assert_eq!(report["exit_code"], 2);
    let (code, text, _) = run("echo data > f && sync");
    assert_eq!(code, Some(0), "the control writes a file: {text}");
    // A change of owner alone is a change (only the inode's ctime shows it).
    let (code, text, _) = run("chown 1:1 . && sync");
    assert_eq!(code, Some(0), "a chown changed the filesystem: {text}");
    // The image is made as ext4 is deployed: 4 KiB blocks at 64 MiB too.
    assert!(text.contains("mkfs.ext4 -q -F -b 4096 -I 256"), "{text}");
    scope.assert_nothing_left();
}

#[test]
fn fs_with_backing_says_how_to_give_the_initial_state() {
    let out = Command::new(env!("CARGO_BIN_EXE_slowfs"))
        .args([
            "explore",
            "--fs",
            "ext4",
            "--backing",
            "/tmp",
            "--check",
            "true",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("--fs-setup 'cp -a /tmp/. .'"), "{stderr}");
}

/// XFS's sync interval is machine-wide: overlapping `--fs xfs` runs share
/// the shortened setting, a run that ends while another holds it leaves it
/// short, and the last one out puts the original back, even after a holder
/// was SIGKILLed (its pid is pruned). Before, the second run saved the first
/// one's 1 s as "the original" and left it.
#[test]
fn overlapping_xfs_runs_put_the_sync_interval_back() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    preflight();
    let scope = Scope::new();
    let interval = || {
        std::fs::read_to_string("/proc/sys/fs/xfs/xfssyncd_centisecs")
            .unwrap()
            .trim()
            .to_string()
    };
    let before = interval();
    assert_ne!(
        before, "100",
        "a run left the interval short before this test"
    );
    let scratch = tempfile::tempdir().unwrap();
    let run = |workload: &str| {
        let out = scope
            .slowfs()
            .args([
                "explore", "--fs", "xfs", "--check", "true", "--", "sh", "-c", workload,
            ])
            .current_dir(scratch.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", common::text(&out));
    };
    let tag = "3617.31";
    let mut holder = explore_on_until_sleeping(
        &scope,
        "xfs",
        scratch.path(),
        &format!("echo a > a && exec sleep {tag}"),
        tag,
    );
    assert_eq!(interval(), "100", "shortened while a workload runs");
    run("echo b > b");
    assert_eq!(interval(), "100", "another run still holds it");
    holder.kill().unwrap();
    holder.wait().unwrap();
    run("echo c > c");
    assert_eq!(
        interval(),
        before,
        "the last run out puts the original back"
    );
    scope.assert_nothing_left();
}

/// The leftover check sees what is the test's own: a loop device attached to
/// a file in its scope, a mount in it, and their names; gone once released.
#[test]
fn the_leftover_check_sees_a_loop_device_and_a_mount_of_the_tests_own() {
    preflight();
    let scope = Scope::new();
    let image = scope.path().join("slowfs-fs-control.img");
    std::fs::File::create(&image)
        .unwrap()
        .set_len(1 << 20)
        .unwrap();
    let out = Command::new("losetup")
        .args(["--find", "--show"])
        .arg(&image)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common::text(&out));
    let device = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let mountpoint = scope.path().join("mnt");
    std::fs::create_dir(&mountpoint).unwrap();
    nix::mount::mount(
        Some("tmpfs"),
        &mountpoint,
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .unwrap();
    let devices = scope.loop_devices();
    let mounts = scope.mounts();
    let _ = Command::new("losetup").arg("-d").arg(&device).status();
    let _ = nix::mount::umount2(&mountpoint, nix::mount::MntFlags::MNT_DETACH);
    assert_eq!(devices.len(), 1, "{devices:?}");
    assert!(devices[0].contains("slowfs-fs-control.img"), "{devices:?}");
    assert_eq!(mounts.len(), 1, "{mounts:?}");
    assert!(mounts[0].contains(" tmpfs "), "{mounts:?}");
    scope.assert_nothing_left();
}

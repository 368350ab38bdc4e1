//! `slowfs run` as an unprivileged user: mounted through the setuid fusermount3,
//! with /dev/fuse at its usual mode 0666 (a fresh device node bound over it in a
//! private mount namespace, so the machine's own stays as it is).

mod common;

use std::process::Command;

use common::text;
use std::time::{Duration, Instant};

const USER: &str = "slowfs-test";

/// The test user's uid, creating the user once per test process: the tests here
/// run in parallel, and two `useradd`s at once race for /etc/passwd's lock (the
/// loser fails, or a test runs as a uid fusermount3 cannot name yet).
fn test_user() -> u32 {
    static UID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *UID.get_or_init(create_test_user)
}

fn create_test_user() -> u32 {
    let lookup = || {
        let out = Command::new("getent")
            .args(["passwd", USER])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .split(':')
            .nth(2)
            .and_then(|uid| uid.trim().parse::<u32>().ok())
    };
    if let Some(uid) = lookup() {
        return uid;
    }
    // Another process (a second test binary) may be adding it too: retry while
    // /etc/passwd is locked, and accept its user when it wins.
    for _ in 0..50 {
        let out = Command::new("useradd")
            .args(["--no-create-home", "--shell", "/bin/sh", USER])
            .output()
            .expect("useradd (this test runs as root and creates its user)");
        if let Some(uid) = lookup() {
            return uid;
        }
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("lock"),
            "useradd {USER} failed: {}",
            text(&out)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("useradd {USER}: /etc/passwd stayed locked for 5 s");
}

/// Runs `script` as the test user in a private mount namespace where /dev/fuse is
/// a node of mode `mode`.
fn as_user(mode: &str, script: &str) -> (std::process::Output, Duration) {
    assert!(
        std::path::Path::new("/dev/fuse").exists(),
        "/dev/fuse is missing: this test needs FUSE"
    );
    let uid = test_user();
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("fuse");
    let slowfs = env!("CARGO_BIN_EXE_slowfs");
    let wrapper = format!(
        "mknod -m {mode} {node} c 10 229 && mount --bind {node} /dev/fuse && \
         exec setpriv --reuid={uid} --regid={uid} --clear-groups \
         env -i PATH=/usr/bin:/bin:/usr/sbin:/sbin HOME=/tmp SLOWFS={slowfs} sh -c '{script}'",
        node = node.display()
    );
    let started = Instant::now();
    let out = Command::new("timeout")
        .args([
            "60",
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
        ])
        .arg(wrapper)
        .current_dir("/tmp")
        .output()
        .unwrap();
    (out, started.elapsed())
}

#[test]
fn an_unprivileged_user_runs_a_command_on_a_mount_of_their_own() {
    let uid = test_user();
    let (out, took) = as_user(
        "666",
        "$SLOWFS run --seed 1 -- sh -c \"echo hi > \\$SLOWFS_MOUNT/x && cat \\$SLOWFS_MOUNT/x && \
         stat -c %u \\$SLOWFS_MOUNT/x && grep \\\" \\$SLOWFS_MOUNT fuse.slowfs \\\" /proc/mounts\"",
    );
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("hi\n"), "{said}");
    assert!(
        said.contains(&format!("\n{uid}\n")),
        "the file is the user's: {said}"
    );
    assert!(
        said.contains(&format!("user_id={uid}")),
        "the user's own mount: {said}"
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

#[test]
fn without_access_to_dev_fuse_the_error_names_the_fix() {
    let (out, _) = as_user("600", "$SLOWFS run -- true");
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("/dev/fuse is mode 600"), "{said}");
    assert!(said.contains("chmod 0666 /dev/fuse"), "{said}");
}

/// Another user who can reach a mount's control socket (here: the socket and
/// its directory opened to everyone, as a umask of 000 in a shared directory
/// once allowed for a moment) is refused on every request: only the mount's
/// owner and root may control it (SO_PEERCRED). Before, such a user added a rule.
#[test]
fn another_user_cannot_control_a_mount_even_through_an_open_socket() {
    use std::os::unix::fs::PermissionsExt;
    let uid = test_user();
    let daemon = common::daemon::Daemon::start(common::daemon::Options::default());
    let socket = daemon.socket();
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the socket is private from the start");
    for dir in [&daemon.runtime_dir, &daemon.mountpoint] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (out, _) = as_user(
        "666",
        &format!(
            "$SLOWFS ctl --socket {} {} set read\\ delay=1ms; echo rc=$?",
            socket.display(),
            daemon.mountpoint.display()
        ),
    );
    let said = text(&out);
    assert!(
        said.contains(&format!("uid {uid} may not control")),
        "{said}"
    );
    assert!(said.contains("rc=1"), "{said}");
    // Private again: the owner's client refuses a runtime directory others can write.
    std::fs::set_permissions(&daemon.runtime_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let rules = daemon
        .cli()
        .arg("ctl")
        .arg(&daemon.mountpoint)
        .arg("rules")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&rules.stdout).trim(),
        "no rules",
        "{}",
        text(&rules)
    );
    assert!(daemon.umount().status.success());
}

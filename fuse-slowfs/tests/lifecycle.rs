//! The mount's life: refusing a live mountpoint, `slowfs umount` with parked
//! requests, `umount --all` and dead mounts, stale sockets, remounting at once.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::daemon::{Daemon, Options};
use common::text;

/// `umount --all --force` ends every live mount of root's: the tests in this file
/// run one at a time so that none ends another's.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn a_second_mount_on_a_live_mountpoint_is_refused_and_touches_nothing() {
    let _serial = serial();
    let daemon = Daemon::start(Options::default());
    std::fs::write(daemon.mountpoint.join("f"), b"first").unwrap();
    for extra in [&[][..], &["--ctl-socket", "/tmp/slowfs-second.sock"][..]] {
        let out = daemon
            .cli()
            .args(["mount", "--backing", "/tmp"])
            .args(extra)
            .arg(&daemon.mountpoint)
            .output()
            .unwrap();
        let said = text(&out);
        assert_eq!(out.status.code(), Some(2), "{said}");
        assert!(
            said.contains("already has a slowfs mounted on it"),
            "{said}"
        );
        assert!(said.contains("slowfs umount"), "the fix is named: {said}");
    }
    assert_eq!(
        std::fs::read(daemon.mountpoint.join("f")).unwrap(),
        b"first",
        "the first mount still serves"
    );
    let stacked = slowfs::mount::slowfs_mounts()
        .iter()
        .filter(|m| **m == daemon.mountpoint)
        .count();
    assert_eq!(stacked, 1);
}

#[test]
fn umount_releases_hung_requests_and_waits_for_the_daemon() {
    let _serial = serial();
    let mut daemon = Daemon::start(Options {
        args: &["--set", "read hang"],
        ..Options::default()
    });
    std::fs::write(daemon.backing.join("f"), b"data").unwrap();
    let path = daemon.mountpoint.join("f");
    let reader = std::thread::spawn(move || {
        let started = Instant::now();
        let mut buf = [0u8; 4];
        let result = std::fs::File::open(&path).and_then(|mut f| f.read(&mut buf));
        (result.map(|_| buf), started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(300));
    let out = daemon.umount();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("released 1 parked request"), "{said}");
    assert!(said.contains("exited"), "{said}");
    let (result, waited) = reader.join().unwrap();
    assert_eq!(result.unwrap(), *b"data", "the released read completes");
    assert!(
        waited < Duration::from_secs(5),
        "the reader waited {waited:?}"
    );
    assert!(
        daemon.wait_exit(Duration::from_secs(1)).is_some(),
        "the daemon has exited when umount returns"
    );
    assert!(!daemon.mounted());
    // A clean unmount warns about nothing (it used to warn that the FUSE
    // connection it meant to abort was gone: it had ended by itself).
    let mut logged = String::new();
    daemon
        .child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut logged)
        .unwrap();
    assert!(!logged.contains("WARN"), "{logged}");
}

/// Set in the copy of the test binary that [`in_a_mount_namespace_of_its_own`] runs.
const OWN_NAMESPACE: &str = "SLOWFS_TEST_OWN_MOUNT_NAMESPACE";

/// Runs test `name` again, alone, in a copy of this binary in a private
/// mount namespace of its own (`unshare -m --propagation private`), and
/// checks it passed; there, before the test, the copies of the slowfs mounts
/// it inherited are detached (the originals, other tests' and runs', stay),
/// so `umount --all` sees only the mounts the test makes. True in that copy:
/// the caller then runs the test's body.
fn in_a_mount_namespace_of_its_own(name: &str) -> bool {
    if std::env::var_os(OWN_NAMESPACE).is_some() {
        // Stacked mounts: detach until none is left.
        let deadline = Instant::now() + Duration::from_secs(10);
        while let Some(inherited) = slowfs::mount::slowfs_mounts().pop() {
            assert!(Instant::now() < deadline, "{inherited:?} stays mounted");
            nix::mount::umount2(&inherited, nix::mount::MntFlags::MNT_DETACH).unwrap_or_else(|e| {
                panic!("detaching the copy of {inherited:?} in the test's namespace: {e}")
            });
        }
        return true;
    }
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "--"])
        .arg(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads", "1"])
        .env(OWN_NAMESPACE, "1")
        .output()
        .unwrap();
    let said = text(&out);
    println!("{said}");
    assert!(
        out.status.success(),
        "{name} in its own mount namespace: {said}"
    );
    assert!(said.contains("1 passed"), "{name} did not run: {said}");
    false
}

/// `umount --all` runs in a mount namespace of the test's own: `--force`
/// ends every live slowfs mount it sees, and the machine's (other tests',
/// a long explore's) are not the test's to end.
#[test]
fn umount_all_takes_only_dead_mounts_unless_forced() {
    let _serial = serial();
    if !in_a_mount_namespace_of_its_own("umount_all_takes_only_dead_mounts_unless_forced") {
        return;
    }
    let mut live = Daemon::start(Options::default());
    let mut dead = Daemon::start(Options::default());
    dead.kill_leaving_a_dead_mount();
    assert!(
        dead.mounted(),
        "a SIGKILLed daemon and guard leave the mount"
    );
    let out = live.cli().args(["umount", "--all"]).output().unwrap();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(!dead.mounted(), "the dead mount is gone: {said}");
    assert!(live.mounted(), "the live one stays: {said}");
    assert!(said.contains("live (--force ends it)"), "{said}");

    // The killed daemon's socket is still there; the next mount sweeps it away.
    let stale: Vec<_> = std::fs::read_dir(&dead.runtime_dir)
        .unwrap()
        .filter(|e| {
            use std::os::unix::fs::FileTypeExt;
            e.as_ref().unwrap().file_type().unwrap().is_socket()
        })
        .collect();
    assert_eq!(stale.len(), 1, "the killed daemon left its socket");
    dead.restart(Options::default());
    dead.kill_leaving_a_dead_mount();
    let _ = slowfs::mount::force_unmount(&dead.mountpoint);
    let out = live
        .cli()
        .args(["umount", "--all", "--force"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(!live.mounted());
    assert!(live.wait_exit(Duration::from_secs(5)).is_some());
}

/// SIGKILL leaves the daemon no chance to unmount: its guard does. A released
/// guard (a clean unmount) exits and touches nothing.
#[test]
fn a_sigkilled_daemon_leaves_no_mount_behind() {
    let _serial = serial();
    let mut daemon = Daemon::start(Options::default());
    let guards = daemon.children();
    assert_eq!(guards.len(), 1, "one unmount guard: {guards:?}");
    daemon.child.kill().unwrap();
    daemon.child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while daemon.mounted() {
        assert!(Instant::now() < deadline, "the dead mount stayed");
        std::thread::sleep(Duration::from_millis(10));
    }
    let alive = |pid: i32| std::path::Path::new(&format!("/proc/{pid}")).exists();
    while alive(guards[0]) {
        assert!(Instant::now() < deadline, "the guard stayed after its work");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Clean: unmounted by the daemon, the guard gone with it.
    daemon.restart(Options::default());
    let guard = daemon.children()[0];
    let out = daemon.umount();
    assert!(out.status.success(), "{}", text(&out));
    assert!(daemon.wait_exit(Duration::from_secs(10)).is_some());
    assert!(!alive(guard), "the daemon reaps its released guard");
}

/// SIGKILL while readers are parked: the kernel aborts the connection as the
/// daemon's last FUSE fd closes, and a stat the guard sends in between fails
/// with ECONNABORTED, not ENOTCONN. The guard took that for another
/// filesystem and left a dead mount in ~15% of kills; every kill here must
/// leave none (bench/sigkill_mounts.sh runs 200 under load).
#[test]
fn sigkill_with_parked_readers_never_leaves_a_dead_mount() {
    let _serial = serial();
    let rounds = 25;
    let mut daemon = Daemon::start(Options {
        args: &["--set", "read hang"],
        ..Options::default()
    });
    for round in 0..rounds {
        std::fs::write(daemon.backing.join("f"), b"data").unwrap();
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let path = daemon.mountpoint.join("f");
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4];
                    let _ = std::fs::File::open(&path).and_then(|mut f| f.read(&mut buf));
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(50 + 10 * (round % 5)));
        daemon.child.kill().unwrap();
        daemon.child.wait().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while daemon.mounted() {
            if Instant::now() > deadline {
                let _ = slowfs::mount::force_unmount(&daemon.mountpoint);
                panic!("round {round} of {rounds}: SIGKILL left a dead mount");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        for reader in readers {
            reader.join().unwrap();
        }
        if round + 1 < rounds {
            daemon.restart(Options {
                args: &["--set", "read hang"],
                ..Options::default()
            });
        }
    }
}

#[test]
fn a_stale_socket_is_removed_by_the_next_mount() {
    let _serial = serial();
    let mut first = Daemon::start(Options::default());
    first.kill_leaving_a_dead_mount();
    let _ = slowfs::mount::force_unmount(&first.mountpoint);
    // Sockets only: a daemon killed between renaming its socket into place
    // and removing the private directory it was bound in leaves that
    // (empty) directory too (seen once: 2 entries).
    let sockets = || -> Vec<std::path::PathBuf> {
        use std::os::unix::fs::FileTypeExt;
        std::fs::read_dir(&first.runtime_dir)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_socket()))
            .map(|e| e.path())
            .collect()
    };
    let stale = sockets();
    assert_eq!(stale.len(), 1, "a SIGKILLed daemon leaves its socket");
    // Staging directories of daemons killed while binding: an old one goes,
    // one a daemon may be binding in right now stays.
    let staging = |name: &str| first.runtime_dir.join(name);
    std::fs::create_dir(staging(".slowfs-ctl-old")).unwrap();
    std::fs::create_dir(staging(".slowfs-ctl-new")).unwrap();
    let touched = Command::new("touch")
        .args(["-d", "2 minutes ago"])
        .arg(staging(".slowfs-ctl-old"))
        .status()
        .unwrap();
    assert!(touched.success());
    // Another mount using the same runtime directory (another mountpoint).
    let other = tempfile::tempdir().unwrap();
    let mut child = first
        .cli()
        .args(["mount"])
        .arg(other.path())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !slowfs::mount::slowfs_mounts().contains(&other.path().to_path_buf()) {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    // The kernel shows the mount a moment before its control socket is
    // bound: wait for the socket, not only the mount.
    while sockets().len() != 1 || sockets() == stale {
        assert!(
            Instant::now() < deadline,
            "only the new mount's socket should remain: {:?} (stale: {stale:?})",
            sockets()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = first
        .cli()
        .arg("umount")
        .arg(other.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    child.wait().unwrap();
    // Checked after the unmount, so that a failure leaves no mount.
    assert!(
        !staging(".slowfs-ctl-old").exists(),
        "an old staging dir is swept"
    );
    assert!(
        staging(".slowfs-ctl-new").exists(),
        "a fresh one is left alone"
    );
}

#[test]
fn the_daemon_exits_when_unmounted_from_outside_and_a_remount_works_at_once() {
    let _serial = serial();
    let mut daemon = Daemon::start(Options::default());
    for _ in 0..5 {
        nix::mount::umount2(&daemon.mountpoint, nix::mount::MntFlags::empty()).unwrap();
        daemon.restart(Options::default());
        assert!(daemon.mounted());
    }
    nix::mount::umount2(&daemon.mountpoint, nix::mount::MntFlags::empty()).unwrap();
    let status = daemon.wait_exit(Duration::from_secs(5));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
}

/// `umount M & sleep 0.01; mount M` (xfstests generic/604): a mount that
/// finds its mountpoint still taken by a slowfs on its way out waits for it
/// (here: unmounted 300 ms after the mount began) instead of refusing.
#[test]
fn a_mount_racing_an_unmount_of_its_mountpoint_waits_for_it() {
    let _serial = serial();
    let daemon = Daemon::start(Options::default());
    let mount = daemon
        .cli()
        .args(["mount", "--background", "--backing"])
        .arg(&daemon.backing)
        .arg(&daemon.mountpoint)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let unmounted = daemon.umount();
    let out = mount.wait_with_output().unwrap();
    let remounted = out.status.success();
    // The second daemon is not the fixture's child: end it here on every path.
    let end = remounted.then(|| daemon.cli().arg("umount").arg(&daemon.mountpoint).output());
    assert!(unmounted.status.success(), "{}", text(&unmounted));
    assert!(remounted, "{}", text(&out));
    assert!(end.unwrap().unwrap().status.success());
}

#[test]
fn the_control_socket_caps_line_length_and_connections() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;
    let _serial = serial();
    let daemon = Daemon::start(Options::default());
    let socket = daemon.socket();
    let answer = |stream: &UnixStream| {
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).unwrap();
        line
    };

    // A 2 MiB line is refused after 1 MiB, not read whole and echoed.
    let mut stream = UnixStream::connect(&socket).unwrap();
    let huge = vec![b'x'; 2 << 20];
    let writer = {
        let mut stream = stream.try_clone().unwrap();
        std::thread::spawn(move || {
            let _ = stream.write_all(&huge);
        })
    };
    let line = answer(&stream);
    assert!(line.contains("longer than 1048576 bytes"), "{line}");
    assert!(line.len() < 300, "the request is not echoed back");
    drop(stream.shutdown(std::net::Shutdown::Both));
    let _ = writer.join();

    // Connections beyond the cap are answered with an error (a request that
    // is not about the mount's life waits at most 2 s for it). A connection
    // that ended just before (the refused one above) may still hold its slot
    // for a moment, and an extra connection then takes the slot it frees:
    // each extra asks for the rules, and keeps its slot if served.
    let mut idle: Vec<_> = (0..slowfs::control::MAX_CONNECTIONS)
        .map(|_| UnixStream::connect(&socket).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut refused = None;
    for _ in 0..4 {
        let mut extra = UnixStream::connect(&socket).unwrap();
        extra.write_all(b"{\"cmd\":\"rules\"}\n").unwrap();
        let line = answer(&extra);
        if line.contains("too many control connections") {
            refused = Some(extra);
            break;
        }
        assert!(line.contains("\"ok\":true"), "served or refused: {line}");
        idle.push(extra);
    }
    let extra = refused.expect("a connection beyond the cap is refused");
    assert!(
        idle.len() <= slowfs::control::MAX_CONNECTIONS + 2,
        "only slots freed late were taken: {} connections served",
        idle.len()
    );
    drop(idle);
    // Served again once the closed connections' threads have seen them end
    // (at most 5 s on a loaded machine).
    let ctl_rules = || {
        daemon
            .cli()
            .args(["ctl"])
            .arg(&daemon.mountpoint)
            .arg("rules")
            .output()
            .unwrap()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut out = ctl_rules();
    while !out.status.success() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        out = ctl_rules();
    }
    assert!(out.status.success(), "served again: {}", text(&out));
    stream = extra;
    drop(stream);
}

#[test]
fn errors_name_the_path() {
    let _serial = serial();
    let mountpoint = tempfile::tempdir().unwrap();
    let out = common::daemon::slowfs()
        .args(["mount", "--backing", "/nonexistent/backing"])
        .arg(mountpoint.path())
        .output()
        .unwrap();
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("/nonexistent/backing"), "{said}");
}

//! A daemon that loses no data it was not told to lose, never wedges, and lets
//! no one in: each test here failed before its fix.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::daemon::{slowfs, Daemon, Options};
use common::{text, SlowMount};

/// Tests that start daemons and count mounts run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// 1 MiB written through a shared mapping, msync and fsync: every byte lands,
/// although a rule shortens every write. The kernel's write-back is not a
/// caller's write: it cannot retry a short one, so none is ever shortened.
#[test]
fn mmap_write_back_is_never_shortened() {
    use std::os::fd::AsRawFd;
    let _serial = serial();
    let mount = SlowMount::configured(&["write short=1..4096"], |_| {}).expect("mounting slowfs");
    const LEN: usize = 1 << 20;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(mount.path("mapped"))
        .unwrap();
    file.set_len(LEN as u64).unwrap();
    // SAFETY: a fresh shared mapping of a file we hold open, LEN bytes long,
    // written within bounds and unmapped before the file is closed.
    unsafe {
        let map = libc::mmap(
            std::ptr::null_mut(),
            LEN,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        );
        assert_ne!(map, libc::MAP_FAILED, "{}", std::io::Error::last_os_error());
        let bytes = std::slice::from_raw_parts_mut(map as *mut u8, LEN);
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i % 251) as u8 + 1;
        }
        assert_eq!(libc::msync(map, LEN, libc::MS_SYNC), 0);
        assert_eq!(libc::munmap(map, LEN), 0);
    }
    file.sync_all().unwrap();
    drop(file);
    let landed = std::fs::read(mount.backing_path("mapped")).unwrap();
    assert_eq!(landed.len(), LEN);
    let wrong = landed
        .iter()
        .enumerate()
        .filter(|(i, b)| **b != (i % 251) as u8 + 1)
        .count();
    assert_eq!(wrong, 0, "{wrong} of {LEN} bytes did not land");
}

#[test]
fn a_mountpoint_inside_its_backing_directory_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let backing = root.path().join("b");
    std::fs::create_dir_all(backing.join("mnt")).unwrap();
    for (mountpoint, says) in [
        (backing.join("mnt"), "inside the backing directory"),
        (backing.clone(), "is the backing directory itself"),
        (root.path().to_path_buf(), "contains the backing directory"),
    ] {
        let err = slowfs::Mount::start(slowfs::MountConfig::new(&backing, &mountpoint))
            .map(drop)
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{}: {err}", mountpoint.display());
        assert!(!slowfs::mount::slowfs_mounts().contains(&mountpoint.canonicalize().unwrap()));
    }
}

/// The control socket deleted under a running mount: every stop path still
/// ends in bounded time.
#[test]
fn a_deleted_control_socket_does_not_wedge_the_daemon() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("ctl.sock");
    let started = Instant::now();
    let out = Command::new("timeout")
        .arg("30")
        .arg(env!("CARGO_BIN_EXE_slowfs"))
        .args(["run", "--ctl-socket"])
        .arg(&socket)
        .args(["--", "sh", "-c"])
        .arg(format!("rm {}", socket.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );

    let mut daemon = Daemon::start(Options::default());
    std::fs::remove_file(daemon.socket()).unwrap();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(daemon.pid(), libc::SIGTERM) };
    assert!(
        daemon.wait_exit(Duration::from_secs(10)).is_some(),
        "SIGTERM did not end a daemon whose socket was deleted"
    );
    assert!(!daemon.mounted());
}

/// `slowfs umount` of a live daemon with every control connection taken by idle
/// clients, and the overflow batch too: the daemon is reached, parked callers
/// get their answers, nothing is force-detached (a busy daemon is not a dead one).
#[test]
fn umount_reaches_a_daemon_whose_connections_are_all_taken() {
    let _serial = serial();
    let daemon = Daemon::start(Options {
        args: &["--set", "read path=held hang"],
        ..Options::default()
    });
    std::fs::write(daemon.backing.join("held"), b"answer").unwrap();
    let socket = daemon.socket();
    let path = daemon.mountpoint.join("held");
    let reader = std::thread::spawn(move || std::fs::read(path));
    std::thread::sleep(Duration::from_millis(300));
    // Past both the served connections and the overflow batch.
    let idle: Vec<UnixStream> = (0..2 * slowfs::control::MAX_CONNECTIONS + 20)
        .map(|_| UnixStream::connect(&socket).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let out = daemon.umount();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(!said.contains("no daemon answered"), "{said}");
    let read = reader.join().unwrap();
    assert_eq!(
        read.as_deref().ok(),
        Some(&b"answer"[..]),
        "{read:?}: {said}"
    );
    drop(idle);
}

/// A mount right after `umount` at the same mountpoint: never refused.
#[test]
fn a_remount_right_after_umount_is_accepted() {
    let _serial = serial();
    let mut daemon = Daemon::start(Options::default());
    for round in 0..5 {
        let out = daemon.umount();
        assert!(out.status.success(), "round {round}: {}", text(&out));
        let started = Instant::now();
        daemon.restart(Options::default());
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "round {round}: the remount took {:?}",
            started.elapsed()
        );
    }
}

/// A runtime directory another user could write to (or owns) is refused with
/// the fix, and nothing is mounted.
#[test]
fn a_runtime_directory_that_is_not_private_is_refused() {
    let _serial = serial();
    let backing = tempfile::tempdir().unwrap();
    let mountpoint = tempfile::tempdir().unwrap();
    let base = tempfile::tempdir().unwrap();
    let open = base.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let theirs = base.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    for (dir, says) in [
        (&open, "has mode 777: other users can create files in it"),
        (&theirs, "belongs to uid 65534"),
    ] {
        for args in [vec!["mount", "--backing"], vec!["ctl"]] {
            let mut cmd = slowfs();
            cmd.env("SLOWFS_RUNTIME_DIR", dir).args(&args);
            if args[0] == "mount" {
                cmd.arg(backing.path()).arg(mountpoint.path());
            } else {
                cmd.arg(mountpoint.path()).arg("rules");
            }
            let out = Command::new("timeout")
                .arg("20")
                .arg(cmd.get_program())
                .args(cmd.get_args())
                .envs(cmd.get_envs().map(|(k, v)| (k, v.unwrap())))
                .output()
                .unwrap();
            let said = text(&out);
            assert!(
                !out.status.success(),
                "{args:?} in {}: {said}",
                dir.display()
            );
            assert!(
                said.contains(says) && said.contains("SLOWFS_RUNTIME_DIR"),
                "{said}"
            );
        }
    }
    assert!(!slowfs::mount::slowfs_mounts().contains(&mountpoint.path().canonicalize().unwrap()));
}

/// `--ctl-socket` naming a regular file: refused, the file left as it was.
#[test]
fn ctl_socket_never_deletes_what_is_not_a_socket() {
    let dir = tempfile::tempdir().unwrap();
    let precious = dir.path().join("precious.txt");
    std::fs::write(&precious, b"keep me").unwrap();
    let out = slowfs()
        .args(["run", "--ctl-socket"])
        .arg(&precious)
        .args(["--", "true"])
        .output()
        .unwrap();
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("is not a socket"), "{said}");
    assert_eq!(std::fs::read(&precious).unwrap(), b"keep me");
}

/// Ctrl-Z then `fg` (SIGSTOP, SIGCONT) to a program with no signal handlers
/// while its read is delayed: the read completes, it does not fail with EINTR.
#[test]
fn stop_and_continue_do_not_interrupt_a_delayed_read() {
    let _serial = serial();
    let mount =
        SlowMount::configured(&["read path=slow delay=1500ms"], |_| {}).expect("mounting slowfs");
    std::fs::write(mount.backing_path("slow"), b"all of it\n").unwrap();
    let out_file = tempfile::NamedTempFile::new().unwrap();
    let mut cat = Command::new("cat")
        .arg(mount.path("slow"))
        .stdout(out_file.reopen().unwrap())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let pid = cat.id() as i32;
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let status = cat.wait().unwrap();
    assert!(status.success(), "cat: {status}");
    assert_eq!(std::fs::read(out_file.path()).unwrap(), b"all of it\n");
}

#[test]
fn rules_that_would_make_a_correct_program_wrong_are_refused() {
    for rule in ["read short=0", "write short=0", "write short=0..64"] {
        let out = slowfs()
            .args(["run", "--set", rule, "--", "true"])
            .output()
            .unwrap();
        let said = text(&out);
        assert_eq!(out.status.code(), Some(2), "{rule}: {said}");
        assert!(
            said.contains("1..") && said.contains("short=0!"),
            "{rule}: {said}"
        );
    }
}

/// A background mount with `-o`: the options reach the kernel, /proc/mounts
/// names the backing directory as the source, `ro` refuses writes, and as root
/// `dev` lets device nodes work.
#[test]
fn mount_options_are_honoured_and_the_source_is_the_backing_dir() {
    let _serial = serial();
    let backing = tempfile::tempdir().unwrap();
    let mountpoint = tempfile::tempdir().unwrap();
    std::fs::write(backing.path().join("f"), b"data").unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let mounted = |options: &str| {
        let out = slowfs()
            .env("SLOWFS_RUNTIME_DIR", runtime.path())
            .args(["mount", "--background", "-o", options, "--backing"])
            .arg(backing.path())
            .arg(mountpoint.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "-o {options}: {}", text(&out));
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
        let line = mounts
            .lines()
            .find(|l| l.contains(&*mountpoint.path().to_string_lossy()))
            .unwrap_or_else(|| panic!("not mounted: {mounts}"))
            .to_string();
        line
    };
    let unmount = || {
        let out = slowfs()
            .env("SLOWFS_RUNTIME_DIR", runtime.path())
            .arg("umount")
            .arg(mountpoint.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
    };
    let line = mounted("ro,noatime,noexec");
    let fields: Vec<&str> = line.split(' ').collect();
    assert_eq!(
        fields[0],
        backing.path().canonicalize().unwrap().to_str().unwrap(),
        "{line}"
    );
    assert_eq!(fields[2], "fuse.slowfs", "{line}");
    for option in ["ro", "noatime", "noexec", "nosuid", "nodev"] {
        assert!(
            fields[3].split(',').any(|o| o == option),
            "{option}: {line}"
        );
    }
    assert_eq!(std::fs::read(mountpoint.path().join("f")).unwrap(), b"data");
    let err = std::fs::write(mountpoint.path().join("g"), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS), "{err}");
    unmount();

    let line = mounted("dev,suid,strictatime");
    assert!(
        !line.contains("nodev") && !line.contains("nosuid"),
        "{line}"
    );
    let null = mountpoint.path().join("null");
    let made = Command::new("mknod")
        .arg(&null)
        .args(["c", "1", "3"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", text(&made));
    std::fs::write(&null, b"into the void").expect("a device node works on a dev mount");
    unmount();

    let out = slowfs()
        .args(["run", "-o", "ro,noatim", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("unknown mount option 'noatim'"),
        "{}",
        text(&out)
    );
}

/// `mount -t fuse.slowfs` (and so fstab) through the mount.fuse.slowfs helper
/// symlink: mounted with slowfs's own options and the generic ones, and ended
/// by a plain umount.
#[test]
fn mount_t_fuse_slowfs_works_through_the_helper() {
    let _serial = serial();
    let helper = Path::new("/sbin/mount.fuse.slowfs");
    let ours = !helper.exists();
    if ours {
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_slowfs"), helper).unwrap();
    }
    struct Remove(bool);
    impl Drop for Remove {
        fn drop(&mut self) {
            if self.0 {
                let _ = std::fs::remove_file("/sbin/mount.fuse.slowfs");
            }
        }
    }
    let _remove = Remove(ours);
    let backing = tempfile::tempdir().unwrap();
    let mountpoint = tempfile::tempdir().unwrap();
    std::fs::write(backing.path().join("f"), b"through fstab").unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let out = Command::new("mount")
        .env("SLOWFS_RUNTIME_DIR", runtime.path())
        .args(["-t", "fuse.slowfs", "-o", "profile=nfs,seed=3,noatime"])
        .arg(backing.path())
        .arg(mountpoint.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    // A mount helper is silent on success (mount(8) passes its output on).
    assert_eq!(text(&out), "", "the helper said something on success");
    let canonical = mountpoint.path().canonicalize().unwrap();
    assert!(slowfs::mount::slowfs_mounts().contains(&canonical));
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            if slowfs::mount::slowfs_mounts().contains(&self.0) {
                let _ = Command::new("umount").arg(&self.0).status();
            }
        }
    }
    let _unmount = Unmount(canonical.clone());
    // Root's mount(8) semantics: suid,dev unless told otherwise (xfstests 184,
    // 434, 633 need device nodes and set-ID binaries on the mount).
    let flags_as_mounted = || {
        let line = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .find(|l| l.split(' ').nth(4) == Some(canonical.to_str().unwrap()))
            .map(String::from)
            .unwrap();
        let flags = line.split(' ').nth(5).unwrap();
        assert!(
            !flags.contains("nodev") && !flags.contains("nosuid") && flags.contains("noatime"),
            "{line}"
        );
    };
    flags_as_mounted();
    assert_eq!(
        std::fs::read(mountpoint.path().join("f")).unwrap(),
        b"through fstab"
    );
    // `mount -o remount,ro` (xfstests 294, 306, 452): the same daemon, now
    // read-only, then writable again; slowfs's own options cannot change so.
    let remount = |options: &str| {
        Command::new("mount")
            .args(["-o", options])
            .arg(mountpoint.path())
            .output()
            .unwrap()
    };
    let out = remount("remount,ro");
    assert!(out.status.success(), "{}", text(&out));
    let err = std::fs::write(mountpoint.path().join("g"), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS), "{err}");
    let out = remount("remount,rw");
    assert!(out.status.success(), "{}", text(&out));
    std::fs::write(mountpoint.path().join("g"), b"x").unwrap();
    flags_as_mounted();
    // mount(8) passes the first mount's -o again (xfstests: passthrough=never):
    // slowfs's own are left as mounted, silently (a note with -v), and the
    // flags change.
    let out = remount("remount,ro,profile=flaky");
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(text(&out), "", "a remount prints nothing");
    let out = Command::new("mount")
        .args(["-v", "-o", "remount,ro,profile=flaky"])
        .arg(mountpoint.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("'profile=flaky' is left as mounted")
            && text(&out).contains("slowfs ctl"),
        "{}",
        text(&out)
    );
    let err = std::fs::write(mountpoint.path().join("h"), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS), "{err}");
    let rules = slowfs()
        .env("SLOWFS_RUNTIME_DIR", runtime.path())
        .arg("ctl")
        .arg(mountpoint.path())
        .arg("rules")
        .output()
        .unwrap();
    assert!(!text(&rules).contains("flaky"), "{}", text(&rules));
    let rules = slowfs()
        .env("SLOWFS_RUNTIME_DIR", runtime.path())
        .arg("ctl")
        .arg(mountpoint.path())
        .arg("rules")
        .output()
        .unwrap();
    assert!(
        text(&rules).contains("delay"),
        "the nfs profile's rules: {}",
        text(&rules)
    );
    let out = Command::new("umount")
        .arg(mountpoint.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let deadline = Instant::now() + Duration::from_secs(5);
    while slowfs::mount::slowfs_mounts().contains(&canonical) {
        assert!(Instant::now() < deadline, "still mounted");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A config of 6,000 rules whose globs each compile but together exceed the
/// matcher's size limit: `slowfs check` accepts it, the mount serves with it,
/// and the rules fire where they match. The first request of such a mount
/// used to panic every worker ("error building NFA"), leaving a hung, then
/// dead, mount.
#[test]
fn six_thousand_rules_too_large_for_one_matcher_are_served() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("many.toml");
    let rules: String = (0..6000)
        .map(|n| format!("\"read path=**/[!.]*{n}?/**/*.{{db,log,tmp}} delay=1ms\",\n"))
        .collect();
    std::fs::write(&config, format!("rules = [\n{rules}]\n")).unwrap();
    let out = slowfs().arg("check").arg(&config).output().unwrap();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("ok, 6000 rule(s)"), "{said}");

    let backing = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(backing.path().join("a5999z/b")).unwrap();
    std::fs::write(backing.path().join("a5999z/b/c.log"), b"logged").unwrap();
    let out = Command::new("timeout")
        .arg("60")
        .arg(env!("CARGO_BIN_EXE_slowfs"))
        .args(["run", "--config"])
        .arg(&config)
        .arg("--backing")
        .arg(backing.path())
        .args([
            "--",
            "sh",
            "-c",
            "ls -R $SLOWFS_MOUNT && cat $SLOWFS_MOUNT/a5999z/b/c.log",
        ])
        .output()
        .unwrap();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("logged"), "{said}");
    assert!(!said.contains("panicked"), "{said}");
    // Rule #6000 (5999) matched the reads of c.log, and fired.
    assert!(
        said.lines()
            .any(|l| l.starts_with("rule #6000 fired") && !l.contains("fired 0/")),
        "{said}"
    );
}

/// One glob of 409 KB (a brace list of 40,000 names) sent with `ctl set`: the
/// rule is refused and the mount serves on. It used to panic every worker.
#[test]
fn a_glob_too_large_to_match_is_refused_by_ctl_set_and_the_mount_serves_on() {
    let _serial = serial();
    let daemon = Daemon::start(Options::default());
    std::fs::write(daemon.backing.join("f"), b"still here").unwrap();
    let names: Vec<String> = (0..40_000).map(|n| format!("name{n:05}")).collect();
    let rule = format!("read path=**/{{{}}} delay=1ms", names.join(","));
    assert!(rule.len() > 400_000);
    // Longer than one argument may be (128 KiB): straight to the socket.
    let socket = daemon.socket();
    let command = slowfs::control::Command::Set { rule };
    let answer = slowfs::control::request(&socket, &command).unwrap();
    assert!(!answer.ok, "{answer:?}");
    let said = answer.message;
    assert!(
        said.contains("size limit") || said.contains("too large"),
        "{said}"
    );
    assert_eq!(
        std::fs::read(daemon.mountpoint.join("f")).unwrap(),
        b"still here"
    );
    let listed = std::fs::read_dir(&daemon.mountpoint).unwrap().count();
    assert_eq!(listed, 1);
    assert!(daemon.umount().status.success());
}

/// A panic in a request's handler (forced on one path by
/// SLOWFS_TEST_PANIC_PATH), 40 times, inline and in a parked (delayed)
/// request: each such request fails with EIO, and the mount serves every
/// other request after them and unmounts cleanly. Before, each panic ended a
/// worker thread and the mount hung once they were gone.
#[test]
fn a_panic_in_a_request_fails_that_request_only() {
    let _serial = serial();
    // A rule naming lookups makes the daemon compute lookup paths; the
    // second one parks boom's lookups, so they panic in the scheduler.
    for rule in ["lookup path=never delay=1ms", "lookup path=boom delay=5ms"] {
        let backing = tempfile::tempdir().unwrap();
        std::fs::write(backing.path().join("boom"), b"x").unwrap();
        std::fs::write(backing.path().join("fine"), b"ok").unwrap();
        let started = Instant::now();
        let out = Command::new("timeout")
            .arg("60")
            .arg(env!("CARGO_BIN_EXE_slowfs"))
            .env("SLOWFS_TEST_PANIC_PATH", "boom")
            .args(["run", "--threads", "2", "--set", rule, "--backing"])
            .arg(backing.path())
            .args([
                "--",
                "sh",
                "-c",
                "failed=0; \
                 for i in $(seq 40); do stat $SLOWFS_MOUNT/boom >/dev/null 2>&1 || failed=$((failed+1)); done; \
                 echo failed=$failed; cat $SLOWFS_MOUNT/fine; echo; ls $SLOWFS_MOUNT",
            ])
            .output()
            .unwrap();
        let said = text(&out);
        assert!(out.status.success(), "{rule}: {said}");
        assert!(said.contains("failed=40"), "{rule}: {said}");
        assert!(said.contains("ok\nboom\nfine"), "{rule}: served on: {said}");
        assert!(
            said.contains("panicked and were answered EIO"),
            "{rule}: counted: {said}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{rule}: {said}"
        );
    }
}

/// A bind mount of the backing directory is the backing directory: a
/// mountpoint inside the alias is refused (it used to be accepted, and with
/// shared propagation a deep path deadlocked the daemon).
#[test]
fn a_mountpoint_inside_a_bind_mount_of_the_backing_directory_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let backing = root.path().join("b");
    let alias = root.path().join("alias");
    std::fs::create_dir_all(backing.join("deep/mnt")).unwrap();
    std::fs::create_dir(&alias).unwrap();
    let bind = Command::new("mount")
        .args(["--bind"])
        .arg(&backing)
        .arg(&alias)
        .output()
        .unwrap();
    assert!(bind.status.success(), "mount --bind: {}", text(&bind));
    let unbind = scopeguard(&alias);
    let mountpoint = alias.join("deep/mnt");
    let err = slowfs::Mount::start(slowfs::MountConfig::new(&backing, &mountpoint))
        .map(drop)
        .unwrap_err()
        .to_string();
    assert!(err.contains("inside the backing directory"), "{err}");
    assert!(
        err.contains("bind mount"),
        "says why the spelling differs: {err}"
    );
    drop(unbind);
}

/// Unmounts `path` (lazily) when dropped, also when the test panics.
fn scopeguard(path: &Path) -> impl Drop + '_ {
    struct Unbind<'a>(&'a Path);
    impl Drop for Unbind<'_> {
        fn drop(&mut self) {
            let _ = nix::mount::umount2(self.0, nix::mount::MntFlags::MNT_DETACH);
        }
    }
    Unbind(path)
}

/// A daemon that accepts a connection and never answers (SIGSTOP): `ctl`
/// says within a second what it waits for and gives up in ~10 s (it took
/// 30.7 s, silently); `umount` does not take a stopped daemon for a dead
/// one and changes nothing, unless told `--force`.
#[test]
fn a_silent_daemon_is_named_quickly_and_not_detached_unless_forced() {
    let _serial = serial();
    let mut daemon = Daemon::start(Options::default());
    // SAFETY: signalling our own child.
    unsafe { libc::kill(daemon.pid(), libc::SIGSTOP) };
    let started = Instant::now();
    let out = daemon
        .cli()
        .arg("ctl")
        .arg(&daemon.mountpoint)
        .arg("info")
        .output()
        .unwrap();
    let took = started.elapsed();
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("waiting for the daemon"), "{said}");
    assert!(
        said.contains("did not") || said.contains("no answer"),
        "{said}"
    );
    assert!(took < Duration::from_secs(20), "took {took:?}: {said}");

    let out = daemon.umount();
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("Nothing was changed"), "{said}");
    assert!(said.contains("--force"), "the way out is named: {said}");
    assert!(daemon.mounted(), "a stopped daemon keeps its mount: {said}");

    let out = daemon
        .cli()
        .args(["umount", "--force"])
        .arg(&daemon.mountpoint)
        .output()
        .unwrap();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(!daemon.mounted(), "{said}");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(daemon.pid(), libc::SIGCONT) };
    assert!(
        daemon.wait_exit(Duration::from_secs(10)).is_some(),
        "the detached daemon exits once continued"
    );
}

/// `--passthrough never`: a file opened before a `read short=` rule is added
/// reads through the page cache, and the kernel takes a short page-cache fill
/// for the end of the file. Such reads must come back whole (the rule applies
/// to handles opened after it); they used to return 0 bytes mid-file.
#[test]
fn a_short_rule_never_makes_a_false_end_of_file_on_a_cached_handle() {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;
    let _serial = serial();
    let mount =
        SlowMount::configured(&[], |config| config.passthrough = false).expect("mounting slowfs");
    let data: Vec<u8> = (0..1 << 20).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(mount.path("big"), &data).unwrap();
    let file = std::fs::File::open(mount.path("big")).unwrap();
    mount.set("read short=1..512").unwrap();
    let mut short_reads = 0;
    for round in 0..64u64 {
        // Drop the cached pages, so each read is a fill the daemon answers.
        // SAFETY: an advice call on an fd we own.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        let offset = (round * 16_384 + 512 * 1024) % (1 << 20);
        let mut buf = vec![0u8; 4096];
        let n = file.read_at(&mut buf, offset).unwrap();
        assert!(
            n > 0,
            "read at {offset} of a 1 MiB file returned 0 (a false end of file)"
        );
        assert_eq!(buf[..n], data[offset as usize..offset as usize + n]);
        if n < 4096 {
            short_reads += 1;
        }
    }
    assert_eq!(
        short_reads, 0,
        "a page-cache handle never sees a short count"
    );
    // A handle opened after the rule is direct-I/O: its reads are short, and
    // never 0 before the end.
    let fresh = std::fs::File::open(mount.path("big")).unwrap();
    let mut buf = vec![0u8; 4096];
    let n = fresh.read_at(&mut buf, 512 * 1024).unwrap();
    assert!(
        (1..=512).contains(&n),
        "a direct-I/O handle gets the short count: {n}"
    );
}

/// `chown(f, -1, -1)` on a 6755 file: ext4 drops both set-ID bits (the group
/// one because group-execute is set), and so must the mount, in both modes.
/// The kernel sends it as a setattr naming nothing; it used to change nothing.
#[test]
fn chown_to_the_same_owner_drops_set_id_bits_as_the_backing_filesystem_does() {
    use std::os::unix::fs::PermissionsExt;
    let _serial = serial();
    let chown_same = |path: &Path| {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string; -1 leaves owner and group as they are.
        assert_eq!(unsafe { libc::chown(c.as_ptr(), u32::MAX, u32::MAX) }, 0);
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    };
    let native = tempfile::tempdir().unwrap();
    let f = native.path().join("f");
    std::fs::write(&f, b"x").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o6755)).unwrap();
    let expected = chown_same(&f);
    assert_eq!(expected, 0o755, "the backing filesystem's own behaviour");
    for passthrough in [true, false] {
        let mount = SlowMount::configured(&[], |c| c.passthrough = passthrough).unwrap();
        let f = mount.path("f");
        std::fs::write(&f, b"x").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o6755)).unwrap();
        assert_eq!(chown_same(&f), expected, "passthrough {passthrough}");
    }
}

/// Random bytes and random commands on the control socket (seeded: the seed
/// is printed, SLOWFS_FUZZ_SEED replays it): every line is answered or
/// refused, the daemon never dies, and the mount serves afterwards.
#[test]
fn junk_on_the_control_socket_never_hurts_the_daemon() {
    use rand::{Rng, SeedableRng};
    use std::io::{BufRead, BufReader, Write};
    let _serial = serial();
    let seed: u64 = std::env::var("SLOWFS_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::time::UNIX_EPOCH.elapsed().unwrap().as_nanos() as u64);
    println!("control socket fuzz: seed {seed} (SLOWFS_FUZZ_SEED={seed} replays it)");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut daemon = Daemon::start(Options::default());
    std::fs::write(daemon.backing.join("f"), b"still served").unwrap();
    let socket = daemon.socket();
    let commands = [
        "stats", "set", "clear", "rules", "release", "crash", "durable", "info",
    ];
    let words = [
        "read",
        "write",
        "delay=1ms",
        "error=EIO",
        "path=**",
        "hang=1ms",
        "short=1..9",
        "p=0.5",
        "crash",
        "{",
        "\"",
        "\\",
        "ü",
        "..",
        "=",
    ];
    let mut answered = 0;
    for round in 0..300 {
        let line: Vec<u8> = match rng.gen_range(0..4) {
            // Raw bytes, newlines and NULs included.
            0 => (0..rng.gen_range(0..200)).map(|_| rng.gen()).collect(),
            // JSON of a random command with a random rule.
            1 | 2 => {
                let rule: Vec<&str> = (0..rng.gen_range(0..6))
                    .map(|_| words[rng.gen_range(0..words.len())])
                    .collect();
                let cmd = commands[rng.gen_range(0..commands.len())];
                serde_json::json!({ "cmd": cmd, "rule": rule.join(" "), "id": rng.gen::<i64>() })
                    .to_string()
                    .into_bytes()
            }
            // Truncated or mangled JSON.
            _ => {
                let mut text = br#"{"cmd":"set","rule":"read delay=1ms"}"#.to_vec();
                let cut = rng.gen_range(0..text.len());
                text.truncate(cut);
                text
            }
        };
        let mut stream = UnixStream::connect(&socket).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let _ = stream.write_all(&line);
        let _ = stream.write_all(b"\n");
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let mut reader = BufReader::new(&stream);
        let mut answer = String::new();
        if reader.read_line(&mut answer).unwrap_or(0) > 0 {
            answered += 1;
            assert!(
                serde_json::from_str::<serde_json::Value>(&answer).is_ok(),
                "seed {seed} round {round}: not a JSON answer: {answer:?}"
            );
        }
        assert!(
            daemon.child.try_wait().unwrap().is_none(),
            "seed {seed} round {round}: the daemon died on {line:?}"
        );
    }
    // A crash command may have run: leave no hang or crash rule behind.
    let _ = daemon
        .cli()
        .arg("ctl")
        .arg(&daemon.mountpoint)
        .arg("clear")
        .output();
    let _ = daemon
        .cli()
        .arg("ctl")
        .arg(&daemon.mountpoint)
        .arg("release")
        .output();
    println!("{answered} of 300 lines answered");
    assert!(answered > 150, "seed {seed}: only {answered} answers");
    assert_eq!(
        std::fs::read(daemon.mountpoint.join("f")).unwrap(),
        b"still served",
        "seed {seed}"
    );
    assert!(daemon.umount().status.success());
    assert!(daemon.wait_exit(Duration::from_secs(10)).is_some());
}

//! `--cache nfs`: the Linux NFS client's caching on real mounts. Two mounts
//! over one backing directory are two clients: close-to-open consistency, a
//! stale page within the attribute cache window, and the requests (RPCs) a
//! sequential read sends. Each property has its negative control: `nocto`
//! (the open that must see the other client's write does not) and
//! `every-call` (each 4 KiB read is a request).

mod common;

use std::os::unix::fs::FileExt;
use std::time::Duration;

use slowfs::fixture::SlowMount;
use slowfs::CachePolicy;

use common::open_rw_create;

/// A child of the test process holds a copy of every fd the process has
/// open until its exec (or, for a mount's unmount guard, its close_range)
/// closes them, and each such close is a FUSE flush that sends that file's
/// gathered writes (as on NFS: `nfs_file_flush` runs for every close of a
/// description open for writing). A test whose outcome depends on when
/// gathered data is sent holds [`no_forks`] while it has files open, after
/// its mounts are made; mounting (which forks the guard) and starting a
/// child hold [`forking`].
static FORKS: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn no_forks() -> std::sync::RwLockReadGuard<'static, ()> {
    FORKS.read().unwrap_or_else(|e| e.into_inner())
}

fn forking() -> std::sync::RwLockWriteGuard<'static, ()> {
    FORKS.write().unwrap_or_else(|e| e.into_inner())
}

fn client(policy: &str, backing: Option<&std::path::Path>, rules: &[&str]) -> SlowMount {
    let policy: CachePolicy = policy.parse().unwrap();
    let _forks = forking();
    SlowMount::configured(rules, |config| {
        config.cache = policy;
        if let Some(backing) = backing {
            config.backing = backing.to_path_buf();
        }
    })
    .expect("mounting slowfs (needs /dev/fuse)")
}

/// Client A writes and closes while B has the file open and cached: what B
/// reads from its old handle at once, after `wait`, and from a new open.
fn handoff(policy: &str, wait: Duration) -> [String; 3] {
    let a = client(policy, None, &[]);
    std::fs::write(a.path("f"), "version-1").unwrap();
    let b = client(policy, Some(&a.backing_path("")), &[]);
    let read = |file: &std::fs::File| {
        let mut buf = vec![0; 64];
        let n = file.read_at(&mut buf, 0).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let held = std::fs::File::open(b.path("f")).unwrap();
    assert_eq!(read(&held), "version-1");
    let writer = std::fs::OpenOptions::new()
        .write(true)
        .open(a.path("f"))
        .unwrap();
    writer.write_all_at(b"version-2", 0).unwrap();
    drop(writer);
    let at_once = read(&held);
    std::thread::sleep(wait);
    let after_wait = read(&held);
    let reopened = read(&std::fs::File::open(b.path("f")).unwrap());
    println!("{policy}, wait {wait:?}: held {at_once} then {after_wait}; reopened {reopened}");
    [at_once, after_wait, reopened]
}

#[test]
fn close_to_open_shows_the_other_clients_write_to_a_new_open() {
    // Within B's attribute window its cached page is stale (as on NFS); an
    // open after A's close revalidates and sees A's data.
    let [at_once, after_wait, reopened] = handoff("nfs:actimeo=5", Duration::ZERO);
    assert_eq!(at_once, "version-1", "the cached page within the window");
    assert_eq!(after_wait, "version-1");
    assert_eq!(reopened, "version-2", "close-to-open");
    // Negative control: without cto the new open keeps the stale page.
    let [_, _, reopened] = handoff("nfs:actimeo=5,nocto", Duration::ZERO);
    assert_eq!(reopened, "version-1", "nocto must keep the stale page");
}

#[test]
fn a_stale_page_is_dropped_once_the_attribute_window_ends() {
    let [at_once, after_wait, _] = handoff("nfs:actimeo=1", Duration::from_millis(1500));
    assert_eq!(at_once, "version-1");
    assert_eq!(after_wait, "version-2", "revalidated after acregmax");
}

#[test]
fn every_call_mode_shows_the_write_at_once() {
    let [at_once, _, reopened] = handoff("every-call", Duration::ZERO);
    assert_eq!(at_once, "version-2");
    assert_eq!(reopened, "version-2");
}

/// READ requests a 4 MiB file read in 4 KiB reads reaches the daemon with.
fn reads_for_sequential_4k(policy: &str) -> u64 {
    let m = client(policy, None, &["read delay=1ms"]);
    std::fs::write(m.backing_path("f"), vec![5u8; 4 << 20]).unwrap();
    let before = m.stats().count("read");
    let file = std::fs::File::open(m.path("f")).unwrap();
    let mut buf = vec![0u8; 4096];
    let mut offset = 0u64;
    while offset < 4 << 20 {
        let n = file.read_at(&mut buf, offset).unwrap();
        assert_eq!(n, 4096, "at {offset}");
        assert!(buf.iter().all(|b| *b == 5));
        offset += n as u64;
    }
    let reads = m.stats().count("read") - before;
    println!("{policy}: {reads} READ requests for 1024 reads of 4 KiB");
    reads
}

#[test]
fn a_sequential_read_is_read_ahead_in_128k_requests_as_on_nfs() {
    // The Linux client since 5.4 reads ahead the VM's 128 KiB (commit
    // c128e575514c), not 15 x rsize: 4 MiB read 4 KiB at a time is about
    // 32 READs of 128 KiB (the window ramps up first); within 1.5x.
    let nfs = reads_for_sequential_4k("nfs");
    assert!((28..=48).contains(&nfs), "{nfs} READs");
    // Smaller rsize, more requests: 4 MiB / 64 KiB = 64 at least.
    let small = reads_for_sequential_4k("nfs:rsize=65536");
    assert!((64..=128).contains(&small), "{small} READs at rsize=64KiB");
    // Negative control: every call pays.
    let every = reads_for_sequential_4k("every-call");
    assert_eq!(every, 1024);
}

#[test]
fn a_cached_stat_sends_no_getattr_until_its_window_ends() {
    let m = client("nfs:actimeo=1", None, &[]);
    std::fs::write(m.path("f"), "x").unwrap();
    std::fs::metadata(m.path("f")).unwrap();
    let before = m.stats().count("getattr") + m.stats().count("lookup");
    for _ in 0..100 {
        std::fs::metadata(m.path("f")).unwrap();
    }
    let cached = m.stats().count("getattr") + m.stats().count("lookup") - before;
    assert!(cached <= 1, "{cached} requests for 100 cached stats");
    std::thread::sleep(Duration::from_millis(1200));
    std::fs::metadata(m.path("f")).unwrap();
    let after = m.stats().count("getattr") + m.stats().count("lookup") - before - cached;
    assert!(after >= 1, "no request after the window ended");
    // lookupcache=none: every path walk asks (negative control of the cache).
    let m = client("nfs:lookupcache=none", None, &[]);
    std::fs::write(m.path("f"), "x").unwrap();
    let before = m.stats().count("lookup");
    for _ in 0..10 {
        std::fs::metadata(m.path("f")).unwrap();
    }
    assert!(m.stats().count("lookup") - before >= 10);
}

#[test]
fn a_bad_cache_option_names_the_known_ones() {
    let err = "nfs:actime=3".parse::<CachePolicy>().unwrap_err();
    assert!(err.contains("known: ac, noac, actimeo=N"), "{err}");
}

/// `fcntl(fd, cmd)` with a whole-file lock of `typ`: the errno on failure,
/// and the type F_GETLK reports.
fn whole_file_lock(file: &std::fs::File, cmd: i32, typ: i32) -> Result<i32, i32> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock is plain old data; zero is valid for every field.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = typ as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: a valid fd and flock.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), cmd, &mut lock) };
    if rc < 0 {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap())
    } else {
        Ok(i32::from(lock.l_type))
    }
}

/// Two clients of one directory, A holding a whole-file write lock on `db`
/// (through the returned file): A, B and that file.
fn a_holds_a_lock_b_can_see() -> (SlowMount, SlowMount, std::fs::File) {
    let a = client("nfs", None, &[]);
    std::fs::write(a.path("db"), "x").unwrap();
    let b = client("nfs", Some(&a.backing_path("")), &[]);
    let held = open_rw(a.path("db"));
    assert_eq!(
        whole_file_lock(&held, libc::F_SETLK, libc::F_WRLCK),
        Ok(libc::F_WRLCK)
    );
    (a, b, held)
}

fn open_rw(path: std::path::PathBuf) -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap()
}

#[test]
fn with_lock_two_clients_share_fcntl_locks_and_with_nolock_they_do_not() {
    let (a, b, held) = a_holds_a_lock_b_can_see();
    let other = open_rw(b.path("db"));
    assert_eq!(
        whole_file_lock(&other, libc::F_SETLK, libc::F_WRLCK),
        Err(libc::EAGAIN),
        "client B must see client A's lock"
    );
    assert_eq!(
        whole_file_lock(&other, libc::F_GETLK, libc::F_RDLCK),
        Ok(libc::F_WRLCK),
        "F_GETLK on B names A's write lock"
    );
    // F_SETLKW on B waits until A lets go; A's close drops its locks.
    let started = std::time::Instant::now();
    let waiter = std::thread::spawn(move || {
        let got = whole_file_lock(&other, libc::F_SETLKW, libc::F_WRLCK);
        (got, other)
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !waiter.is_finished(),
        "F_SETLKW returned while A held the lock"
    );
    drop(held);
    let (got, other) = waiter.join().unwrap();
    assert_eq!(got, Ok(libc::F_WRLCK));
    assert!(started.elapsed() >= Duration::from_millis(300));
    println!(
        "lock: B's F_SETLKW got the lock {:?} after it was asked",
        started.elapsed()
    );
    assert!(a.stats().count("lock") >= 1 && b.stats().count("lock") >= 3);
    drop(other);

    // Negative control, nolock: each client's locks are its own.
    let a = client("nfs:nolock", None, &[]);
    std::fs::write(a.path("db"), "x").unwrap();
    let b = client("nfs:nolock", Some(&a.backing_path("")), &[]);
    let held = open_rw(a.path("db"));
    let other = open_rw(b.path("db"));
    assert_eq!(
        whole_file_lock(&held, libc::F_SETLK, libc::F_WRLCK),
        Ok(libc::F_WRLCK)
    );
    assert_eq!(
        whole_file_lock(&other, libc::F_SETLK, libc::F_WRLCK),
        Ok(libc::F_WRLCK),
        "nolock: B takes the lock A holds"
    );
    assert_eq!(a.stats().count("lock") + b.stats().count("lock"), 0);
}

/// flock(2) of `file` with `operation` (LOCK_EX, LOCK_SH, LOCK_UN, with or
/// without LOCK_NB): the errno on failure.
fn flock(file: &std::fs::File, operation: i32) -> Result<(), i32> {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid fd.
    let rc = unsafe { libc::flock(file.as_raw_fd(), operation) };
    if rc < 0 {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap())
    } else {
        Ok(())
    }
}

/// What client B meets when client A holds an exclusive flock(2) on a file
/// (both under `policy`): B's non-blocking flock, B's fcntl write lock, and
/// B's non-blocking flock again once A closed its file (retried up to 5 s:
/// the kernel sends the release that drops A's flock after close returns).
fn flock_across_clients(policy: &str) -> [Result<(), i32>; 3] {
    let a = client(policy, None, &[]);
    std::fs::write(a.path("f"), "x").unwrap();
    let b = client(policy, Some(&a.backing_path("")), &[]);
    let held = open_rw(a.path("f"));
    flock(&held, libc::LOCK_EX | libc::LOCK_NB).expect("A's flock");
    let other = open_rw(b.path("f"));
    let flocked = flock(&other, libc::LOCK_EX | libc::LOCK_NB);
    let _ = flock(&other, libc::LOCK_UN);
    let fcntl = whole_file_lock(&open_rw(b.path("f")), libc::F_SETLK, libc::F_WRLCK).map(|_| ());
    drop(held);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let after_close = loop {
        match flock(&other, libc::LOCK_EX | libc::LOCK_NB) {
            Err(libc::EWOULDBLOCK) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            other => break other,
        }
    };
    println!("{policy}: B's flock {flocked:?}, fcntl {fcntl:?}, after A's close {after_close:?}");
    [flocked, fcntl, after_close]
}

#[test]
fn flock_conflicts_across_clients_unless_local_lock_keeps_it_local() {
    // Linux sends a flock(2) to the server as a whole-file byte-range lock
    // (nfs_flock, fs/nfs/file.c), so another client's flock and fcntl lock
    // both conflict with it, and A's close lets B have it.
    assert_eq!(
        flock_across_clients("nfs"),
        [Err(libc::EWOULDBLOCK), Err(libc::EAGAIN), Ok(())]
    );
    // local_lock=posix keeps fcntl locks local; flock still goes to the server.
    assert_eq!(
        flock_across_clients("nfs:local_lock=posix"),
        [Err(libc::EWOULDBLOCK), Ok(()), Ok(())]
    );
    // Negative controls: local_lock=flock and nolock keep flock(2) in the
    // client, so B takes the flock A holds.
    assert_eq!(
        flock_across_clients("nfs:local_lock=flock"),
        [Ok(()), Ok(()), Ok(())],
        "local_lock=flock: A's flock is A's own and not sent"
    );
    assert_eq!(flock_across_clients("nfs:nolock"), [Ok(()), Ok(()), Ok(())]);
}

/// A child reading `path` (held by a `read hang` rule on `m`), signalled with
/// `signal` once its read is held: whether it is still waiting 5 s later. Its SIGUSR1
/// handler exits (Python retries a read that EINTR ended, PEP 475: a handler
/// that returns would hide the interruption).
fn reader_survives(m: &SlowMount, path: &std::path::Path, signal: i32) -> bool {
    let held = |want: bool| {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while (m.waiting() > 0) != want {
            assert!(
                std::time::Instant::now() < deadline,
                "held reads: {}",
                m.waiting()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    // An earlier reader's read is gone first.
    held(false);
    let forks = forking();
    let mut child = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import signal, sys\n\
             signal.signal(signal.SIGUSR1, lambda *a: sys.exit(3))\n\
             sys.stdout.write(open(sys.argv[1]).read())",
        )
        .arg(path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(forks);
    // Signalled once its read is held, not while Python starts up (SIGUSR1
    // would then kill it before its handler is set: seen at 7x load).
    held(true);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, signal) };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while child.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let alive = child.try_wait().unwrap().is_none();
    if alive {
        child.kill().unwrap();
    }
    child.wait().unwrap();
    alive
}

#[test]
fn a_hard_mount_waits_out_the_outage_and_only_sigkill_ends_the_wait() {
    let m = client("nfs", None, &["read hang"]);
    std::fs::write(m.backing_path("f"), "after the outage").unwrap();
    // A handled signal does not end a hard mount's wait (nfs(5): intr is
    // ignored since 2.6.25)...
    assert!(reader_survives(&m, &m.path("f"), libc::SIGUSR1));
    // ...SIGKILL does.
    assert!(!reader_survives(&m, &m.path("f"), libc::SIGKILL));
    // Negative control: every-call mode is `intr`, the handled signal ends it.
    let every = client("every-call", None, &["read hang"]);
    std::fs::write(every.backing_path("f"), "x").unwrap();
    assert!(!reader_survives(&every, &every.path("f"), libc::SIGUSR1));
    // The server comes back: the waiting read gets its data.
    let path = m.path("f");
    let reader = std::thread::spawn(move || std::fs::read_to_string(path));
    std::thread::sleep(Duration::from_millis(2500));
    assert!(!reader.is_finished(), "a hard mount gave up");
    assert!(m.release() >= 1);
    assert_eq!(reader.join().unwrap().unwrap(), "after the outage");
}

/// Reads an uncached file through a `read hang` outage: the errno, when, and
/// how long each held READ waited (the kernel may send more than one: a
/// failed read-ahead is followed by a read of the page alone).
fn outage_read(policy: &str) -> (Option<i32>, Duration, Vec<Duration>) {
    let m = client(policy, None, &["read hang"]);
    std::fs::write(m.backing_path("f"), "x").unwrap();
    let path = m.path("f");
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let reader = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        tid_tx.send(unsafe { libc::gettid() } as u32).unwrap();
        go_rx.recv().unwrap();
        std::fs::read(path)
    });
    let tid = tid_rx.recv().unwrap();
    m.watch_thread(tid);
    let started = std::time::Instant::now();
    go_tx.send(()).unwrap();
    while !reader.is_finished() && started.elapsed() < Duration::from_secs(6) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = started.elapsed();
    m.release();
    let errno = reader.join().unwrap().err().and_then(|e| e.raw_os_error());
    let held: Vec<Duration> = m
        .waits_of(tid)
        .into_iter()
        .filter(|w| w.faulted)
        .map(|w| w.latency)
        .collect();
    println!("{policy}: {errno:?} after {took:?}; held READs {held:?}");
    (errno, took, held)
}

#[test]
fn a_soft_mount_fails_at_its_major_timeout() {
    // timeo=5 (0.5 s), retrans=1: each held request fails with EIO at the
    // major timeout, 0.5 s x (1 + 1) from its start (xprt_calc_majortimeo;
    // xprt_request_timeout wakes the request there, not at the second
    // retransmission's 1.5 s).
    let (errno, _, held) = outage_read("nfs:soft,timeo=5,retrans=1");
    assert_eq!(errno, Some(libc::EIO));
    assert!(!held.is_empty());
    for each in &held {
        assert!(
            *each >= Duration::from_millis(950) && *each < Duration::from_millis(1450),
            "{held:?}"
        );
    }
    let (errno, _, _) = outage_read("nfs:softerr,timeo=5,retrans=0");
    assert_eq!(errno, Some(libc::ETIMEDOUT));
    // Negative control: hard still waits when the soft one has given up.
    let (errno, took, _) = outage_read("nfs:hard,timeo=5,retrans=1");
    assert_eq!(errno, None, "released, then served");
    assert!(took >= Duration::from_secs(6));
}

/// Names in the backing directory starting with `.nfs`.
fn silly_names(m: &SlowMount) -> Vec<String> {
    std::fs::read_dir(m.backing_path(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".nfs"))
        .collect()
}

/// Waits (at most 2 s) for the silly names to go: the kernel sends RELEASE
/// after close(2) has returned, as the NFS client's silly delete is async.
fn silly_names_go(m: &SlowMount) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while !silly_names(m).is_empty() {
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

#[test]
fn unlinking_an_open_file_leaves_a_silly_name_until_the_last_close() {
    let m = client("nfs", None, &[]);
    std::fs::write(m.path("f"), "still here").unwrap();
    std::fs::write(m.path("g"), "new").unwrap();
    let held = std::fs::File::open(m.path("f")).unwrap();
    std::fs::remove_file(m.path("f")).unwrap();
    assert!(!m.path("f").exists());
    let silly = silly_names(&m);
    assert_eq!(silly.len(), 1, "{silly:?}");
    assert!(
        silly[0].len() == 4 + 24,
        "Linux's .nfs + 24 hex digits: {silly:?}"
    );
    let mut buf = [0u8; 32];
    let n = held.read_at(&mut buf, 0).unwrap();
    assert_eq!(&buf[..n], b"still here");
    drop(held);
    assert!(silly_names_go(&m), "the last close removes it");
    // A rename over an open file keeps it too.
    let held = std::fs::File::open(m.path("g")).unwrap();
    std::fs::write(m.path("tmp"), "newer").unwrap();
    std::fs::rename(m.path("tmp"), m.path("g")).unwrap();
    assert_eq!(silly_names(&m).len(), 1);
    drop(held);
    assert!(silly_names_go(&m));
    assert_eq!(std::fs::read_to_string(m.path("g")).unwrap(), "newer");
    // Negative control: every-call mode unlinks at once, as a local fs does.
    let m = client("every-call", None, &[]);
    std::fs::write(m.path("f"), "x").unwrap();
    let _held = std::fs::File::open(m.path("f")).unwrap();
    std::fs::remove_file(m.path("f")).unwrap();
    assert!(silly_names(&m).is_empty());
}

/// A file closed and then unlinked is not open any more: the unlink removes
/// it, as SQLite's journal delete does, with no silly rename and no `.nfs`
/// name left behind. The kernel sends RELEASE after close(2) returns, so
/// the daemon reads the RELEASE and the caller's UNLINK on two threads:
/// counted at the end of the RELEASE's job, the file still looked open to
/// 5-8 of these 2,000 unlinks (silly renames), and each whose RELEASE ran
/// during the rename left its `.nfs` name for good (16-24 here; 321 of
/// 18,000 SQLite journals, one of which another client then opened as its
/// own journal: SQLITE_IOERR_DELETE_NOENT with `lock`).
#[test]
fn a_file_closed_then_unlinked_leaves_no_silly_name() {
    let m = client("nfs", None, &[]);
    let (writers, rounds) = (4, 500);
    std::thread::scope(|s| {
        for w in 0..writers {
            let path = m.path(&format!("journal-{w}"));
            s.spawn(move || {
                for _ in 0..rounds {
                    std::fs::write(&path, [7u8; 512]).unwrap();
                    std::fs::remove_file(&path).unwrap();
                }
            });
        }
    });
    let left = if silly_names_go(&m) {
        vec![]
    } else {
        silly_names(&m)
    };
    // One unlink of an open file: its silly name's counter (the last 8 hex
    // digits) says how many silly renames came before it.
    let held = std::fs::File::create(m.path("held")).unwrap();
    std::fs::remove_file(m.path("held")).unwrap();
    let counter = silly_names(&m)
        .iter()
        .filter_map(|n| u32::from_str_radix(&n[n.len() - 8..], 16).ok())
        .min();
    drop(held);
    println!(
        "nfs: {} closed-then-unlinked files, {} .nfs names left, {counter:?} silly renames made",
        writers * rounds,
        left.len()
    );
    assert!(left.is_empty(), "left behind: {left:?}");
    assert_eq!(counter, Some(0), "closed files were silly renamed");
}

/// Client B has a 1 MiB file open (one page read), client A removes it:
/// B's read of an uncached page.
fn read_after_other_client_removed(policy: &str) -> std::io::Result<usize> {
    let a = client(policy, None, &[]);
    std::fs::write(a.path("f"), vec![7u8; 1 << 20]).unwrap();
    let b = client(policy, Some(&a.backing_path("")), &[]);
    let held = std::fs::File::open(b.path("f")).unwrap();
    let mut buf = vec![0u8; 4096];
    held.read_at(&mut buf, 0).unwrap();
    std::fs::remove_file(a.path("f")).unwrap();
    let again = held.read_at(&mut buf, 0);
    assert!(again.is_ok(), "a cached page is served: {again:?}");
    held.read_at(&mut buf, 900 << 10)
}

#[test]
fn a_file_another_client_removed_gives_estale_on_an_open_handle() {
    // rsize=4096: read-ahead of 60 KiB, so the page at 900 KiB is not cached.
    let err = read_after_other_client_removed("nfs:rsize=4096").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ESTALE), "{err}");
    // Negative control: a local filesystem (every-call) keeps serving it.
    assert_eq!(read_after_other_client_removed("every-call").unwrap(), 4096);
}

/// WRITE requests (and write(2)s gathered) for 4 MiB written 4 KiB at a
/// time, then closed.
fn writes_for_sequential_4k(policy: &str) -> (u64, u64) {
    let m = client(policy, None, &["write delay=1ms"]);
    let _quiet = no_forks();
    let mut file = std::fs::File::create(m.path("f")).unwrap();
    let before = m.stats().count("write");
    let block = vec![9u8; 4096];
    for _ in 0..1024 {
        std::io::Write::write_all(&mut file, &block).unwrap();
    }
    drop(file);
    let stats = m.stats();
    let writes = stats.count("write") - before;
    println!(
        "{policy}: {writes} WRITE requests for 1024 writes of 4 KiB ({} gathered)",
        stats.gathered_writes
    );
    let back = std::fs::read(m.backing_path("f")).unwrap();
    assert_eq!(back.len(), 4 << 20, "every byte reached the backing file");
    assert!(back.iter().all(|b| *b == 9));
    (writes, stats.gathered_writes)
}

#[test]
fn writes_are_gathered_into_wsize_requests_sent_at_close() {
    // The NFS client sends 4 WRITEs of 1 MiB; within 2x of that.
    let (writes, gathered) = writes_for_sequential_4k("nfs");
    assert!((1..=8).contains(&writes), "{writes} WRITEs");
    assert_eq!(gathered, 1024);
    let (writes, _) = writes_for_sequential_4k("nfs:wsize=65536");
    assert!(
        (64..=128).contains(&writes),
        "{writes} WRITEs at wsize=64KiB"
    );
    // Negative control: every call pays.
    let (writes, gathered) = writes_for_sequential_4k("every-call");
    assert_eq!((writes, gathered), (1024, 0));
}

#[test]
fn a_failed_write_is_reported_at_close_as_on_nfs() {
    let m = client("nfs", None, &["write error=ENOSPC"]);
    let _quiet = no_forks();
    let mut file = std::fs::File::create(m.path("f")).unwrap();
    std::io::Write::write_all(&mut file, &[1u8; 8192]).expect("write(2) succeeds: gathered");
    // close(2): std's File ignores its result, so call it by hand.
    use std::os::fd::IntoRawFd;
    // SAFETY: the fd is ours, closed once.
    let rc = unsafe { libc::close(file.into_raw_fd()) };
    let errno = std::io::Error::last_os_error().raw_os_error();
    assert_eq!(
        (rc, errno),
        (-1, Some(libc::ENOSPC)),
        "close reports the WRITE's error"
    );
    drop(_quiet);
    // Negative control: every-call fails the write(2) itself.
    let m = client("every-call", None, &["write error=ENOSPC"]);
    let mut file = std::fs::File::create(m.path("f")).unwrap();
    let err = std::io::Write::write_all(&mut file, &[1u8; 8192]).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
}

/// How client A hands `tmp` over to client B.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Handoff {
    /// Close, then rename to `final`.
    CloseThenRename,
    /// Rename to `final` while still open.
    RenameOpen,
    /// Hard-link as `final` while still open.
    LinkOpen,
    /// Neither: B opens `tmp` while A has it open.
    Neither,
}

/// Client A writes `tmp` and hands it over as `how` says; what client B
/// then reads.
fn handoff_by_rename(how: Handoff) -> String {
    let a = client("nfs", None, &[]);
    let b = client("nfs", Some(&a.backing_path("")), &[]);
    let _quiet = no_forks();
    let mut tmp = std::fs::File::create(a.path("tmp")).unwrap();
    std::io::Write::write_all(&mut tmp, b"the whole document").unwrap();
    let tmp = if how == Handoff::CloseThenRename {
        drop(tmp);
        None
    } else {
        Some(tmp)
    };
    let name = match how {
        Handoff::CloseThenRename | Handoff::RenameOpen => {
            std::fs::rename(a.path("tmp"), a.path("final")).unwrap();
            "final"
        }
        Handoff::LinkOpen => {
            std::fs::hard_link(a.path("tmp"), a.path("final")).unwrap();
            "final"
        }
        Handoff::Neither => "tmp",
    };
    let seen = std::fs::read_to_string(b.path(name)).unwrap();
    drop(tmp);
    println!("{how:?}: B read {seen:?}");
    seen
}

#[test]
fn a_handoff_by_rename_or_link_sends_the_data_first() {
    assert_eq!(
        handoff_by_rename(Handoff::CloseThenRename),
        "the whole document"
    );
    // nfs_rename and nfs_link write the file's dirty data back first
    // (nfs_sync_inode): renamed or linked before close, B still reads it.
    assert_eq!(handoff_by_rename(Handoff::RenameOpen), "the whole document");
    assert_eq!(handoff_by_rename(Handoff::LinkOpen), "the whole document");
    // Negative control: neither closed nor renamed, the data is still in
    // A's cache; B finds the file empty.
    assert_eq!(handoff_by_rename(Handoff::Neither), "");
}

/// examples/nfs/sqlite_two_clients.py on two clients: its JSON verdict.
fn sqlite_two_clients(policy: &str) -> serde_json::Value {
    let a = client(policy, None, &[]);
    let b = client(policy, Some(&a.backing_path("")), &[]);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/nfs/sqlite_two_clients.py"
    );
    let _forks = forking();
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(a.path("db"))
        .arg(b.path("db"))
        .arg("100")
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{policy}: {stdout}");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap()
}

#[test]
fn sqlite_on_two_clients_is_safe_with_lock_and_breaks_with_nolock() {
    let locked = sqlite_two_clients("nfs");
    assert_eq!(locked["got"], 200, "{locked}");
    assert_eq!(locked["integrity"], "ok");
    assert_eq!(locked["error_count"], 0);
    // Negative control: nolock loses updates or corrupts the database.
    let unlocked = sqlite_two_clients("nfs:nolock");
    let broken =
        unlocked["got"] != 200 || unlocked["integrity"] != "ok" || unlocked["error_count"] != 0;
    assert!(
        broken,
        "nolock must break SQLite on two clients: {unlocked}"
    );
}

// ---------------------------------------------------------------------------
// Fault x mode matrix (issue 41, item 8): every action either acts on what
// reaches the rules in every mode (the write(2) by default; under
// `--cache nfs` the WRITE the client sends; also on a recording mount) or
// is refused at `set` with why.

/// The mount modes of the matrix.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    /// `--cache every-call`, `--passthrough auto`.
    Default,
    /// `--passthrough never`.
    NoPassthrough,
    /// `--cache nfs`.
    Nfs,
    /// Recording for explore (the operation log).
    Recording,
}

fn matrix_mount(mode: Mode) -> SlowMount {
    let _forks = forking();
    SlowMount::configured(&[], |config| match mode {
        Mode::Default => {}
        Mode::NoPassthrough => config.passthrough = false,
        Mode::Nfs => config.cache = "nfs".parse().unwrap(),
        Mode::Recording => config.durability = slowfs::Durability::Record,
    })
    .expect("mounting slowfs (needs /dev/fuse)")
}

/// Bytes the write workload writes: two halves, each its own write(2) and
/// fsync (so two WRITEs under `--cache nfs`, for `iops`).
const HALF: usize = 128 << 10;

/// What a workload saw.
#[derive(Debug, Default)]
struct Seen {
    /// Each write(2): bytes written or errno.
    writes: Vec<Result<usize, i32>>,
    /// Each fsync: Ok or errno.
    fsyncs: Vec<Result<(), i32>>,
    /// close(2).
    close: Option<Result<(), i32>>,
    /// What a read(2) returned (read workload).
    read: Option<Result<Vec<u8>, i32>>,
    /// The backing file afterwards.
    backing: Vec<u8>,
    elapsed: Duration,
    /// WRITE (or READ) requests the rules saw.
    requests: u64,
}

impl Seen {
    fn errnos(&self) -> Vec<i32> {
        let w = self.writes.iter().filter_map(|r| r.err());
        let f = self.fsyncs.iter().filter_map(|r| r.err());
        let c = self.close.iter().filter_map(|r| r.err());
        w.chain(f).chain(c).collect()
    }
}

fn errno_of(e: std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(-1)
}

fn close_fd(file: std::fs::File) -> Result<(), i32> {
    use std::os::fd::IntoRawFd;
    // SAFETY: the fd is ours, closed once.
    let rc = unsafe { libc::close(file.into_raw_fd()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(errno_of(std::io::Error::last_os_error()))
    }
}

/// Creates `f` through the mount: two halves, each one pwrite(2) and an
/// fsync, then close.
fn write_workload(m: &SlowMount) -> Seen {
    let _quiet = no_forks();
    let before = m.stats().count("write");
    let started = std::time::Instant::now();
    let file = std::fs::File::create(m.path("f")).unwrap();
    let mut seen = Seen::default();
    for (i, byte) in [b'N', b'M'].into_iter().enumerate() {
        let data = vec![byte; HALF];
        seen.writes
            .push(file.write_at(&data, (i * HALF) as u64).map_err(errno_of));
        seen.fsyncs.push(file.sync_all().map_err(errno_of));
    }
    seen.close = Some(close_fd(file));
    seen.elapsed = started.elapsed();
    seen.backing = std::fs::read(m.backing_path("f")).unwrap_or_default();
    seen.requests = m.stats().count("write") - before;
    seen
}

/// Reads `r` (16 KiB of 'O', written to the backing file) through the mount.
fn read_workload(m: &SlowMount) -> Seen {
    let _quiet = no_forks();
    std::fs::write(m.backing_path("r"), vec![b'O'; 16 << 10]).unwrap();
    let before = m.stats().count("read");
    let started = std::time::Instant::now();
    let file = std::fs::File::open(m.path("r")).unwrap();
    let mut buf = vec![0u8; 16 << 10];
    let read = file.read_at(&mut buf, 0).map(|n| buf[..n].to_vec());
    let mut seen = Seen {
        read: Some(read.map_err(errno_of)),
        ..Seen::default()
    };
    seen.close = Some(close_fd(file));
    seen.elapsed = started.elapsed();
    seen.requests = m.stats().count("read") - before;
    seen
}

fn full_content() -> Vec<u8> {
    let mut want = vec![b'N'; HALF];
    want.extend(vec![b'M'; HALF]);
    want
}

/// What must be seen of each action: `Err(reason)` when it did not act.
type Check = fn(Mode, &Seen, &Seen) -> Result<(), String>;

fn slower(by: Duration) -> impl Fn(&Seen, &Seen) -> Result<(), String> {
    move |seen: &Seen, base: &Seen| {
        if seen.elapsed >= by && base.elapsed < by {
            Ok(())
        } else {
            Err(format!(
                "took {:?} (no rule: {:?}), expected at least {by:?}",
                seen.elapsed, base.elapsed
            ))
        }
    }
}

fn intact(seen: &Seen) -> Result<(), String> {
    if seen.backing == full_content() && seen.errnos().is_empty() {
        Ok(())
    } else {
        Err(format!(
            "data or results changed: {} bytes on disk, errnos {:?}",
            seen.backing.len(),
            seen.errnos()
        ))
    }
}

/// The matrix: each rule, the workload it acts on, and what it must do (a
/// rule that needs the crash model must be refused in all three modes).
fn matrix() -> Vec<(&'static str, bool, Option<Check>)> {
    vec![
        (
            "write delay=400ms",
            true,
            Some(|_, s, b| slower(Duration::from_millis(350))(s, b).and(intact(s))),
        ),
        (
            "write delay=1ms spike=1:400ms",
            true,
            Some(|_, s, b| slower(Duration::from_millis(350))(s, b).and(intact(s))),
        ),
        (
            "write hang=400ms",
            true,
            Some(|_, s, b| slower(Duration::from_millis(350))(s, b).and(intact(s))),
        ),
        (
            "write throttle=512KiB/s",
            true,
            Some(|_, s, b| slower(Duration::from_millis(300))(s, b).and(intact(s))),
        ),
        (
            "write iops=4",
            true,
            Some(|_, s, b| slower(Duration::from_millis(200))(s, b).and(intact(s))),
        ),
        (
            "write error=ENOSPC",
            true,
            Some(|mode, s, _| {
                let errnos = s.errnos();
                if !errnos.contains(&libc::ENOSPC) {
                    return Err(format!("no ENOSPC reported: {s:?}"));
                }
                if !s.backing.is_empty() {
                    return Err(format!("{} bytes reached the disk", s.backing.len()));
                }
                // Under NFS the write(2)s succeed and the WRITE's error comes
                // at fsync; elsewhere the write(2) itself fails.
                let write_failed = s.writes.iter().any(|w| w.is_err());
                match (mode, write_failed) {
                    (Mode::Nfs, false)
                    | (Mode::Default | Mode::NoPassthrough | Mode::Recording, true) => Ok(()),
                    _ => Err(format!("ENOSPC at the wrong call for {mode:?}: {s:?}")),
                }
            }),
        ),
        (
            "write short=1..4096",
            true,
            Some(|mode, s, b| match mode {
                // The caller sees the short count.
                Mode::Default | Mode::NoPassthrough | Mode::Recording => {
                    if s.writes.iter().any(|w| matches!(w, Ok(n) if *n < HALF)) {
                        Ok(())
                    } else {
                        Err(format!("no short write(2): {:?}", s.writes))
                    }
                }
                // The client resends the rest of each short WRITE
                // (nfs_writeback_result): more WRITEs, every byte there.
                Mode::Nfs => {
                    if s.requests > 2 * b.requests {
                        intact(s)
                    } else {
                        Err(format!(
                            "{} WRITEs (no rule: {}): no short WRITE was resent",
                            s.requests, b.requests
                        ))
                    }
                }
            }),
        ),
        (
            "write short=0!",
            true,
            Some(|mode, s, _| match mode {
                Mode::Default | Mode::NoPassthrough | Mode::Recording => {
                    if s.writes.iter().all(|w| *w == Ok(0)) {
                        Ok(())
                    } else {
                        Err(format!("write(2)s moved bytes: {:?}", s.writes))
                    }
                }
                // "NFS: Server wrote zero bytes": EIO at fsync.
                Mode::Nfs => {
                    if s.errnos().contains(&libc::EIO) && s.backing.is_empty() {
                        Ok(())
                    } else {
                        Err(format!("no EIO for WRITEs that moved nothing: {s:?}"))
                    }
                }
            }),
        ),
        (
            "write lose",
            true,
            Some(|_, s, _| {
                if s.errnos().is_empty() && s.backing.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "{} bytes reached the disk (errnos {:?})",
                        s.backing.len(),
                        s.errnos()
                    ))
                }
            }),
        ),
        (
            "read corrupt=zero",
            false,
            Some(|_, s, _| match &s.read {
                Some(Ok(data)) if data.len() == 16 << 10 && data.iter().any(|b| *b != b'O') => {
                    Ok(())
                }
                other => Err(format!(
                    "read not corrupted: {:?}",
                    other.as_ref().map(|r| r.as_ref().map(|d| d.len()))
                )),
            }),
        ),
        (
            "read error=EIO",
            false,
            Some(|_, s, _| match &s.read {
                Some(Err(libc::EIO)) => Ok(()),
                other => Err(format!(
                    "read did not fail: {:?}",
                    other.as_ref().map(|r| r.as_ref().map(|d| d.len()))
                )),
            }),
        ),
        (
            "read delay=400ms",
            false,
            Some(|_, s, b| slower(Duration::from_millis(350))(s, b)),
        ),
        ("write crash", true, None),
        ("read stale", false, None),
        ("fsync error=EIO drop", true, None),
    ]
}

#[test]
fn every_fault_acts_or_is_refused_in_every_mode() {
    let mut failures = Vec::new();
    let mut table = String::new();
    for mode in [
        Mode::Default,
        Mode::NoPassthrough,
        Mode::Nfs,
        Mode::Recording,
    ] {
        // Negative control: with no rule, every workload is fast and exact.
        let base_write = write_workload(&matrix_mount(mode));
        intact(&base_write).unwrap_or_else(|e| panic!("{mode:?} without a rule: {e}"));
        let base_read = read_workload(&matrix_mount(mode));
        assert_eq!(
            base_read.read.as_ref().map(|r| r.as_ref().map(|d| d.len())),
            Some(Ok(16 << 10)),
            "{mode:?} without a rule"
        );
        assert!(base_read
            .read
            .as_ref()
            .unwrap()
            .as_ref()
            .unwrap()
            .iter()
            .all(|b| *b == b'O'));
        for (rule, writes, check) in matrix() {
            let m = matrix_mount(mode);
            let socket = m.mount().control_socket().unwrap().to_path_buf();
            let answer = slowfs::control::request(
                &socket,
                &slowfs::control::Command::Set { rule: rule.into() },
            )
            .unwrap();
            let verdict = match (answer.ok, check) {
                (false, None) if answer.message.contains("crash model") => {
                    format!("refused: {}", answer.message)
                }
                (false, _) => {
                    failures.push(format!("{mode:?} `{rule}`: refused: {}", answer.message));
                    continue;
                }
                (true, None) => {
                    failures.push(format!("{mode:?} `{rule}`: accepted but cannot act"));
                    continue;
                }
                (true, Some(check)) => {
                    let (seen, base) = if writes {
                        (write_workload(&m), &base_write)
                    } else {
                        (read_workload(&m), &base_read)
                    };
                    match check(mode, &seen, base) {
                        Ok(()) => format!("acts ({:?}, {} requests)", seen.elapsed, seen.requests),
                        Err(why) => {
                            failures.push(format!("{mode:?} `{rule}`: did not act: {why}"));
                            continue;
                        }
                    }
                }
            };
            table.push_str(&format!("{mode:?}\t{rule}\t{verdict}\n"));
        }
    }
    println!("{table}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---------------------------------------------------------------------------
// Issue 41, item 4: copy_file_range into a file with gathered writes.

/// `dst` gets 8 KiB of 'A' (gathered when `gathered_first`), then
/// copy_file_range puts 8 KiB of 'S' from `src` over it; what `dst` holds
/// through the mount and on disk after close.
fn copy_over_gathered(policy: &str, gathered_first: bool) -> (Vec<u8>, Vec<u8>) {
    use std::os::fd::AsRawFd;
    let m = client(policy, None, &[]);
    std::fs::write(m.path("src"), vec![b'S'; 8192]).unwrap();
    let _quiet = no_forks();
    let src = std::fs::File::open(m.path("src")).unwrap();
    let dst = open_rw_create(&m.path("dst"));
    if gathered_first {
        dst.write_all_at(&[b'A'; 8192], 0).unwrap();
    }
    let (mut off_in, mut off_out) = (0i64, 0i64);
    // SAFETY: two valid fds and offsets.
    let n = unsafe {
        libc::copy_file_range(
            src.as_raw_fd(),
            &mut off_in,
            dst.as_raw_fd(),
            &mut off_out,
            8192,
            0,
        )
    };
    assert_eq!(n, 8192, "{}", std::io::Error::last_os_error());
    assert_eq!(close_fd(dst), Ok(()));
    drop(src);
    let through = std::fs::read(m.path("dst")).unwrap();
    let disk = std::fs::read(m.backing_path("dst")).unwrap();
    (through, disk)
}

fn count_of(data: &[u8], byte: u8) -> usize {
    data.iter().filter(|b| **b == byte).count()
}

#[test]
fn copy_file_range_over_gathered_writes_leaves_the_copied_bytes() {
    let (through, disk) = copy_over_gathered("nfs", true);
    println!(
        "nfs: through the mount {} S / {} A, on disk {} S / {} A",
        count_of(&through, b'S'),
        count_of(&through, b'A'),
        count_of(&disk, b'S'),
        count_of(&disk, b'A')
    );
    assert_eq!(count_of(&disk, b'S'), 8192, "on disk");
    assert_eq!(count_of(&through, b'S'), 8192, "through the mount");
    // Negative controls: nothing gathered before the copy, and every-call.
    let (through, disk) = copy_over_gathered("nfs", false);
    assert_eq!(
        (count_of(&through, b'S'), count_of(&disk, b'S')),
        (8192, 8192)
    );
    let (through, disk) = copy_over_gathered("every-call", true);
    assert_eq!(
        (count_of(&through, b'S'), count_of(&disk, b'S')),
        (8192, 8192)
    );
}

// ---------------------------------------------------------------------------
// Issue 41, item 5: silly-renamed names.

fn errno_of_io<T>(r: std::io::Result<T>) -> Option<i32> {
    r.err().and_then(|e| e.raw_os_error())
}

#[test]
fn a_silly_renamed_name_is_busy_while_open_and_only_its_own_file_goes() {
    let a = client("nfs", None, &[]);
    std::fs::write(a.path("f"), "mine").unwrap();
    std::fs::write(a.path("g"), "other").unwrap();
    let held = std::fs::File::open(a.path("f")).unwrap();
    std::fs::remove_file(a.path("f")).unwrap();
    let silly = silly_names(&a);
    assert_eq!(silly.len(), 1, "{silly:?}");
    let name = &silly[0];
    // Linux: nfs_sillyrename answers EBUSY for a dentry already renamed
    // (DCACHE_NFSFS_RENAMED), for an unlink and for a rename over it, and
    // nfs_rename refuses to move it.
    let unlinked = errno_of_io(std::fs::remove_file(a.path(name)));
    let moved = errno_of_io(std::fs::rename(a.path(name), a.path("moved")));
    let over = errno_of_io(std::fs::rename(a.path("g"), a.path(name)));
    println!("unlink {unlinked:?}, rename away {moved:?}, rename over {over:?}");
    assert_eq!(
        silly_names(&a),
        silly.clone(),
        "the silly name is unchanged"
    );
    assert_eq!(unlinked, Some(libc::EBUSY), "unlink of a silly name");
    assert_eq!(moved, Some(libc::EBUSY), "rename of a silly name");
    assert_eq!(over, Some(libc::EBUSY), "rename over a silly name");
    // Another client (which does not know the name is silly) moves it away
    // and puts an unrelated file under it: the last close must not delete
    // a file this client did not rename there.
    let b = client("nfs", Some(&a.backing_path("")), &[]);
    std::fs::rename(b.path(name), b.path("moved")).unwrap();
    std::fs::write(b.path(name), "unrelated").unwrap();
    drop(held);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        std::fs::read_to_string(a.backing_path(name))
            .ok()
            .as_deref(),
        Some("unrelated"),
        "the unrelated file under the old silly name survives the last close"
    );
    // Negative control: undisturbed, the last close removes the silly name.
    let held = std::fs::File::open(a.path("g")).unwrap();
    std::fs::remove_file(a.path("g")).unwrap();
    let before: Vec<String> = silly_names(&a);
    assert!(before.len() >= 2, "{before:?}");
    drop(held);
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while silly_names(&a).len() == before.len() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(silly_names(&a), vec![name.clone()], "g's silly name went");
}

// ---------------------------------------------------------------------------
// Issue 41, items 2, 3 and 6: write-back errors go to the descriptions that
// wrote, at their fsync or close (nfs_file_flush samples the mapping's
// errseq before its own write-back and reports what that write-back hit;
// nfs_file_fsync reports what this description has not seen), and a
// read-only close reports nothing (nfs_file_flush returns 0 without
// FMODE_WRITE).

/// A call's result: Ok or the errno.
type Outcome = Result<(), i32>;

fn fsync_of(file: &std::fs::File) -> Result<(), i32> {
    file.sync_all().map_err(errno_of)
}

/// A writer gathers 1 MiB; another open of the file, read-only, closes
/// first; then the writer's fsync and close. (reader's close, writer's
/// fsync, writer's close, bytes on disk).
fn reader_closes_first(rules: &[&str]) -> (Outcome, Outcome, Outcome, usize) {
    let m = client("nfs", None, rules);
    let _quiet = no_forks();
    let writer = std::fs::File::create(m.path("f")).unwrap();
    writer.write_all_at(&vec![7u8; 1 << 20], 0).unwrap();
    let reader = std::fs::File::open(m.path("f")).unwrap();
    let reader_close = close_fd(reader);
    let fsync = fsync_of(&writer);
    let close = close_fd(writer);
    let disk = std::fs::read(m.backing_path("f")).unwrap().len();
    (reader_close, fsync, close, disk)
}

#[test]
fn a_write_back_error_goes_to_the_writer_not_to_a_readers_close() {
    let seen = reader_closes_first(&["write error=ENOSPC"]);
    println!("ENOSPC: reader close, writer fsync, writer close, disk: {seen:?}");
    assert_eq!(
        seen.0,
        Ok(()),
        "a read-only close reports no write-back error"
    );
    assert_eq!(seen.1, Err(libc::ENOSPC), "the writer's fsync reports it");
    assert_eq!(seen.2, Ok(()), "reported once: the close after it is clean");
    assert_eq!(seen.3, 0);
    // Negative control: no rule, no error, the data is there.
    assert_eq!(reader_closes_first(&[]), (Ok(()), Ok(()), Ok(()), 1 << 20));
}

/// The writer gathers 2 MiB, starts a child (whose exec closes its inherited
/// copy of the fd: a FUSE flush from another pid, same description), then
/// fsyncs and closes.
fn writer_starts_a_child(rules: &[&str]) -> (Result<(), i32>, Result<(), i32>, usize) {
    let m = client("nfs", None, rules);
    let writer = std::fs::File::create(m.path("f")).unwrap();
    writer.write_all_at(&vec![7u8; 2 << 20], 0).unwrap();
    let forks = forking();
    let status = std::process::Command::new("true").status().unwrap();
    drop(forks);
    assert!(status.success());
    let fsync = fsync_of(&writer);
    let close = close_fd(writer);
    let disk = std::fs::read(m.backing_path("f")).unwrap().len();
    (fsync, close, disk)
}

#[test]
fn a_childs_exec_does_not_take_the_writers_write_back_error() {
    let seen = writer_starts_a_child(&["write error=ENOSPC"]);
    println!("ENOSPC: writer fsync, writer close, disk after a child: {seen:?}");
    assert_eq!(seen.0, Err(libc::ENOSPC), "the writer's fsync reports it");
    assert_eq!(seen.2, 0);
    // Negative control: no rule, no error, every byte there.
    assert_eq!(writer_starts_a_child(&[]), (Ok(()), Ok(()), 2 << 20));
}

/// Item 3: a soft mount gives a WRITE up at its major timeout; then an
/// unrelated open(O_RDONLY) + close. (writer's close, the later close).
fn later_close_after_soft_timeout(policy: &str) -> (Result<(), i32>, Result<(), i32>) {
    let m = client(policy, None, &[]);
    let _quiet = no_forks();
    std::fs::write(m.path("f"), "x").unwrap();
    let writer = std::fs::OpenOptions::new()
        .write(true)
        .open(m.path("f"))
        .unwrap();
    writer.write_all_at(b"new data", 0).unwrap();
    let rule = m.set("write hang=3s").unwrap();
    let close = close_fd(writer);
    m.clear(Some(rule));
    let later = close_fd(std::fs::File::open(m.path("f")).unwrap());
    (close, later)
}

#[test]
fn a_soft_timeout_is_not_reported_to_a_later_unrelated_close() {
    // timeo=5,retrans=1: the WRITE is given up after 1 s.
    let (close, later) = later_close_after_soft_timeout("nfs:soft,timeo=5,retrans=1");
    println!("soft: writer close {close:?}, later read-only close {later:?}");
    assert_eq!(
        close,
        Err(libc::EIO),
        "the writer's close reports the lost WRITE"
    );
    assert_eq!(
        later,
        Ok(()),
        "a later read-only open+close reports nothing"
    );
    // Negative control: hard waits the hang out; nothing is lost.
    assert_eq!(later_close_after_soft_timeout("nfs:hard"), (Ok(()), Ok(())));
}

/// Item 6: client A gathers a write to `f`, client B removes `f` (or not),
/// A closes: what A's close returns.
fn close_after_other_client_removed(remove: bool) -> Result<(), i32> {
    let a = client("nfs", None, &[]);
    std::fs::write(a.path("f"), "x").unwrap();
    let b = client("nfs", Some(&a.backing_path("")), &[]);
    let _quiet = no_forks();
    let writer = std::fs::OpenOptions::new()
        .write(true)
        .open(a.path("f"))
        .unwrap();
    writer.write_all_at(b"gathered", 0).unwrap();
    if remove {
        std::fs::remove_file(b.path("f")).unwrap();
    }
    close_fd(writer)
}

#[test]
fn a_write_to_a_file_another_client_removed_fails_at_close_with_estale() {
    let close = close_after_other_client_removed(true);
    println!("orphan: close {close:?}");
    assert_eq!(close, Err(libc::ESTALE), "the WRITE to a removed file");
    // Negative control: not removed, written.
    assert_eq!(close_after_other_client_removed(false), Ok(()));
}

// ---------------------------------------------------------------------------
// Issue 41, item 7: writes by a caller without CAP_FSETID are gathered too.

/// 64 write(2)s of 4 KiB into `f` by uid 65534 (or root), then close: the
/// WRITE requests, and the mode of `s` (set-ID, 06777) after one write by
/// the same user.
fn writes_as(policy: &str, uid: u32) -> (u64, u32) {
    let forks = forking();
    let m = SlowMount::configured(&[], |config| {
        config.cache = policy.parse().unwrap();
        config.options.allow_other = true;
        // Every write(2) reaches the daemon in every mode (no kernel
        // passthrough), so that the count is the client's WRITEs.
        config.passthrough = false;
    })
    .expect("mounting slowfs (needs /dev/fuse)");
    drop(forks);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(m.backing_path(""), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::write(m.backing_path("f"), "").unwrap();
    std::fs::set_permissions(m.backing_path("f"), std::fs::Permissions::from_mode(0o666)).unwrap();
    std::fs::write(m.backing_path("s"), "").unwrap();
    std::fs::set_permissions(m.backing_path("s"), std::fs::Permissions::from_mode(0o6777)).unwrap();
    let before = m.stats().count("write");
    let script = format!(
        "dd if=/dev/zero of={f} bs=4096 count=64 conv=notrunc status=none && \
         printf x | dd of={s} conv=notrunc status=none",
        f = m.path("f").display(),
        s = m.path("s").display()
    );
    let _forks = forking();
    let out = std::process::Command::new("setpriv")
        .args([
            &format!("--reuid={uid}"),
            &format!("--regid={uid}"),
            "--clear-groups",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", common_text(&out));
    let writes = m.stats().count("write") - before;
    assert_eq!(std::fs::read(m.backing_path("f")).unwrap().len(), 64 * 4096);
    use std::os::unix::fs::MetadataExt;
    let mode = std::fs::metadata(m.backing_path("s")).unwrap().mode() & 0o7777;
    (writes, mode)
}

fn common_text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn writes_without_cap_fsetid_are_gathered_and_still_drop_set_id_bits() {
    let (nobody, mode) = writes_as("nfs", 65534);
    println!("nfs as nobody: {nobody} WRITEs for 64 write(2)s; set-ID file now {mode:o}");
    assert!(nobody <= 2, "{nobody} WRITEs: not gathered");
    assert_eq!(
        mode, 0o777,
        "set-ID bits dropped by a write without CAP_FSETID"
    );
    // Negative controls: root's writes (1 WRITE, bits kept), every-call.
    let (root, mode) = writes_as("nfs", 0);
    assert!(root <= 2, "{root}");
    assert_eq!(mode, 0o6777, "root (CAP_FSETID) keeps them");
    let (every, _) = writes_as("every-call", 65534);
    assert_eq!(every, 64 + 1, "every call pays");
}

// ---------------------------------------------------------------------------
// Issue 41, item 11: the attribute time doubles only when a revalidation
// after it ran out finds the file unchanged (nfs_update_inode), not at every
// reply.

/// Client B opens and fstats `f` `opens` times in quick succession (each
/// open drops the cached attributes, close-to-open; each fstat is a GETATTR
/// whose reply finds the file unchanged), then client A grows the file: how
/// long B's stat shows the old size (at most `limit`).
fn stale_size_after_revalidations(policy: &str, opens: usize, limit: Duration) -> Duration {
    let a = client(policy, None, &[]);
    std::fs::write(a.path("f"), "x").unwrap();
    let b = client(policy, Some(&a.backing_path("")), &[]);
    for _ in 0..opens {
        let file = std::fs::File::open(b.path("f")).unwrap();
        assert_eq!(file.metadata().unwrap().len(), 1);
    }
    std::fs::write(a.path("f"), "grown").unwrap();
    let started = std::time::Instant::now();
    while std::fs::metadata(b.path("f")).unwrap().len() == 1 && started.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(20));
    }
    let stale = started.elapsed();
    println!("{policy}, {opens} revalidations: B saw the old size for {stale:?}");
    stale
}

#[test]
fn replies_within_the_attribute_time_do_not_lengthen_it() {
    // acregmin=1: ten revalidations within the first second leave the time
    // at 1 s, so B sees A's new size within about a second (NFS: at most
    // acregmin after the last revalidation).
    let limit = Duration::from_secs(5);
    let stale = stale_size_after_revalidations("nfs:acregmin=1,acregmax=60", 10, limit);
    assert!(stale < Duration::from_millis(2500), "{stale:?}");
    // Negative control: the window is honoured (acregmin=4: stale for
    // seconds), so the measurement can see a long one.
    let stale = stale_size_after_revalidations("nfs:acregmin=4,acregmax=60", 10, limit);
    assert!(stale >= Duration::from_millis(2500), "{stale:?}");
}

// ---------------------------------------------------------------------------
// Issue 41, item 12: O_APPEND is not atomic across clients.

/// Clients A and B open `log` with O_APPEND, each appends a line, A closes,
/// then B: what the file holds.
fn two_clients_append(policy: &str) -> String {
    let a = client(policy, None, &[]);
    std::fs::write(a.path("log"), "").unwrap();
    let b = client(policy, Some(&a.backing_path("")), &[]);
    let _quiet = no_forks();
    let append = |path| std::fs::OpenOptions::new().append(true).open(path).unwrap();
    let mut from_a = append(a.path("log"));
    let mut from_b = append(b.path("log"));
    std::io::Write::write_all(&mut from_a, b"from A\n").unwrap();
    std::io::Write::write_all(&mut from_b, b"from B\n").unwrap();
    assert_eq!(close_fd(from_a), Ok(()));
    assert_eq!(close_fd(from_b), Ok(()));
    let log = std::fs::read_to_string(a.backing_path("log")).unwrap();
    println!("{policy}: {log:?}");
    log
}

#[test]
fn o_append_is_not_atomic_across_clients() {
    // Each client appends at the end it knows (size 0): B's WRITE at
    // offset 0 lands over A's (open(2): "O_APPEND may lead to corrupted
    // files on NFS").
    assert_eq!(two_clients_append("nfs"), "from B\n");
    // Negative control: every-call (a local filesystem) appends both.
    assert_eq!(two_clients_append("every-call"), "from A\nfrom B\n");
}

// ---------------------------------------------------------------------------
// Issue 41, item 15 (in part): a close sends a COMMIT (what `flush` rules
// stand for under NFS) only when it has WRITEs to commit.

/// How long close(2) takes under `flush delay=300ms`: of a read-only open,
/// after a write(2), and after a write(2) and an fsync.
fn close_costs(policy: &str) -> [Duration; 3] {
    let m = client(policy, None, &["flush delay=300ms"]);
    std::fs::write(m.backing_path("f"), "x").unwrap();
    let _quiet = no_forks();
    let timed_close = |file: std::fs::File| {
        let started = std::time::Instant::now();
        assert_eq!(close_fd(file), Ok(()));
        started.elapsed()
    };
    let read_only = timed_close(std::fs::File::open(m.path("f")).unwrap());
    let written = open_rw(m.path("f"));
    written.write_all_at(b"new", 0).unwrap();
    let written = timed_close(written);
    let synced = open_rw(m.path("f"));
    synced.write_all_at(b"newer", 0).unwrap();
    synced.sync_all().unwrap();
    let synced = timed_close(synced);
    println!("{policy}: close read-only {read_only:?}, after a write {written:?}, after write+fsync {synced:?}");
    [read_only, written, synced]
}

#[test]
fn a_close_pays_for_a_commit_only_when_it_has_writes_to_commit() {
    let slow = Duration::from_millis(250);
    let [read_only, written, synced] = close_costs("nfs");
    assert!(
        read_only < slow,
        "a read-only close sends nothing: {read_only:?}"
    );
    assert!(
        synced < slow,
        "nothing left to commit after fsync: {synced:?}"
    );
    // Negative controls: a close with WRITEs to commit pays; every-call
    // pays at every close.
    assert!(written >= slow, "{written:?}");
    let [read_only, _, _] = close_costs("every-call");
    assert!(read_only >= slow, "{read_only:?}");
}

// ---------------------------------------------------------------------------
// Issue 41, item 10 (the signal): F_SETLKW ends with EINTR when a signal
// handler runs, as the NLM client's wait is interruptible (nlmclnt_block).

extern "C" fn on_usr1(_: libc::c_int) {}

/// Client B waits in F_SETLKW for client A's lock; after 300 ms B's thread
/// gets `signal` (SIGUSR1 has a handler, SIGWINCH's default does nothing).
/// What B's F_SETLKW returned 300 ms later, if it returned.
fn lock_wait_signalled(signal: i32) -> Option<Result<i32, i32>> {
    use std::os::unix::thread::JoinHandleExt;
    // SAFETY: a handler that does nothing, installed without SA_RESTART.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_usr1 as extern "C" fn(libc::c_int) as usize;
        libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut());
    }
    let (_a, b, held) = a_holds_a_lock_b_can_see();
    let other = open_rw(b.path("db"));
    let waiter = std::thread::spawn(move || whole_file_lock(&other, libc::F_SETLKW, libc::F_WRLCK));
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !waiter.is_finished(),
        "F_SETLKW returned while A held the lock"
    );
    // SAFETY: the thread is alive (not finished) and joined below.
    unsafe { libc::pthread_kill(waiter.as_pthread_t(), signal) };
    std::thread::sleep(Duration::from_millis(300));
    let ended = waiter.is_finished();
    drop(held);
    let result = waiter.join().unwrap();
    println!("signal {signal}: ended {ended}, {result:?}");
    ended.then_some(result)
}

#[test]
fn a_lock_wait_ends_with_eintr_when_a_signal_handler_runs() {
    let started = std::time::Instant::now();
    assert_eq!(lock_wait_signalled(libc::SIGUSR1), Some(Err(libc::EINTR)));
    println!("with the mounts' teardown: {:?}", started.elapsed());
    // Negative control: a signal that runs nothing (SIGWINCH by default)
    // leaves it waiting; it gets the lock once A lets go.
    assert_eq!(lock_wait_signalled(libc::SIGWINCH), None);
}

/// What client B's stat of `f` says 2.5 s after client A removed it (or,
/// with `remove` false, renamed it away), where B's attribute time is 1 s
/// and its names last the directory's 30 s: the errno, or the link count.
fn stat_after_other_client(remove: bool) -> Result<u64, i32> {
    use std::os::unix::fs::MetadataExt;
    let policy = "nfs:acregmin=1,acregmax=1";
    let a = client(policy, None, &[]);
    std::fs::write(a.path("f"), "x").unwrap();
    let b = client(policy, Some(&a.backing_path("")), &[]);
    assert_eq!(std::fs::metadata(b.path("f")).unwrap().nlink(), 1);
    if remove {
        std::fs::remove_file(a.path("f")).unwrap();
    } else {
        std::fs::rename(a.path("f"), a.path("g")).unwrap();
    }
    std::thread::sleep(Duration::from_millis(2500));
    let seen = std::fs::metadata(b.path("f"))
        .map(|m| m.nlink())
        .map_err(errno_of);
    println!("removed {remove}: B's stat of f after 2.5 s: {seen:?}");
    seen
}

#[test]
fn a_file_another_client_removed_is_gone_once_its_attribute_time_is_out() {
    // The server answers the removed file's handle NFS3ERR_STALE and the
    // client looks the name up again: ENOENT (before: nlink 0 for as long
    // as B cached the name, 30 s).
    assert_eq!(stat_after_other_client(true), Err(libc::ENOENT));
    // Negative control: a file renamed away still answers under the name
    // B cached, as on NFS until the directory's attribute time is out.
    assert_eq!(stat_after_other_client(false), Ok(1));
}

/// Client B caches `d/g` as missing; client A creates it; B's stat of it
/// (after listing `d` when `list`): Ok or the errno. A stat, not an open:
/// proposed kernels revalidate a negative entry at every open.
fn stat_after_other_client_created(list: bool) -> Result<(), i32> {
    let a = client("nfs", None, &[]);
    std::fs::create_dir(a.path("d")).unwrap();
    let b = client("nfs", Some(&a.backing_path("")), &[]);
    assert_eq!(
        std::fs::metadata(b.path("d/g")).map_err(errno_of).err(),
        Some(libc::ENOENT)
    );
    std::fs::write(a.path("d/g"), "new").unwrap();
    if list {
        let names: Vec<_> = std::fs::read_dir(b.path("d"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["g"], "B's listing after A's create");
    }
    let opened = std::fs::File::open(b.path("d/g"))
        .map(drop)
        .map_err(errno_of);
    println!("listed {list}: B's open of d/g: {opened:?}");
    opened
}

#[test]
fn a_negative_entry_goes_when_a_directory_revalidation_shows_the_name() {
    // B's open of d revalidates it (close-to-open, also for directories),
    // finds it changed, and the missing name is asked again
    // (nfs_neg_need_reval -> nfs_check_verifier). Before: B listed g and
    // its stat said ENOENT for 30 s.
    assert_eq!(stat_after_other_client_created(true), Ok(()));
    // Negative control: without a revalidation of d, the negative entry
    // lasts d's attribute time (30 s), as on NFS with lookupcache=all.
    assert_eq!(stat_after_other_client_created(false), Err(libc::ENOENT));
}

/// READDIRs client B sends to list `d` (50 files) twice, then once more
/// after client A added a file, and whether that last listing shows it.
fn readdirs_for_listings(policy: &str) -> (u64, u64, bool) {
    let a = client(policy, None, &[]);
    std::fs::create_dir(a.path("d")).unwrap();
    for i in 0..50 {
        std::fs::write(a.path(&format!("d/f{i}")), "x").unwrap();
    }
    let b = client(policy, Some(&a.backing_path("")), &[]);
    let list = || -> Vec<String> {
        std::fs::read_dir(b.path("d"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(list().len(), 50);
    let before = b.stats().count("readdir");
    assert_eq!(list().len(), 50);
    let again = b.stats().count("readdir") - before;
    std::fs::write(a.path("d/new"), "x").unwrap();
    let before = b.stats().count("readdir");
    let shows_new = list().iter().any(|n| n == "new");
    let changed = b.stats().count("readdir") - before;
    println!("{policy}: READDIRs for an unchanged listing {again}, after A's create {changed}");
    (again, changed, shows_new)
}

#[test]
fn an_unchanged_directory_is_listed_from_the_cache_and_a_changed_one_is_read_again() {
    // The listing is cached while the directory is unchanged (nfs_readdir's
    // page cache), and an open of a changed directory reads it again
    // (close-to-open for directories: nfs_lookup_verify_inode).
    let (again, changed, shows_new) = readdirs_for_listings("nfs");
    assert_eq!(again, 0, "an unchanged directory's listing is cached");
    assert!(
        changed >= 1 && shows_new,
        "A's new file shows at B's next open"
    );
    // Negative control: every-call reads it every time.
    let (again, _, shows_new) = readdirs_for_listings("every-call");
    assert!(again >= 1 && shows_new);
}

/// Client A writes 100 bytes at 10 into a file of 8 KiB of 'o' and fsyncs it,
/// the fsync held 1 s by a rule (its WRITE in flight all that time, as a
/// `--profile nfs` round trip holds it briefly); a reader on A itself (or on
/// client B) preads page 0 meanwhile and again after the fsync returned:
/// whether each saw the new bytes.
fn reads_beside_a_held_fsync(same_client: bool) -> (bool, bool) {
    let a = client("nfs", None, &["fsync delay=1s"]);
    std::fs::write(a.backing_path("f"), vec![b'o'; 8192]).unwrap();
    let b = (!same_client).then(|| client("nfs", Some(&a.backing_path("")), &[]));
    let reader_path = b.as_ref().map_or_else(|| a.path("f"), |b| b.path("f"));
    let _forks = no_forks();
    let writer = open_rw(a.path("f"));
    let reader = std::fs::File::open(reader_path).unwrap();
    let has_new = |file: &std::fs::File| {
        let mut page = vec![0u8; 4096];
        file.read_at(&mut page, 0).unwrap();
        page[10..110].iter().all(|b| *b == b'N')
    };
    writer.write_all_at(&[b'N'; 100], 10).unwrap();
    let fsync = std::thread::spawn(move || writer.sync_all().map(|()| writer));
    std::thread::sleep(Duration::from_millis(300));
    let during = has_new(&reader);
    let _writer = fsync.join().unwrap().unwrap();
    let after = has_new(&reader);
    println!("same client {same_client}: new bytes during the fsync {during}, after {after}");
    (during, after)
}

#[test]
fn processes_on_one_client_share_its_page_cache_while_a_write_is_in_flight() {
    // On Linux a write(2) is in the client's page cache at once, for every
    // local reader, while its WRITE is in flight. Before: the reader got the
    // old bytes from the server during the fsync, and its page cache kept
    // them after the fsync returned (issue 41 item 1).
    assert_eq!(reads_beside_a_held_fsync(true), (true, true));
    // Negative control: another client does not see data that has not
    // reached the server.
    assert!(!reads_beside_a_held_fsync(false).0);
}

/// Threads of this process (the test and its in-process daemons).
fn threads_now() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap()
}

/// CPU time this process has used (user + system).
fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

// Issue 41, item 10: a blocked F_SETLKW costs no daemon thread (before: a
// thread each, polling every 10 ms: 200 waits took 200 more threads).
#[test]
fn blocked_lock_waits_hold_no_daemon_thread() {
    const WAITS: usize = 200;
    let (_a, b, held) = a_holds_a_lock_b_can_see();
    let before = threads_now();
    let waiters: Vec<_> = (0..WAITS)
        .map(|_| {
            let other = open_rw(b.path("db"));
            std::thread::spawn(move || whole_file_lock(&other, libc::F_SETLKW, libc::F_WRLCK))
        })
        .collect();
    // Every wait has reached the daemon and been found blocked (parked).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while b.waiting() < WAITS && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let parked = b.waiting();
    assert!(
        parked >= WAITS,
        "{parked} of {WAITS} waits are parked in the daemon"
    );
    std::thread::sleep(Duration::from_millis(500));
    let (cpu, wall) = (cpu_time(), std::time::Instant::now());
    std::thread::sleep(Duration::from_secs(2));
    let cpu = cpu_time() - cpu;
    let stat_started = std::time::Instant::now();
    std::fs::metadata(b.path("db")).unwrap();
    let stat_took = stat_started.elapsed();
    let during = threads_now();
    assert!(
        waiters.iter().all(|w| !w.is_finished()),
        "a wait returned while A held the lock"
    );
    println!(
        "{WAITS} blocked waits: threads {before} -> {during}; CPU {:.1}% of a core over {:?} (the whole test process); a stat meanwhile took {stat_took:?}",
        cpu.as_secs_f64() * 100.0 / wall.elapsed().as_secs_f64(),
        wall.elapsed()
    );
    // The waiting callers' own threads, and no daemon thread per wait (the
    // margin is for other tests' mounts in this process, which come and go:
    // a thread per wait would be WAITS more).
    assert!(
        during <= before + WAITS + WAITS / 2,
        "{WAITS} waits took {} threads beyond their callers'",
        during - before - WAITS
    );
    let released = std::time::Instant::now();
    drop(held);
    for waiter in waiters {
        assert_eq!(waiter.join().unwrap(), Ok(libc::F_WRLCK));
    }
    println!(
        "every wait got the lock {:?} after A's close",
        released.elapsed()
    );
}

/// `ls -ln` of a 200-file directory another client made, on a fresh client
/// with `policy`: whether it shows what the backing directory holds, and
/// the LOOKUPs and READDIRs it sent.
fn ls_l_requests(policy: &str) -> (bool, u64, u64) {
    let a = client(policy, None, &[]);
    let dir = a.backing_path("d");
    std::fs::create_dir(&dir).unwrap();
    for i in 0..200 {
        std::fs::write(dir.join(format!("f{i}")), "x".repeat(i)).unwrap();
    }
    let ls = |path: &std::path::Path| {
        let _forks = forking();
        let out = std::process::Command::new("ls")
            .args(["-ln", "--time-style=+%s.%N"])
            .arg(path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let before = a.stats();
    let shown = ls(&a.path("d"));
    let after = a.stats();
    let sent = |op: &str| after.count(op) - before.count(op);
    let same = shown == ls(&dir);
    println!(
        "{policy}: ls -l of 200 entries: {} lines, as the backing: {same}; {} LOOKUPs, {} READDIRs",
        shown.lines().count(),
        sent("lookup"),
        sent("readdir")
    );
    (same, sent("lookup"), sent("readdir"))
}

// Issue 41, item 15 (READDIRPLUS): `ls -l` sends no LOOKUP per entry, as the
// Linux client's adaptive READDIRPLUS (nfs_use_readdirplus).
#[test]
fn a_listing_brings_the_entries_attributes_with_rdirplus() {
    let (same, lookups, readdirs) = ls_l_requests("nfs");
    assert!(same, "ls -l through the mount differs from the backing's");
    assert!(
        lookups < 5 && readdirs >= 1,
        "{lookups} LOOKUPs, {readdirs} READDIRs"
    );
    // Negative control: nordirplus lists names only, and ls -l looks each up.
    let (same, lookups, _) = ls_l_requests("nfs:nordirplus");
    assert!(same);
    assert!(lookups >= 200, "nordirplus: {lookups} LOOKUPs");
}

/// `ls -ln` twice over a 100-file directory another client made, on a
/// client with `policy` whose xattr requests meet a rule: how many of them
/// the rule saw each time, then after the other client changed one file.
fn acl_rpcs(policy: &str) -> [u64; 3] {
    let a = client(policy, None, &["xattr delay=1us"]);
    let dir = a.backing_path("d");
    std::fs::create_dir(&dir).unwrap();
    for i in 0..100 {
        std::fs::write(dir.join(format!("f{i}")), "x").unwrap();
    }
    let xattr_rpcs = || a.stats().rules[0].matched;
    let ls = || {
        let _forks = forking();
        let out = std::process::Command::new("ls")
            .arg("-ln")
            .arg(a.path("d"))
            .output()
            .unwrap();
        assert!(out.status.success());
        assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 101);
    };
    let mut seen = [0; 3];
    let mut before = xattr_rpcs();
    for (round, seen) in seen.iter_mut().enumerate() {
        if round == 2 {
            // Another client changes one file: its ACLs are fetched again
            // once this client sees the change (after its attribute time).
            std::fs::write(dir.join("f7"), "changed").unwrap();
            std::thread::sleep(Duration::from_millis(1500));
        }
        ls();
        *seen = xattr_rpcs() - before;
        before = xattr_rpcs();
    }
    println!("{policy}: xattr requests the rule saw per ls -l of 100 files: {seen:?}");
    // A user.* name is sent once (v4.2's GETXATTR, then cached); security.* never.
    let asks = |name: &str| {
        let before = xattr_rpcs();
        let path =
            std::ffi::CString::new(a.path("d/f1").into_os_string().into_encoded_bytes()).unwrap();
        let name = std::ffi::CString::new(name).unwrap();
        // SAFETY: valid C strings; a size query (no buffer).
        unsafe { libc::getxattr(path.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) };
        xattr_rpcs() - before
    };
    if policy.starts_with("nfs") {
        assert_eq!(
            (asks("user.x"), asks("user.x"), asks("security.x")),
            (1, 0, 0)
        );
    }
    seen
}

// Issue 41, item 15 (costs): ls -l sends one GETACL per file the first time,
// as a v3 client over NFSACL (nfs3_get_acl caches both ACLs per file); the
// security.* name it also asks is answered without an RPC.
#[test]
fn acls_are_fetched_once_per_file_and_again_after_it_changes() {
    let [first, again, after_change] = acl_rpcs("nfs:acregmin=1,acregmax=1");
    assert!((100..=102).contains(&first), "{first}");
    assert_eq!(again, 0, "cached ACLs asked again");
    assert!((1..=2).contains(&after_change), "{after_change}");
    // Negative control: every call pays, two per file each time.
    let [first, again, _] = acl_rpcs("every-call");
    assert!(first >= 200 && again >= 200, "{first} {again}");
}

/// `fcntl(fd, cmd)` with a lock of `typ` on bytes `start..start + len`.
fn range_lock(file: &std::fs::File, cmd: i32, typ: i32, start: i64, len: i64) -> Result<(), i32> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock is plain old data; zero is valid for every field.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = typ as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock.l_start = start;
    lock.l_len = len;
    // SAFETY: a valid fd and flock.
    if unsafe { libc::fcntl(file.as_raw_fd(), cmd, &mut lock) } < 0 {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap())
    } else {
        Ok(())
    }
}

// A lock a blocked F_SETLKW is granted after its owner closed another
// descriptor of the file is held, on the description the owner has now
// (before: granted on the description the close had dropped, and gone with
// it: the other client could take it at once).
#[test]
fn a_lock_granted_after_the_owner_closed_the_file_elsewhere_is_held() {
    let a = client("nfs", None, &[]);
    std::fs::write(a.path("db"), "x").unwrap();
    let b = client("nfs", Some(&a.backing_path("")), &[]);
    let held = open_rw(a.path("db"));
    assert_eq!(
        range_lock(&held, libc::F_SETLK, libc::F_WRLCK, 100, 100),
        Ok(())
    );
    let waiting = open_rw(b.path("db"));
    let waiter = std::thread::spawn(move || {
        let got = range_lock(&waiting, libc::F_SETLKW, libc::F_WRLCK, 100, 100);
        (got, waiting)
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !waiter.is_finished(),
        "F_SETLKW returned while A held the lock"
    );
    // This process (B's lock owner) closes another descriptor of the file:
    // POSIX drops its locks on it, and its description goes.
    drop(open_rw(b.path("db")));
    std::thread::sleep(Duration::from_millis(100));
    drop(held);
    let (got, waiting) = waiter.join().unwrap();
    assert_eq!(got, Ok(()));
    let other = open_rw(a.path("db"));
    assert_eq!(
        range_lock(&other, libc::F_SETLK, libc::F_WRLCK, 100, 100),
        Err(libc::EAGAIN),
        "B's granted lock is held: A cannot take it"
    );
    drop(waiting);
}

// A GETACL that failed is not held: the next query asks again (before: the
// first query's EIO, then the second answered from a cache it never filled).
#[test]
fn a_failed_acl_fetch_is_asked_again() {
    let a = client("nfs", None, &["xattr error=EIO"]);
    std::fs::write(a.path("f"), "x").unwrap();
    let path = std::ffi::CString::new(a.path("f").into_os_string().into_encoded_bytes()).unwrap();
    let name = std::ffi::CString::new("system.posix_acl_access").unwrap();
    let errno = || {
        // SAFETY: valid C strings; a size query (no buffer).
        let rc = unsafe { libc::getxattr(path.as_ptr(), name.as_ptr(), std::ptr::null_mut(), 0) };
        (rc < 0).then(|| std::io::Error::last_os_error().raw_os_error().unwrap())
    };
    assert_eq!((errno(), errno()), (Some(libc::EIO), Some(libc::EIO)));
    // Control: an answer (no ACL) is held: of two queries one is a GETACL.
    a.clear(None);
    a.set("xattr delay=1us").unwrap();
    assert_eq!(
        (errno(), errno()),
        (Some(libc::ENODATA), Some(libc::ENODATA))
    );
    assert_eq!(a.stats().rules[0].matched, 1, "one GETACL, then the cache");
}

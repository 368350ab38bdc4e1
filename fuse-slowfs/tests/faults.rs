//! Faults observed through real syscalls on a real mount.

mod common;

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use common::SlowMount;
use slowfs::control::{request, Command};

#[test]
fn a_delay_rule_delays_the_syscall() {
    let m = SlowMount::configured(&["fsync delay=300ms"], |_| {}).expect("mounting slowfs");
    let file = File::create(m.path("f")).unwrap();
    let start = Instant::now();
    file.sync_all().unwrap();
    assert!(
        start.elapsed() >= Duration::from_millis(300),
        "{:?}",
        start.elapsed()
    );
    let start = Instant::now();
    file.set_len(10).unwrap();
    assert!(
        start.elapsed() < Duration::from_millis(300),
        "setattr was not delayed"
    );
}

#[test]
fn parallel_delayed_reads_wait_together_not_in_turn() {
    let m = SlowMount::configured(&[], |_| {}).expect("mounting slowfs");
    fs::write(m.path("f"), vec![7u8; 4096]).unwrap();
    m.mount()
        .plan()
        .add(slowfs_faults::parse_rule("read delay=200ms").unwrap());
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..32 {
            s.spawn(|| {
                let file = File::open(m.path("f")).unwrap();
                let mut buf = [0u8; 4096];
                assert_eq!(file.read_at(&mut buf, 0).unwrap(), 4096);
            });
        }
    });
    let elapsed = start.elapsed();
    // In turn, 32 reads would take 6.4 s; the 4 FUSE workers alone would allow 1.6 s.
    assert!(elapsed >= Duration::from_millis(200), "{elapsed:?}");
    assert!(
        elapsed < Duration::from_millis(1500),
        "reads were serialised: {elapsed:?}"
    );
    assert_eq!(m.mount().stats().count("read"), 32);
}

#[test]
fn a_short_write_rule_shortens_write() {
    let m = SlowMount::configured(&["write short=1..100"], |_| {}).expect("mounting slowfs");
    let mut file = File::create(m.path("f")).unwrap();
    let n = file.write(&[1u8; 4096]).unwrap();
    assert!((1..=100).contains(&n), "write returned {n}");
    // A loop still gets everything there.
    file.write_all(&[2u8; 1000]).unwrap();
    assert_eq!(
        fs::metadata(m.backing_path("f")).unwrap().len(),
        n as u64 + 1000
    );
}

#[test]
fn a_short_read_rule_shortens_read() {
    let m = SlowMount::configured(&["read short=10..20"], |_| {}).expect("mounting slowfs");
    fs::write(m.backing_path("f"), vec![3u8; 8192]).unwrap();
    let mut file = File::open(m.path("f")).unwrap();
    let mut buf = vec![0u8; 8192];
    let n = file.read(&mut buf).unwrap();
    assert!((10..=20).contains(&n), "read returned {n}");
    let mut all = Vec::new();
    File::open(m.path("f"))
        .unwrap()
        .read_to_end(&mut all)
        .unwrap();
    assert_eq!(all, vec![3u8; 8192], "looping reads see every byte");
}

#[test]
fn an_errno_rule_surfaces_its_errno() {
    let m = SlowMount::configured(
        &["write path=**/*.tmp error=ENOSPC", "fsync error=EIO"],
        |_| {},
    )
    .expect("mounting slowfs");
    let mut tmp = File::create(m.path("x.tmp")).unwrap();
    let err = tmp.write(b"data").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    let mut ok = File::create(m.path("x.txt")).unwrap();
    ok.write_all(b"data").unwrap();
    assert_eq!(ok.sync_all().unwrap_err().raw_os_error(), Some(libc::EIO));
}

#[test]
fn a_throttle_caps_throughput() {
    let m = SlowMount::configured(&["write throttle=4MiB/s"], |_| {}).expect("mounting slowfs");
    let mut file = File::create(m.path("f")).unwrap();
    let chunk = vec![0u8; 128 << 10];
    let start = Instant::now();
    for _ in 0..32 {
        file.write_all(&chunk).unwrap();
    }
    let elapsed = start.elapsed();
    // 4 MiB at 4 MiB/s with a 0.4 MiB burst: at least 0.9 s.
    assert!(
        elapsed >= Duration::from_millis(850),
        "4 MiB in {elapsed:?} beats 4 MiB/s"
    );
}

#[test]
fn an_iops_cap_limits_requests() {
    let m = SlowMount::configured(&["getattr iops=50 burst=1"], |_| {}).expect("mounting slowfs");
    fs::write(m.backing_path("f"), b"x").unwrap();
    let start = Instant::now();
    let file = File::open(m.path("f")).unwrap();
    for _ in 0..20 {
        file.metadata().unwrap();
    }
    assert!(
        start.elapsed() >= Duration::from_millis(350),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn a_hang_blocks_until_released_through_the_control_socket() {
    let m = SlowMount::configured(&["read hang"], |_| {}).expect("mounting slowfs");
    fs::write(m.backing_path("f"), b"payload").unwrap();
    let path = m.path("f");
    let reader = std::thread::spawn(move || fs::read(path).unwrap());
    std::thread::sleep(Duration::from_millis(300));
    assert!(!reader.is_finished(), "a hung read finished by itself");
    let socket = m.mount().control_socket().unwrap().to_path_buf();
    // Clear the rule first so the reader's next read does not hang again.
    assert!(request(&socket, &Command::Clear { id: None }).unwrap().ok);
    let ack = request(&socket, &Command::Release).unwrap();
    assert!(ack.ok && ack.message.contains("released 1"), "{ack:?}");
    assert_eq!(reader.join().unwrap(), b"payload");
}

#[test]
fn a_hang_with_a_timeout_ends_by_itself() {
    let m = SlowMount::configured(&["read hang=300ms"], |_| {}).expect("mounting slowfs");
    fs::write(m.backing_path("f"), b"x").unwrap();
    let start = Instant::now();
    assert_eq!(fs::read(m.path("f")).unwrap(), b"x");
    assert!(start.elapsed() >= Duration::from_millis(300));
}

#[test]
fn unmounting_releases_hung_requests() {
    let m = SlowMount::configured(&["read hang"], |_| {}).expect("mounting slowfs");
    fs::write(m.backing_path("f"), b"x").unwrap();
    let path = m.path("f");
    let reader = std::thread::spawn(move || fs::read(path));
    std::thread::sleep(Duration::from_millis(200));
    drop(m);
    // The read either completes or fails, but it returns.
    let _ = reader.join().unwrap();
}

#[test]
fn rules_change_at_runtime_through_the_socket() {
    let m = SlowMount::configured(&[], |_| {}).expect("mounting slowfs");
    let socket = m.mount().control_socket().unwrap().to_path_buf();
    let ack = request(
        &socket,
        &Command::Set {
            rule: "unlink error=EROFS".into(),
        },
    )
    .unwrap();
    assert!(ack.ok, "{ack:?}");
    fs::write(m.path("f"), b"x").unwrap();
    assert_eq!(
        fs::remove_file(m.path("f")).unwrap_err().raw_os_error(),
        Some(libc::EROFS)
    );
    let bad = request(
        &socket,
        &Command::Set {
            rule: "unlink error=EWHAT".into(),
        },
    )
    .unwrap();
    assert!(!bad.ok && bad.message.contains("unknown errno"), "{bad:?}");
    let rules = request(&socket, &Command::Rules).unwrap();
    assert!(
        rules.message.contains("#1 unlink error=EROFS"),
        "{}",
        rules.message
    );
    assert!(
        request(&socket, &Command::Clear { id: Some(1) })
            .unwrap()
            .ok
    );
    fs::remove_file(m.path("f")).unwrap();
}

#[test]
fn stats_count_what_happened() {
    let m = SlowMount::configured(&["write error=EIO every=2"], |_| {}).expect("mounting slowfs");
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(m.path("f"))
        .unwrap();
    assert!(file.write(b"abc").is_ok());
    assert!(file.write(b"abc").is_err());
    assert!(file.write(b"abcd").is_ok());
    let stats = m.mount().stats();
    let write = stats.ops.iter().find(|o| o.op == "write").unwrap();
    assert_eq!(
        (write.count, write.errors, write.faulted, write.bytes),
        (3, 1, 1, 7)
    );
    assert_eq!(stats.rules[0].fired, 1);
    assert_eq!(stats.rules[0].matched, 3);
}

#[test]
fn the_same_seed_gives_the_same_faults() {
    let run = |seed| {
        let m = SlowMount::configured(&["write error=EIO p=0.5"], |c| c.spec.seed = Some(seed))
            .expect("mounting slowfs");
        let mut file = File::create(m.path("f")).unwrap();
        (0..40)
            .map(|_| file.write(b"x").is_ok())
            .collect::<Vec<_>>()
    };
    assert_eq!(run(11), run(11));
    assert_ne!(run(11), run(12));
}

#[test]
fn a_panicking_test_still_unmounts() {
    let mountpoint = std::sync::Mutex::new(None);
    let result = std::panic::catch_unwind(|| {
        let m = SlowMount::configured(&["read hang"], |_| {}).expect("mounting slowfs");
        *mountpoint.lock().unwrap() = Some(m.mount().mountpoint().to_path_buf());
        panic!("boom");
    });
    assert!(result.is_err());
    let mountpoint = mountpoint.into_inner().unwrap().unwrap();
    assert!(!slowfs::mount::slowfs_mounts().contains(&mountpoint));
}

/// A full-disk quota shows in statfs (df): the free space is what the quota still
/// lets through, and it shrinks as data is written.
#[test]
fn a_quota_shows_in_statfs() {
    let m = SlowMount::configured(&["write after_bytes=8MiB error=ENOSPC"], |_| {})
        .expect("mounting slowfs");
    let avail = || {
        let st = nix::sys::statvfs::statvfs(&m.path("")).unwrap();
        st.blocks_available() * st.fragment_size()
    };
    assert_eq!(avail(), 8 << 20);
    std::fs::write(m.path("f"), vec![1u8; 3 << 20]).unwrap();
    assert_eq!(avail(), 5 << 20);
}

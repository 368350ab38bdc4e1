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
        (
            write.count,
            write.injected.failed,
            write.fs_errors,
            write.faulted,
            write.bytes
        ),
        (3, 1, 0, 1, 7)
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

/// `stat` of `path`, its errno if it fails.
fn stat_errno(path: &std::path::Path) -> Option<i32> {
    fs::metadata(path).err().and_then(|e| e.raw_os_error())
}

#[test]
fn the_backing_filesystems_own_errors_are_not_injected_faults() {
    let m =
        SlowMount::configured(&["lookup path=bad-* error=EIO"], |_| {}).expect("mounting slowfs");
    fs::write(m.path("here"), b"x").unwrap();
    for i in 0..5 {
        // Names that are not there: the backing filesystem answers ENOENT.
        assert_eq!(
            stat_errno(&m.path(&format!("missing-{i}"))),
            Some(libc::ENOENT)
        );
    }
    // An xattr the file does not have: the backing filesystem's ENODATA.
    let path =
        std::ffi::CString::new(m.path("here").into_os_string().into_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path and name, no buffer (size 0).
    let got = unsafe {
        libc::getxattr(
            path.as_ptr(),
            c"user.none".as_ptr(),
            std::ptr::null_mut(),
            0,
        )
    };
    assert_eq!(got, -1);
    let stats = m.mount().stats();
    let lookup = stats.ops.iter().find(|o| o.op == "lookup").unwrap();
    assert!(lookup.fs_errors >= 5, "{lookup:?}");
    assert_eq!(
        lookup.injected.failed, 0,
        "ENOENT is no injected fault: {lookup:?}"
    );
    assert_eq!(lookup.faulted, 0, "{lookup:?}");
    let xattr = stats.ops.iter().find(|o| o.op == "xattr").unwrap();
    assert!(
        xattr.fs_errors >= 1 && xattr.injected.failed == 0,
        "{xattr:?}"
    );

    // The control: lookups the rule fails are injected faults, not the
    // backing filesystem's errors (the names are not there either).
    for i in 0..3 {
        assert_eq!(stat_errno(&m.path(&format!("bad-{i}"))), Some(libc::EIO));
    }
    let after = m.mount().stats();
    let lookup_after = after.ops.iter().find(|o| o.op == "lookup").unwrap();
    assert_eq!(lookup_after.injected.failed, 3, "{lookup_after:?}");
    assert_eq!(lookup_after.faulted, 3, "{lookup_after:?}");
    assert_eq!(lookup_after.fs_errors, lookup.fs_errors, "{lookup_after:?}");
    assert_eq!(after.rules[0].fired, 3);
    // The render says the same in its columns.
    let table = after.render();
    assert!(
        table.contains("fs-errors") && table.contains("3 failed"),
        "{table}"
    );
}

#[test]
fn a_profile_run_says_where_the_time_went() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("stats.json");
    // A small workload: files created, written, closed (a flush each), read,
    // and names looked up that are not there; then the stats, as JSON.
    let script = format!(
        "set -e; cd \"$SLOWFS_MOUNT\"; \
         for i in 1 2 3 4 5 6 7 8; do echo data$i > f$i; cat f$i > /dev/null; done; \
         for i in 1 2 3 4 5; do test ! -e nothere$i; done; \
         {slowfs} ctl --socket \"$SLOWFS_CTL\" \"$SLOWFS_MOUNT\" stats --json > {json}",
        slowfs = env!("CARGO_BIN_EXE_slowfs"),
        json = json.display()
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_slowfs"))
        .args([
            "run",
            "--seed",
            "1",
            "--profile",
            "nfs",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stats: slowfs::StatsReport =
        serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap();
    // Every op that ran took time, and the shares of the wall time add up to
    // at most all of it (one caller at a time).
    let shares: f64 = stats.ops.iter().map(|o| o.wall_share).sum();
    assert!(
        shares > 0.0 && shares <= 1.0,
        "shares add up to {shares}: {stats:?}"
    );
    for op in &stats.ops {
        assert!(op.time_us > 0, "{op:?}");
        let expected = op.time_us as f64 / 1e6 / stats.uptime_s;
        assert!((op.wall_share - expected).abs() < 1e-3, "{op:?}");
    }
    let top = stats.most_time().unwrap();
    assert!(stats.ops.iter().all(|o| o.time_us <= top.time_us));
    // The profile delays every lookup, but injects no failure: the missing
    // names are the backing filesystem's ENOENT.
    let lookup = stats.ops.iter().find(|o| o.op == "lookup").unwrap();
    assert!(lookup.fs_errors >= 5, "{lookup:?}");
    assert!(lookup.injected.delayed > 0, "{lookup:?}");
    assert!(
        stats.ops.iter().all(|o| o.injected.failed == 0),
        "the nfs profile fails nothing: {stats:?}"
    );
    // The run's summary ends with the one-line answer, naming the op that
    // took the most time (its table's first row), and each rule's share.
    let answer = stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("most time: "))
        .unwrap_or_else(|| panic!("no one-line answer: {stderr}"));
    assert!(answer.ends_with("of the wall time"), "{answer}");
    let header = stderr.lines().position(|l| l.starts_with("op ")).unwrap();
    let first = stderr.lines().nth(header + 1).unwrap();
    let first_op = first.split_whitespace().next().unwrap();
    assert!(
        answer.contains(&format!("({first_op})")),
        "{answer}\n{stderr}"
    );
    let summed: f64 = stderr
        .lines()
        .skip(header + 1)
        // The table's rows: their fourth column is the share of the wall time.
        .map_while(|l| l.split_whitespace().nth(3).filter(|f| f.ends_with('%')))
        .map(|share| share.trim_end_matches('%').parse::<f64>().unwrap())
        .sum();
    assert!(summed > 0.0 && summed <= 100.5, "{summed}: {stderr}");
    assert!(
        stderr.contains("of wall) in the requests it fired on"),
        "{stderr}"
    );
}

/// Requests of `op` the mount has answered so far.
fn answered(m: &SlowMount, op: &str) -> u64 {
    m.stats()
        .ops
        .iter()
        .find(|o| o.op == op)
        .map_or(0, |o| o.count)
}

/// With no rule on metadata the kernel caches names and attributes (a
/// repeated stat costs no request: the negative control, without which the
/// rest proves nothing), yet a rule added at runtime acts on the very next
/// stat, and on the next lookup of a name the kernel had cached.
#[test]
fn metadata_is_cached_until_a_rule_wants_to_see_it() {
    let m = SlowMount::configured(&[], |_| {}).expect("mounting slowfs");
    fs::write(m.path("f"), b"x").unwrap();
    fs::create_dir(m.path("d")).unwrap();
    fs::write(m.path("d/g"), b"y").unwrap();
    fs::metadata(m.path("f")).unwrap();
    fs::metadata(m.path("d/g")).unwrap();
    let asked = |m: &SlowMount| answered(m, "getattr") + answered(m, "lookup");
    let before = asked(&m);
    for _ in 0..1000 {
        fs::metadata(m.path("f")).unwrap();
        fs::metadata(m.path("d/g")).unwrap();
    }
    let during = asked(&m) - before;
    assert!(
        during < 10,
        "2,000 stats of two cached files sent {during} lookups/getattrs: the kernel did not cache them"
    );

    let next_stat_fails = |rule: &str, path: &str, errno: i32| {
        m.set(rule).unwrap();
        let stat = fs::metadata(m.path(path));
        assert_eq!(
            stat.as_ref().err().and_then(|e| e.raw_os_error()),
            Some(errno),
            "the stat right after `set {rule}`: {stat:?}"
        );
    };
    next_stat_fails("getattr path=f error=EIO", "f", libc::EIO);
    next_stat_fails("lookup path=d/g error=EACCES", "d/g", libc::EACCES);
    m.clear(None);
    fs::metadata(m.path("f")).expect("no rule, no error");
}

/// A file created and closed keeps the attributes its create gave the
/// kernel: stats of fresh files cost no request (as natively; issue 44).
#[test]
fn fresh_files_are_stat_without_a_request() {
    let m = SlowMount::configured(&[], |_| {}).expect("mounting slowfs");
    for i in 0..200 {
        File::create(m.path(&format!("f{i}"))).unwrap();
    }
    // RELEASE arrives after close returns.
    std::thread::sleep(Duration::from_millis(300));
    let asked = |m: &SlowMount| answered(m, "getattr") + answered(m, "lookup");
    let before = asked(&m);
    for i in 0..200 {
        fs::metadata(m.path(&format!("f{i}"))).unwrap();
    }
    let sent = asked(&m) - before;
    assert!(
        sent < 10,
        "200 stats of fresh files sent {sent} lookups/getattrs"
    );
}

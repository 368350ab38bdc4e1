//! `--cache nfs`: the VM's write-back of gathered data (issue 41 item 9), on
//! a `slowfs mount` daemon of its own so that its memory can be measured.
//! Above the hard limit (`dirty_bytes`) a writer sends its own data and the
//! flusher drains the rest, so the daemon's memory is bounded; data a
//! program leaves open reaches the backing file after `dirty_expire_centisecs`,
//! and not before. Each beside its negative control: limits above what is
//! written (nothing sent while the files are open, memory grows with them),
//! and the backing file still empty before the expiry.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::daemon::{Daemon, Options};

/// Held by each test for its whole run: another test's daemon, forked while
/// this one has a file open, closes its inherited copy at exec, and that close
/// is a flush that sends the file's gathered data (as `nfs_file_flush` does
/// on NFS), which would hide what the limits do.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// The daemon's resident memory, in MiB.
fn rss_mib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS");
    kib / 1024
}

/// Bytes in the regular files of `dir`.
fn bytes_in(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

/// `files` files of 1 MB written through a daemon under `cache` and left
/// open: how much its memory grew (MiB) and the bytes on the backing files
/// while they are still open.
fn written_and_left_open(cache: &str, files: usize) -> (u64, u64) {
    let daemon = Daemon::start(Options {
        args: &["--cache", cache],
        ..Default::default()
    });
    let before = rss_mib(daemon.pid());
    let mut open = Vec::new();
    for i in 0..files {
        let mut f = std::fs::File::create(daemon.mountpoint.join(format!("f{i}"))).unwrap();
        f.write_all(&vec![b'x'; 1_000_000]).unwrap();
        open.push(f);
    }
    let grew = rss_mib(daemon.pid()).saturating_sub(before);
    let on_backing = bytes_in(&daemon.backing);
    println!(
        "{cache}: {files} x 1 MB open: daemon RSS +{grew} MiB, {} MB on the backing",
        on_backing / 1_000_000
    );
    drop(open);
    (grew, on_backing)
}

#[test]
fn gathered_data_is_bounded_by_the_dirty_limit() {
    let _alone = one_at_a_time();
    // 16 MiB hard limit, 8 MiB background: the daemon holds about that
    // much, and the rest of 150 MB is on the backing files although none
    // was closed (before: +150 MiB and 0 bytes).
    let (grew, on_backing) =
        written_and_left_open("nfs:dirty_bytes=16MiB,dirty_background_bytes=8MiB", 150);
    assert!(grew < 64, "daemon RSS grew {grew} MiB");
    assert!(
        on_backing >= 150_000_000 - (20 << 20),
        "{on_backing} bytes on the backing"
    );
    // Negative control: limits above what is written send nothing early,
    // and the daemon holds it all.
    let (grew, on_backing) =
        written_and_left_open("nfs:dirty_bytes=1GiB,dirty_background_bytes=512MiB", 150);
    assert_eq!(on_backing, 0);
    assert!(grew >= 100, "daemon RSS grew only {grew} MiB");
}

#[test]
fn data_left_open_reaches_the_backing_after_the_expiry() {
    let _alone = one_at_a_time();
    // dirty_expire_centisecs=500: 5 s (Linux's default is 30 s), the flusher
    // looking every 0.5 s.
    let daemon = Daemon::start(Options {
        args: &[
            "--cache",
            "nfs:dirty_expire_centisecs=500,dirty_writeback_centisecs=50",
        ],
        ..Default::default()
    });
    let mut f = std::fs::File::create(daemon.mountpoint.join("f")).unwrap();
    f.write_all(&vec![b'x'; 1_000_000]).unwrap();
    let written = Instant::now();
    let backing = daemon.backing.join("f");
    let size = || std::fs::metadata(&backing).unwrap().len();
    // Negative control: nothing is sent before the expiry.
    let early = size();
    assert!(
        written.elapsed() < Duration::from_secs(4),
        "the machine is too slow for this check: {:?}",
        written.elapsed()
    );
    assert_eq!(early, 0, "sent before the expiry");
    // Then it reaches the backing file, with the file still open.
    while size() < 1_000_000 && written.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let took = written.elapsed();
    println!("1 MB left open reached the backing after {took:?}");
    assert_eq!(size(), 1_000_000, "not written back within 60 s");
    assert!(
        took >= Duration::from_secs(4),
        "{took:?}: before the expiry"
    );
    drop(f);
}

/// A file written and left for the flusher, whose WRITE a `write delay=2s`
/// rule holds; then an fsync of it (or, with `other`, of another file):
/// the bytes on the backing file when the fsync returned, and its time.
fn fsync_beside_the_flushers_write(other: bool) -> (u64, Duration) {
    let daemon = Daemon::start(Options {
        args: &[
            "--cache",
            "nfs:dirty_expire_centisecs=50,dirty_writeback_centisecs=10",
            "--set",
            "write delay=2s",
        ],
        ..Default::default()
    });
    let mut f = std::fs::File::create(daemon.mountpoint.join("f")).unwrap();
    let g = std::fs::File::create(daemon.mountpoint.join("g")).unwrap();
    f.write_all(&vec![b'x'; 1_000_000]).unwrap();
    // The flusher takes it after 0.5 s; its WRITE lands 2 s later.
    std::thread::sleep(Duration::from_millis(1500));
    let started = Instant::now();
    if other { g.sync_all() } else { f.sync_all() }.unwrap();
    let took = started.elapsed();
    let on_backing = std::fs::metadata(daemon.backing.join("f")).unwrap().len();
    println!(
        "fsync of {}: {took:?}, f has {on_backing} bytes",
        if other { "g" } else { "f" }
    );
    (on_backing, took)
}

#[test]
fn an_fsync_waits_for_the_flushers_write_of_its_file_only() {
    let _alone = one_at_a_time();
    // fsync returns once the data is on the server, also when the flusher
    // took it (nfs_file_fsync waits for write-back). Before: it returned at
    // once with nothing sent, the WRITE still held.
    let (on_backing, _) = fsync_beside_the_flushers_write(false);
    assert_eq!(on_backing, 1_000_000);
    // Negative control: an fsync of another file does not wait for it.
    let (_, took) = fsync_beside_the_flushers_write(true);
    assert!(took < Duration::from_millis(1500), "{took:?}");
}

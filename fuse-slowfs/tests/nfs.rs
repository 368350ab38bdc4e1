//! `--cache nfs`: the Linux NFS client's caching on real mounts. Two mounts
//! over one backing directory are two clients: close-to-open consistency, a
//! stale page within the attribute cache window, and the requests (RPCs) a
//! sequential read sends. Each property has its negative control: `nocto`
//! (the open that must see the other client's write does not) and
//! `every-call` (each 4 KiB read is a request).

use std::os::unix::fs::FileExt;
use std::time::Duration;

use slowfs::fixture::SlowMount;
use slowfs::CachePolicy;

fn client(policy: &str, backing: Option<&std::path::Path>, rules: &[&str]) -> SlowMount {
    let policy: CachePolicy = policy.parse().unwrap();
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
fn a_sequential_read_is_a_few_rsize_requests_as_on_nfs() {
    // The Linux NFS client with rsize=1MiB sends 4-5 READs for 4 MiB (its
    // read-ahead ramps up); within 2x of that.
    let nfs = reads_for_sequential_4k("nfs");
    assert!((1..=10).contains(&nfs), "{nfs} READs");
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

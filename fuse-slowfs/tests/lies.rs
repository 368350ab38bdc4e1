//! Storage that lies, on real mounts: fsync failures with Linux's write-back
//! error semantics, corrupt and stale reads, lost writes. Each test shows both
//! sides: what the fault does to a caller that trusts the storage, and that a
//! caller who checks catches it.

mod common;

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::FileExt;

use common::{open_rw_create, sync_dir, SlowMount};

/// A file whose `durable` content was fsynced (entry included), then overwritten
/// at offset 0 by `newer`, not yet synced.
fn durable_then_overwritten(m: &SlowMount, name: &str, durable: &[u8], newer: &[u8]) -> File {
    let f = open_rw_create(&m.path(name));
    f.write_at(durable, 0).unwrap();
    f.sync_all().unwrap();
    sync_dir(&m.path(""));
    f.write_at(newer, 0).unwrap();
    f
}

/// fsyncgate: the failed fsync reports EIO, the retry succeeds, and the data
/// the retry "made durable" is gone after a crash.
#[test]
fn a_failed_fsync_drops_the_data_and_the_retry_lies() {
    let m =
        SlowMount::strict(7, &["fsync path=db error=EIO drop after=1"]).expect("mounting slowfs");
    let mut db = open_rw_create(&m.path("db"));
    db.write_all(b"first ").unwrap();
    db.sync_all().unwrap(); // the rule skips the first fsync
    sync_dir(&m.path(""));
    db.write_all(b"second").unwrap();
    let err = db.sync_all().unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO));
    // The pages are clean now: the retry has nothing to write and succeeds.
    db.sync_all()
        .expect("a retried fsync succeeds, as on Linux");
    assert_eq!(
        fs::read(m.path("db")).unwrap(),
        b"first second",
        "without drop=evict the cache still shows the lost write"
    );
    assert!(m.mount().crash());
    assert_eq!(
        fs::read(m.path("db")).unwrap(),
        b"first ",
        "the write whose fsync failed must not survive a crash"
    );
}

/// With nothing to write back, a drop rule's fsync succeeds (no error without I/O).
#[test]
fn a_drop_rule_fails_only_fsyncs_with_dirty_data() {
    let m = SlowMount::strict(7, &["fsync error=EIO drop"]).expect("mounting slowfs");
    let f = open_rw_create(&m.path("clean"));
    f.sync_all()
        .expect("an fsync with nothing to write back succeeds");
    f.write_at(b"dirty", 0).unwrap();
    assert_eq!(f.sync_all().unwrap_err().raw_os_error(), Some(libc::EIO));
    f.sync_all().expect("retry: nothing dirty any more");
}

/// errseq: each open file description reports the write-back error once, even
/// one that wrote nothing; the description that saw it already does not again.
#[test]
fn the_error_is_reported_once_per_open_file_description() {
    let m = SlowMount::strict(7, &["fsync path=shared error=EIO drop"]).expect("mounting slowfs");
    let writer = open_rw_create(&m.path("shared"));
    let other = File::open(m.path("shared")).unwrap();
    let third = File::open(m.path("shared")).unwrap();
    writer.write_at(b"doomed", 0).unwrap();
    assert_eq!(
        writer.sync_all().unwrap_err().raw_os_error(),
        Some(libc::EIO)
    );
    assert_eq!(
        other.sync_all().unwrap_err().raw_os_error(),
        Some(libc::EIO)
    );
    other.sync_all().expect("reported once to this description");
    assert_eq!(
        third.sync_all().unwrap_err().raw_os_error(),
        Some(libc::EIO)
    );
    writer.sync_all().expect("the writer saw it already");
    let late = File::open(m.path("shared")).unwrap();
    late.sync_all()
        .expect("a description opened after the error never sees it");
}

/// After a failed write-back drops data, `durable` says a crash would change
/// the file (it still shows the dropped data), and a crash then does.
#[test]
fn durable_reports_data_a_failed_write_back_dropped() {
    let m =
        SlowMount::strict(7, &["fsync path=db error=EIO drop after=1"]).expect("mounting slowfs");
    let f = durable_then_overwritten(&m, "db", b"durable", b"visible");
    assert!(m
        .mount()
        .durability()
        .unwrap()
        .at_risk
        .iter()
        .any(|p| p.contains("db")));
    assert!(f.sync_all().is_err());
    assert_eq!(fs::read(m.path("db")).unwrap(), b"visible");
    let report = m.mount().durability().unwrap();
    assert!(
        report.at_risk.iter().any(|p| p.contains("db")),
        "a crash now changes db: {report:?}"
    );
    drop(f);
    assert!(m.mount().crash());
    assert_eq!(fs::read(m.path("db")).unwrap(), b"durable");
}

/// drop=evict: the dropped pages leave the cache, so reads show the durable content.
#[test]
fn drop_evict_makes_reads_show_the_durable_content() {
    let m = SlowMount::strict(7, &["fsync path=evicted error=EIO drop=evict after=1"])
        .expect("mounting slowfs");
    let f = durable_then_overwritten(&m, "evicted", b"durable", b"DOOMED!");
    assert!(f.sync_all().is_err());
    assert_eq!(fs::read(m.path("evicted")).unwrap(), b"durable");
    assert_eq!(fs::read(m.backing_path("evicted")).unwrap(), b"durable");
}

/// A drop rule needs the crash model, and says so.
#[test]
fn lies_about_durability_need_the_crash_model() {
    let base = tempfile::tempdir().unwrap();
    let (backing, mountpoint) = (base.path().join("b"), base.path().join("m"));
    fs::create_dir(&backing).unwrap();
    fs::create_dir(&mountpoint).unwrap();
    let mut config = slowfs::MountConfig::new(&backing, &mountpoint);
    config
        .spec
        .add_rule("test", "fsync error=EIO drop")
        .unwrap();
    let err = slowfs::Mount::start(config).unwrap_err().to_string();
    assert!(err.contains("--crash-model strict"), "{err}");
}

fn checksum(data: &[u8]) -> u64 {
    // FNV-1a: enough to notice a flipped bit.
    data.iter().fold(0xcbf29ce484222325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100000001b3)
    })
}

/// A reader that trusts the disk gets corrupted bytes; one that checks a
/// checksum catches it. The backing file never changes, and the seed
/// reproduces the damage.
#[test]
fn corrupt_reads_fool_a_trusting_reader_and_a_checksum_catches_them() {
    for (how, flipped_bits) in [("bitflip:3", Some(3)), ("zero", None), ("random", None)] {
        let m = SlowMount::configured(&[&format!("read path=blob corrupt={how}")], |_| {})
            .expect("mounting slowfs");
        let original: Vec<u8> = (0..8192u32).map(|i| (i % 251) as u8 + 1).collect();
        fs::write(m.backing_path("blob"), &original).unwrap();
        let stored_sum = checksum(&original);
        let read = fs::read(m.path("blob")).unwrap();
        assert_eq!(read.len(), original.len());
        assert_ne!(
            read, original,
            "{how}: the trusting reader got corrupted data"
        );
        assert_ne!(
            checksum(&read),
            stored_sum,
            "{how}: the checksum catches it"
        );
        let differing: Vec<usize> = (0..read.len())
            .filter(|&i| read[i] != original[i])
            .collect();
        let (first, last) = (differing[0], *differing.last().unwrap());
        assert_eq!(
            first / 512,
            last / 512,
            "{how}: the damage stays in one sector"
        );
        if let Some(bits) = flipped_bits {
            let flipped: u32 = differing
                .iter()
                .map(|&i| (read[i] ^ original[i]).count_ones())
                .sum();
            assert_eq!(flipped, bits, "{how}");
        }
        assert_eq!(
            fs::read(m.backing_path("blob")).unwrap(),
            original,
            "{how}: backing unchanged"
        );
    }
    // The same seed damages the same sector the same way.
    let damage = || {
        let m = SlowMount::configured(&["read path=blob corrupt=bitflip:1"], |_| {})
            .expect("mounting slowfs");
        fs::write(m.backing_path("blob"), vec![0u8; 65536]).unwrap();
        fs::read(m.path("blob")).unwrap()
    };
    assert_eq!(damage(), damage());
}

/// A lost write is acknowledged and never lands: only reading back catches it.
#[test]
fn a_lost_write_is_acknowledged_and_never_lands() {
    let m = SlowMount::configured(&["write path=ledger lose after=1"], |_| {})
        .expect("mounting slowfs");
    let f = open_rw_create(&m.path("ledger"));
    assert_eq!(f.write_at(b"entry 1;", 0).unwrap(), 8);
    assert_eq!(
        f.write_at(b"entry 2;", 8).unwrap(),
        8,
        "acknowledged in full"
    );
    f.sync_all().unwrap();
    assert_eq!(fs::read(m.path("ledger")).unwrap(), b"entry 1;");
    assert_eq!(fs::read(m.backing_path("ledger")).unwrap(), b"entry 1;");
}

/// A stale read returns what is durable, not the latest write.
#[test]
fn a_stale_read_returns_the_durable_content() {
    let m = SlowMount::strict(7, &["read path=config stale"]).expect("mounting slowfs");
    let f = durable_then_overwritten(&m, "config", b"version=1", b"version=2");
    assert_eq!(fs::read(m.path("config")).unwrap(), b"version=1");
    assert_eq!(fs::read(m.backing_path("config")).unwrap(), b"version=2");
    f.sync_all().unwrap();
    assert_eq!(fs::read(m.path("config")).unwrap(), b"version=2");
}

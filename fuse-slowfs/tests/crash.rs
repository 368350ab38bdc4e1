//! Live crashes in a mount with the strict crash model.

mod common;

use std::fs::{self, File};
use std::io::{Read, Write};

use common::{sync_dir, SlowMount};
use slowfs::control::{request, Command};

#[test]
fn a_crash_keeps_only_what_was_made_durable() {
    let m = SlowMount::strict(7, &[]).expect("mounting slowfs");
    fs::write(m.path("lost"), b"never synced").unwrap();
    let mut kept = File::create(m.path("kept")).unwrap();
    kept.write_all(b"synced").unwrap();
    kept.sync_all().unwrap();
    sync_dir(&m.path(""));
    fs::write(m.path("new"), b"entry never synced").unwrap();
    kept.write_all(b" and more, unsynced").unwrap();
    let mut reader = File::open(m.path("kept")).unwrap();

    let report = m.mount().durability().unwrap();
    assert!(
        report.pending.iter().any(|p| p.contains("write kept")),
        "{report:?}"
    );
    assert!(report.at_risk.contains(&"kept".to_string()), "{report:?}");

    assert!(m.mount().crash());
    assert!(
        !m.path("new").exists(),
        "an unsynced entry survived the crash"
    );
    assert_eq!(
        fs::read(m.path("lost")).unwrap(),
        b"",
        "a durable entry keeps no unsynced data"
    );
    assert_eq!(fs::read(m.path("kept")).unwrap(), b"synced");
    let mut buf = [0u8; 4];
    let err = reader.read(&mut buf).unwrap_err();
    assert_eq!(
        err.raw_os_error(),
        Some(libc::EIO),
        "a handle from before the crash still works"
    );
    assert_eq!(
        fs::read(m.backing_path("kept")).unwrap(),
        b"synced",
        "the backing tree is the durable state"
    );
    fs::write(m.path("after"), b"new life").unwrap();
    assert_eq!(fs::read(m.path("after")).unwrap(), b"new life");
}

#[test]
fn a_crash_rule_fires_at_its_request() {
    let m = SlowMount::strict(7, &["rename crash after=1"]).expect("mounting slowfs");
    fs::write(m.path("a"), b"a").unwrap();
    File::open(m.path("a")).unwrap().sync_all().unwrap();
    sync_dir(&m.path(""));
    fs::rename(m.path("a"), m.path("b")).unwrap();
    let err = fs::rename(m.path("b"), m.path("c")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EIO));
    // The first rename was never made durable (no directory fsync): it is undone.
    assert!(m.path("a").exists() && !m.path("b").exists() && !m.path("c").exists());
    assert_eq!(m.mount().stats().rules[0].fired, 1);
}

#[test]
fn ctl_crash_and_durable_through_the_socket() {
    let m = SlowMount::strict(7, &[]).expect("mounting slowfs");
    let socket = m.mount().control_socket().unwrap().to_path_buf();
    fs::write(m.path("x"), b"x").unwrap();
    let durable = request(&socket, &Command::Durable).unwrap();
    assert!(
        durable.ok && durable.message.contains("not durable"),
        "{durable:?}"
    );
    assert!(durable.data["pending"]
        .as_array()
        .is_some_and(|p| !p.is_empty()));
    assert!(request(&socket, &Command::Crash).unwrap().ok);
    assert!(!m.path("x").exists());
    // Without a crash model, both are refused with the fix.
    let plain = SlowMount::configured(&[], |_| {}).expect("mounting slowfs");
    let socket = plain.mount().control_socket().unwrap().to_path_buf();
    let refused = request(&socket, &Command::Crash).unwrap();
    assert!(!refused.ok && refused.message.contains("--crash-model strict"));
}

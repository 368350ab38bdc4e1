//! Kernel passthrough: files no data rule touches bypass the daemon; files a data
//! rule touches never do; `--passthrough never` routes everything through it.

mod common;

use std::fs;

use common::SlowMount;

#[test]
fn untouched_files_bypass_the_daemon() {
    let m = SlowMount::configured(&["read path=slow* delay=1ms"], |_| {}).expect("mounting slowfs");
    fs::write(m.path("fast"), vec![1u8; 1 << 20]).unwrap();
    fs::write(m.path("slow"), vec![2u8; 1 << 20]).unwrap();
    let before = m.mount().stats().count("read");
    assert_eq!(fs::read(m.path("fast")).unwrap().len(), 1 << 20);
    assert_eq!(
        m.mount().stats().count("read"),
        before,
        "a passthrough file's reads reached the daemon"
    );
    assert_eq!(fs::read(m.path("slow")).unwrap().len(), 1 << 20);
    assert!(
        m.mount().stats().count("read") > before,
        "a file with a data rule was opened in passthrough"
    );
}

#[test]
fn passthrough_never_routes_everything_through_the_daemon() {
    let m = SlowMount::configured(&[], |c| c.passthrough = false).expect("mounting slowfs");
    fs::write(m.path("f"), vec![1u8; 1 << 20]).unwrap();
    assert!(m.mount().stats().count("write") > 0);
    let before = m.mount().stats().count("read");
    let _ = fs::read(m.path("f")).unwrap();
    // Page-cache hits are fine; the file was written through the daemon.
    assert!(m.mount().stats().count("read") >= before);
    assert_eq!(m.mount().passthrough_handles(), 0);
}

#[test]
fn open_passthrough_handles_are_counted() {
    let m = SlowMount::configured(&[], |_| {}).expect("mounting slowfs");
    fs::write(m.path("f"), b"x").unwrap();
    let file = fs::File::open(m.path("f")).unwrap();
    assert_eq!(m.mount().passthrough_handles(), 1);
    drop(file);
}

//! A driver that never sends its handshake cannot hold a run: it is killed
//! after the handshake timeout and reported, with what started it.

use std::time::{Duration, Instant};

use slowfs_harness::AnyEngine;

#[test]
fn a_silent_driver_is_killed_and_reported_after_the_handshake_timeout() {
    // SAFETY: set before any other thread of this test binary runs.
    unsafe { std::env::set_var("SLOWFS_DRIVER_HANDSHAKE_SECS", "1") };
    // A sleep of 60.PID seconds: its command line is this test's own.
    let marker = format!("60.{}", std::process::id());
    // `sh -c` forks here (two commands): the real driver is a grandchild.
    let start = Instant::now();
    let err = AnyEngine::by_name(&format!("cmd:true; sleep {marker}")).unwrap_err();
    let took = start.elapsed();
    let message = err.to_string();
    assert!(
        message.contains("sent no handshake line within 1 s"),
        "{message}"
    );
    assert!(took < Duration::from_secs(20), "took {took:?}");
    // Killed, not left running (a zombie of an exited parent counts as gone).
    std::thread::sleep(Duration::from_millis(200));
    let running = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("cmdline")).ok())
        .any(|cmdline| cmdline.contains(&marker));
    assert!(!running, "the silent driver was left running");
}

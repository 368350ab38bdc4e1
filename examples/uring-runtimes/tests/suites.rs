//! tokio-uring and monoio through the conformance suites, from `cargo test`:
//! what a library author's CI would run, with the findings pinned.

use std::sync::{Arc, Mutex};

use slowfs_conformance::{run_suite, Suite, SuiteConfig, Verdict};
use slowfs_harness::Engine;
use uring_runtimes::{MonoioEngine, TokioUringEngine};

/// The cancel suite counts the process's open descriptors: suites of two
/// engines running at once would see each other's files as leaks.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs every suite; the failed ones with their reasons.
fn failures<E: Engine>(start: impl FnOnce() -> std::io::Result<E>) -> Vec<(Suite, String)> {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let engine = Arc::new(start().expect("the runtime needs io_uring"));
    let config = SuiteConfig::default().cases(12).seed(2026);
    let mut failed = Vec::new();
    for &suite in Suite::ALL {
        let outcome = run_suite(suite, Arc::clone(&engine), &config);
        println!("{} {suite:?}: {}", engine.name(), outcome.verdict);
        if let Verdict::Fail { reason, .. } = &outcome.verdict {
            failed.push((suite, reason.clone()));
        }
    }
    failed
}

/// The finding both share with compio: they write through io_uring, and
/// Linux completes an async direct-I/O write that FUSE answered short with
/// EIO (the short prefix was written), so the short-io and positioned suites
/// see EIO. Everything else holds, loop-lag measured on the runtime's own
/// loop: a delayed read does not stall it.
fn assert_only_short_writes_fail(failed: &[(Suite, String)]) {
    assert!(
        failed
            .iter()
            .all(|(s, _)| matches!(s, Suite::ShortIo | Suite::Positioned)),
        "{failed:?}"
    );
    assert!(
        failed
            .iter()
            .any(|(s, r)| *s == Suite::ShortIo && r.contains("Input/output error")),
        "short writes through io_uring on FUSE come back as EIO: {failed:?}"
    );
}

#[test]
fn tokio_uring_through_the_suites() {
    let failed = failures(TokioUringEngine::start);
    assert_only_short_writes_fail(&failed);
}

#[test]
fn monoio_through_the_suites() {
    let failed = failures(MonoioEngine::start);
    assert_only_short_writes_fail(&failed);
}

//! tokio-uring and monoio through the conformance suites, from `cargo test`:
//! what a library author's CI would run, with the findings pinned.

use std::sync::Arc;

use slowfs_conformance::{run_suite, Suite, SuiteConfig, Verdict};
use slowfs_harness::Engine;
use uring_runtimes::{MonoioEngine, TokioUringEngine};

/// Runs every suite; the failed ones with their reasons.
fn failures<E: Engine>(engine: E) -> Vec<(Suite, String)> {
    let engine = Arc::new(engine);
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
    let failed = failures(TokioUringEngine::start().expect("tokio-uring needs io_uring"));
    assert_only_short_writes_fail(&failed);
}

#[test]
fn monoio_through_the_suites() {
    let failed = failures(MonoioEngine::start().expect("monoio needs io_uring"));
    assert_only_short_writes_fail(&failed);
}

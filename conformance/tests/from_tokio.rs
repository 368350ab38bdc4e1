//! A library author's `#[tokio::test]` can call the suites directly: `run_suite`
//! runs them on a thread of its own when called inside a runtime.

use std::sync::Arc;

use slowfs_conformance::{run_suite, Suite, SuiteConfig, Verdict};
use slowfs_harness::AnyEngine;

#[tokio::test]
async fn run_suite_works_inside_a_tokio_test() {
    let engine = Arc::new(AnyEngine::by_name("threadpool").expect("a built-in engine"));
    let config = SuiteConfig::default().cases(4).seed(3);
    let outcome = run_suite(Suite::Errors, engine, &config);
    assert_eq!(outcome.verdict, Verdict::Pass, "{}", outcome.verdict);
}

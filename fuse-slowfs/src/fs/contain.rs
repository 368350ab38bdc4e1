//! A panic in one request must not end the mount. fuser runs each request on
//! one of a few worker threads; a panic there would end the thread, and with
//! the last one the mount hangs (every later access waits forever). Here a
//! request's handler runs under `catch_unwind`: a panic is logged, the
//! request's reply (dropped while unwinding) answers EIO, and the thread goes
//! on serving. Jobs parked by the scheduler (delays, hangs) are run the same way.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};

/// Panics caught in request handlers since the daemon started.
static CAUGHT: AtomicU64 = AtomicU64::new(0);

/// Runs the handler of one `op` request; a panic in it fails only that request.
pub(crate) fn contain(op: &str, handler: impl FnOnce()) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(handler)) {
        CAUGHT.fetch_add(1, Ordering::Relaxed);
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into());
        tracing::error!(
            "a {op} request panicked ({message}): answered EIO, the mount keeps serving; \
             this is a slowfs bug, please report it with the line above"
        );
    }
}

/// Panics caught so far (shown in `ctl stats`).
pub fn caught() -> u64 {
    CAUGHT.load(Ordering::Relaxed)
}

/// The path a test makes requests panic on (`SLOWFS_TEST_PANIC_PATH`, a
/// mount-relative path): the only way to prove, on a real mount, that a
/// panic cannot end it. Read once.
pub(crate) fn test_panic_path() -> Option<&'static str> {
    static PATH: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    PATH.get_or_init(|| std::env::var("SLOWFS_TEST_PANIC_PATH").ok())
        .as_deref()
}

//! Two thread-per-core io_uring runtimes as [`slowfs_harness::Engine`]s:
//! [tokio-uring](TokioUringEngine) and [monoio](MonoioEngine). Their files are
//! `!Send`, so each runs behind [`slowfs_harness::proxy::ProxyEngine`]; these
//! modules only say how the runtime does each call.
//!
//! Neither library has `ftruncate`: `set_len` is `ftruncate(2)` on the file's
//! descriptor, made on the runtime's thread (it blocks that loop for as long
//! as the storage takes, as a user of these libraries would have to do too).
#![deny(missing_docs)]

mod monoio_runtime;
mod tokio_uring_runtime;

pub use monoio_runtime::{Monoio, MonoioEngine};
pub use tokio_uring_runtime::{TokioUring, TokioUringEngine};

/// `ftruncate(2)` on `fd`.
fn ftruncate(fd: std::os::fd::RawFd, len: u64) -> std::io::Result<()> {
    let len =
        libc::off_t::try_from(len).map_err(|_| std::io::Error::from_raw_os_error(libc::EFBIG))?;
    // SAFETY: ftruncate reads no memory; a bad fd is an error, not UB.
    if unsafe { libc::ftruncate(fd, len) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A buffer these runtimes read into: they fill a Vec's spare capacity, so it
/// goes in empty with room for exactly `len` bytes.
fn read_buffer(len: usize) -> Vec<u8> {
    Vec::with_capacity(len)
}

/// The read's buffer back at the length the caller asked for.
fn at_length(
    result: std::io::Result<usize>,
    mut buf: Vec<u8>,
    len: usize,
) -> slowfs_harness::BufResult {
    buf.truncate(len);
    buf.resize(len, 0);
    (result.map(|n| n.min(len)), buf)
}

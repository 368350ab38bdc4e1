//! The built-in backends, and [`AnyEngine`] to pick one by name at runtime.

pub mod aio;
mod any;
pub mod async_fs;
pub mod blocking;
pub mod external;
mod seeking;
pub mod threadpool;
pub mod tokio_fs;
pub mod uring;

pub use any::{AnyEngine, AnyFile, ENGINE_NAMES};

use std::fs;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::engine::OpenOptions;

/// Opens with `std` (shared by the backends that make plain syscalls).
pub(crate) fn std_open(path: &Path, options: &OpenOptions) -> io::Result<fs::File> {
    crate::apply_open_options!(fs::OpenOptions::new(), options).open(path)
}

/// `fsync` on a directory.
pub(crate) fn std_sync_dir(path: &Path) -> io::Result<()> {
    fs::File::open(path)?.sync_all()
}

/// Copies with `copy_file_range` (what `std::fs::copy` uses on Linux).
pub(crate) fn std_copy(from: &Path, to: &Path) -> io::Result<u64> {
    fs::copy(from, to)
}

const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;

/// Whether an fd is on a FUSE filesystem. On FUSE, the kernel completes an
/// asynchronous (io_uring or AIO) direct-I/O write that the server answered
/// short with `-EIO` (fs/fuse/file.c, `fuse_get_res_by_io`), so the async
/// backends write FUSE files synchronously to keep short counts.
pub(crate) fn is_fuse(fd: std::os::fd::RawFd) -> io::Result<bool> {
    // SAFETY: zeroed statfs is a valid out-parameter for fstatfs on a valid fd.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(fd, &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_type as i64 == FUSE_SUPER_MAGIC)
}

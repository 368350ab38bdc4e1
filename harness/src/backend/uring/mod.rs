//! `uring`: io_uring through the io-uring crate.
//!
//! Reads, writes and fsyncs go through a ring owned by a driver thread
//! (`driver`); batches (`read_many`, `write_many`) are submitted in one
//! `io_uring_enter`. Every operation owns its buffer and a reference to its fd
//! (`op::OpKind`); dropping the caller's future submits an async cancel and
//! leaves both with the driver (`op::Lifecycle::Ignored`) until the kernel's
//! completion arrives. Open, close, metadata, truncate and path operations are
//! plain syscalls on tokio's blocking pool.
//!
//! Reads of local (non-FUSE) files first try `preadv2(RWF_NOWAIT)` on the
//! caller's thread: data in the page cache comes back at once, with no trip to
//! the driver thread and back (two cross-thread wake-ups, which made cached reads
//! 0.2-0.4x a plain `pread` loop). Anything not all cached (`EAGAIN`, or fewer
//! bytes than asked for before the end of the file) goes through the ring. This is
//! what io_uring itself does at submission, a nonblocking attempt first. FUSE files
//! never take this path: the kernel refuses nonblocking reads there, and every read
//! must reach the daemon as the caller's own request.
//!
//! One exception, for correctness: on FUSE files, writes are `pwrite(2)` on the
//! blocking pool. The kernel completes an asynchronous (io_uring or AIO) direct-I/O
//! write that the FUSE server answered short with `-EIO` (fs/fuse/file.c,
//! `fuse_get_res_by_io`: `if (io->bytes >= 0 && io->write) return -EIO;`), although
//! the short prefix was written, so no caller could tell how much landed. A
//! synchronous write reports the short count.

mod driver;
mod op;

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

use driver::Driver;
pub use driver::UringConfig;
use op::{Completion, OpKind};

use super::{is_fuse, std_copy, std_open, std_sync_dir};
use crate::engine::{BufResult, Engine, EngineFile, Metadata, OpenOptions};

/// The io_uring engine.
#[derive(Debug, Clone)]
pub struct UringEngine {
    driver: Arc<Driver>,
}

impl UringEngine {
    /// Starts a ring and its driver thread; fails clearly where io_uring or an
    /// opcode it needs is missing.
    pub fn new(config: UringConfig) -> io::Result<UringEngine> {
        Ok(UringEngine {
            driver: Driver::start(config)?,
        })
    }
}

/// A file of [`UringEngine`].
#[derive(Debug)]
pub struct UringFile {
    fd: Arc<OwnedFd>,
    driver: Arc<Driver>,
    /// On a FUSE mount: writes go through `pwrite` on the blocking pool and reads
    /// never try the page cache first (see the module docs).
    on_fuse: bool,
}

fn result(completion: &Completion) -> io::Result<usize> {
    if completion.result < 0 {
        Err(io::Error::from_raw_os_error(-completion.result))
    } else {
        Ok(completion.result as usize)
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(io::Error::other(format!("blocking task failed: {e}"))))
}

/// `preadv2(RWF_NOWAIT)`: bytes read, or a negative result where the data is
/// not all in the page cache.
fn pread_nowait(fd: &OwnedFd, buf: &mut [u8], offset: u64) -> isize {
    let iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: one iovec over `buf`, which outlives the call; a valid fd.
    unsafe {
        libc::preadv2(
            std::os::fd::AsRawFd::as_raw_fd(fd),
            &iov,
            1,
            offset as libc::off_t,
            libc::RWF_NOWAIT,
        )
    }
}

/// A read served from the page cache without blocking, or `None` where it would
/// have to wait for the disk (then the ring does it).
fn cached_read(fd: &OwnedFd, buf: &mut [u8], offset: u64) -> Option<usize> {
    let n = usize::try_from(pread_nowait(fd, buf, offset)).ok()?;
    if n == buf.len() || n == 0 {
        return Some(n);
    }
    // Short: the end of the file, or only part of the range cached. A second
    // nonblocking read tells which (0 at the end); anything else goes to the ring.
    (pread_nowait(fd, &mut [0u8; 1], offset + n as u64) == 0).then_some(n)
}

impl UringFile {
    async fn one(&self, kind: OpKind) -> Completion {
        let op = self
            .driver
            .submit(vec![kind])
            .pop()
            .expect("one op submitted");
        op.await
    }

    async fn many(&self, kinds: Vec<OpKind>) -> Vec<BufResult> {
        let ops = self.driver.submit(kinds);
        futures::future::join_all(ops)
            .await
            .into_iter()
            .map(|c| (result(&c), c.buf))
            .collect()
    }

    fn with_file<T>(fd: &OwnedFd, f: impl FnOnce(&File) -> io::Result<T>) -> io::Result<T> {
        let file = File::from(fd.as_fd().try_clone_to_owned()?);
        f(&file)
    }
}

/// `pwrite` on the blocking pool; the buffer travels with the task, so a dropped
/// caller leaves nothing the kernel still uses.
async fn sync_write(fd: Arc<OwnedFd>, buf: Vec<u8>, offset: u64) -> BufResult {
    use std::os::unix::fs::FileExt;
    tokio::task::spawn_blocking(move || {
        let result = UringFile::with_file(&fd, |f| f.write_at(&buf, offset));
        (result, buf)
    })
    .await
    .unwrap_or_else(|e| {
        (
            Err(io::Error::other(format!("blocking task failed: {e}"))),
            Vec::new(),
        )
    })
}

impl EngineFile for UringFile {
    async fn read_at(&self, mut buf: Vec<u8>, offset: u64) -> BufResult {
        if !self.on_fuse {
            if let Some(n) = cached_read(&self.fd, &mut buf, offset) {
                return (Ok(n), buf);
            }
        }
        let fd = Arc::clone(&self.fd);
        let c = self.one(OpKind::Read { fd, buf, offset }).await;
        (result(&c), c.buf)
    }

    async fn read(&self, buf: Vec<u8>) -> BufResult {
        // read(2) on the blocking pool: the kernel does not keep the file position
        // of async FUSE direct-I/O reads at offset -1 (IORING_FEAT_RW_CUR_POS) in step.
        use std::io::Read;
        let fd = Arc::clone(&self.fd);
        let mut buf = buf;
        tokio::task::spawn_blocking(move || {
            let result = UringFile::with_file(&fd, |mut f| f.read(&mut buf));
            (result, buf)
        })
        .await
        .unwrap_or_else(|e| {
            (
                Err(io::Error::other(format!("blocking task failed: {e}"))),
                Vec::new(),
            )
        })
    }

    async fn write_at(&self, buf: Vec<u8>, offset: u64) -> BufResult {
        let fd = Arc::clone(&self.fd);
        if self.on_fuse {
            return sync_write(fd, buf, offset).await;
        }
        let c = self.one(OpKind::Write { fd, buf, offset }).await;
        (result(&c), c.buf)
    }

    async fn read_many(&self, reads: Vec<(u64, Vec<u8>)>) -> Vec<BufResult> {
        let kinds = reads
            .into_iter()
            .map(|(offset, buf)| OpKind::Read {
                fd: Arc::clone(&self.fd),
                buf,
                offset,
            })
            .collect();
        self.many(kinds).await
    }

    async fn write_many(&self, writes: Vec<(u64, Vec<u8>)>) -> Vec<BufResult> {
        if self.on_fuse {
            let mut out = Vec::with_capacity(writes.len());
            for (offset, buf) in writes {
                out.push(sync_write(Arc::clone(&self.fd), buf, offset).await);
            }
            return out;
        }
        let kinds = writes
            .into_iter()
            .map(|(offset, buf)| OpKind::Write {
                fd: Arc::clone(&self.fd),
                buf,
                offset,
            })
            .collect();
        self.many(kinds).await
    }

    async fn fsync(&self) -> io::Result<()> {
        let fd = Arc::clone(&self.fd);
        result(
            &self
                .one(OpKind::Fsync {
                    fd,
                    datasync: false,
                })
                .await,
        )
        .map(drop)
    }

    async fn fdatasync(&self) -> io::Result<()> {
        let fd = Arc::clone(&self.fd);
        result(&self.one(OpKind::Fsync { fd, datasync: true }).await).map(drop)
    }

    async fn set_len(&self, len: u64) -> io::Result<()> {
        let fd = Arc::clone(&self.fd);
        blocking(move || UringFile::with_file(&fd, |f| f.set_len(len))).await
    }

    async fn metadata(&self) -> io::Result<Metadata> {
        let fd = Arc::clone(&self.fd);
        blocking(move || {
            UringFile::with_file(&fd, |f| {
                Ok(Metadata {
                    len: f.metadata()?.len(),
                })
            })
        })
        .await
    }

    async fn close(self) -> io::Result<()> {
        // The fd closes when the last in-flight op holding it completes.
        let fd = self.fd;
        blocking(move || {
            drop(fd);
            Ok(())
        })
        .await
    }
}

impl Engine for UringEngine {
    type File = UringFile;

    fn name(&self) -> &str {
        "uring"
    }

    async fn open(&self, path: &Path, options: &OpenOptions) -> io::Result<UringFile> {
        let (path, options) = (path.to_path_buf(), options.clone());
        // fstatfs may block (a FUSE STATFS request), so it runs with the open.
        let (fd, on_fuse) = blocking(move || {
            let fd: OwnedFd = std_open(&path, &options)?.into();
            let fuse = is_fuse(std::os::fd::AsRawFd::as_raw_fd(&fd))?;
            Ok((fd, fuse))
        })
        .await?;
        Ok(UringFile {
            on_fuse,
            fd: Arc::new(fd),
            driver: Arc::clone(&self.driver),
        })
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from, to) = (from.to_path_buf(), to.to_path_buf());
        blocking(move || std::fs::rename(from, to)).await
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        blocking(move || std::fs::remove_file(path)).await
    }

    async fn create_dir(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        blocking(move || std::fs::create_dir(path)).await
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        blocking(move || std_sync_dir(&path)).await
    }

    async fn copy(&self, from: &Path, to: &Path) -> io::Result<u64> {
        let (from, to) = (from.to_path_buf(), to.to_path_buf());
        blocking(move || std_copy(&from, &to)).await
    }

    fn in_flight(&self) -> usize {
        self.driver.in_flight()
    }
}

//! `aio`: Linux native AIO (`io_setup` / `io_submit` / `io_getevents` /
//! `io_cancel`), the interface behind libaio, caio's `linux` backend and Seastar.
//!
//! Reads, writes, fsync and fdatasync are AIO requests (`IOCB_CMD_PREAD`,
//! `PWRITE`, `FSYNC`, `FDSYNC`); AIO has no open, close, truncate or rename, so
//! those go to a thread pool, as libaio users do. One reaper thread waits in
//! `io_getevents` and completes the waiting futures.
//!
//! The catch, and why this backend is in the matrix: AIO is asynchronous only for
//! `O_DIRECT` on filesystems that support it. On a buffered file `io_submit` does
//! the whole read or write itself before returning, on the submitting thread —
//! the runtime thread — so the loop-lag suite catches it, as it catches
//! `blocking`.
//!
//! Ownership after a cancel is explicit in `Lifecycle`: a dropped operation's
//! buffer moves into the in-flight table and is freed only when the kernel's
//! completion arrives (`io_cancel` is tried first; regular files rarely honour it).

use std::collections::HashMap;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::threadpool::{PoolFile, ThreadPoolEngine};
use crate::engine::{BufResult, Engine, EngineFile, Metadata, OpenOptions};

type AioContext = libc::c_ulong;

const IOCB_CMD_PREAD: u16 = 0;
const IOCB_CMD_PWRITE: u16 = 1;
const IOCB_CMD_FSYNC: u16 = 2;
const IOCB_CMD_FDSYNC: u16 = 3;
/// Requests one context holds at once.
const QUEUE_DEPTH: u32 = 256;

/// `struct iocb` from `<linux/aio_abi.h>` (little-endian field order).
#[repr(C)]
#[derive(Default)]
struct Iocb {
    aio_data: u64,
    aio_key: u32,
    aio_rw_flags: i32,
    aio_lio_opcode: u16,
    aio_reqprio: i16,
    aio_fildes: u32,
    aio_buf: u64,
    aio_nbytes: u64,
    aio_offset: i64,
    aio_reserved2: u64,
    aio_flags: u32,
    aio_resfd: u32,
}

/// `struct io_event`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct IoEvent {
    data: u64,
    obj: u64,
    res: i64,
    res2: i64,
}

/// Where an operation is, and who owns its buffer.
enum Lifecycle {
    /// Submitted; the future waits for the result and will take the buffer back.
    Waiting(oneshot::Sender<(i64, Vec<u8>)>),
    /// The future was dropped: the kernel may still use the buffer, so the
    /// table keeps it until the completion arrives.
    Ignored,
}

struct Op {
    /// The iocb the kernel was given (io_cancel names the op by its address).
    iocb: Box<Iocb>,
    buf: Vec<u8>,
    state: Lifecycle,
}

struct Ring {
    ctx: AioContext,
    ops: Mutex<HashMap<u64, Op>>,
    next: AtomicU64,
    closing: AtomicBool,
}

// SAFETY: the raw pointers inside the table's iocbs point into buffers the table
// owns; all access goes through the mutex.
unsafe impl Send for Op {}

impl Ring {
    fn new() -> io::Result<Arc<Ring>> {
        let mut ctx: AioContext = 0;
        // SAFETY: io_setup writes the new context id into ctx.
        let ret = unsafe { libc::syscall(libc::SYS_io_setup, QUEUE_DEPTH, &mut ctx) };
        if ret < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("io_setup failed: {e} (see /proc/sys/fs/aio-max-nr)"),
            ));
        }
        let ring = Arc::new(Ring {
            ctx,
            ops: Mutex::default(),
            next: AtomicU64::new(1),
            closing: AtomicBool::new(false),
        });
        let reaper = Arc::clone(&ring);
        std::thread::Builder::new()
            .name("aio-reaper".into())
            .spawn(move || reaper.reap())?;
        Ok(ring)
    }

    /// Waits for completions and hands each to its future (or frees an ignored one's buffer).
    fn reap(&self) {
        let mut events = [IoEvent::default(); 64];
        let timeout = libc::timespec {
            tv_sec: 0,
            tv_nsec: 100_000_000,
        };
        loop {
            // SAFETY: events has room for 64 entries; the timeout lets a closing ring notice.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_io_getevents,
                    self.ctx,
                    1,
                    events.len(),
                    events.as_mut_ptr(),
                    &timeout,
                )
            };
            if n < 0 {
                if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return;
            }
            for event in &events[..n as usize] {
                let op = self.ops.lock().unwrap().remove(&event.data);
                if let Some(Op {
                    buf,
                    state: Lifecycle::Waiting(tx),
                    ..
                }) = op
                {
                    let _ = tx.send((event.res, buf));
                }
            }
            if self.closing.load(Ordering::SeqCst) && self.ops.lock().unwrap().is_empty() {
                // SAFETY: nothing is in flight; the context is ours.
                unsafe { libc::syscall(libc::SYS_io_destroy, self.ctx) };
                return;
            }
        }
    }

    /// Submits one request and waits for its result; the buffer comes back with it.
    async fn submit(&self, fd: i32, opcode: u16, mut buf: Vec<u8>, offset: u64) -> (i64, Vec<u8>) {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        let mut iocb = Box::new(Iocb {
            aio_data: key,
            aio_lio_opcode: opcode,
            aio_fildes: fd as u32,
            // fsync requests must carry no buffer (the kernel refuses one with EINVAL).
            aio_buf: if buf.is_empty() {
                0
            } else {
                buf.as_mut_ptr() as u64
            },
            aio_nbytes: buf.len() as u64,
            aio_offset: offset as i64,
            ..Iocb::default()
        });
        let (tx, rx) = oneshot::channel();
        {
            let mut iocbs = [&mut *iocb as *mut Iocb];
            // The table owns the buffer before the kernel sees it; the lock is held
            // across io_submit so the reaper cannot complete an op not yet in it.
            let mut ops = self.ops.lock().unwrap();
            // SAFETY: one valid iocb whose buffer lives in the table until completion.
            let ret =
                unsafe { libc::syscall(libc::SYS_io_submit, self.ctx, 1, iocbs.as_mut_ptr()) };
            if ret != 1 {
                let errno = if ret < 0 {
                    io::Error::last_os_error()
                        .raw_os_error()
                        .unwrap_or(libc::EIO)
                } else {
                    libc::EAGAIN
                };
                return (-(errno as i64), buf);
            }
            ops.insert(
                key,
                Op {
                    iocb,
                    buf,
                    state: Lifecycle::Waiting(tx),
                },
            );
        }
        let guard = CancelOnDrop { ring: self, key };
        let result = rx.await;
        std::mem::forget(guard);
        result.unwrap_or((-(libc::EIO as i64), Vec::new()))
    }

    fn in_flight(&self) -> usize {
        self.ops.lock().unwrap().len()
    }
}

/// A dropped operation: try io_cancel, and leave the buffer to the reaper.
struct CancelOnDrop<'a> {
    ring: &'a Ring,
    key: u64,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        let mut ops = self.ring.ops.lock().unwrap();
        if let Some(op) = ops.get_mut(&self.key) {
            op.state = Lifecycle::Ignored;
            let mut event = IoEvent::default();
            // SAFETY: the iocb is the one submitted; a successful cancel fills event,
            // and the reaper never sees it, so the table entry goes here.
            let ret = unsafe {
                libc::syscall(
                    libc::SYS_io_cancel,
                    self.ring.ctx,
                    &*op.iocb as *const Iocb,
                    &mut event,
                )
            };
            if ret == 0 {
                ops.remove(&self.key);
            }
        }
    }
}

fn result(res: i64) -> io::Result<usize> {
    if res < 0 {
        Err(io::Error::from_raw_os_error(-res as i32))
    } else {
        Ok(res as usize)
    }
}

/// The Linux AIO engine.
#[derive(Clone)]
pub struct AioEngine {
    ring: Arc<Ring>,
    pool: ThreadPoolEngine,
}

impl std::fmt::Debug for AioEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AioEngine")
            .field("in_flight", &self.ring.in_flight())
            .finish()
    }
}

impl AioEngine {
    /// An AIO context of 256 requests and a pool for the operations AIO lacks.
    pub fn new() -> io::Result<AioEngine> {
        Ok(AioEngine {
            ring: Ring::new()?,
            pool: ThreadPoolEngine::new(16),
        })
    }
}

impl Drop for AioEngine {
    fn drop(&mut self) {
        if Arc::strong_count(&self.ring) == 2 {
            // The last engine handle (the reaper holds the other): let it wind down.
            self.ring.closing.store(true, Ordering::SeqCst);
        }
    }
}

/// A file of [`AioEngine`].
#[derive(Debug)]
pub struct AioFile {
    file: PoolFile,
    engine: AioEngine,
    /// On FUSE, writes go to the pool (see [`super::is_fuse`]), as in `uring`.
    sync_writes: bool,
}

impl AioFile {
    async fn aio(&self, opcode: u16, buf: Vec<u8>, offset: u64) -> BufResult {
        let fd = self.file.as_raw_fd();
        let (res, buf) = self.engine.ring.submit(fd, opcode, buf, offset).await;
        (result(res), buf)
    }
}

impl EngineFile for AioFile {
    async fn read_at(&self, buf: Vec<u8>, offset: u64) -> BufResult {
        self.aio(IOCB_CMD_PREAD, buf, offset).await
    }

    async fn write_at(&self, buf: Vec<u8>, offset: u64) -> BufResult {
        if self.sync_writes {
            return self.file.write_at(buf, offset).await;
        }
        self.aio(IOCB_CMD_PWRITE, buf, offset).await
    }

    async fn read(&self, buf: Vec<u8>) -> BufResult {
        // AIO reads are positioned only: the cursor read goes to the pool.
        self.file.read(buf).await
    }

    async fn fsync(&self) -> io::Result<()> {
        self.aio(IOCB_CMD_FSYNC, Vec::new(), 0).await.0.map(drop)
    }

    async fn fdatasync(&self) -> io::Result<()> {
        self.aio(IOCB_CMD_FDSYNC, Vec::new(), 0).await.0.map(drop)
    }

    async fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len).await
    }

    async fn metadata(&self) -> io::Result<Metadata> {
        self.file.metadata().await
    }

    async fn close(self) -> io::Result<()> {
        self.file.close().await
    }
}

impl Engine for AioEngine {
    type File = AioFile;

    fn name(&self) -> &str {
        "aio"
    }

    async fn open(&self, path: &Path, options: &OpenOptions) -> io::Result<AioFile> {
        let file = self.pool.open(path, options).await?;
        Ok(AioFile {
            sync_writes: super::is_fuse(file.as_raw_fd())?,
            file,
            engine: self.clone(),
        })
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.pool.rename(from, to).await
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.pool.remove_file(path).await
    }

    async fn create_dir(&self, path: &Path) -> io::Result<()> {
        self.pool.create_dir(path).await
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.pool.sync_dir(path).await
    }

    async fn copy(&self, from: &Path, to: &Path) -> io::Result<u64> {
        self.pool.copy(from, to).await
    }

    fn in_flight(&self) -> usize {
        self.ring.in_flight() + self.pool.in_flight()
    }
}

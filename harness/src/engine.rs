//! The engine contract: what an async file library offers, with owned buffers.
//!
//! Buffers move into an operation and come back with its result, so that an
//! engine on a completion-based kernel interface (io_uring) can keep a buffer alive
//! for the kernel after the caller's future is dropped. A caller never lends memory
//! to an operation it can walk away from.

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};

use crate::Capability;

/// A result with the buffer handed back: `(bytes moved or error, buffer)`.
pub type BufResult = (io::Result<usize>, Vec<u8>);

/// Sets a library's open-options builder from an [`OpenOptions`]: std's,
/// tokio's, tokio-uring's, monoio's and the like share the method names (the
/// library's `OpenOptionsExt` must be in scope for `custom_flags` and `mode`).
/// Evaluates to the builder (`&mut`), ready for `open`.
///
/// ```
/// use std::os::unix::fs::OpenOptionsExt;
/// let options = slowfs_harness::OpenOptions::read_write_create();
/// let mut builder = std::fs::OpenOptions::new();
/// slowfs_harness::apply_open_options!(builder, &options);
/// ```
#[macro_export]
macro_rules! apply_open_options {
    ($builder:expr, $options:expr) => {{
        let options: &$crate::OpenOptions = $options;
        $builder
            .read(options.read)
            .write(options.write)
            .append(options.append)
            .create(options.create)
            .create_new(options.create_new)
            .truncate(options.truncate)
            .custom_flags(options.custom_flags)
            .mode(options.mode.unwrap_or(0o644))
    }};
}

/// How to open a file, as `std::fs::OpenOptions` says it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Open for reading.
    pub read: bool,
    /// Open for writing.
    pub write: bool,
    /// Create if missing.
    pub create: bool,
    /// Truncate to 0 on open.
    pub truncate: bool,
    /// Every write appends.
    pub append: bool,
    /// Fail if it exists.
    pub create_new: bool,
    /// Extra `O_*` flags.
    pub custom_flags: i32,
    /// Mode for a created file (default 0o644).
    pub mode: Option<u32>,
}

impl OpenOptions {
    /// Read-only.
    pub fn read() -> Self {
        OpenOptions {
            read: true,
            ..Self::default()
        }
    }

    /// Read-write, created if missing.
    pub fn read_write_create() -> Self {
        OpenOptions {
            read: true,
            write: true,
            create: true,
            ..Self::default()
        }
    }

    /// Write-only, created and truncated.
    pub fn create_truncate() -> Self {
        OpenOptions {
            write: true,
            create: true,
            truncate: true,
            ..Self::default()
        }
    }

    /// The `open(2)` flags.
    pub fn flags(&self) -> i32 {
        let access = match (self.read, self.write || self.append) {
            (true, true) => libc::O_RDWR,
            (false, true) => libc::O_WRONLY,
            _ => libc::O_RDONLY,
        };
        let mut flags = access | libc::O_CLOEXEC | self.custom_flags;
        if self.create_new {
            flags |= libc::O_CREAT | libc::O_EXCL;
        } else if self.create {
            flags |= libc::O_CREAT;
        }
        if self.truncate {
            flags |= libc::O_TRUNC;
        }
        if self.append {
            flags |= libc::O_APPEND;
        }
        flags
    }
}

/// What `metadata` reports.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metadata {
    /// Size in bytes.
    pub len: u64,
}

impl Metadata {
    /// Metadata of a file of `len` bytes.
    pub fn new(len: u64) -> Metadata {
        Metadata { len }
    }
}

/// How an engine answered an operation after its caller dropped it.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelAnswer {
    /// No answer yet: the operation is still in flight in the engine.
    Pending,
    /// The engine said the operation was cancelled: it claims it had no effect.
    Cancelled,
    /// The engine finished the operation (ok or error) before the cancel took.
    Completed,
}

/// An open file of some engine.
pub trait EngineFile: Send + Sync + 'static {
    /// Reads up to `buf.len()` bytes at `offset`, without moving any file position.
    /// A short count is allowed; 0 means end of file.
    fn read_at(&self, buf: Vec<u8>, offset: u64) -> impl Future<Output = BufResult> + Send;

    /// Reads at the file's cursor and advances it (a plain `read(2)`): how the
    /// suites observe that positioned operations leave the cursor alone.
    fn read(&self, buf: Vec<u8>) -> impl Future<Output = BufResult> + Send;

    /// Writes `buf` at `offset` (appends if opened for append), without moving any
    /// file position. Reports exactly what the kernel accepted; a short count is allowed.
    fn write_at(&self, buf: Vec<u8>, offset: u64) -> impl Future<Output = BufResult> + Send;

    /// Several reads, submitted together where the backend can (one `io_uring_enter`).
    fn read_many(&self, reads: Vec<(u64, Vec<u8>)>) -> impl Future<Output = Vec<BufResult>> + Send {
        async move {
            let mut out = Vec::with_capacity(reads.len());
            for (offset, buf) in reads {
                out.push(self.read_at(buf, offset).await);
            }
            out
        }
    }

    /// Several writes, submitted together where the backend can.
    fn write_many(
        &self,
        writes: Vec<(u64, Vec<u8>)>,
    ) -> impl Future<Output = Vec<BufResult>> + Send {
        async move {
            let mut out = Vec::with_capacity(writes.len());
            for (offset, buf) in writes {
                out.push(self.write_at(buf, offset).await);
            }
            out
        }
    }

    /// Flushes data and metadata to stable storage.
    fn fsync(&self) -> impl Future<Output = io::Result<()>> + Send;

    /// Flushes data (and the metadata needed to read it back).
    fn fdatasync(&self) -> impl Future<Output = io::Result<()>> + Send;

    /// Truncates or extends (with zeros) to `len`.
    fn set_len(&self, len: u64) -> impl Future<Output = io::Result<()>> + Send;

    /// Size and such.
    fn metadata(&self) -> impl Future<Output = io::Result<Metadata>> + Send;

    /// Closes the file, reporting a close error.
    fn close(self) -> impl Future<Output = io::Result<()>> + Send
    where
        Self: Sized;

    /// Fills all of `buf` from `offset`, looping over short reads; fails with
    /// `UnexpectedEof` if the file ends first.
    fn read_exact_at(
        &self,
        mut buf: Vec<u8>,
        offset: u64,
    ) -> impl Future<Output = (io::Result<()>, Vec<u8>)> + Send {
        async move {
            let mut done = 0;
            let mut scratch = Vec::new();
            while done < buf.len() {
                let want = buf.len() - done;
                scratch.resize(want, 0);
                let (result, back) = self.read_at(scratch, offset + done as u64).await;
                scratch = back;
                match result {
                    Ok(0) => return (Err(io::ErrorKind::UnexpectedEof.into()), buf),
                    Ok(n) if n <= want => {
                        buf[done..done + n].copy_from_slice(&scratch[..n]);
                        done += n;
                    }
                    Ok(n) => return (Err(overcount("read", n, want)), buf),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return (Err(e), buf),
                }
            }
            (Ok(()), buf)
        }
    }

    /// Writes all of `buf` at `offset`, looping over short writes; a write that
    /// moves 0 bytes is an error (`WriteZero`), not a reason to loop forever.
    /// The buffer comes back emptied (its capacity kept).
    fn write_all_at(
        &self,
        buf: Vec<u8>,
        offset: u64,
    ) -> impl Future<Output = (io::Result<()>, Vec<u8>)> + Send {
        async move {
            let mut pending = buf;
            let mut position = offset;
            while !pending.is_empty() {
                let want = pending.len();
                let (result, back) = self.write_at(pending, position).await;
                pending = back;
                match result {
                    Ok(0) => return (Err(io::ErrorKind::WriteZero.into()), pending),
                    Ok(n) if n <= want => {
                        pending.drain(..n);
                        position += n as u64;
                    }
                    Ok(n) => return (Err(overcount("write", n, want)), pending),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return (Err(e), pending),
                }
            }
            (Ok(()), pending)
        }
    }
}

fn overcount(op: &str, n: usize, want: usize) -> io::Error {
    io::Error::other(format!("{op} reported {n} bytes for a {want}-byte request"))
}

/// An async file engine: opens files and does path operations.
///
/// Implement it (and [`EngineFile`]) for a library to run the conformance suites
/// against it.
pub trait Engine: Send + Sync + 'static {
    /// The engine's open file.
    type File: EngineFile;

    /// A short name (`uring`, `threadpool`, ...).
    fn name(&self) -> &str;

    /// Opens a file.
    fn open(
        &self,
        path: &Path,
        options: &OpenOptions,
    ) -> impl Future<Output = io::Result<Self::File>> + Send;

    /// Renames, replacing the destination.
    fn rename(&self, from: &Path, to: &Path) -> impl Future<Output = io::Result<()>> + Send;

    /// Removes a file.
    fn remove_file(&self, path: &Path) -> impl Future<Output = io::Result<()>> + Send;

    /// Creates a directory.
    fn create_dir(&self, path: &Path) -> impl Future<Output = io::Result<()>> + Send;

    /// Makes a directory's entries durable (fsync on the directory).
    fn sync_dir(&self, path: &Path) -> impl Future<Output = io::Result<()>> + Send;

    /// Copies a whole file with `copy_file_range`; returns the bytes copied.
    fn copy(&self, from: &Path, to: &Path) -> impl Future<Output = io::Result<u64>> + Send;

    /// Operations submitted and not yet completed inside the engine (for leak checks).
    fn in_flight(&self) -> usize {
        0
    }

    /// Whether the engine has a capability. Suites that need a missing one
    /// report "unsupported" instead of failing; the runner counts such a cell as
    /// expected only where the engine says why ([`Engine::unsupported_reason`])
    /// or an expectations file lists it.
    fn supports(&self, _capability: Capability) -> bool {
        true
    }

    /// Why the engine lacks `capability` (shown in the report), for one it does
    /// not support; `None` when it gives no reason.
    fn unsupported_reason(&self, _capability: Capability) -> Option<String> {
        None
    }

    /// For engines that run their own event loop in another process (drivers):
    /// the loop thread's kernel thread id, so that loop-lag can tell a request
    /// the loop itself waited for. `None` for in-process engines, whose loop is
    /// the caller's runtime thread.
    fn own_loop_thread(&self) -> Option<u32> {
        None
    }

    /// For engines that answer a cancel explicitly (out-of-process drivers): how
    /// the last operation its caller dropped was answered. `None` for engines
    /// where dropping the future is the whole cancel.
    fn last_cancel(&self) -> Option<CancelAnswer> {
        None
    }

    /// For engines that run their own event loop (out-of-process drivers): the
    /// loop's lag since the last reset, measured by its own heartbeat.
    fn own_loop_lag(
        &self,
        _reset: bool,
    ) -> impl Future<Output = Option<crate::lag::LagReport>> + Send {
        async { None }
    }

    /// Reads a whole file.
    fn read_file(&self, path: &Path) -> impl Future<Output = io::Result<Vec<u8>>> + Send {
        let path = path.to_path_buf();
        async move {
            let file = self.open(&path, &OpenOptions::read()).await?;
            let len = file.metadata().await?.len as usize;
            let mut out = Vec::with_capacity(len);
            let mut offset = 0u64;
            loop {
                let (result, buf) = file
                    .read_at(vec![0; (len + 1).clamp(4096, 1 << 20)], offset)
                    .await;
                let n = result?;
                if n == 0 {
                    break;
                }
                out.extend_from_slice(&buf[..n]);
                offset += n as u64;
            }
            file.close().await?;
            Ok(out)
        }
    }

    /// Replaces a file's contents (create, truncate, write all). Not durable.
    fn write_file(
        &self,
        path: &Path,
        data: Vec<u8>,
    ) -> impl Future<Output = io::Result<()>> + Send {
        let path = path.to_path_buf();
        async move {
            let file = self.open(&path, &OpenOptions::create_truncate()).await?;
            file.write_all_at(data, 0).await.0?;
            file.close().await
        }
    }

    /// Replaces `path` atomically and durably: write a temporary file in the same
    /// directory, fsync it, rename it over `path`, fsync the directory. After a crash
    /// at any point `path` holds the old or the new content, never a mix.
    fn atomic_write(
        &self,
        path: &Path,
        data: Vec<u8>,
    ) -> impl Future<Output = io::Result<()>> + Send {
        let path = path.to_path_buf();
        async move {
            let dir = parent_dir(&path);
            let tmp = temp_sibling(&path);
            let file = self.open(&tmp, &OpenOptions::create_truncate()).await?;
            let (result, _) = file.write_all_at(data, 0).await;
            result?;
            file.fsync().await?;
            file.close().await?;
            self.rename(&tmp, &path).await?;
            self.sync_dir(&dir).await
        }
    }
}

/// The directory holding `path` (`.` for a bare name).
pub fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A temporary name next to `path`, unique within this process.
pub fn temp_sibling(path: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    parent_dir(path).join(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

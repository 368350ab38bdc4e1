//! Deliberately broken engines: the negative controls each suite must catch.
//!
//! [`BrokenEngine`] wraps a working engine and breaks one promise ([`Defect`]). The
//! test suite runs every suite against its control, so a suite that goes blind
//! fails CI instead of passing everything.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use slowfs_harness::{BufResult, Capability, Engine, EngineFile, Metadata, OpenOptions};

/// The promise a [`BrokenEngine`] breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defect {
    /// `write_at` claims the whole buffer was written when the kernel took less.
    ClaimsFullWrites,
    /// A failed `write_at` is reported as a full write (the error is swallowed).
    SwallowsWriteErrors,
    /// `read_at` is a seek plus a read: it moves the file's cursor.
    MovesCursorOnReadAt,
    /// Buffers of cancelled reads are recycled into later reads while the
    /// cancelled read still writes into them.
    TouchesBufferAfterCancel,
    /// `atomic_write` skips the directory fsync after the rename.
    SkipsDirFsync,
    /// `fsync`/`fdatasync` return success without syncing.
    SkipsFsync,
    /// A failed `fsync` is retried until it succeeds (PostgreSQL before 2018):
    /// on Linux the retry succeeds and the data is gone.
    RetriesFsync,
    /// Does no I/O it reports: a write claims every byte without writing, a
    /// read returns zeros (with the count a real read gives). Every suite must
    /// catch it: a suite that only looks at what the engine says is blind.
    FakesIo,
}

impl Defect {
    /// Every defect.
    pub const ALL: &'static [Defect] = &[
        Defect::ClaimsFullWrites,
        Defect::SwallowsWriteErrors,
        Defect::MovesCursorOnReadAt,
        Defect::TouchesBufferAfterCancel,
        Defect::SkipsDirFsync,
        Defect::SkipsFsync,
        Defect::RetriesFsync,
        Defect::FakesIo,
    ];

    /// The control's engine name.
    pub fn name(self) -> &'static str {
        match self {
            Defect::ClaimsFullWrites => "broken:claims-full-writes",
            Defect::SwallowsWriteErrors => "broken:swallows-write-errors",
            Defect::MovesCursorOnReadAt => "broken:moves-cursor-on-read-at",
            Defect::TouchesBufferAfterCancel => "broken:touches-buffer-after-cancel",
            Defect::SkipsDirFsync => "broken:skips-dir-fsync",
            Defect::SkipsFsync => "broken:skips-fsync",
            Defect::RetriesFsync => "broken:retries-fsync",
            Defect::FakesIo => "broken:fakes-io",
        }
    }

    /// The suites that must catch it.
    pub fn caught_by(self) -> &'static [crate::Suite] {
        use crate::Suite;
        match self {
            Defect::ClaimsFullWrites => &[Suite::ShortIo],
            Defect::SwallowsWriteErrors => &[Suite::Errors],
            Defect::MovesCursorOnReadAt => &[Suite::Positioned],
            Defect::TouchesBufferAfterCancel => &[Suite::Cancel],
            Defect::SkipsDirFsync => &[Suite::AtomicReplace],
            Defect::SkipsFsync => &[Suite::Durability],
            Defect::RetriesFsync => &[Suite::Errors],
            Defect::FakesIo => Suite::ALL,
        }
    }
}

/// A working engine with one [`Defect`].
#[derive(Debug)]
pub struct BrokenEngine<E> {
    inner: E,
    defect: Defect,
    background: Arc<AtomicUsize>,
    recycled: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl<E: Engine> BrokenEngine<E> {
    /// Breaks `inner` in the way `defect` says.
    pub fn new(inner: E, defect: Defect) -> Self {
        BrokenEngine {
            inner,
            defect,
            background: Arc::default(),
            recycled: Arc::default(),
        }
    }
}

/// A file of [`BrokenEngine`].
#[derive(Debug)]
pub struct BrokenFile<F> {
    inner: Arc<F>,
    defect: Defect,
    recycled: Arc<Mutex<Vec<Vec<u8>>>>,
    background: Arc<AtomicUsize>,
}

/// A raw pointer the deliberately broken read carries to its background task.
struct SendPtr(*mut u8);
// SAFETY: only used by the TouchesBufferAfterCancel control, whose whole point is
// to write into memory it no longer owns; the allocation stays alive (recycled).
unsafe impl Send for SendPtr {}

/// Puts the buffer of a read that is dropped before completion into the recycle list.
struct RecycleOnDrop {
    buf: Option<Vec<u8>>,
    pool: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Drop for RecycleOnDrop {
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            self.pool.lock().unwrap().push(buf);
        }
    }
}

impl<F: EngineFile> BrokenFile<F> {
    async fn recycling_read(&self, buf: Vec<u8>, offset: u64) -> BufResult {
        let len = buf.len();
        let mut buf = {
            let mut pool = self.recycled.lock().unwrap();
            match pool.iter().position(|b| b.len() == len) {
                Some(i) => pool.swap_remove(i),
                None => buf,
            }
        };
        let target = SendPtr(buf.as_mut_ptr());
        let (tx, rx) = tokio::sync::oneshot::channel();
        let inner = Arc::clone(&self.inner);
        let background = Arc::clone(&self.background);
        background.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(async move {
            let target = target;
            let (result, tmp) = inner.read_at(vec![0; len], offset).await;
            if let Ok(n) = &result {
                // SAFETY: deliberately unsound control; see `SendPtr`.
                unsafe { std::ptr::copy_nonoverlapping(tmp.as_ptr(), target.0, *n) };
            }
            background.fetch_sub(1, Ordering::SeqCst);
            let _ = tx.send(result);
        });
        let mut guard = RecycleOnDrop {
            buf: Some(std::mem::take(&mut buf)),
            pool: Arc::clone(&self.recycled),
        };
        let result = rx
            .await
            .unwrap_or_else(|_| Err(io::Error::other("background read vanished")));
        (result, guard.buf.take().expect("present until completion"))
    }
}

/// A read's result with its data replaced by zeros (the count kept).
fn zeroed((result, mut buf): BufResult) -> BufResult {
    buf.fill(0);
    (result, buf)
}

impl<F: EngineFile> EngineFile for BrokenFile<F> {
    async fn read_at(&self, buf: Vec<u8>, offset: u64) -> BufResult {
        match self.defect {
            Defect::MovesCursorOnReadAt => {
                let (result, buf) = self.inner.read_at(buf, offset).await;
                if let Ok(n) = result {
                    // As if implemented with lseek + read: the cursor ends after the data.
                    let _ = self.inner.read(vec![0; n]).await;
                }
                (result, buf)
            }
            Defect::TouchesBufferAfterCancel => self.recycling_read(buf, offset).await,
            Defect::FakesIo => zeroed(self.inner.read_at(buf, offset).await),
            _ => self.inner.read_at(buf, offset).await,
        }
    }

    async fn read(&self, buf: Vec<u8>) -> BufResult {
        match self.defect {
            Defect::FakesIo => zeroed(self.inner.read(buf).await),
            _ => self.inner.read(buf).await,
        }
    }

    async fn write_at(&self, buf: Vec<u8>, offset: u64) -> BufResult {
        let len = buf.len();
        if self.defect == Defect::FakesIo {
            return (Ok(len), buf);
        }
        let (result, buf) = self.inner.write_at(buf, offset).await;
        match (self.defect, result) {
            (Defect::ClaimsFullWrites, Ok(_)) => (Ok(len), buf),
            (Defect::SwallowsWriteErrors, Err(_)) => (Ok(len), buf),
            (_, result) => (result, buf),
        }
    }

    async fn fsync(&self) -> io::Result<()> {
        match self.defect {
            Defect::SkipsFsync => Ok(()),
            Defect::RetriesFsync => match self.inner.fsync().await {
                Err(_) => self.inner.fsync().await,
                ok => ok,
            },
            _ => self.inner.fsync().await,
        }
    }

    async fn fdatasync(&self) -> io::Result<()> {
        if self.defect == Defect::SkipsFsync {
            return Ok(());
        }
        self.inner.fdatasync().await
    }

    async fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len).await
    }

    async fn metadata(&self) -> io::Result<Metadata> {
        self.inner.metadata().await
    }

    async fn close(self) -> io::Result<()> {
        match Arc::try_unwrap(self.inner) {
            Ok(inner) => inner.close().await,
            Err(_) => Ok(()),
        }
    }
}

impl<E: Engine> Engine for BrokenEngine<E> {
    type File = BrokenFile<E::File>;

    fn name(&self) -> &str {
        self.defect.name()
    }

    async fn open(&self, path: &Path, options: &OpenOptions) -> io::Result<Self::File> {
        Ok(BrokenFile {
            inner: Arc::new(self.inner.open(path, options).await?),
            defect: self.defect,
            recycled: Arc::clone(&self.recycled),
            background: Arc::clone(&self.background),
        })
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to).await
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path).await
    }

    async fn create_dir(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir(path).await
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        if self.defect == Defect::SkipsDirFsync {
            return Ok(());
        }
        self.inner.sync_dir(path).await
    }

    async fn copy(&self, from: &Path, to: &Path) -> io::Result<u64> {
        self.inner.copy(from, to).await
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight() + self.background.load(Ordering::SeqCst)
    }

    fn supports(&self, capability: Capability) -> bool {
        self.inner.supports(capability)
    }

    fn unsupported_reason(&self, capability: Capability) -> Option<String> {
        self.inner.unsupported_reason(capability)
    }
}

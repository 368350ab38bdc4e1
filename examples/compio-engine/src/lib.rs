//! A thread-per-core runtime adapted to [`slowfs_harness::Engine`]: compio, whose files
//! are `!Send` (they belong to the thread whose io_uring submits their ops).
//!
//! `slowfs_harness::EngineFile` futures must be `Send`, so the adapter is a **proxy**:
//! one thread runs a compio runtime and owns every open file in a handle table;
//! each operation is a job sent to that thread (a closure that is `Send`, building
//! a future that is not), spawned there as a local task, and answered over a
//! oneshot channel. The caller's side holds only a handle number. The same
//! pattern fits monoio, tokio-uring and glommio.
//!
//! Dropping the caller's future drops the answer's receiver; the compio task runs
//! on to completion and keeps the buffer until the kernel is done with it (compio's
//! ops own their buffers), so a cancel never frees memory the kernel still writes.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use slowfs_harness::{Engine, EngineFile, OpenOptions};
//! let engine = compio_engine::CompioEngine::start()?;
//! let file = engine.open("/tmp/x".as_ref(), &OpenOptions::read_write_create()).await?;
//! let (n, _buf) = file.write_at(b"hello".to_vec(), 0).await;
//! n?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use compio::buf::BufResult as CompioResult;
use compio::fs::File;
use compio::io::{AsyncReadAt, AsyncWriteAt};
use futures::channel::mpsc;
use futures::StreamExt;
use slowfs_harness::lag::LagReport;
use slowfs_harness::{BufResult, Engine, EngineFile, Metadata, OpenOptions};

/// An open file on the proxy thread, with the cursor compio's positioned-only
/// files lack (for `read`).
struct Open {
    file: File,
    cursor: Cell<u64>,
}

/// The proxy thread's handle table.
#[derive(Default)]
struct Table {
    files: RefCell<HashMap<u64, Rc<Open>>>,
}

impl Table {
    fn get(&self, handle: u64) -> io::Result<Rc<Open>> {
        self.files
            .borrow()
            .get(&handle)
            .cloned()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))
    }
}

type LocalFuture<T> = Pin<Box<dyn Future<Output = T>>>;
/// Work for the proxy thread: `Send` itself, building a future that is not.
type Job = Box<dyn FnOnce(Rc<Table>) -> LocalFuture<()> + Send>;

/// compio behind a proxy thread.
#[derive(Debug, Clone)]
pub struct CompioEngine {
    jobs: mpsc::UnboundedSender<Job>,
    in_flight: Arc<AtomicUsize>,
    next_handle: Arc<AtomicU64>,
    /// The proxy thread: compio's event loop, whose lag is the one that matters.
    loop_thread: u32,
    /// Lateness of each wake-up of a heartbeat on compio's loop (ms).
    heartbeat: Arc<Mutex<Vec<f64>>>,
}

/// Sleeps 1 ms at a time on compio's loop and records how late it wakes: the
/// loop-lag suite must measure compio's loop, not the caller's runtime.
async fn heartbeat(late: Arc<Mutex<Vec<f64>>>) {
    let tick = std::time::Duration::from_millis(1);
    loop {
        let start = std::time::Instant::now();
        compio::time::sleep(tick).await;
        let ms = start.elapsed().saturating_sub(tick).as_secs_f64() * 1000.0;
        let mut late = late.lock().unwrap();
        // About 15 minutes of beats between resets; later ones are not kept.
        if late.len() < 1_000_000 {
            late.push(ms);
        }
    }
}

impl CompioEngine {
    /// Starts the proxy thread and its compio runtime (io_uring).
    pub fn start() -> io::Result<CompioEngine> {
        let (jobs, mut queue) = mpsc::unbounded::<Job>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let heartbeat_late: Arc<Mutex<Vec<f64>>> = Arc::default();
        let late = Arc::clone(&heartbeat_late);
        std::thread::Builder::new()
            .name("compio-proxy".into())
            .spawn(move || {
                let runtime = match compio::runtime::Runtime::new() {
                    Ok(rt) => {
                        // SAFETY: gettid has no preconditions.
                        let tid = unsafe { libc::gettid() } as u32;
                        let _ = ready_tx.send(Ok(tid));
                        rt
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                runtime.block_on(async move {
                    compio::runtime::spawn(heartbeat(late)).detach();
                    let table = Rc::new(Table::default());
                    // Ends when every engine handle is gone.
                    while let Some(job) = queue.next().await {
                        compio::runtime::spawn(job(Rc::clone(&table))).detach();
                    }
                });
            })?;
        let loop_thread = ready_rx
            .recv()
            .map_err(|_| io::Error::other("the compio proxy thread died starting"))??;
        Ok(CompioEngine {
            jobs,
            in_flight: Arc::default(),
            next_handle: Arc::new(AtomicU64::new(1)),
            loop_thread,
            heartbeat: heartbeat_late,
        })
    }

    /// Runs `work` on the proxy thread and waits for its answer.
    async fn call<T, F>(&self, work: F) -> T
    where
        T: Send + 'static,
        F: FnOnce(Rc<Table>) -> LocalFuture<T> + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let in_flight = Arc::clone(&self.in_flight);
        in_flight.fetch_add(1, Ordering::SeqCst);
        let job: Job = Box::new(move |table| {
            Box::pin(async move {
                let result = work(table).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                let _ = tx.send(result);
            })
        });
        self.jobs
            .unbounded_send(job)
            .expect("the compio proxy thread outlives its engine handles");
        rx.await.expect("the compio proxy thread panicked")
    }
}

/// A file open on the proxy thread.
#[derive(Debug)]
pub struct CompioFile {
    engine: CompioEngine,
    handle: u64,
}

impl CompioFile {
    /// Runs `op` on this file on the proxy thread.
    async fn with<T, F, Fut>(&self, op: F) -> io::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Rc<Open>) -> Fut + Send + 'static,
        Fut: Future<Output = io::Result<T>> + 'static,
    {
        let handle = self.handle;
        self.engine
            .call(move |table| {
                Box::pin(async move {
                    let open = table.get(handle)?;
                    op(open).await
                })
            })
            .await
    }

    /// Runs `op` on this file and a caller's buffer on the proxy thread; the
    /// buffer comes back also when the handle is unknown.
    async fn with_buf<F, Fut>(&self, buf: Vec<u8>, op: F) -> BufResult
    where
        F: FnOnce(Rc<Open>, Vec<u8>) -> Fut + Send + 'static,
        Fut: Future<Output = BufResult> + 'static,
    {
        let handle = self.handle;
        self.engine
            .call(move |table| {
                Box::pin(async move {
                    match table.get(handle) {
                        Ok(open) => op(open, buf).await,
                        Err(e) => (Err(e), buf),
                    }
                })
            })
            .await
    }
}

/// Reads up to `buf.len()` bytes at `offset` (compio reads into a Vec's spare
/// capacity, so the buffer goes in empty and comes back at its old length).
async fn read_into(file: &File, mut buf: Vec<u8>, offset: u64) -> BufResult {
    let len = buf.len();
    buf.clear();
    buf.shrink_to(len);
    let CompioResult(result, mut buf) = file.read_at(buf, offset).await;
    buf.resize(len, 0);
    (result.map(|n| n.min(len)), buf)
}

impl EngineFile for CompioFile {
    async fn read_at(&self, buf: Vec<u8>, offset: u64) -> BufResult {
        self.with_buf(buf, move |open, buf| async move {
            read_into(&open.file, buf, offset).await
        })
        .await
    }

    async fn read(&self, buf: Vec<u8>) -> BufResult {
        self.with_buf(buf, |open, buf| async move {
            let (result, buf) = read_into(&open.file, buf, open.cursor.get()).await;
            if let Ok(n) = result {
                open.cursor.set(open.cursor.get() + n as u64);
            }
            (result, buf)
        })
        .await
    }

    async fn write_at(&self, buf: Vec<u8>, offset: u64) -> BufResult {
        self.with_buf(buf, move |open, buf| async move {
            let mut file = &open.file;
            let CompioResult(result, buf) = file.write_at(buf, offset).await;
            (result, buf)
        })
        .await
    }

    async fn fsync(&self) -> io::Result<()> {
        self.with(|open| async move { open.file.sync_all().await })
            .await
    }

    async fn fdatasync(&self) -> io::Result<()> {
        self.with(|open| async move { open.file.sync_data().await })
            .await
    }

    async fn set_len(&self, len: u64) -> io::Result<()> {
        self.with(move |open| async move { open.file.set_len(len).await })
            .await
    }

    async fn metadata(&self) -> io::Result<Metadata> {
        self.with(|open| async move {
            let meta = open.file.metadata().await?;
            Ok(Metadata::new(meta.len()))
        })
        .await
    }

    async fn close(self) -> io::Result<()> {
        let handle = self.handle;
        self.engine
            .call(move |table| {
                Box::pin(async move {
                    let open = table.files.borrow_mut().remove(&handle);
                    match open.map(Rc::try_unwrap) {
                        Some(Ok(open)) => open.file.close().await,
                        // An op still holds it: the fd closes when that op ends.
                        Some(Err(_)) => Ok(()),
                        None => Err(io::Error::from_raw_os_error(libc::EBADF)),
                    }
                })
            })
            .await
    }
}

impl Engine for CompioEngine {
    type File = CompioFile;

    fn name(&self) -> &str {
        "compio"
    }

    async fn open(&self, path: &Path, options: &OpenOptions) -> io::Result<CompioFile> {
        let (path, options) = (path.to_path_buf(), options.clone());
        let handle = self.next_handle.fetch_add(1, Ordering::Relaxed);
        self.call(move |table| {
            Box::pin(async move {
                let mut flags = options.custom_flags;
                if options.append {
                    flags |= libc::O_APPEND;
                }
                let file = compio::fs::OpenOptions::new()
                    .read(options.read)
                    .write(options.write || options.append)
                    .create(options.create)
                    .create_new(options.create_new)
                    .truncate(options.truncate)
                    .custom_flags(flags)
                    .mode(options.mode.unwrap_or(0o644))
                    .open(&path)
                    .await?;
                let open = Open {
                    file,
                    cursor: Cell::new(0),
                };
                table.files.borrow_mut().insert(handle, Rc::new(open));
                Ok::<(), io::Error>(())
            })
        })
        .await?;
        Ok(CompioFile {
            engine: self.clone(),
            handle,
        })
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from, to) = (from.to_path_buf(), to.to_path_buf());
        self.call(move |_| Box::pin(async move { compio::fs::rename(from, to).await }))
            .await
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        self.call(move |_| Box::pin(async move { compio::fs::remove_file(path).await }))
            .await
    }

    async fn create_dir(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        self.call(move |_| Box::pin(async move { compio::fs::create_dir(path).await }))
            .await
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let path: PathBuf = path.to_path_buf();
        self.call(move |_| {
            Box::pin(async move {
                let dir = compio::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_DIRECTORY)
                    .open(&path)
                    .await?;
                dir.sync_all().await?;
                dir.close().await
            })
        })
        .await
    }

    async fn copy(&self, from: &Path, to: &Path) -> io::Result<u64> {
        // compio has no copy: copy_file_range on the proxy thread (it blocks that
        // thread, not the caller's loop).
        let (from, to) = (from.to_path_buf(), to.to_path_buf());
        self.call(move |_| Box::pin(async move { std::fs::copy(from, to) }))
            .await
    }

    fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    fn own_loop_thread(&self) -> Option<u32> {
        Some(self.loop_thread)
    }

    async fn own_loop_lag(&self, reset: bool) -> Option<LagReport> {
        let mut late = {
            let mut beats = self.heartbeat.lock().unwrap();
            if reset {
                std::mem::take(&mut *beats)
            } else {
                beats.clone()
            }
        };
        late.sort_by(f64::total_cmp);
        let pick =
            |q: f64| late.get(((q * late.len() as f64) as usize).min(late.len().saturating_sub(1)));
        let mut report = LagReport::new(
            late.len() as u64,
            pick(0.5).copied().unwrap_or(0.0),
            pick(0.99).copied().unwrap_or(0.0),
            late.last().copied().unwrap_or(0.0),
        );
        report.late_ms = Some(
            late.iter()
                .copied()
                .filter(|ms| *ms > slowfs_harness::lag::KEEP_LATE_OVER_MS)
                .collect(),
        );
        Some(report)
    }
}

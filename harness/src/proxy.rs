//! An [`Engine`] for any thread-per-core runtime whose files are `!Send`
//! (compio, tokio-uring, monoio, glommio): implement [`LocalRuntime`] —
//! the runtime's own calls, a dozen lines each — and [`ProxyEngine`] does
//! the rest.
//!
//! [`EngineFile`] futures must be `Send`, so the engine is a **proxy**: one
//! thread runs the runtime and owns every open file in a handle table; each
//! operation is a job sent to that thread (a `Send` closure building a future
//! that is not), spawned there as a local task, and answered over a oneshot
//! channel. The caller's side holds only a handle number.
//!
//! Dropping the caller's future drops the answer's receiver; the local task
//! runs on to completion and keeps the buffer until the kernel is done with it
//! (these runtimes' ops own their buffers), so a cancel never frees memory the
//! kernel still writes. A heartbeat on the runtime's own loop measures its lag
//! ([`Engine::own_loop_lag`]): the loop-lag suite judges the runtime's loop,
//! not the caller's.
//!
//! ```ignore
//! struct Compio;
//! impl LocalRuntime for Compio {
//!     type File = compio::fs::File;
//!     const NAME: &'static str = "compio";
//!     fn block_on(main: impl Future<Output = ()> + 'static) -> io::Result<()> {
//!         compio::runtime::Runtime::new()?.block_on(main);
//!         Ok(())
//!     }
//!     // spawn, sleep, open, read_at, write_at, sync_all, ...
//! }
//! let engine = ProxyEngine::<Compio>::start()?;
//! ```

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::channel::mpsc;
use futures::StreamExt;

use crate::engine::{BufResult, Engine, EngineFile, Metadata, OpenOptions};
use crate::lag::LagReport;

/// A thread-per-core runtime's own calls, run on the proxy thread. Path
/// operations default to `std` on the proxy thread (they block that thread,
/// never the caller's); override those the runtime has.
pub trait LocalRuntime: Sized + 'static {
    /// The runtime's open file.
    type File: 'static;

    /// The engine's name in reports.
    const NAME: &'static str;

    /// Builds the runtime on the calling thread and runs `main` on it to its
    /// end; an error when the runtime cannot start (no io_uring...).
    fn block_on(main: impl Future<Output = ()> + 'static) -> io::Result<()>;

    /// Spawns a local task on the running runtime.
    fn spawn(task: impl Future<Output = ()> + 'static);

    /// The runtime's own timer.
    fn sleep(duration: Duration) -> impl Future<Output = ()>;

    /// Opens a file (`options` as given to [`Engine::open`]).
    fn open(path: PathBuf, options: OpenOptions) -> impl Future<Output = io::Result<Self::File>>;

    /// Reads up to `buf.len()` bytes at `offset`; the buffer comes back at its length.
    fn read_at(file: &Self::File, buf: Vec<u8>, offset: u64) -> impl Future<Output = BufResult>;

    /// Writes `buf` at `offset` (at the end for an `O_APPEND` file).
    fn write_at(file: &Self::File, buf: Vec<u8>, offset: u64) -> impl Future<Output = BufResult>;

    /// fsync.
    fn sync_all(file: &Self::File) -> impl Future<Output = io::Result<()>>;

    /// fdatasync.
    fn sync_data(file: &Self::File) -> impl Future<Output = io::Result<()>>;

    /// ftruncate.
    fn set_len(file: &Self::File, len: u64) -> impl Future<Output = io::Result<()>>;

    /// The file's size.
    fn len(file: &Self::File) -> impl Future<Output = io::Result<u64>>;

    /// Closes the file, reporting close's error.
    fn close(file: Self::File) -> impl Future<Output = io::Result<()>>;

    /// Renames, replacing the destination.
    fn rename(from: PathBuf, to: PathBuf) -> impl Future<Output = io::Result<()>> {
        async move { std::fs::rename(from, to) }
    }

    /// Removes a file.
    fn remove_file(path: PathBuf) -> impl Future<Output = io::Result<()>> {
        async move { std::fs::remove_file(path) }
    }

    /// Creates a directory.
    fn create_dir(path: PathBuf) -> impl Future<Output = io::Result<()>> {
        async move { std::fs::create_dir(path) }
    }

    /// fsync on a directory.
    fn sync_dir(path: PathBuf) -> impl Future<Output = io::Result<()>> {
        async move { std::fs::File::open(path)?.sync_all() }
    }

    /// Copies a whole file.
    fn copy(from: PathBuf, to: PathBuf) -> impl Future<Output = io::Result<u64>> {
        async move { std::fs::copy(from, to) }
    }
}

/// An open file on the proxy thread, with a cursor for [`EngineFile::read`]
/// (these runtimes' files are positioned-only).
struct Open<R: LocalRuntime> {
    file: R::File,
    cursor: Cell<u64>,
}

/// The proxy thread's handle table.
struct Table<R: LocalRuntime> {
    files: RefCell<HashMap<u64, Rc<Open<R>>>>,
}

impl<R: LocalRuntime> Table<R> {
    fn get(&self, handle: u64) -> io::Result<Rc<Open<R>>> {
        self.files
            .borrow()
            .get(&handle)
            .cloned()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))
    }
}

type LocalFuture<T> = Pin<Box<dyn Future<Output = T>>>;
/// Work for the proxy thread: `Send` itself, building a future that is not.
type Job<R> = Box<dyn FnOnce(Rc<Table<R>>) -> LocalFuture<()> + Send>;

/// A [`LocalRuntime`] behind a proxy thread, as an [`Engine`].
pub struct ProxyEngine<R: LocalRuntime> {
    jobs: mpsc::UnboundedSender<Job<R>>,
    in_flight: Arc<AtomicUsize>,
    next_handle: Arc<AtomicU64>,
    /// The proxy thread: the runtime's event loop, whose lag is the one that matters.
    loop_thread: u32,
    /// Lateness of each wake-up of a heartbeat on the runtime's loop (ms).
    heartbeat: Arc<Mutex<Vec<f64>>>,
    runtime: PhantomData<fn() -> R>,
}

impl<R: LocalRuntime> Clone for ProxyEngine<R> {
    fn clone(&self) -> Self {
        ProxyEngine {
            jobs: self.jobs.clone(),
            in_flight: Arc::clone(&self.in_flight),
            next_handle: Arc::clone(&self.next_handle),
            loop_thread: self.loop_thread,
            heartbeat: Arc::clone(&self.heartbeat),
            runtime: PhantomData,
        }
    }
}

impl<R: LocalRuntime> std::fmt::Debug for ProxyEngine<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyEngine")
            .field("runtime", &R::NAME)
            .field("loop_thread", &self.loop_thread)
            .finish()
    }
}

/// Sleeps 1 ms at a time on the runtime's loop and records how late it wakes.
async fn heartbeat<R: LocalRuntime>(late: Arc<Mutex<Vec<f64>>>) {
    let tick = Duration::from_millis(1);
    loop {
        let start = Instant::now();
        R::sleep(tick).await;
        let ms = start.elapsed().saturating_sub(tick).as_secs_f64() * 1000.0;
        let mut late = late.lock().unwrap_or_else(|e| e.into_inner());
        // About 15 minutes of beats between resets; later ones are not kept.
        if late.len() < 1_000_000 {
            late.push(ms);
        }
    }
}

impl<R: LocalRuntime> ProxyEngine<R> {
    /// Starts the proxy thread and the runtime on it.
    pub fn start() -> io::Result<ProxyEngine<R>> {
        let (jobs, mut queue) = mpsc::unbounded::<Job<R>>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<io::Result<u32>>();
        let heartbeat_late: Arc<Mutex<Vec<f64>>> = Arc::default();
        let late = Arc::clone(&heartbeat_late);
        std::thread::Builder::new()
            .name(format!("{}-proxy", R::NAME))
            .spawn(move || {
                let ready = ready_tx.clone();
                let ran = R::block_on(async move {
                    // SAFETY: gettid has no preconditions.
                    let _ = ready.send(Ok(unsafe { libc::gettid() } as u32));
                    R::spawn(heartbeat::<R>(late));
                    let table = Rc::new(Table::<R> {
                        files: RefCell::default(),
                    });
                    // Ends when every engine handle is gone.
                    while let Some(job) = queue.next().await {
                        R::spawn(job(Rc::clone(&table)));
                    }
                });
                if let Err(e) = ran {
                    let _ = ready_tx.send(Err(e));
                }
            })?;
        let loop_thread = ready_rx.recv().map_err(|_| {
            io::Error::other(format!("the {} proxy thread died starting", R::NAME))
        })??;
        Ok(ProxyEngine {
            jobs,
            in_flight: Arc::default(),
            next_handle: Arc::new(AtomicU64::new(1)),
            loop_thread,
            heartbeat: heartbeat_late,
            runtime: PhantomData,
        })
    }

    /// Runs `work` on the proxy thread and waits for its answer.
    async fn call<T, F>(&self, work: F) -> T
    where
        T: Send + 'static,
        F: FnOnce(Rc<Table<R>>) -> LocalFuture<T> + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let in_flight = Arc::clone(&self.in_flight);
        in_flight.fetch_add(1, Ordering::SeqCst);
        let job: Job<R> = Box::new(move |table| {
            Box::pin(async move {
                let result = work(table).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                let _ = tx.send(result);
            })
        });
        self.jobs
            .unbounded_send(job)
            .expect("the proxy thread outlives its engine handles");
        rx.await.expect("the proxy thread panicked")
    }

    /// Runs a path operation on the proxy thread.
    async fn on_paths<T, Fut>(&self, op: impl FnOnce() -> Fut + Send + 'static) -> io::Result<T>
    where
        T: Send + 'static,
        Fut: Future<Output = io::Result<T>> + 'static,
    {
        self.call(move |_| Box::pin(op())).await
    }
}

/// A file open on the proxy thread.
pub struct ProxyFile<R: LocalRuntime> {
    engine: ProxyEngine<R>,
    handle: u64,
}

impl<R: LocalRuntime> std::fmt::Debug for ProxyFile<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyFile")
            .field("runtime", &R::NAME)
            .field("handle", &self.handle)
            .finish()
    }
}

impl<R: LocalRuntime> ProxyFile<R> {
    /// Runs `op` on this file on the proxy thread.
    async fn with<T, F, Fut>(&self, op: F) -> io::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(Rc<Open<R>>) -> Fut + Send + 'static,
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
        F: FnOnce(Rc<Open<R>>, Vec<u8>) -> Fut + Send + 'static,
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

impl<R: LocalRuntime> EngineFile for ProxyFile<R> {
    async fn read_at(&self, buf: Vec<u8>, offset: u64) -> BufResult {
        self.with_buf(buf, move |open, buf| async move {
            R::read_at(&open.file, buf, offset).await
        })
        .await
    }

    async fn read(&self, buf: Vec<u8>) -> BufResult {
        self.with_buf(buf, |open, buf| async move {
            let (result, buf) = R::read_at(&open.file, buf, open.cursor.get()).await;
            if let Ok(n) = result {
                open.cursor.set(open.cursor.get() + n as u64);
            }
            (result, buf)
        })
        .await
    }

    async fn write_at(&self, buf: Vec<u8>, offset: u64) -> BufResult {
        self.with_buf(buf, move |open, buf| async move {
            R::write_at(&open.file, buf, offset).await
        })
        .await
    }

    async fn fsync(&self) -> io::Result<()> {
        self.with(|open| async move { R::sync_all(&open.file).await })
            .await
    }

    async fn fdatasync(&self) -> io::Result<()> {
        self.with(|open| async move { R::sync_data(&open.file).await })
            .await
    }

    async fn set_len(&self, len: u64) -> io::Result<()> {
        self.with(move |open| async move { R::set_len(&open.file, len).await })
            .await
    }

    async fn metadata(&self) -> io::Result<Metadata> {
        self.with(|open| async move { Ok(Metadata::new(R::len(&open.file).await?)) })
            .await
    }

    async fn close(self) -> io::Result<()> {
        let handle = self.handle;
        self.engine
            .call(move |table| {
                Box::pin(async move {
                    let open = table.files.borrow_mut().remove(&handle);
                    match open.map(Rc::try_unwrap) {
                        Some(Ok(open)) => R::close(open.file).await,
                        // An op still holds it: the fd closes when that op ends.
                        Some(Err(_)) => Ok(()),
                        None => Err(io::Error::from_raw_os_error(libc::EBADF)),
                    }
                })
            })
            .await
    }
}

impl<R: LocalRuntime> Engine for ProxyEngine<R> {
    type File = ProxyFile<R>;

    fn name(&self) -> &str {
        R::NAME
    }

    async fn open(&self, path: &Path, options: &OpenOptions) -> io::Result<ProxyFile<R>> {
        let (path, options) = (path.to_path_buf(), options.clone());
        let handle = self.next_handle.fetch_add(1, Ordering::Relaxed);
        self.call(move |table: Rc<Table<R>>| {
            Box::pin(async move {
                let file = R::open(path, options).await?;
                let open = Open {
                    file,
                    cursor: Cell::new(0),
                };
                table.files.borrow_mut().insert(handle, Rc::new(open));
                Ok::<(), io::Error>(())
            })
        })
        .await?;
        Ok(ProxyFile {
            engine: self.clone(),
            handle,
        })
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from, to) = (from.to_path_buf(), to.to_path_buf());
        self.on_paths(move || R::rename(from, to)).await
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        self.on_paths(move || R::remove_file(path)).await
    }

    async fn create_dir(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        self.on_paths(move || R::create_dir(path)).await
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        self.on_paths(move || R::sync_dir(path)).await
    }

    async fn copy(&self, from: &Path, to: &Path) -> io::Result<u64> {
        let (from, to) = (from.to_path_buf(), to.to_path_buf());
        self.on_paths(move || R::copy(from, to)).await
    }

    fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    fn own_loop_thread(&self) -> Option<u32> {
        Some(self.loop_thread)
    }

    async fn own_loop_lag(&self, reset: bool) -> Option<LagReport> {
        let mut late = {
            let mut beats = self.heartbeat.lock().unwrap_or_else(|e| e.into_inner());
            if reset {
                std::mem::take(&mut *beats)
            } else {
                beats.clone()
            }
        };
        late.sort_by(f64::total_cmp);
        let pick = |q: f64| {
            late.get(((q * late.len() as f64) as usize).min(late.len().saturating_sub(1)))
                .copied()
                .unwrap_or(0.0)
        };
        let mut report = LagReport::new(
            late.len() as u64,
            pick(0.5),
            pick(0.99),
            late.last().copied().unwrap_or(0.0),
        );
        report.late_ms = Some(
            late.iter()
                .copied()
                .filter(|ms| *ms > crate::lag::KEEP_LATE_OVER_MS)
                .collect(),
        );
        Some(report)
    }
}

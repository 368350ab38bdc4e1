//! `threadpool`: every logical operation is one hand-off to a dedicated, bounded pool.
//!
//! The pool is sized for storage (many threads, since each mostly waits on the
//! device), not for CPUs, and a semaphore bounds the operations queued or running.
//! Cancelling abandons the wait: the thread still finishes the syscall, and the
//! buffer it used is dropped there — it is no longer the caller's.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use tokio::sync::{oneshot, Semaphore};

use super::{std_copy, std_open, std_sync_dir};
use crate::engine::{BufResult, Engine, EngineFile, Metadata, OpenOptions};

type Job = Box<dyn FnOnce() + Send>;

/// Default pool size: storage latency, not CPU count, decides how many help.
pub const DEFAULT_THREADS: usize = 64;

#[derive(Debug)]
struct Pool {
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    permits: Arc<Semaphore>,
    size: usize,
}

impl Pool {
    fn new(size: usize) -> Arc<Pool> {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..size {
            let rx = Arc::clone(&rx);
            std::thread::Builder::new()
                .name(format!("fs-pool-{i}"))
                .spawn(move || loop {
                    let job = rx.lock().unwrap().recv();
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                })
                .expect("spawning a pool thread");
        }
        Arc::new(Pool {
            jobs: Mutex::new(Some(tx)),
            permits: Arc::new(Semaphore::new(size)),
            size,
        })
    }

    /// Runs `work` on a pool thread and waits for it: the one hand-off per operation.
    async fn run<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> T {
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            let result = work();
            drop(permit);
            let _ = tx.send(result);
        });
        self.jobs
            .lock()
            .unwrap()
            .as_ref()
            .expect("pool alive while the engine is")
            .send(job)
            .expect("pool threads alive");
        rx.await.expect("a pool thread panicked")
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // Closing the channel ends the threads once queued jobs are done.
        self.jobs.lock().unwrap().take();
    }
}

/// A thread-pool engine.
#[derive(Debug, Clone)]
pub struct ThreadPoolEngine {
    pool: Arc<Pool>,
}

impl ThreadPoolEngine {
    /// A pool of `threads` threads.
    pub fn new(threads: usize) -> ThreadPoolEngine {
        ThreadPoolEngine {
            pool: Pool::new(threads.max(1)),
        }
    }
}

impl Default for ThreadPoolEngine {
    fn default() -> Self {
        Self::new(DEFAULT_THREADS)
    }
}

/// A file of [`ThreadPoolEngine`].
#[derive(Debug)]
pub struct PoolFile {
    file: Arc<File>,
    pool: Arc<Pool>,
}

impl std::os::fd::AsRawFd for PoolFile {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.file.as_raw_fd()
    }
}

impl PoolFile {
    async fn with_file<T: Send + 'static>(&self, f: impl FnOnce(&File) -> T + Send + 'static) -> T {
        let file = Arc::clone(&self.file);
        self.pool.run(move || f(&file)).await
    }
}

impl EngineFile for PoolFile {
    async fn read_at(&self, mut buf: Vec<u8>, offset: u64) -> BufResult {
        self.with_file(move |f| (f.read_at(&mut buf, offset), buf))
            .await
    }

    async fn write_at(&self, buf: Vec<u8>, offset: u64) -> BufResult {
        self.with_file(move |f| (f.write_at(&buf, offset), buf))
            .await
    }

    async fn read(&self, mut buf: Vec<u8>) -> BufResult {
        use std::io::Read;
        self.with_file(move |mut f| (f.read(&mut buf), buf)).await
    }

    async fn fsync(&self) -> io::Result<()> {
        self.with_file(|f| f.sync_all()).await
    }

    async fn fdatasync(&self) -> io::Result<()> {
        self.with_file(|f| f.sync_data()).await
    }

    async fn set_len(&self, len: u64) -> io::Result<()> {
        self.with_file(move |f| f.set_len(len)).await
    }

    async fn metadata(&self) -> io::Result<Metadata> {
        self.with_file(|f| f.metadata().map(|m| Metadata { len: m.len() }))
            .await
    }

    async fn close(self) -> io::Result<()> {
        // The last reference closes the fd on a pool thread (close can block on FUSE).
        let file = self.file;
        self.pool.run(move || drop(file)).await;
        Ok(())
    }
}

impl Engine for ThreadPoolEngine {
    type File = PoolFile;

    fn name(&self) -> &str {
        "threadpool"
    }

    async fn open(&self, path: &Path, options: &OpenOptions) -> io::Result<PoolFile> {
        let (path, options) = (path.to_path_buf(), options.clone());
        let file = self.pool.run(move || std_open(&path, &options)).await?;
        Ok(PoolFile {
            file: Arc::new(file),
            pool: Arc::clone(&self.pool),
        })
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from, to) = (from.to_path_buf(), to.to_path_buf());
        self.pool.run(move || std::fs::rename(from, to)).await
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        self.pool.run(move || std::fs::remove_file(path)).await
    }

    async fn create_dir(&self, path: &Path) -> io::Result<()> {
        let path = path.to_path_buf();
        self.pool.run(move || std::fs::create_dir(path)).await
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let path: PathBuf = path.to_path_buf();
        self.pool.run(move || std_sync_dir(&path)).await
    }

    async fn copy(&self, from: &Path, to: &Path) -> io::Result<u64> {
        let (from, to) = (from.to_path_buf(), to.to_path_buf());
        self.pool.run(move || std_copy(&from, &to)).await
    }

    fn in_flight(&self) -> usize {
        self.pool.size - self.pool.permits.available_permits()
    }
}

//! [`AnyEngine`]: a built-in engine chosen by name at runtime.

use std::io;
use std::path::Path;

use super::aio::{AioEngine, AioFile};
use super::async_fs::{AsyncFsEngine, AsyncFsFile};
use super::blocking::{BlockingEngine, BlockingFile};
use super::external::{ExternalEngine, ExternalFile};
use super::threadpool::{PoolFile, ThreadPoolEngine};
use super::tokio_fs::{TokioFile, TokioFsEngine};
use super::uring::{UringConfig, UringEngine, UringFile};
use crate::engine::{BufResult, Engine, EngineFile, Metadata, OpenOptions};
use crate::Capability;

/// Names of the built-in engines, in the order the matrix shows them.
pub const ENGINE_NAMES: &[&str] = &[
    "uring",
    "aio",
    "threadpool",
    "tokio-fs",
    "async-fs",
    "blocking",
];

/// One of the built-in engines.
#[derive(Debug, Clone)]
pub enum AnyEngine {
    /// io_uring.
    Uring(UringEngine),
    /// Linux native AIO.
    Aio(AioEngine),
    /// A dedicated thread pool.
    ThreadPool(ThreadPoolEngine),
    /// tokio::fs.
    TokioFs(std::sync::Arc<TokioFsEngine>),
    /// async-fs (smol).
    AsyncFs(std::sync::Arc<AsyncFsEngine>),
    /// Syscalls on the runtime thread (the negative control).
    Blocking(std::sync::Arc<BlockingEngine>),
    /// A driver in another process (`cmd:COMMAND`).
    External(ExternalEngine),
}

impl AnyEngine {
    /// Starts the engine called `name`.
    pub fn by_name(name: &str) -> io::Result<AnyEngine> {
        match name {
            "uring" => Ok(AnyEngine::Uring(UringEngine::new(UringConfig::default())?)),
            "aio" => Ok(AnyEngine::Aio(AioEngine::new()?)),
            "threadpool" => Ok(AnyEngine::ThreadPool(ThreadPoolEngine::default())),
            "tokio-fs" => Ok(AnyEngine::TokioFs(Default::default())),
            "async-fs" => Ok(AnyEngine::AsyncFs(Default::default())),
            "blocking" => Ok(AnyEngine::Blocking(Default::default())),
            cmd if cmd.starts_with("cmd:") => {
                Ok(AnyEngine::External(ExternalEngine::start(&cmd[4..])?))
            }
            other => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "unknown engine '{other}' (built-in: {})",
                    ENGINE_NAMES.join(", ")
                ),
            )),
        }
    }
}

/// A file of [`AnyEngine`].
#[derive(Debug)]
pub enum AnyFile {
    /// io_uring.
    Uring(UringFile),
    /// Linux native AIO.
    Aio(AioFile),
    /// Thread pool.
    ThreadPool(PoolFile),
    /// tokio::fs.
    TokioFs(TokioFile),
    /// async-fs.
    AsyncFs(AsyncFsFile),
    /// Blocking.
    Blocking(BlockingFile),
    /// External driver.
    External(ExternalFile),
}

macro_rules! each_file {
    ($self:expr, $f:ident => $body:expr) => {
        match $self {
            AnyFile::Uring($f) => $body,
            AnyFile::Aio($f) => $body,
            AnyFile::ThreadPool($f) => $body,
            AnyFile::TokioFs($f) => $body,
            AnyFile::AsyncFs($f) => $body,
            AnyFile::Blocking($f) => $body,
            AnyFile::External($f) => $body,
        }
    };
}

macro_rules! each_engine {
    ($self:expr, $e:ident => $body:expr) => {
        match $self {
            AnyEngine::Uring($e) => $body,
            AnyEngine::Aio($e) => $body,
            AnyEngine::ThreadPool($e) => $body,
            AnyEngine::TokioFs($e) => $body,
            AnyEngine::AsyncFs($e) => $body,
            AnyEngine::Blocking($e) => $body,
            AnyEngine::External($e) => $body,
        }
    };
}

impl EngineFile for AnyFile {
    async fn read_at(&self, buf: Vec<u8>, offset: u64) -> BufResult {
        each_file!(self, f => f.read_at(buf, offset).await)
    }

    async fn write_at(&self, buf: Vec<u8>, offset: u64) -> BufResult {
        each_file!(self, f => f.write_at(buf, offset).await)
    }

    async fn read(&self, buf: Vec<u8>) -> BufResult {
        each_file!(self, f => f.read(buf).await)
    }

    async fn read_many(&self, reads: Vec<(u64, Vec<u8>)>) -> Vec<BufResult> {
        each_file!(self, f => f.read_many(reads).await)
    }

    async fn write_many(&self, writes: Vec<(u64, Vec<u8>)>) -> Vec<BufResult> {
        each_file!(self, f => f.write_many(writes).await)
    }

    async fn fsync(&self) -> io::Result<()> {
        each_file!(self, f => f.fsync().await)
    }

    async fn fdatasync(&self) -> io::Result<()> {
        each_file!(self, f => f.fdatasync().await)
    }

    async fn set_len(&self, len: u64) -> io::Result<()> {
        each_file!(self, f => f.set_len(len).await)
    }

    async fn metadata(&self) -> io::Result<Metadata> {
        each_file!(self, f => f.metadata().await)
    }

    async fn close(self) -> io::Result<()> {
        each_file!(self, f => f.close().await)
    }
}

impl Engine for AnyEngine {
    type File = AnyFile;

    fn name(&self) -> &str {
        each_engine!(self, e => e.name())
    }

    async fn open(&self, path: &Path, options: &OpenOptions) -> io::Result<AnyFile> {
        Ok(match self {
            AnyEngine::Uring(e) => AnyFile::Uring(e.open(path, options).await?),
            AnyEngine::Aio(e) => AnyFile::Aio(e.open(path, options).await?),
            AnyEngine::ThreadPool(e) => AnyFile::ThreadPool(e.open(path, options).await?),
            AnyEngine::TokioFs(e) => AnyFile::TokioFs(e.open(path, options).await?),
            AnyEngine::AsyncFs(e) => AnyFile::AsyncFs(e.open(path, options).await?),
            AnyEngine::Blocking(e) => AnyFile::Blocking(e.open(path, options).await?),
            AnyEngine::External(e) => AnyFile::External(e.open(path, options).await?),
        })
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        each_engine!(self, e => e.rename(from, to).await)
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        each_engine!(self, e => e.remove_file(path).await)
    }

    async fn create_dir(&self, path: &Path) -> io::Result<()> {
        each_engine!(self, e => e.create_dir(path).await)
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        each_engine!(self, e => e.sync_dir(path).await)
    }

    async fn copy(&self, from: &Path, to: &Path) -> io::Result<u64> {
        each_engine!(self, e => e.copy(from, to).await)
    }

    fn in_flight(&self) -> usize {
        each_engine!(self, e => e.in_flight())
    }

    fn supports(&self, capability: Capability) -> bool {
        each_engine!(self, e => e.supports(capability))
    }

    fn unsupported_reason(&self, capability: Capability) -> Option<String> {
        each_engine!(self, e => e.unsupported_reason(capability))
    }

    fn own_loop_thread(&self) -> Option<u32> {
        each_engine!(self, e => e.own_loop_thread())
    }

    fn last_cancel(&self) -> Option<crate::engine::CancelAnswer> {
        each_engine!(self, e => e.last_cancel())
    }

    async fn own_loop_lag(&self, reset: bool) -> Option<crate::lag::LagReport> {
        each_engine!(self, e => e.own_loop_lag(reset).await)
    }
}

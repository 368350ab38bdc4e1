//! A thread-per-core runtime adapted to [`slowfs_harness::Engine`]: compio, whose files
//! are `!Send` (they belong to the thread whose io_uring submits their ops).
//!
//! `slowfs_harness::EngineFile` futures must be `Send`, so the engine is
//! [`slowfs_harness::proxy::ProxyEngine`]: one thread runs a compio runtime and
//! owns every open file; each operation is a job sent to it. This crate only
//! says how compio does each call ([`Compio`]); the same few lines adapt monoio,
//! tokio-uring or glommio (the `uring-runtimes` example does the first two).
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

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

use compio::buf::BufResult as CompioResult;
use compio::fs::File;
use compio::io::{AsyncReadAt, AsyncWriteAt};
use slowfs_harness::proxy::{LocalRuntime, ProxyEngine};
use slowfs_harness::{BufResult, OpenOptions};

/// compio's calls, for [`ProxyEngine`].
#[derive(Debug)]
pub struct Compio;

/// compio behind a proxy thread.
pub type CompioEngine = ProxyEngine<Compio>;

impl LocalRuntime for Compio {
    type File = File;

    const NAME: &'static str = "compio";

    fn block_on(main: impl Future<Output = ()> + 'static) -> io::Result<()> {
        compio::runtime::Runtime::new()?.block_on(main);
        Ok(())
    }

    fn spawn(task: impl Future<Output = ()> + 'static) {
        compio::runtime::spawn(task).detach();
    }

    async fn sleep(duration: Duration) {
        compio::time::sleep(duration).await
    }

    async fn open(path: PathBuf, options: OpenOptions) -> io::Result<File> {
        let mut flags = options.custom_flags;
        if options.append {
            flags |= libc::O_APPEND;
        }
        compio::fs::OpenOptions::new()
            .read(options.read)
            .write(options.write || options.append)
            .create(options.create)
            .create_new(options.create_new)
            .truncate(options.truncate)
            .custom_flags(flags)
            .mode(options.mode.unwrap_or(0o644))
            .open(&path)
            .await
    }

    /// compio reads into a Vec's spare capacity, so the buffer goes in empty
    /// and comes back at its old length.
    async fn read_at(file: &File, mut buf: Vec<u8>, offset: u64) -> BufResult {
        let len = buf.len();
        buf.clear();
        buf.shrink_to(len);
        let CompioResult(result, mut buf) = file.read_at(buf, offset).await;
        buf.resize(len, 0);
        (result.map(|n| n.min(len)), buf)
    }

    async fn write_at(mut file: &File, buf: Vec<u8>, offset: u64) -> BufResult {
        let CompioResult(result, buf) = file.write_at(buf, offset).await;
        (result, buf)
    }

    async fn sync_all(file: &File) -> io::Result<()> {
        file.sync_all().await
    }

    async fn sync_data(file: &File) -> io::Result<()> {
        file.sync_data().await
    }

    async fn set_len(file: &File, len: u64) -> io::Result<()> {
        file.set_len(len).await
    }

    async fn len(file: &File) -> io::Result<u64> {
        Ok(file.metadata().await?.len())
    }

    async fn close(file: File) -> io::Result<()> {
        file.close().await
    }

    async fn rename(from: PathBuf, to: PathBuf) -> io::Result<()> {
        compio::fs::rename(from, to).await
    }

    async fn remove_file(path: PathBuf) -> io::Result<()> {
        compio::fs::remove_file(path).await
    }

    async fn create_dir(path: PathBuf) -> io::Result<()> {
        compio::fs::create_dir(path).await
    }

    async fn sync_dir(path: PathBuf) -> io::Result<()> {
        let dir = compio::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY)
            .open(&path)
            .await?;
        dir.sync_all().await?;
        dir.close().await
    }

    // compio has no copy: the default copy_file_range on the proxy thread (it
    // blocks that thread, not the caller's loop).
}

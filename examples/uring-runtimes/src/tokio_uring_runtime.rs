//! tokio-uring: io_uring on a tokio current-thread runtime.

use std::future::Future;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::Duration;

use slowfs_harness::proxy::{LocalRuntime, ProxyEngine};
use slowfs_harness::{BufResult, OpenOptions};
use tokio_uring::fs::File;

/// tokio-uring's calls, for [`ProxyEngine`].
#[derive(Debug)]
pub struct TokioUring;

/// tokio-uring behind a proxy thread.
pub type TokioUringEngine = ProxyEngine<TokioUring>;

impl LocalRuntime for TokioUring {
    type File = File;

    const NAME: &'static str = "tokio-uring";

    fn block_on(main: impl Future<Output = ()> + 'static) -> io::Result<()> {
        tokio_uring::Runtime::new(&tokio_uring::builder())?.block_on(main);
        Ok(())
    }

    fn spawn(task: impl Future<Output = ()> + 'static) {
        tokio_uring::spawn(task);
    }

    async fn sleep(duration: Duration) {
        tokio::time::sleep(duration).await
    }

    async fn open(path: PathBuf, options: OpenOptions) -> io::Result<File> {
        slowfs_harness::apply_open_options!(tokio_uring::fs::OpenOptions::new(), &options)
            .open(&path)
            .await
    }

    async fn read_at(file: &File, buf: Vec<u8>, offset: u64) -> BufResult {
        let len = buf.len();
        let (result, buf) = file.read_at(crate::read_buffer(len), offset).await;
        crate::at_length(result, buf, len)
    }

    async fn write_at(file: &File, buf: Vec<u8>, offset: u64) -> BufResult {
        file.write_at(buf, offset).submit().await
    }

    async fn sync_all(file: &File) -> io::Result<()> {
        file.sync_all().await
    }

    async fn sync_data(file: &File) -> io::Result<()> {
        file.sync_data().await
    }

    async fn set_len(file: &File, len: u64) -> io::Result<()> {
        crate::ftruncate(file.as_raw_fd(), len)
    }

    async fn len(file: &File) -> io::Result<u64> {
        Ok(file.statx().await?.stx_size)
    }

    async fn close(file: File) -> io::Result<()> {
        file.close().await
    }

    async fn rename(from: PathBuf, to: PathBuf) -> io::Result<()> {
        tokio_uring::fs::rename(from, to).await
    }

    async fn remove_file(path: PathBuf) -> io::Result<()> {
        tokio_uring::fs::remove_file(path).await
    }

    async fn create_dir(path: PathBuf) -> io::Result<()> {
        tokio_uring::fs::create_dir(path).await
    }

    async fn sync_dir(path: PathBuf) -> io::Result<()> {
        let dir = File::open(path).await?;
        dir.sync_all().await?;
        dir.close().await
    }
}

//! monoio: ByteDance's thread-per-core runtime, on its io_uring driver.

use std::future::Future;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::Duration;

use monoio::fs::File;
use slowfs_harness::proxy::{LocalRuntime, ProxyEngine};
use slowfs_harness::{BufResult, OpenOptions};

/// monoio's calls, for [`ProxyEngine`].
#[derive(Debug)]
pub struct Monoio;

/// monoio behind a proxy thread.
pub type MonoioEngine = ProxyEngine<Monoio>;

impl LocalRuntime for Monoio {
    type File = File;

    const NAME: &'static str = "monoio";

    fn block_on(main: impl Future<Output = ()> + 'static) -> io::Result<()> {
        monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
            .enable_timer()
            .build()?
            .block_on(main);
        Ok(())
    }

    fn spawn(task: impl Future<Output = ()> + 'static) {
        // Dropping the handle detaches the task.
        drop(monoio::spawn(task));
    }

    async fn sleep(duration: Duration) {
        monoio::time::sleep(duration).await
    }

    async fn open(path: PathBuf, options: OpenOptions) -> io::Result<File> {
        slowfs_harness::apply_open_options!(monoio::fs::OpenOptions::new(), &options)
            .open(&path)
            .await
    }

    async fn read_at(file: &File, buf: Vec<u8>, offset: u64) -> BufResult {
        let len = buf.len();
        let (result, buf) = file.read_at(crate::read_buffer(len), offset).await;
        crate::at_length(result, buf, len)
    }

    async fn write_at(file: &File, buf: Vec<u8>, offset: u64) -> BufResult {
        file.write_at(buf, offset).await
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
        Ok(file.metadata().await?.len())
    }

    async fn close(file: File) -> io::Result<()> {
        file.close().await
    }

    async fn rename(from: PathBuf, to: PathBuf) -> io::Result<()> {
        monoio::fs::rename(from, to).await
    }

    async fn remove_file(path: PathBuf) -> io::Result<()> {
        monoio::fs::remove_file(path).await
    }

    async fn create_dir(path: PathBuf) -> io::Result<()> {
        monoio::fs::create_dir(path).await
    }

    async fn sync_dir(path: PathBuf) -> io::Result<()> {
        let dir = File::open(path).await?;
        dir.sync_all().await?;
        dir.close().await
    }
}

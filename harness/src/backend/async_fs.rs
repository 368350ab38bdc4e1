//! `async-fs`: an adapter over smol's `async-fs` crate, a real third-party library
//! under test (runtime-agnostic: its files run their syscalls on the `blocking`
//! crate's thread pool, whatever executor polls them; here tokio's).
//!
//! Like `tokio::fs`, its `File` has no positioned I/O, so `read_at`/`write_at` are
//! a seek plus a read or write under the file's lock, and a write may return once
//! the data is in the file's buffer: every write is followed by `flush`, which
//! reports the real result.

use std::io;
use std::path::Path;

use async_fs::unix::OpenOptionsExt;
use futures::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
use tokio::sync::Mutex;

use super::seeking::seeking_engine_file;
use crate::engine::{Engine, OpenOptions};

/// `async-fs` (smol).
#[derive(Debug, Default)]
pub struct AsyncFsEngine;

/// A file of [`AsyncFsEngine`].
#[derive(Debug)]
pub struct AsyncFsFile {
    file: Mutex<async_fs::File>,
    append: bool,
}

seeking_engine_file!(AsyncFsFile, close: |file| file.close().await);

impl Engine for AsyncFsEngine {
    type File = AsyncFsFile;

    fn name(&self) -> &str {
        "async-fs"
    }

    async fn open(&self, path: &Path, options: &OpenOptions) -> io::Result<AsyncFsFile> {
        let mut open = async_fs::OpenOptions::new();
        open.read(options.read)
            .write(options.write)
            .append(options.append)
            .create(options.create)
            .create_new(options.create_new)
            .truncate(options.truncate);
        OpenOptionsExt::custom_flags(&mut open, options.custom_flags);
        OpenOptionsExt::mode(&mut open, options.mode.unwrap_or(0o644));
        Ok(AsyncFsFile {
            file: Mutex::new(open.open(path).await?),
            append: options.append,
        })
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        async_fs::rename(from, to).await
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        async_fs::remove_file(path).await
    }

    async fn create_dir(&self, path: &Path) -> io::Result<()> {
        async_fs::create_dir(path).await
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        async_fs::File::open(path).await?.sync_all().await
    }

    async fn copy(&self, from: &Path, to: &Path) -> io::Result<u64> {
        async_fs::copy(from, to).await
    }
}

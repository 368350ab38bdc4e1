//! `tokio-fs`: an adapter over `tokio::fs`, a real third-party library under test.
//!
//! tokio's `File` has no positioned I/O, so `read_at`/`write_at` are a seek plus a
//! read or write under the file's lock (positioned ops on one file serialise, as
//! they would for any user of tokio::fs). Its documented caveat is honoured, not
//! hidden: `write` returns once the data is in tokio's buffer, before it is
//! written, so every write is followed by `flush`, which reports the real result.
//! Each call is a `spawn_blocking` hand-off on tokio's shared blocking pool.

use std::io::{self, SeekFrom};
use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
use tokio::sync::Mutex;

use crate::engine::{BufResult, Engine, EngineFile, Metadata, OpenOptions};

/// `tokio::fs`.
#[derive(Debug, Default)]
pub struct TokioFsEngine;

/// A file of [`TokioFsEngine`].
#[derive(Debug)]
pub struct TokioFile {
    file: Mutex<tokio::fs::File>,
    append: bool,
}

impl EngineFile for TokioFile {
    async fn read_at(&self, mut buf: Vec<u8>, offset: u64) -> BufResult {
        let mut file = self.file.lock().await;
        let result = match file.seek(SeekFrom::Start(offset)).await {
            Ok(_) => file.read(&mut buf).await,
            Err(e) => Err(e),
        };
        (result, buf)
    }

    async fn read(&self, mut buf: Vec<u8>) -> BufResult {
        let result = self.file.lock().await.read(&mut buf).await;
        (result, buf)
    }

    async fn write_at(&self, buf: Vec<u8>, offset: u64) -> BufResult {
        let mut file = self.file.lock().await;
        let result = async {
            if !self.append {
                file.seek(SeekFrom::Start(offset)).await?;
            }
            let n = file.write(&buf).await?;
            file.flush().await?;
            Ok(n)
        }
        .await;
        (result, buf)
    }

    async fn fsync(&self) -> io::Result<()> {
        let mut file = self.file.lock().await;
        file.flush().await?;
        file.sync_all().await
    }

    async fn fdatasync(&self) -> io::Result<()> {
        let mut file = self.file.lock().await;
        file.flush().await?;
        file.sync_data().await
    }

    async fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.lock().await.set_len(len).await
    }

    async fn metadata(&self) -> io::Result<Metadata> {
        let meta = self.file.lock().await.metadata().await?;
        Ok(Metadata { len: meta.len() })
    }

    async fn close(self) -> io::Result<()> {
        let mut file = self.file.into_inner();
        file.flush().await
    }
}

impl Engine for TokioFsEngine {
    type File = TokioFile;

    fn name(&self) -> &str {
        "tokio-fs"
    }

    async fn open(&self, path: &Path, options: &OpenOptions) -> io::Result<TokioFile> {
        let mut open = tokio::fs::OpenOptions::new();
        open.read(options.read)
            .write(options.write)
            .append(options.append)
            .create(options.create)
            .create_new(options.create_new)
            .truncate(options.truncate)
            .custom_flags(options.custom_flags)
            .mode(options.mode.unwrap_or(0o644));
        Ok(TokioFile {
            file: Mutex::new(open.open(path).await?),
            append: options.append,
        })
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        tokio::fs::rename(from, to).await
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        tokio::fs::remove_file(path).await
    }

    async fn create_dir(&self, path: &Path) -> io::Result<()> {
        tokio::fs::create_dir(path).await
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        tokio::fs::File::open(path).await?.sync_all().await
    }

    async fn copy(&self, from: &Path, to: &Path) -> io::Result<u64> {
        tokio::fs::copy(from, to).await
    }
}

//! `tokio-fs`: an adapter over `tokio::fs`, a real third-party library under test.
//!
//! tokio's `File` has no positioned I/O, so `read_at`/`write_at` are a seek plus a
//! read or write under the file's lock (positioned ops on one file serialise, as
//! they would for any user of tokio::fs). Its documented caveat is honoured, not
//! hidden: `write` returns once the data is in tokio's buffer, before it is
//! written, so every write is followed by `flush`, which reports the real result.
//! Each call is a `spawn_blocking` hand-off on tokio's shared blocking pool.

use std::io;
use std::path::Path;

use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
use tokio::sync::Mutex;

use super::seeking::seeking_engine_file;
use crate::engine::{Engine, OpenOptions};

/// `tokio::fs`.
#[derive(Debug, Default)]
pub struct TokioFsEngine;

/// A file of [`TokioFsEngine`].
#[derive(Debug)]
pub struct TokioFile {
    file: Mutex<tokio::fs::File>,
    append: bool,
}

seeking_engine_file!(TokioFile, close: |file| file.flush().await);

impl Engine for TokioFsEngine {
    type File = TokioFile;

    fn name(&self) -> &str {
        "tokio-fs"
    }

    async fn open(&self, path: &Path, options: &OpenOptions) -> io::Result<TokioFile> {
        let mut open = tokio::fs::OpenOptions::new();
        crate::apply_open_options!(open, options);
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

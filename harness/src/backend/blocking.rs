//! `blocking`: the same syscalls, made right on the runtime thread.
//!
//! The negative control: while a syscall is stalled, the whole runtime thread
//! stalls with it, so the loop-lag suite must fail it.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::{std_copy, std_open, std_sync_dir};
use crate::engine::{BufResult, Engine, EngineFile, Metadata, OpenOptions};
use crate::Capability;

/// Blocking syscalls inside `async fn`s.
#[derive(Debug, Default)]
pub struct BlockingEngine;

/// A file of [`BlockingEngine`].
#[derive(Debug)]
pub struct BlockingFile(File);

impl EngineFile for BlockingFile {
    async fn read_at(&self, mut buf: Vec<u8>, offset: u64) -> BufResult {
        let result = self.0.read_at(&mut buf, offset);
        (result, buf)
    }

    async fn write_at(&self, buf: Vec<u8>, offset: u64) -> BufResult {
        (self.0.write_at(&buf, offset), buf)
    }

    async fn read(&self, mut buf: Vec<u8>) -> BufResult {
        use std::io::Read;
        let result = (&self.0).read(&mut buf);
        (result, buf)
    }

    async fn fsync(&self) -> io::Result<()> {
        self.0.sync_all()
    }

    async fn fdatasync(&self) -> io::Result<()> {
        self.0.sync_data()
    }

    async fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }

    async fn metadata(&self) -> io::Result<Metadata> {
        Ok(Metadata {
            len: self.0.metadata()?.len(),
        })
    }

    async fn close(self) -> io::Result<()> {
        drop(self.0);
        Ok(())
    }
}

impl Engine for BlockingEngine {
    type File = BlockingFile;

    fn name(&self) -> &str {
        "blocking"
    }

    fn supports(&self, capability: Capability) -> bool {
        capability != Capability::Cancel
    }

    fn unsupported_reason(&self, capability: Capability) -> Option<String> {
        (capability == Capability::Cancel).then(|| {
            "operations run to completion on the runtime thread: a future cannot be dropped mid-flight".to_string()
        })
    }

    async fn open(&self, path: &Path, options: &OpenOptions) -> io::Result<BlockingFile> {
        std_open(path, options).map(BlockingFile)
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    async fn create_dir(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir(path)
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        std_sync_dir(path)
    }

    async fn copy(&self, from: &Path, to: &Path) -> io::Result<u64> {
        std_copy(from, to)
    }
}

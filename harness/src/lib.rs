//! The async file engine that the conformance suites drive, on each kernel
//! backend, plus what the suites need around it.
//!
//! * [`engine`]: the contract — [`Engine`] and [`EngineFile`], owned buffers,
//!   `read_at`/`write_at` with short counts, `*_all`/`*_exact` loops, batches,
//!   fsync, `atomic_write`. Implement it for a library to test that library.
//! * [`backend`]: `uring` (io_uring, cancel-safe by construction), `threadpool`
//!   (one hand-off per operation to a bounded pool), `tokio-fs` (tokio::fs, its
//!   caveats honoured) and `blocking` (the negative control for loop lag);
//!   [`AnyEngine`] picks one by name.
//! * [`lag`]: the loop-lag probe. (The slowfs mount fixture is `slowfs::fixture`.)
//!
//! ```no_run
//! use slowfs_harness::{AnyEngine, Engine, EngineFile, OpenOptions};
//! # async fn demo() -> std::io::Result<()> {
//! let engine = AnyEngine::by_name("uring")?;
//! let file = engine.open("/tmp/x".as_ref(), &OpenOptions::read_write_create()).await?;
//! let (written, _buf) = file.write_at(b"hello".to_vec(), 0).await;
//! assert!(written? <= 5); // a single write may be short
//! engine.atomic_write("/tmp/y".as_ref(), b"new".to_vec()).await?;
//! # Ok(()) }
//! ```
//!
//! # Stability (semver)
//!
//! Third-party engines build on [`Engine`], [`EngineFile`], [`OpenOptions`],
//! [`Metadata`], [`Capability`], [`CancelAnswer`] and [`lag::LagReport`]. Within
//! a major version:
//!
//! * trait methods are only added with a default body, so an engine written
//!   against an older minor version keeps compiling;
//! * enums that will grow ([`Capability`], [`CancelAnswer`]) are
//!   `#[non_exhaustive]`: match them with a `_` arm;
//! * structs that will grow ([`Metadata`], [`lag::LagReport`]) are
//!   `#[non_exhaustive]` and built with their constructors
//!   ([`Metadata::new`], [`lag::LagReport::new`]);
//! * removing or renaming anything public, or changing a signature, is a major
//!   release.
//!
//! The example below is a whole third-party engine (std::fs behind the trait),
//! compiled by `cargo test` against exactly this public surface: if it stops
//! compiling, the change broke every engine out there.
//!
//! ```no_run
//! use std::io;
//! use std::os::unix::fs::FileExt;
//! use std::path::Path;
//! use slowfs_harness::{BufResult, Capability, Engine, EngineFile, Metadata, OpenOptions};
//!
//! struct StdEngine;
//! struct StdFile(std::fs::File);
//!
//! impl EngineFile for StdFile {
//!     async fn read_at(&self, mut buf: Vec<u8>, offset: u64) -> BufResult {
//!         (self.0.read_at(&mut buf, offset), buf)
//!     }
//!     async fn read(&self, mut buf: Vec<u8>) -> BufResult {
//!         use std::io::Read;
//!         ((&self.0).read(&mut buf), buf)
//!     }
//!     async fn write_at(&self, buf: Vec<u8>, offset: u64) -> BufResult {
//!         (self.0.write_at(&buf, offset), buf)
//!     }
//!     async fn fsync(&self) -> io::Result<()> { self.0.sync_all() }
//!     async fn fdatasync(&self) -> io::Result<()> { self.0.sync_data() }
//!     async fn set_len(&self, len: u64) -> io::Result<()> { self.0.set_len(len) }
//!     async fn metadata(&self) -> io::Result<Metadata> {
//!         Ok(Metadata::new(self.0.metadata()?.len()))
//!     }
//!     async fn close(self) -> io::Result<()> { Ok(()) }
//! }
//!
//! impl Engine for StdEngine {
//!     type File = StdFile;
//!     fn name(&self) -> &str { "std" }
//!     async fn open(&self, path: &Path, o: &OpenOptions) -> io::Result<StdFile> {
//!         use std::os::unix::fs::OpenOptionsExt;
//!         std::fs::OpenOptions::new()
//!             .read(o.read).write(o.write).create(o.create).truncate(o.truncate)
//!             .append(o.append).create_new(o.create_new).custom_flags(o.custom_flags)
//!             .open(path).map(StdFile)
//!     }
//!     async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> { std::fs::rename(from, to) }
//!     async fn remove_file(&self, path: &Path) -> io::Result<()> { std::fs::remove_file(path) }
//!     async fn create_dir(&self, path: &Path) -> io::Result<()> { std::fs::create_dir(path) }
//!     async fn sync_dir(&self, path: &Path) -> io::Result<()> { std::fs::File::open(path)?.sync_all() }
//!     async fn copy(&self, from: &Path, to: &Path) -> io::Result<u64> { std::fs::copy(from, to) }
//!     // Syscalls on the caller's thread: dropping a future cannot stop one.
//!     fn supports(&self, capability: Capability) -> bool { capability != Capability::Cancel }
//!     fn unsupported_reason(&self, capability: Capability) -> Option<String> {
//!         match capability {
//!             Capability::Cancel => Some("blocking syscalls run to completion".into()),
//!             _ => None,
//!         }
//!     }
//! }
//! ```
//!
//! A new capability does not break that `match`; matching without the `_` arm
//! does not compile, by design:
//!
//! ```compile_fail,E0004
//! fn name(c: slowfs_harness::Capability) -> &'static str {
//!     match c {
//!         slowfs_harness::Capability::Open => "open",
//!         slowfs_harness::Capability::Close => "close",
//!         slowfs_harness::Capability::Read => "read",
//!         slowfs_harness::Capability::ReadAt => "read_at",
//!         slowfs_harness::Capability::WriteAt => "write_at",
//!         slowfs_harness::Capability::ReadMany => "read_many",
//!         slowfs_harness::Capability::WriteMany => "write_many",
//!         slowfs_harness::Capability::Fsync => "fsync",
//!         slowfs_harness::Capability::Fdatasync => "fdatasync",
//!         slowfs_harness::Capability::SetLen => "set_len",
//!         slowfs_harness::Capability::Metadata => "metadata",
//!         slowfs_harness::Capability::Rename => "rename",
//!         slowfs_harness::Capability::Copy => "copy",
//!         slowfs_harness::Capability::RemoveFile => "remove_file",
//!         slowfs_harness::Capability::CreateDir => "create_dir",
//!         slowfs_harness::Capability::SyncDir => "sync_dir",
//!         slowfs_harness::Capability::Cancel => "cancel",
//!         slowfs_harness::Capability::Lag => "lag",
//!         slowfs_harness::Capability::Positioned => "positioned",
//!         slowfs_harness::Capability::Append => "append",
//!     }
//! }
//! ```
#![deny(missing_docs)]

pub mod backend;
pub mod capability;
pub mod engine;
pub mod lag;
pub mod proxy;

pub use backend::{AnyEngine, AnyFile, ENGINE_NAMES};
pub use capability::{Capability, UnknownCapability};
pub use engine::{BufResult, CancelAnswer, Engine, EngineFile, Metadata, OpenOptions};

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
//! * [`lag`]: the loop-lag probe. [`mount`]: a real slowfs mount as a fixture.
//!
//! ```no_run
//! use harness::{AnyEngine, Engine, EngineFile, OpenOptions};
//! # async fn demo() -> std::io::Result<()> {
//! let engine = AnyEngine::by_name("uring")?;
//! let file = engine.open("/tmp/x".as_ref(), &OpenOptions::read_write_create()).await?;
//! let (written, _buf) = file.write_at(b"hello".to_vec(), 0).await;
//! assert!(written? <= 5); // a single write may be short
//! engine.atomic_write("/tmp/y".as_ref(), b"new".to_vec()).await?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod backend;
pub mod capability;
pub mod engine;
pub mod lag;
pub mod mount;

pub use backend::{AnyEngine, AnyFile, ENGINE_NAMES};
pub use capability::{Capability, UnknownCapability};
pub use engine::{BufResult, CancelAnswer, Engine, EngineFile, Metadata, OpenOptions};

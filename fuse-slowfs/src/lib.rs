//! slowfs: a FUSE filesystem over a backing directory that makes storage slow, flaky
//! and crash-prone on demand, deterministically.
//!
//! Every request asks a [`slowfs_faults::FaultPlan`] what to do: delay it (without
//! holding a thread), fail it with an errno, shorten a read or write (files such
//! rules can touch are opened in direct-I/O mode so the short count reaches the
//! caller), throttle it by bytes or requests, or hang it until released. Rules change
//! at runtime through a control socket ([`control`]); [`Mount`] unmounts on drop.
//!
//! ```no_run
//! use slowfs::{Mount, MountConfig};
//!
//! let mut config = MountConfig::new("/srv/data", "/mnt/slow");
//! config.spec.add_profile("nfs").unwrap();
//! let mount = Mount::start(config)?;
//! // ... run a workload against /mnt/slow ...
//! println!("{}", mount.stats().render());
//! # Ok::<(), std::io::Error>(())
//! ```
#![deny(missing_docs)]

/// Headless Chromium for the tests of the HTML reports.
#[cfg(feature = "fixture")]
pub mod browser;
pub mod client_cache;
pub mod control;
pub mod explore;
#[cfg(feature = "fixture")]
pub mod fixture;
pub(crate) mod fs;
pub mod limits;
pub mod mount;
pub mod mount_options;
mod scheduler;
pub mod signals;
pub mod stats;
pub mod sync_watch;
pub mod tree_io;
pub mod tuning;

pub use client_cache::CachePolicy;
pub use fs::DurabilityReport;
pub use mount::{holders, table as mount_table};
pub use mount::{ControlSocket, Durability, FaultTraceFile, Mount, MountConfig};
pub use stats::StatsReport;
pub use tuning::Tuning;

//! The Linux NFS client of a `--cache nfs` mount, as one layer in the request
//! path: every request of such a mount passes through the [`NfsClient`],
//! which owns all the client keeps (attribute and name caches, gathered
//! writes and their write-back, open files and silly renames, locks). Its
//! WRITEs (gathered or written back) go through the same fault and data path
//! as a direct write; on other mounts there is no client and none of this
//! state exists.
//!
//! The parts, one job each:
//! - [`arrivals`]: the order the kernel sent requests in (a RELEASE before
//!   the unlink after it);
//! - [`acls`]: which xattr requests are RPCs (GETACL, cached per file);
//! - [`consistency`]: close-to-open, revalidation, what a soft mount answers;
//! - [`write_behind`]: write(2)s gathered per file, sent as WRITEs, errors
//!   kept per file (errseq) and reported to each writer at close or fsync;
//! - [`write_back`]: the VM's dirty limits and the flusher;
//! - [`silly`]: silly renames and ESTALE;
//! - [`listings`]: READDIRPLUS, a listing with each entry's attributes;
//! - [`names`]: names cached as missing, dropped at a directory revalidation;
//! - [`locks`]: fcntl and flock locks as the server's, and blocked waits.

pub(in crate::fs) mod acls;
pub(in crate::fs) mod arrivals;
mod consistency;
pub(in crate::fs) mod gather;
pub(in crate::fs) mod listings;
pub(in crate::fs) mod locks;
mod names;
pub(in crate::fs) mod silly;
pub(in crate::fs) mod write_back;
pub(in crate::fs) mod write_behind;

use std::sync::Arc;

use crate::client_cache::{ClientView, NfsCache};

/// The NFS client of a `--cache nfs` mount and everything it keeps.
#[derive(Debug)]
pub(in crate::fs) struct NfsClient {
    /// Its settings (nfs(5)'s options).
    pub(in crate::fs) settings: NfsCache,
    /// What it has seen of each file (attribute windows, versions).
    pub(in crate::fs) view: ClientView,
    /// The VM's write-back limits on gathered data (with write-behind,
    /// that is not under `sync`).
    pub(in crate::fs) dirty_limits: Option<write_back::DirtyLimits>,
    /// fcntl and flock locks as the server's, under `lock`.
    pub(in crate::fs) locks: locks::Locks,
    /// Open files and silly renames.
    pub(in crate::fs) open_files: silly::OpenFiles,
    /// Gathered writes.
    pub(in crate::fs) write_behind: write_behind::WriteBehind,
    /// Names the kernel caches as missing.
    pub(in crate::fs) negative_names: names::NegativeNames,
    /// The flusher's wake-up (with write-behind).
    pub(in crate::fs) flusher: Arc<write_back::Flusher>,
    /// The files whose ACLs it holds.
    pub(in crate::fs) acls: acls::AclCache,
    /// Which requests have been handled, in the kernel's order.
    pub(in crate::fs) arrivals: arrivals::Arrivals,
}

impl NfsClient {
    /// A client with `settings` that has seen nothing yet.
    pub(in crate::fs) fn new(settings: NfsCache) -> NfsClient {
        NfsClient {
            settings,
            view: Default::default(),
            dirty_limits: (!settings.sync).then(|| write_back::DirtyLimits::of(&settings)),
            locks: Default::default(),
            open_files: Default::default(),
            write_behind: Default::default(),
            negative_names: Default::default(),
            flusher: Default::default(),
            acls: Default::default(),
            arrivals: Default::default(),
        }
    }

    /// The kernel forgot inode `ino`: what this client kept of it goes.
    pub(in crate::fs) fn forget(&self, ino: u64) {
        self.view.forget(ino);
        self.negative_names.forget(ino);
        self.write_behind.forget(ino);
        self.acls.forget(ino);
    }
}

impl crate::fs::Inner {
    /// The NFS client, on an NFS client mount (`--cache nfs` without a log).
    pub(in crate::fs) fn nfs(&self) -> Option<&NfsClient> {
        self.mode.nfs()
    }
}

//! Consistency: close-to-open, revalidation at a consistency point, what
//! this client learns from its own WRITEs, and what a soft mount answers
//! when it gives up.

use fuser::{Errno, FileHandle, FopenFlags};

use super::NfsClient;
use crate::fs::{sys, Inner};

impl Inner {
    /// The NFS client's settings where this mount is one (silly renames,
    /// gathered writes, caching): under `--cache nfs`, unless a log or crash
    /// model records the tree, which must see each name and write as the
    /// caller made it. Decided once, at mount ([`Mode::resolve`](crate::fs::mode::Mode::resolve)).
    pub(in crate::fs) fn nfs_client(&self) -> Option<&crate::client_cache::NfsCache> {
        self.mode.nfs().map(|nfs| &nfs.settings)
    }

    /// Under `--cache nfs`, an open of `ino` (its backing file `fd`) as the NFS
    /// client does it: the cached pages are kept only if the file is as this
    /// client last saw it, and with close-to-open the cached attributes are
    /// dropped, so the next stat or read asks again (the client's GETATTR at
    /// open). `None` on other mounts.
    pub(in crate::fs) fn close_to_open(
        &self,
        ino: u64,
        fd: &std::os::fd::OwnedFd,
    ) -> Option<FopenFlags> {
        let nfs = &self.mode.nfs()?.settings;
        if !nfs.cto || self.revalidate_fd(ino, sys::raw(fd)) {
            Some(FopenFlags::FOPEN_KEEP_CACHE)
        } else {
            Some(FopenFlags::empty())
        }
    }

    /// Under `--cache nfs`, a consistency point (an open with close-to-open, a
    /// lock taken): the cached attributes are dropped, so the next stat or
    /// read asks again, and the cached pages too if the file changed since
    /// this client last saw it. Returns whether the pages are still current.
    pub(in crate::fs) fn revalidate_fd(&self, ino: u64, fd: std::os::fd::RawFd) -> bool {
        let Some(NfsClient {
            settings: nfs,
            view,
            ..
        }) = self.mode.nfs()
        else {
            return true;
        };
        self.attributes_changed(ino);
        let current = sys::stat_fd(fd)
            .is_ok_and(|st| view.still_current(nfs, ino, crate::client_cache::Version::of(&st)));
        if !current {
            // Changed by another client: drop the cached pages (which an open
            // without FOPEN_KEEP_CACHE does too, but not on every kernel path).
            if let Some(notifier) = self.notifier.get() {
                let _ = notifier.inval_inode(fuser::INodeNo(ino), 0, 0);
            }
        }
        current
    }

    /// [`revalidate_fd`](Self::revalidate_fd) through open handle `fh`.
    pub(in crate::fs) fn revalidate(&self, ino: u64, fh: FileHandle) {
        if let Ok(h) = self.handles.get(fh) {
            self.revalidate_fd(ino, h.raw());
        }
    }

    /// Under `--cache nfs`, this client wrote to `ino` (backing fd `fd`): what
    /// the file is now is what it knows, as an NFS client learns it from the
    /// WRITE's reply (so its own writes do not drop its cache at the next open).
    pub(in crate::fs) fn wrote_here(&self, ino: u64, fd: std::os::fd::RawFd) {
        if let Some(NfsClient {
            settings: nfs,
            view,
            ..
        }) = self.mode.nfs()
        {
            if let Ok(st) = sys::stat_fd(fd) {
                view.changed_here(nfs, ino, crate::client_cache::Version::of(&st));
            }
        }
    }

    /// What a soft NFS mount answers at its major timeout (EIO, or ETIMEDOUT
    /// under `softerr`).
    pub(in crate::fs) fn soft_timeout_errno(&self) -> Errno {
        Errno::from_i32(
            self.mode
                .nfs()
                .map_or(libc::EIO, |nfs| nfs.settings.recovery.gave_up_errno()),
        )
    }
}

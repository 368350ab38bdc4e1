//! Kernel passthrough (FUSE_PASSTHROUGH, Linux 6.9+): a file that no data rule can
//! touch when it is opened has its reads and writes served by the kernel from the
//! backing file, never entering the daemon.
//!
//! The decision is made per open: a rule added later applies to files opened after
//! it (`slowfs ctl MNT rules` says how many handles are exempt). All passthrough
//! opens of one inode share one backing id, as the kernel requires.

use std::sync::Arc;

use fuser::{BackingId, INodeNo};

use super::inodes::Inode;
use super::{sys, Inner};

impl Inner {
    /// Whether an open of `path` goes into passthrough.
    pub(super) fn passthrough_for(&self, path: &str) -> bool {
        self.negotiated.passthrough() && !self.plan.touches_data_path(path)
    }

    /// The backing id for `inode`'s passthrough opens: the live one, or a new one
    /// made by `open_backing`. `None` when the kernel refuses (the open then goes
    /// through the daemon).
    pub(super) fn backing_for(
        &self,
        inode: &Inode,
        open_backing: impl FnOnce() -> std::io::Result<BackingId>,
    ) -> Option<Arc<BackingId>> {
        let mut slot = inode.backing.lock().unwrap();
        if let Some(live) = slot.upgrade() {
            return Some(live);
        }
        match open_backing() {
            Ok(id) => {
                let id = Arc::new(id);
                *slot = Arc::downgrade(&id);
                Some(id)
            }
            Err(e) => {
                tracing::debug!("passthrough refused, serving through the daemon: {e}");
                None
            }
        }
    }

    /// Handles open in passthrough right now.
    pub fn passthrough_handles(&self) -> usize {
        self.handles.passthrough()
    }

    /// A passthrough handle `fh` of inode `ino` was opened; `write` if for writing.
    /// A writer drops the attributes the kernel cached before the open (a stat
    /// then an mmap store must not show the old mtime, xfstests 080).
    pub(super) fn opened_passthrough(&self, fh: u64, ino: u64, write: bool) {
        if write {
            self.passthrough_writers.opened(fh, ino);
            self.attributes_changed(ino);
        }
    }

    /// A passthrough handle `fh` of inode `ino` came with a create. Counted as
    /// a writer like an open, but nothing to drop: the create's reply carries
    /// the attributes, which the kernel takes over any it had for the inode
    /// (a notice per create was a sixth write to /dev/fuse for nothing).
    pub(super) fn created_passthrough(&self, fh: u64, ino: u64, write: bool) {
        if write {
            self.passthrough_writers.opened(fh, ino);
        }
    }

    /// Handle `fh` was released. A passthrough writer's last stores (through a
    /// mapping, which keeps the file open until munmap) changed the times; an
    /// empty file had none (the attributes of a file created and closed stay
    /// cached, as natively).
    pub(super) fn released(&self, fh: u64) {
        let Some(ino) = self.passthrough_writers.closed(fh) else {
            return;
        };
        let empty = self
            .inodes
            .get(INodeNo(ino))
            .is_ok_and(|node| sys::stat_fd(node.raw()).is_ok_and(|st| st.st_size == 0));
        if !empty {
            self.attributes_changed(ino);
        }
    }
}

/// Handles open for writing in passthrough, by inode.
#[derive(Debug, Default)]
pub(super) struct PassthroughWriters {
    /// How many, for the fast path (none: nothing to look up).
    count: std::sync::atomic::AtomicUsize,
    /// Handle -> inode.
    handles: std::sync::Mutex<std::collections::HashMap<u64, u64>>,
}

impl PassthroughWriters {
    pub(super) fn opened(&self, fh: u64, ino: u64) {
        self.handles.lock().unwrap().insert(fh, ino);
        self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Forgets handle `fh`; its inode if it was a writer.
    pub(super) fn closed(&self, fh: u64) -> Option<u64> {
        if self.count.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            return None;
        }
        let ino = self.handles.lock().unwrap().remove(&fh)?;
        self.count.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        Some(ino)
    }

    pub(super) fn writing(&self, ino: u64) -> bool {
        self.count.load(std::sync::atomic::Ordering::Relaxed) > 0
            && self.handles.lock().unwrap().values().any(|i| *i == ino)
    }
}

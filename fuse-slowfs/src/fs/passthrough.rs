//! Kernel passthrough (FUSE_PASSTHROUGH, Linux 6.9+): a file that no data rule can
//! touch when it is opened has its reads and writes served by the kernel from the
//! backing file, never entering the daemon.
//!
//! The decision is made per open: a rule added later applies to files opened after
//! it (`slowfs ctl MNT rules` says how many handles are exempt). All passthrough
//! opens of one inode share one backing id, as the kernel requires.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use fuser::BackingId;

use super::inodes::Inode;
use super::Inner;

impl Inner {
    /// Whether an open of `path` goes into passthrough.
    pub(super) fn passthrough_for(&self, path: &str) -> bool {
        self.passthrough.load(Ordering::Relaxed) && !self.plan.touches_data_path(path)
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
}

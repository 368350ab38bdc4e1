//! Storage that lies: the faults that change what a request does rather than
//! whether or when — corrupt and stale reads, lost writes, and fsync failures
//! with Linux's write-back error semantics.
//!
//! Linux, when write-back of a file's dirty pages fails, records the error in
//! the mapping's `errseq_t`, marks the pages clean and (for most filesystems)
//! keeps them in the cache: the next fsync on each open file description
//! reports the error once, a retried fsync then succeeds, and the data never
//! reaches the disk (Documentation/filesystems/vfs.rst, "Handling errors during
//! writeback"; the 2018 PostgreSQL "fsyncgate" thread). `fsync error=EIO drop`
//! models exactly that on the crash model's log.

use fuser::{Errno, INodeNo};
use slowfs_faults::durability::Node;
use slowfs_faults::Effects;

use super::{sys, Inner};

/// Applies the read-side lies of `effects` to `data` read at `offset` of inode `ino`.
pub(crate) fn lie_about_read(
    effects: &Effects,
    inner: &Inner,
    ino: u64,
    offset: u64,
    mut data: Vec<u8>,
) -> Vec<u8> {
    if effects.stale {
        if let Some(durable) = inner.durable_content(ino) {
            let len = data.len();
            data = durable
                .get(offset as usize..)
                .map(|rest| rest[..rest.len().min(len)].to_vec())
                .unwrap_or_default();
        }
    }
    if let Some((how, seed)) = effects.corrupt {
        how.apply(&mut data, offset, seed);
    }
    data
}

impl Inner {
    /// The content a crash now would keep of inode `ino`'s file (the crash
    /// model's durable state); `None` without the crash model.
    pub(crate) fn durable_content(&self, ino: u64) -> Option<Vec<u8>> {
        let crash = self.crash.as_ref()?;
        let recorder = self.recorder.as_ref()?;
        let id = recorder.id_of(self.node(ino)?);
        let log = self.current_log(crash);
        let durable = log.durable_state(log.ops().len());
        match durable.nodes.get(&id) {
            Some(Node::File(data)) => Some(data.clone()),
            _ => Some(Vec::new()),
        }
    }

    /// An fsync that a `fsync error=EIO drop` rule fired on, through handle
    /// `fh` (backing fd `fd`) of inode `ino`: with data not yet durable, drops it
    /// from the log,
    /// flags the file's other open handles to report the error once, and
    /// returns the errno; with nothing to write back, `None` (the fsync goes on
    /// and succeeds, as on Linux).
    pub(crate) fn fail_write_back(
        &self,
        ino: u64,
        fh: u64,
        fd: std::os::fd::RawFd,
        errno: i32,
        evict: bool,
    ) -> Option<Errno> {
        let recorder = self.recorder.as_ref()?;
        let node = self.node(ino)?;
        if recorder.drop_unsynced(node) == 0 {
            return None;
        }
        let st = sys::stat_fd(fd).ok()?;
        self.handles
            .flag_write_back_error(fh, (st.st_dev, st.st_ino));
        if evict {
            self.evict_to_durable(ino);
        }
        tracing::info!(
            "fsync of inode {ino}: write-back failed (errno {errno}); unsynced data dropped"
        );
        Some(Errno::from_i32(errno))
    }

    /// `drop=evict`: the dropped pages leave the cache too, so the file reads as
    /// its durable content from now on.
    fn evict_to_durable(&self, ino: u64) {
        let Some(durable) = self.durable_content(ino) else {
            return;
        };
        let rewrite = || -> sys::SysResult<()> {
            let node = self.inodes.get(INodeNo(ino))?;
            let fd = sys::reopen(node.raw(), libc::O_WRONLY)?;
            let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
            // SAFETY: plain syscall on an fd we own.
            sys::check(unsafe { libc::ftruncate(raw, durable.len() as libc::off_t) })?;
            let mut at = 0;
            while at < durable.len() {
                at += sys::pwrite(raw, &durable[at..], at as u64)?;
            }
            Ok(())
        };
        if let Err(e) = rewrite() {
            tracing::error!(
                "drop=evict: rewriting inode {ino} to its durable content failed: {e:?}"
            );
        }
        if let Some(notifier) = self.notifier.get() {
            let _ = notifier.inval_inode(INodeNo(ino), 0, 0);
        }
    }
}

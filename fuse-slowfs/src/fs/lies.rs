//! Storage that lies: the faults that change what a request does rather than
//! whether or when — corrupt and stale reads, lost writes, and fsync failures
//! with Linux's write-back error semantics. A layer the data handlers pass
//! their backing call through ([`read()`], [`write()`], [`sync()`]).
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
use slowfs_faults::{Effects, FsyncFailure};

use super::handles::Handle;
use super::sys::{self, SysResult};
use super::Inner;

/// A read through the lies: the backing read, then what a `stale` or
/// `corrupt` rule makes of its data.
pub(super) fn read(
    effects: &Effects,
    inner: &Inner,
    ino: u64,
    offset: u64,
    backing: impl FnOnce() -> SysResult<Vec<u8>>,
) -> SysResult<Vec<u8>> {
    let mut data = backing()?;
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
    Ok(data)
}

/// A write of `len` bytes through the lies: a `lose` rule acknowledges it
/// without running `backing`, so the write never reaches the file (nor the
/// layers watching the tree change).
pub(super) fn write(
    effects: &Effects,
    len: usize,
    backing: impl FnOnce() -> SysResult<usize>,
) -> SysResult<usize> {
    if effects.lose {
        return Ok(len);
    }
    backing()
}

/// An fsync through handle `fh` of inode `ino`, through the lies: an
/// `fsync error=EIO` rule with data to write back fails it in place of
/// `backing`; afterwards, a write-back error another open file description
/// hit is reported once (errseq).
pub(super) fn sync(
    effects: &Effects,
    inner: &Inner,
    ino: u64,
    fh: u64,
    handle: &Handle,
    backing: impl FnOnce() -> SysResult<()>,
) -> SysResult<()> {
    if let Some(FsyncFailure { errno, evict }) = effects.fsync_fail {
        if let Some(errno) = inner.fail_write_back(ino, fh, handle.raw(), errno, evict) {
            return Err(errno);
        }
    }
    backing()?;
    // After this fsync's own write-back, as Linux does.
    if handle
        .unreported_write_back_error
        .swap(false, std::sync::atomic::Ordering::SeqCst)
    {
        return Err(Errno::EIO);
    }
    Ok(())
}

impl Inner {
    /// The content a crash now would keep of inode `ino`'s file (the crash
    /// model's durable state); `None` without the crash model.
    pub(crate) fn durable_content(&self, ino: u64) -> Option<Vec<u8>> {
        let crash = self.mode.crash()?;
        let recorder = self.mode.recorder()?;
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
        let recorder = self.mode.recorder()?;
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
            let raw = sys::raw(&fd);
            sys::truncate(sys::Target::Fd(raw), durable.len() as u64)?;
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

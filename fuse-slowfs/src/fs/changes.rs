//! What a mutating request did to the backing tree, in the filesystem's own
//! terms (inodes, names, the backing fd), told to the layers that watch the
//! tree change. Today one layer watches: the recorder of a recording mount,
//! which turns changes into the durability log's operations
//! (`recorder::log_op`). Handlers describe what they did and never build a log
//! entry themselves.

use std::ffi::OsStr;
use std::os::fd::RawFd;

use slowfs_faults::durability::{NodeId, NodeKind};

use super::Inner;

/// One change to the backing tree, after it succeeded.
#[derive(Debug)]
pub(super) enum Change<'a> {
    /// `data` was written at `offset` of inode `ino` through backing fd `fd`
    /// (an O_APPEND fd places it at the end, found from `fd`).
    Wrote {
        ino: u64,
        fd: RawFd,
        offset: u64,
        data: &'a [u8],
    },
    /// `len` bytes were copied in at `offset` of inode `ino` (their content is
    /// read back from `fd` only when a layer needs it).
    CopiedIn {
        ino: u64,
        fd: RawFd,
        offset: u64,
        len: usize,
    },
    /// fallocate(2) with `mode` over `offset..offset+length` of inode `ino`.
    Allocated {
        ino: u64,
        fd: RawFd,
        offset: u64,
        length: u64,
        mode: i32,
    },
    /// Inode `ino` truncated or extended to `len`.
    Resized { ino: u64, len: u64 },
    /// A new node `ino` of `kind` under `parent/name`.
    Created {
        parent: u64,
        name: &'a OsStr,
        ino: u64,
        kind: NodeKind,
    },
    /// Inode `ino` got another name, `parent/name`.
    Linked {
        parent: u64,
        name: &'a OsStr,
        ino: u64,
    },
    /// `from_name` in backing directory `from_dir` moved to `to_name` in
    /// `to_dir`; `moved` is what moved (and, for an exchange, what moved back),
    /// when it was looked up before the names changed (see
    /// [`Inner::wants_moved_nodes`]).
    Renamed {
        from_dir: NodeId,
        from_name: &'a OsStr,
        to_dir: NodeId,
        to_name: &'a OsStr,
        moved: Option<(NodeId, Option<NodeId>)>,
    },
    /// `name` left backing directory `dir` (unlink or rmdir).
    Removed { dir: NodeId, name: &'a OsStr },
    /// fsync/fdatasync of inode `ino` (`dir`: fsync of a directory;
    /// `datasync`: fdatasync, which the models tell apart).
    Synced { ino: u64, dir: bool, datasync: bool },
    /// sync(2)/syncfs(2) seen from the workload's side.
    SyncedAll,
}

impl Inner {
    /// Tells the watching layers that the backing tree changed.
    pub(super) fn changed(&self, change: Change<'_>) {
        if let Some(recorder) = self.mode.recorder() {
            if let Some(op) = self.log_op(change) {
                recorder.push(op);
            }
        }
    }

    /// Whether a layer needs to know which nodes a rename moves (looked up
    /// before the rename, at the cost of a stat or two).
    pub(super) fn wants_moved_nodes(&self) -> bool {
        self.mode.recorder().is_some()
    }
}

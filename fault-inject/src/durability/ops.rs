//! The operations a log records: what each changes (its nodes, its
//! directories, its file data), and how each reads in a report. Apart from
//! the tree and the log, since both only consume them.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::base64_bytes;
use super::tree::Node;

/// A node's identity: the inode number it had when the log was taken.
pub type NodeId = u64;

/// What a created node is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NodeKind {
    /// A regular file (or a fifo/device, kept as an empty file).
    File,
    /// A directory.
    Dir,
    /// A symlink with its target.
    Symlink(String),
}

impl NodeKind {
    /// A node of this kind with no content yet.
    pub fn fresh(&self) -> Node {
        match self {
            NodeKind::File => Node::File(Vec::new()),
            NodeKind::Dir => Node::Dir(BTreeMap::new()),
            NodeKind::Symlink(target) => Node::Symlink(target.clone()),
        }
    }
}

/// One mutating operation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LogOp {
    /// Data written at an offset.
    Write {
        /// The file.
        node: NodeId,
        /// Where.
        offset: u64,
        /// What.
        #[serde(with = "base64_bytes")]
        data: Vec<u8>,
    },
    /// Truncate or extend.
    SetLen {
        /// The file.
        node: NodeId,
        /// New length.
        len: u64,
    },
    /// The zeros a truncate to a size inside a block writes in place over
    /// the rest of that block (ext4 `ext4_block_truncate_page`, XFS
    /// `xfs_truncate_page`): a data write that changes no size, so it can
    /// reach the disk in a write-back before the journal commits the new
    /// size, leaving the old size with a run of zeros. Bytes past the file's
    /// size are untouched. Recorded by
    /// [`Log::from_recorded`](super::Log::from_recorded), after its truncate.
    TruncateZeroing {
        /// The file.
        node: NodeId,
        /// The truncate's new size.
        offset: u64,
        /// To the end of the block (or of the old size, if sooner).
        len: u64,
    },
    /// The bytes of a write that grew a file which fall inside its old size:
    /// an overwrite in place of blocks the file has (ext4 data=ordered, XFS),
    /// so they can reach the disk in a write-back before the journal commits
    /// the new size, leaving the old size with the new bytes. btrfs writes
    /// them copy-on-write with the rest, in the size's transaction. Recorded
    /// by [`Log::from_recorded`](super::Log::from_recorded), after its write;
    /// bytes past the file's size when applied are untouched.
    WriteInPlace {
        /// The file.
        node: NodeId,
        /// Where the write began.
        offset: u64,
        /// Its bytes up to the old size.
        data: Vec<u8>,
    },
    /// The old bytes a grow brings back: a truncate into a block left them
    /// on the disk past the size, in the rest of that block, and the grow
    /// ([`LogOp::GrowZeroing`], after this) zeroes them in a data write of
    /// its own that may reach the disk after the new size (btrfs
    /// `btrfs_cont_expand` -> `btrfs_truncate_block`, a delayed-allocation
    /// write; the shrink's own zeroing, [`LogOp::TruncateZeroing`], may not
    /// have reached the disk either). Recorded by
    /// [`Log::from_recorded`](super::Log::from_recorded) after a grow past
    /// such a truncate; bytes past the file's size when applied are untouched.
    GrowStale {
        /// The file.
        node: NodeId,
        /// The size the truncate left.
        offset: u64,
        /// The block's old bytes from there (up to the block's end or the
        /// grown size).
        data: Vec<u8>,
    },
    /// The zeros a grow writes over [`LogOp::GrowStale`]'s bytes, after it:
    /// kept, the grown file reads zeros there; lost with the grow kept, the
    /// old bytes.
    GrowZeroing {
        /// The file.
        node: NodeId,
        /// Where the zeros begin.
        offset: u64,
        /// How many.
        len: u64,
    },
    /// A new node under a name.
    Create {
        /// Parent directory.
        dir: NodeId,
        /// Entry name.
        name: String,
        /// The new node.
        node: NodeId,
        /// Its kind.
        kind: NodeKind,
    },
    /// Another name for an existing node.
    Link {
        /// Directory of the new name.
        dir: NodeId,
        /// The new name.
        name: String,
        /// The node.
        node: NodeId,
    },
    /// A name removed (unlink or rmdir).
    Remove {
        /// Parent directory.
        dir: NodeId,
        /// Entry name.
        name: String,
    },
    /// A rename (replacing the destination), or an exchange of two entries.
    Rename {
        /// Source directory.
        from_dir: NodeId,
        /// Source name.
        from_name: String,
        /// Destination directory.
        to_dir: NodeId,
        /// Destination name.
        to_name: String,
        /// The node that moved.
        node: NodeId,
        /// RENAME_EXCHANGE: the node that moved the other way.
        exchanged: Option<NodeId>,
    },
    /// fsync/fdatasync of a file: its data and size are durable.
    Fsync {
        /// The file.
        node: NodeId,
        /// fdatasync: a journal commits at it only when the file's size or
        /// allocation changed ([`crate::crash::models`]).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        datasync: bool,
    },
    /// fsync of a directory: its entries are durable.
    FsyncDir {
        /// The directory.
        dir: NodeId,
    },
    /// syncfs/sync: everything is durable.
    Sync,
}

impl LogOp {
    /// Every node this op names, to rename them (the recorder's fresh ids, a
    /// fingerprint's canonical ones).
    pub fn nodes_mut(&mut self) -> Vec<&mut NodeId> {
        match self {
            LogOp::Write { node, .. }
            | LogOp::SetLen { node, .. }
            | LogOp::TruncateZeroing { node, .. }
            | LogOp::WriteInPlace { node, .. }
            | LogOp::GrowStale { node, .. }
            | LogOp::GrowZeroing { node, .. }
            | LogOp::Fsync { node, .. } => vec![node],
            LogOp::Create { dir, node, .. } | LogOp::Link { dir, node, .. } => vec![dir, node],
            LogOp::Remove { dir, .. } | LogOp::FsyncDir { dir } => vec![dir],
            LogOp::Rename {
                from_dir,
                to_dir,
                node,
                exchanged,
                ..
            } => {
                let mut nodes = vec![from_dir, to_dir, node];
                nodes.extend(exchanged.as_mut());
                nodes
            }
            LogOp::Sync => Vec::new(),
        }
    }

    /// Directories whose entries this op changes.
    pub(crate) fn dirs(&self) -> Vec<NodeId> {
        match self {
            LogOp::Create { dir, .. } | LogOp::Link { dir, .. } | LogOp::Remove { dir, .. } => {
                vec![*dir]
            }
            LogOp::Rename {
                from_dir, to_dir, ..
            } => vec![*from_dir, *to_dir],
            _ => Vec::new(),
        }
    }

    /// The file whose data this op changes (none for a metadata or sync op).
    pub fn data_node(&self) -> Option<NodeId> {
        match self {
            LogOp::Write { node, .. }
            | LogOp::SetLen { node, .. }
            | LogOp::TruncateZeroing { node, .. }
            | LogOp::WriteInPlace { node, .. }
            | LogOp::GrowStale { node, .. }
            | LogOp::GrowZeroing { node, .. } => Some(*node),
            _ => None,
        }
    }

    /// Whether this op is an fsync, a directory fsync or a sync.
    pub fn is_sync(&self) -> bool {
        matches!(
            self,
            LogOp::Fsync { .. } | LogOp::FsyncDir { .. } | LogOp::Sync
        )
    }
}

impl fmt::Display for LogOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogOp::Write { node, offset, data } => {
                write!(f, "write(#{node}, {offset}, {} bytes)", data.len())
            }
            LogOp::SetLen { node, len } => write!(f, "truncate(#{node}, {len})"),
            LogOp::TruncateZeroing { node, offset, len } => {
                write!(f, "truncate_zeroing(#{node}, {offset}, {len} bytes)")
            }
            LogOp::WriteInPlace { node, offset, data } => {
                write!(f, "write_in_place(#{node}, {offset}, {} bytes)", data.len())
            }
            LogOp::GrowStale { node, offset, data } => {
                write!(f, "grow_stale(#{node}, {offset}, {} bytes)", data.len())
            }
            LogOp::GrowZeroing { node, offset, len } => {
                write!(f, "grow_zeroing(#{node}, {offset}, {len} bytes)")
            }
            LogOp::Create {
                dir,
                name,
                node,
                kind,
            } => {
                let what = match kind {
                    NodeKind::File => "create",
                    NodeKind::Dir => "mkdir",
                    NodeKind::Symlink(_) => "symlink",
                };
                write!(f, "{what}(#{dir}/{name} -> #{node})")
            }
            LogOp::Link { dir, name, node } => write!(f, "link(#{dir}/{name} -> #{node})"),
            LogOp::Remove { dir, name } => write!(f, "remove(#{dir}/{name})"),
            LogOp::Rename {
                from_dir,
                from_name,
                to_dir,
                to_name,
                node,
                exchanged,
            } => write!(
                f,
                "{}(#{from_dir}/{from_name}, #{to_dir}/{to_name}; #{node})",
                if exchanged.is_some() {
                    "exchange"
                } else {
                    "rename"
                }
            ),
            LogOp::Fsync { node, .. } => write!(f, "fsync(#{node})"),
            LogOp::FsyncDir { dir } => write!(f, "fsync_dir(#{dir})"),
            LogOp::Sync => write!(f, "sync"),
        }
    }
}

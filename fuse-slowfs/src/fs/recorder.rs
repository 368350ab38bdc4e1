//! Recording the mutating operations a mount serves, for the durability model:
//! the layer that turns the handlers' [`Change`]s into the log's operations.
//!
//! Nodes are named by backing inode number, except that every created node gets
//! a fresh id: the backing filesystem reuses the inode number of a deleted file,
//! and the model must not mistake the new file for the old one.

use std::collections::HashMap;
use std::sync::Mutex;

use slowfs_faults::durability::{LogOp, NodeId};

use super::changes::Change;
use super::{sys, Inner};

/// First id handed to a created node (far above real inode numbers).
const FRESH: NodeId = 1 << 62;

#[derive(Debug)]
struct State {
    ops: Vec<LogOp>,
    /// Backing inode number -> log id, for nodes created during the recording.
    ids: HashMap<NodeId, NodeId>,
    next: NodeId,
}

/// The log of a recording mount, in the order requests completed.
#[derive(Debug)]
pub struct Recorder {
    state: Mutex<State>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            state: Mutex::new(State {
                ops: Vec::new(),
                ids: HashMap::new(),
                next: FRESH,
            }),
        }
    }
}

impl Recorder {
    /// Appends an operation whose nodes are backing inode numbers.
    pub fn push(&self, mut op: LogOp) {
        let mut state = self.state.lock().unwrap();
        let state = &mut *state;
        if let LogOp::Create { node, .. } = &mut op {
            let fresh = state.next;
            state.next += 1;
            state.ids.insert(*node, fresh);
        }
        for node in op.nodes_mut() {
            *node = state.ids.get(node).copied().unwrap_or(*node);
        }
        state.ops.push(op);
    }

    /// Starts over (after a crash, the durable state is the new beginning).
    pub fn clear(&self) {
        let mut state = self.state.lock().unwrap();
        state.ops.clear();
        state.ids.clear();
    }

    /// The log id of a node named by its backing inode number.
    pub fn id_of(&self, backing: NodeId) -> NodeId {
        let state = self.state.lock().unwrap();
        state.ids.get(&backing).copied().unwrap_or(backing)
    }

    /// A failed write-back of a file (backing inode number): its writes and
    /// truncations since its last fsync (or sync) leave the log, so no crash
    /// state and no later fsync can make them durable. Returns how many went.
    pub fn drop_unsynced(&self, backing: NodeId) -> usize {
        let mut state = self.state.lock().unwrap();
        let id = state.ids.get(&backing).copied().unwrap_or(backing);
        let since = state
            .ops
            .iter()
            .rposition(|op| {
                matches!(op, LogOp::Fsync { node, .. } if *node == id) || *op == LogOp::Sync
            })
            .map_or(0, |i| i + 1);
        let before = state.ops.len();
        let mut at = 0;
        state.ops.retain(|op| {
            at += 1;
            at <= since
                || !matches!(op, LogOp::Write { node, .. } | LogOp::SetLen { node, .. } if *node == id)
        });
        before - state.ops.len()
    }

    /// Everything recorded so far.
    pub fn ops(&self) -> Vec<LogOp> {
        self.state.lock().unwrap().ops.clone()
    }
}

impl Inner {
    /// The log operation for a change (node ids are backing inode numbers;
    /// [`Recorder::push`] renames created ones). `None` when the change's node
    /// is already gone or its content cannot be read back.
    pub(super) fn log_op(&self, change: Change<'_>) -> Option<LogOp> {
        let name = |name: &std::ffi::OsStr| name.to_string_lossy().into_owned();
        Some(match change {
            Change::Wrote {
                ino,
                fd,
                offset,
                data,
            } => LogOp::Write {
                node: self.node(ino)?,
                offset: sys::written_at(fd, offset, data.len()),
                data: data.to_vec(),
            },
            Change::CopiedIn {
                ino,
                fd,
                offset,
                len,
            } => LogOp::Write {
                node: self.node(ino)?,
                offset,
                data: sys::pread(fd, len, offset).ok()?,
            },
            Change::Allocated {
                ino,
                fd,
                offset,
                length,
                mode,
            } => {
                let node = self.node(ino)?;
                let size = sys::stat_fd(fd).ok()?.st_size as u64;
                if mode & (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE) != 0 {
                    // The range reads as zeros (within the file's size).
                    let end = (offset + length).min(size);
                    let data = vec![0; end.saturating_sub(offset) as usize];
                    LogOp::Write { node, offset, data }
                } else {
                    LogOp::SetLen { node, len: size }
                }
            }
            Change::Resized { ino, len } => LogOp::SetLen {
                node: self.node(ino)?,
                len,
            },
            Change::Created {
                parent,
                name: entry,
                ino,
                kind,
            } => LogOp::Create {
                dir: self.node(parent)?,
                name: name(entry),
                node: self.node(ino)?,
                kind,
            },
            Change::Linked {
                parent,
                name: entry,
                ino,
            } => LogOp::Link {
                dir: self.node(parent)?,
                name: name(entry),
                node: self.node(ino)?,
            },
            Change::Renamed {
                from_dir,
                from_name,
                to_dir,
                to_name,
                moved,
            } => {
                let (node, exchanged) = moved?;
                LogOp::Rename {
                    from_dir,
                    from_name: name(from_name),
                    to_dir,
                    to_name: name(to_name),
                    node,
                    exchanged,
                }
            }
            Change::Removed { dir, name: entry } => LogOp::Remove {
                dir,
                name: name(entry),
            },
            Change::Synced { ino, dir: true, .. } => LogOp::FsyncDir {
                dir: self.node(ino)?,
            },
            Change::Synced {
                ino,
                dir: false,
                datasync,
            } => LogOp::Fsync {
                node: self.node(ino)?,
                datasync,
            },
            Change::SyncedAll => LogOp::Sync,
        })
    }
}

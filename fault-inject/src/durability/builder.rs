//! A log written a line per operation, for tests and examples: a
//! [`LogOp`] spelled out takes six lines, and a test's log is its point.

use super::{Log, LogOp, Node, NodeId, NodeKind, Tree};

/// Builds a [`Log`] over a tree rooted at [`LogBuilder::ROOT`]: node ids are the
/// caller's, names are in the root unless a method's `_in` form names the
/// directory.
///
/// ```
/// use slowfs_faults::durability::LogBuilder;
///
/// // config holds "old"; the new version is written to tmp, then renamed over it.
/// let log = LogBuilder::new()
///     .initial_file("config", 2, b"old")
///     .create("tmp", 3)
///     .write(3, 0, b"new")
///     .fsync(3)
///     .rename("tmp", "config", 3)
///     .build();
/// assert_eq!(log.ops().len(), 4);
/// assert_eq!(log.pending(4), [0, 3]);
/// ```
#[derive(Debug, Clone)]
pub struct LogBuilder {
    initial: Tree,
    ops: Vec<LogOp>,
}

impl Default for LogBuilder {
    fn default() -> Self {
        LogBuilder::new()
    }
}

impl LogBuilder {
    /// The root directory's node.
    pub const ROOT: NodeId = 1;

    /// An empty root directory and no operations.
    pub fn new() -> LogBuilder {
        LogBuilder {
            initial: Tree::empty(Self::ROOT),
            ops: Vec::new(),
        }
    }

    /// The log so far.
    pub fn build(&self) -> Log {
        let mut log = Log::new(self.initial.clone());
        for op in &self.ops {
            log.push(op.clone());
        }
        log
    }

    /// The initial tree has file `name` (node `node`) holding `data`.
    pub fn initial_file(
        &mut self,
        name: &str,
        node: NodeId,
        data: impl Into<Vec<u8>>,
    ) -> &mut Self {
        self.initial
            .apply(&create(Self::ROOT, name, node, NodeKind::File));
        self.initial.nodes.insert(node, Node::File(data.into()));
        self
    }

    /// The initial tree has directory `name` (node `node`) in `dir`.
    pub fn initial_dir_in(&mut self, dir: NodeId, name: &str, node: NodeId) -> &mut Self {
        self.initial.apply(&create(dir, name, node, NodeKind::Dir));
        self
    }

    /// Any operation.
    pub fn op(&mut self, op: LogOp) -> &mut Self {
        self.ops.push(op);
        self
    }

    /// Creates file `name`.
    pub fn create(&mut self, name: &str, node: NodeId) -> &mut Self {
        self.create_in(Self::ROOT, name, node)
    }

    /// Creates file `name` in `dir`.
    pub fn create_in(&mut self, dir: NodeId, name: &str, node: NodeId) -> &mut Self {
        self.op(create(dir, name, node, NodeKind::File))
    }

    /// Makes directory `name`.
    pub fn mkdir(&mut self, name: &str, node: NodeId) -> &mut Self {
        self.op(create(Self::ROOT, name, node, NodeKind::Dir))
    }

    /// Writes `data` at `offset` of file `node`.
    pub fn write(&mut self, node: NodeId, offset: u64, data: impl Into<Vec<u8>>) -> &mut Self {
        self.op(LogOp::Write {
            node,
            offset,
            data: data.into(),
        })
    }

    /// Truncates or extends file `node` to `len`.
    pub fn set_len(&mut self, node: NodeId, len: u64) -> &mut Self {
        self.op(LogOp::SetLen { node, len })
    }

    /// Removes `name`.
    pub fn remove(&mut self, name: &str) -> &mut Self {
        self.op(LogOp::Remove {
            dir: Self::ROOT,
            name: name.into(),
        })
    }

    /// Renames `from` to `to` (node `node`), replacing what `to` was.
    pub fn rename(&mut self, from: &str, to: &str, node: NodeId) -> &mut Self {
        self.rename_in((Self::ROOT, from), (Self::ROOT, to), node)
    }

    /// Renames `from` (a directory and a name) to `to`.
    pub fn rename_in(
        &mut self,
        from: (NodeId, &str),
        to: (NodeId, &str),
        node: NodeId,
    ) -> &mut Self {
        self.op(LogOp::Rename {
            from_dir: from.0,
            from_name: from.1.into(),
            to_dir: to.0,
            to_name: to.1.into(),
            node,
            exchanged: None,
        })
    }

    /// fsync of file `node`.
    pub fn fsync(&mut self, node: NodeId) -> &mut Self {
        self.op(LogOp::Fsync {
            node,
            datasync: false,
        })
    }

    /// fdatasync of file `node`.
    pub fn fdatasync(&mut self, node: NodeId) -> &mut Self {
        self.op(LogOp::Fsync {
            node,
            datasync: true,
        })
    }

    /// fsync of directory `dir`.
    pub fn fsync_dir(&mut self, dir: NodeId) -> &mut Self {
        self.op(LogOp::FsyncDir { dir })
    }

    /// sync: everything durable.
    pub fn sync(&mut self) -> &mut Self {
        self.op(LogOp::Sync)
    }
}

fn create(dir: NodeId, name: &str, node: NodeId, kind: NodeKind) -> LogOp {
    LogOp::Create {
        dir,
        name: name.into(),
        node,
        kind,
    }
}

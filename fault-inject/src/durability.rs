//! The durability model: what a crash keeps.
//!
//! A [`Log`] holds the mutating operations a filesystem saw, on node ids (inode
//! numbers) and names. Strict POSIX: file data and size become durable when the
//! file is fsynced (any handle); a directory's entries become durable when the
//! directory is fsynced (a rename needs both parents); a full sync makes everything
//! durable. For a crash after operation `k`, [`Log::durable_state`] is the state
//! that surely survives, and [`Log::pending`] the operations that may or may not
//! have: any subset of them, applied in log order on top of the durable state,
//! is an allowed state ([`Log::state_with`]); with torn writes, a kept write may
//! survive only in part, a prefix of whole sectors ([`Keep::Torn`]).
//!
//! ```
//! use slowfs_faults::durability::{Log, LogOp, NodeKind, Tree};
//!
//! let mut log = Log::new(Tree::empty(1));
//! log.push(LogOp::Create { dir: 1, name: "f".into(), node: 2, kind: NodeKind::File });
//! log.push(LogOp::Write { node: 2, offset: 0, data: b"data".to_vec() });
//! log.push(LogOp::Fsync { node: 2, datasync: false });
//! // The file's data is durable, its directory entry is not: it may vanish.
//! assert!(log.durable_state(3).lookup("f").is_none());
//! log.push(LogOp::FsyncDir { dir: 1 });
//! assert_eq!(log.durable_state(4).lookup("f").unwrap().data().unwrap(), b"data");
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::hash::{Hash, Hasher};

use serde::{Deserialize, Serialize};

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
    /// size are untouched. Recorded by [`Log::push_truncate`], after its
    /// truncate.
    TruncateZeroing {
        /// The file.
        node: NodeId,
        /// The truncate's new size.
        offset: u64,
        /// To the end of the block (or of the old size, if sooner).
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

    /// The file whose data this op changes.
    pub(crate) fn data_node(&self) -> Option<NodeId> {
        match self {
            LogOp::Write { node, .. }
            | LogOp::SetLen { node, .. }
            | LogOp::TruncateZeroing { node, .. } => Some(*node),
            _ => None,
        }
    }

    fn is_sync(&self) -> bool {
        matches!(
            self,
            LogOp::Fsync { .. } | LogOp::FsyncDir { .. } | LogOp::Sync
        )
    }
}

/// A node of a [`Tree`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Node {
    /// A file's bytes.
    File(#[serde(with = "base64_bytes")] Vec<u8>),
    /// A directory's entries.
    Dir(BTreeMap<String, NodeId>),
    /// A symlink's target.
    Symlink(String),
}

impl Node {
    /// A file's bytes.
    pub fn data(&self) -> Option<&[u8]> {
        match self {
            Node::File(data) => Some(data),
            _ => None,
        }
    }
}

/// A directory tree: nodes by id, and the root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tree {
    /// Every node, reachable or not.
    pub nodes: HashMap<NodeId, Node>,
    /// The root directory.
    pub root: NodeId,
}

impl Tree {
    /// An empty root directory.
    pub fn empty(root: NodeId) -> Tree {
        Tree {
            nodes: HashMap::from([(root, Node::Dir(BTreeMap::new()))]),
            root,
        }
    }

    /// The node at a `/`-separated path from the root.
    pub fn lookup(&self, path: &str) -> Option<&Node> {
        self.nodes.get(&self.lookup_id(path)?)
    }

    /// The id of the node at a `/`-separated path from the root.
    pub fn lookup_id(&self, path: &str) -> Option<NodeId> {
        let mut id = self.root;
        for part in path.split('/').filter(|p| !p.is_empty()) {
            let Some(Node::Dir(entries)) = self.nodes.get(&id) else {
                return None;
            };
            id = *entries.get(part)?;
        }
        Some(id)
    }

    fn dir_mut(&mut self, dir: NodeId) -> Option<&mut BTreeMap<String, NodeId>> {
        match self.nodes.get_mut(&dir) {
            Some(Node::Dir(entries)) => Some(entries),
            _ => None,
        }
    }

    fn file_mut(&mut self, node: NodeId) -> &mut Vec<u8> {
        let entry = self
            .nodes
            .entry(node)
            .or_insert_with(|| Node::File(Vec::new()));
        if !matches!(entry, Node::File(_)) {
            *entry = Node::File(Vec::new());
        }
        match entry {
            Node::File(data) => data,
            _ => unreachable!("just made a file"),
        }
    }

    /// Applies one operation to the tree's shape only: names, directories,
    /// symlinks and which nodes are files, but no file content (a write makes
    /// its node a file and stores nothing). For passes over a log that look at
    /// names, not data: a block device's image written near its end would
    /// otherwise be held whole in memory (a 1 GiB image, 1 GiB).
    pub fn apply_shape(&mut self, op: &LogOp) {
        match op {
            LogOp::Write { node, .. }
            | LogOp::SetLen { node, .. }
            | LogOp::TruncateZeroing { node, .. } => {
                self.file_mut(*node);
            }
            op => self.apply(op),
        }
    }

    /// Applies one operation; operations on missing names or nodes do nothing
    /// (a kept op may refer to something a dropped op would have made).
    pub fn apply(&mut self, op: &LogOp) {
        match op {
            LogOp::Write { node, offset, data } => {
                let file = self.file_mut(*node);
                let end = *offset as usize + data.len();
                if file.len() < end {
                    file.resize(end, 0);
                }
                file[*offset as usize..end].copy_from_slice(data);
            }
            LogOp::SetLen { node, len } => self.file_mut(*node).resize(*len as usize, 0),
            LogOp::TruncateZeroing { node, offset, len } => {
                let file = self.file_mut(*node);
                let end = ((offset + len) as usize).min(file.len());
                if let Some(zeroed) = file.get_mut(*offset as usize..end) {
                    zeroed.fill(0);
                }
            }
            LogOp::Create {
                dir,
                name,
                node,
                kind,
            } => {
                let fresh = kind.fresh();
                if self.dir_mut(*dir).is_some() {
                    // A node that already has content here got it from a later fsync
                    // (made durable before this entry): creating it must not empty it.
                    self.nodes.entry(*node).or_insert(fresh);
                    self.dir_mut(*dir)
                        .expect("checked")
                        .insert(name.clone(), *node);
                }
            }
            LogOp::Link { dir, name, node } => {
                if self.nodes.contains_key(node) {
                    if let Some(entries) = self.dir_mut(*dir) {
                        entries.insert(name.clone(), *node);
                    }
                }
            }
            LogOp::Remove { dir, name } => {
                if let Some(entries) = self.dir_mut(*dir) {
                    entries.remove(name);
                }
            }
            LogOp::Rename { .. } => self.rename_sides(op, true, true),
            LogOp::Fsync { .. } | LogOp::FsyncDir { .. } | LogOp::Sync => {}
        }
    }

    /// Applies the source side (`from`: the old name goes, or gets the exchanged
    /// node) and/or the destination side (`to`: the new name points at the node) of
    /// a rename. A crash may keep one side and not the other: each parent's entries
    /// become durable with that parent's fsync.
    fn rename_sides(&mut self, op: &LogOp, from: bool, to: bool) {
        let LogOp::Rename {
            from_dir,
            from_name,
            to_dir,
            to_name,
            node,
            exchanged,
        } = op
        else {
            return;
        };
        if from_dir == to_dir && from_name == to_name {
            return;
        }
        if to {
            if let Some(entries) = self.dir_mut(*to_dir) {
                entries.insert(to_name.clone(), *node);
            }
        }
        if from {
            if let Some(entries) = self.dir_mut(*from_dir) {
                match exchanged {
                    Some(other) => {
                        entries.insert(from_name.clone(), *other);
                    }
                    None => {
                        if entries.get(from_name) == Some(node) {
                            entries.remove(from_name);
                        }
                    }
                }
            }
        }
    }

    /// As the durable tree, takes in what `op` (just applied to `volatile`, the
    /// no-crash tree) makes durable: a file's content at its fsync, a
    /// directory's entries at its fsync, everything at a sync. A created node
    /// exists from its creation, with no durable content of its own yet.
    pub(crate) fn absorb(&mut self, volatile: &Tree, op: &LogOp) {
        if let LogOp::Create { node, kind, .. } = op {
            // Reachable only through durable (or kept) entries.
            self.nodes.entry(*node).or_insert_with(|| kind.fresh());
        }
        match op {
            LogOp::Fsync { node, .. } => {
                if let Some(n @ Node::File(_)) = volatile.nodes.get(node) {
                    self.nodes.insert(*node, n.clone());
                }
            }
            LogOp::FsyncDir { dir } => {
                if let Some(Node::Dir(entries)) = volatile.nodes.get(dir).cloned() {
                    for child in entries.values() {
                        // A child new to the durable tree exists with no durable
                        // content of its own yet: an empty file or directory, or
                        // the symlink.
                        if !self.nodes.contains_key(child) {
                            let fresh = match volatile.nodes.get(child) {
                                Some(Node::Dir(_)) => Node::Dir(BTreeMap::new()),
                                Some(Node::Symlink(t)) => Node::Symlink(t.clone()),
                                _ => Node::File(Vec::new()),
                            };
                            self.nodes.insert(*child, fresh);
                        }
                    }
                    self.nodes.insert(*dir, Node::Dir(entries));
                }
            }
            LogOp::Sync => *self = volatile.clone(),
            _ => {}
        }
    }

    /// The tree without the entries whose path matches `ignore` (files an
    /// application discards on open, such as SQLite's `-shm`).
    pub fn without(mut self, ignore: &globset::GlobSet) -> Tree {
        if ignore.is_empty() {
            return self;
        }
        let doomed: Vec<String> = self
            .walk()
            .into_iter()
            .map(|(path, _)| path)
            .filter(|path| ignore.is_match(path))
            .collect();
        for path in doomed {
            let (dir, name) = match path.rsplit_once('/') {
                Some((dir, name)) => (self.lookup_id(dir), name),
                None => (Some(self.root), path.as_str()),
            };
            if let Some(Node::Dir(entries)) = dir.and_then(|d| self.nodes.get_mut(&d)) {
                entries.remove(name);
            }
        }
        self
    }

    /// The paths whose node differs between this tree and `other`, or that
    /// only one of them has: what a crash from `other` to this tree changes.
    pub fn differences(&self, other: &Tree) -> Vec<String> {
        let (a, b) = (self.walk(), other.walk());
        let mut changed: Vec<String> = b
            .iter()
            .filter(|(path, node)| !a.iter().any(|(p, n)| p == path && n == node))
            .map(|(path, _)| path.clone())
            .chain(
                a.iter()
                    .filter(|(p, _)| !b.iter().any(|(q, _)| q == p))
                    .map(|(p, _)| p.clone()),
            )
            .collect();
        changed.sort();
        changed.dedup();
        changed
    }

    /// Every reachable path with its node, depth first, sorted.
    pub fn walk(&self) -> Vec<(String, &Node)> {
        let mut out = Vec::new();
        let mut stack = vec![(String::new(), self.root, 0usize)];
        let mut seen = BTreeSet::new();
        while let Some((path, id, depth)) = stack.pop() {
            let Some(node) = self.nodes.get(&id) else {
                continue;
            };
            if !path.is_empty() {
                out.push((path.clone(), node));
            }
            if let Node::Dir(entries) = node {
                if depth > 64 || !seen.insert(id) {
                    continue; // a directory cycle from an odd subset: stop
                }
                for (name, child) in entries.iter().rev() {
                    let child_path = if path.is_empty() {
                        name.clone()
                    } else {
                        format!("{path}/{name}")
                    };
                    stack.push((child_path, *child, depth + 1));
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// A fingerprint of what is reachable, to check each distinct state once.
    pub fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for (path, node) in self.walk() {
            path.hash(&mut hasher);
            match node {
                Node::File(data) => (0u8, data).hash(&mut hasher),
                Node::Dir(_) => 1u8.hash(&mut hasher),
                Node::Symlink(t) => (2u8, t).hash(&mut hasher),
            }
        }
        hasher.finish()
    }
}

/// How much of a pending operation a state keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Keep {
    /// All of it.
    Whole,
    /// A write cut after this many bytes (a whole number of sectors from its
    /// offset's sector boundary).
    Torn(u64),
    /// A write whose size change persisted without its data: the file
    /// reaches the write's end, the bytes it wrote past the old end read as
    /// zeros (an allocation or unwritten extent committed before the data
    /// reached the disk, as ext4 leaves one by default), the rest unchanged.
    SizeOnly,
}

/// A log of operations over an initial, durable tree.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Log {
    initial: Tree,
    ops: Vec<LogOp>,
}

impl Log {
    /// An empty log over `initial`.
    pub fn new(initial: Tree) -> Log {
        Log {
            initial,
            ops: Vec::new(),
        }
    }

    /// Appends an operation.
    pub fn push(&mut self, op: LogOp) {
        self.ops.push(op);
    }

    /// The log of `ops` as recorded over `initial`, as a filesystem with
    /// `block`-byte blocks performs them: each truncate through
    /// [`Log::push_truncate`], the rest as they are.
    pub fn from_recorded(initial: Tree, ops: impl IntoIterator<Item = LogOp>, block: u64) -> Log {
        let mut log = Log::new(initial);
        for op in ops {
            match op {
                LogOp::SetLen { node, len } => log.push_truncate(node, len, block),
                op => log.push(op),
            }
        }
        log
    }

    /// Records a truncate of `node` to `len` as a filesystem with
    /// `block`-byte blocks performs it: a shrink to a size inside a block
    /// also zeroes the rest of that block in place
    /// ([`LogOp::TruncateZeroing`], after the truncate).
    pub fn push_truncate(&mut self, node: NodeId, len: u64, block: u64) {
        let old = self.size_of(node, self.ops.len());
        self.push(LogOp::SetLen { node, len });
        let block_end = len.div_ceil(block) * block;
        let end = block_end.min(old);
        if end > len {
            self.push(LogOp::TruncateZeroing {
                node,
                offset: len,
                len: end - len,
            });
        }
    }

    /// The size of file `node` after the first `k` operations.
    fn size_of(&self, node: NodeId, k: usize) -> u64 {
        let mut size = match self.initial.nodes.get(&node) {
            Some(Node::File(bytes)) => bytes.len() as u64,
            _ => 0,
        };
        for op in &self.ops[..k] {
            match op {
                LogOp::Write {
                    node: n,
                    offset,
                    data,
                } if *n == node => size = size.max(offset + data.len() as u64),
                LogOp::SetLen { node: n, len } if *n == node => size = *len,
                _ => {}
            }
        }
        size
    }

    /// The operations.
    pub fn ops(&self) -> &[LogOp] {
        &self.ops
    }

    /// A fingerprint of the initial tree and the operations that does not
    /// depend on the backing inode numbers: two recordings of a program that
    /// did the same things on the same files have the same one, wherever
    /// they ran (the shards of an exploration check that they explored one
    /// program). Nodes are numbered in the order a sorted walk of the
    /// initial tree meets them; ids the recorder handed out stay.
    pub fn fingerprint(&self) -> u64 {
        let mut canonical = HashMap::new();
        let mut walk = vec![self.initial.root];
        let mut nodes = Vec::new();
        while let Some(id) = walk.pop() {
            if canonical.contains_key(&id) {
                continue;
            }
            canonical.insert(id, canonical.len() as NodeId);
            let node = self.initial.nodes.get(&id);
            if let Some(Node::Dir(entries)) = node {
                walk.extend(entries.values().rev());
            }
            nodes.push(node.cloned());
        }
        let rename = |id: &NodeId| canonical.get(id).copied().unwrap_or(*id);
        let mut hasher = Fnv1a::default();
        for node in nodes {
            match node {
                Some(Node::Dir(entries)) => {
                    let entries: BTreeMap<&String, NodeId> = entries
                        .iter()
                        .map(|(name, id)| (name, rename(id)))
                        .collect();
                    entries.hash(&mut hasher);
                }
                other => other.hash(&mut hasher),
            }
        }
        for op in &self.ops {
            let mut op = op.clone();
            for id in op.nodes_mut() {
                *id = rename(id);
            }
            op.hash(&mut hasher);
        }
        hasher.finish()
    }

    /// Whether write `i` reaches past its file's size as the operations
    /// before it leave it: the writes whose size can persist without their
    /// data (delayed allocation, unwritten extents).
    pub fn extends_size(&self, i: usize) -> bool {
        let LogOp::Write { node, offset, data } = &self.ops[i] else {
            return false;
        };
        offset + data.len() as u64 > self.size_of(*node, i)
    }

    /// The initial tree.
    pub fn initial(&self) -> &Tree {
        &self.initial
    }

    /// The state with every one of the first `k` operations applied (no crash).
    pub fn volatile_state(&self, k: usize) -> Tree {
        let mut tree = self.initial.clone();
        for op in &self.ops[..k] {
            tree.apply(op);
        }
        tree
    }

    /// The state that surely survives a crash after the first `k` operations.
    pub fn durable_state(&self, k: usize) -> Tree {
        let mut volatile = self.initial.clone();
        let mut durable = self.initial.clone();
        for op in &self.ops[..k] {
            volatile.apply(op);
            durable.absorb(&volatile, op);
        }
        durable
    }

    /// Indices (among the first `k`) of the operations not yet made durable by a
    /// later sync within the first `k`: those a crash after `k` may or may not keep.
    pub fn pending(&self, k: usize) -> Vec<usize> {
        let ops = &self.ops[..k];
        (0..k)
            .filter(|&i| {
                let op = &ops[i];
                if op.is_sync() {
                    return false;
                }
                let later = &ops[i + 1..];
                if later.iter().any(|o| matches!(o, LogOp::Sync)) {
                    return false;
                }
                if let Some(node) = op.data_node() {
                    return !later
                        .iter()
                        .any(|o| matches!(o, LogOp::Fsync { node: n, .. } if *n == node));
                }
                let dirs = op.dirs();
                !dirs.iter().all(|d| {
                    later
                        .iter()
                        .any(|o| matches!(o, LogOp::FsyncDir { dir } if dir == d))
                })
            })
            .collect()
    }

    /// The state after a crash at `k` that keeps, of the pending operations, those
    /// in `kept` (by index, with how much of each): the durable state with them
    /// applied in log order.
    pub fn state_with(&self, k: usize, kept: &BTreeMap<usize, Keep>) -> Tree {
        self.state_on(self.durable_state(k), k, kept)
    }

    /// [`Log::state_with`] from the durable state of point `k`, already known.
    pub fn state_on(&self, mut tree: Tree, k: usize, kept: &BTreeMap<usize, Keep>) -> Tree {
        for (&i, keep) in kept {
            match (keep, &self.ops[i]) {
                (Keep::Torn(bytes), LogOp::Write { node, offset, data }) => {
                    tree.apply(&LogOp::Write {
                        node: *node,
                        offset: *offset,
                        data: data[..(*bytes as usize).min(data.len())].to_vec(),
                    })
                }
                (Keep::SizeOnly, LogOp::Write { node, offset, data }) => {
                    let end = offset + data.len() as u64;
                    let len = tree
                        .nodes
                        .get(node)
                        .and_then(Node::data)
                        .map_or(0, |d| d.len() as u64);
                    if end > len {
                        tree.apply(&LogOp::SetLen {
                            node: *node,
                            len: end,
                        });
                    }
                }
                (
                    _,
                    op @ LogOp::Rename {
                        from_dir, to_dir, ..
                    },
                ) => {
                    // Only the side whose parent was not fsynced since is pending;
                    // the other is already in the durable state, later changes and all.
                    let later = &self.ops[i + 1..k];
                    let synced = |d: &NodeId| {
                        later.iter().any(|o| {
                            matches!(o, LogOp::Sync)
                                || matches!(o, LogOp::FsyncDir { dir } if dir == d)
                        })
                    };
                    tree.rename_sides(op, !synced(from_dir), !synced(to_dir));
                }
                (_, op) => tree.apply(op),
            }
        }
        tree
    }

    /// The ways a pending write can tear: cut after each sector boundary inside it
    /// (sectors aligned to file offsets).
    pub fn tears(&self, i: usize, sector: u64) -> Vec<u64> {
        let LogOp::Write { offset, data, .. } = &self.ops[i] else {
            return Vec::new();
        };
        let end = offset + data.len() as u64;
        let first = (offset / sector + 1) * sector;
        (0..)
            .map(|s| first + s * sector)
            .take_while(|b| *b < end)
            .map(|b| b - offset)
            .collect()
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

/// Which pending operations a crash state keeps, and how much of each.
pub type Kept = BTreeMap<usize, Keep>;

impl Log {
    /// Checks that `kept` names only operations pending at `k`, and torn sizes
    /// that cut inside their write: the error says what is wrong.
    pub fn validate(&self, k: usize, kept: &Kept) -> Result<(), String> {
        if k > self.ops.len() {
            return Err(format!(
                "crash point {k} is past the log's {} operations (0..={})",
                self.ops.len(),
                self.ops.len()
            ));
        }
        let pending = self.pending(k);
        for (i, keep) in kept {
            if !pending.contains(i) {
                return Err(format!(
                    "operation {i} is not pending at crash point {k} (pending there: {})",
                    if pending.is_empty() {
                        "none".to_string()
                    } else {
                        pending
                            .iter()
                            .map(|p| p.to_string())
                            .collect::<Vec<_>>()
                            .join(",")
                    }
                ));
            }
            if *keep == Keep::SizeOnly && !matches!(self.ops[*i], LogOp::Write { .. }) {
                return Err(format!(
                    "operation {i} ({}) is not a write: only a write can keep its size without \
                     its data",
                    self.ops[*i]
                ));
            }
            if let Keep::Torn(bytes) = keep {
                let len = match &self.ops[*i] {
                    LogOp::Write { data, .. } => data.len() as u64,
                    other => {
                        return Err(format!(
                            "operation {i} ({other}) is not a write and cannot tear"
                        ))
                    }
                };
                if *bytes == 0 || *bytes >= len {
                    return Err(format!(
                        "torn size {bytes} for operation {i} must be between 1 and {} (its length minus one)",
                        len.saturating_sub(1)
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Bytes as base64 in saved logs (a JSON array of numbers would be 4x larger).
mod base64_bytes {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(deserializer)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

/// FNV-1a: a hash that is the same in every process (std's `DefaultHasher`
/// promises nothing across releases), for [`Log::fingerprint`].
#[derive(Debug)]
struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv1a {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log of "write `data` to the file `f` that was there", over a tree
    /// whose nodes have the given (backing inode) numbers.
    fn log(root: NodeId, file: NodeId, data: &[u8]) -> Log {
        let mut tree = Tree::empty(root);
        tree.nodes
            .insert(root, Node::Dir(BTreeMap::from([("f".into(), file)])));
        tree.nodes.insert(file, Node::File(b"old".to_vec()));
        let mut log = Log::new(tree);
        log.push(LogOp::Write {
            node: file,
            offset: 0,
            data: data.to_vec(),
        });
        log.push(LogOp::Fsync {
            node: file,
            datasync: false,
        });
        log
    }

    #[test]
    fn fingerprints_ignore_inode_numbers_but_not_what_was_done() {
        let here = log(2, 131_077, b"new");
        assert_eq!(here.fingerprint(), log(9, 42, b"new").fingerprint());
        assert_ne!(here.fingerprint(), log(2, 131_077, b"NEW").fingerprint());
        let mut more = log(2, 131_077, b"new");
        more.push(LogOp::Sync);
        assert_ne!(here.fingerprint(), more.fingerprint());
    }
}

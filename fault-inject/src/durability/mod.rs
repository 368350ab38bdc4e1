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
//! survive only in part: a prefix of whole sectors ([`Keep::Torn`]) or the
//! rest after one ([`Keep::TornTail`]).

//!
//! The operations ([`LogOp`], `ops.rs`) and the trees they change ([`Tree`],
//! `tree.rs`) have files of their own; this one is the log and what a crash
//! keeps of it.
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

mod base64_bytes;
mod builder;
mod ops;
mod tree;

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};

use serde::{Deserialize, Serialize};

pub use builder::LogBuilder;
pub use ops::{LogOp, NodeId, NodeKind};
pub use tree::{Node, Tree};

/// How much of a pending operation a state keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Keep {
    /// All of it.
    Whole,
    /// A write cut after this many bytes (a whole number of sectors from its
    /// offset's sector boundary).
    Torn(u64),
    /// A write of which only the bytes from this many on persisted (a whole
    /// number of sectors from its offset's sector boundary): the kernel
    /// writes a page's blocks, and a write's pages, in requests of their own
    /// (ext4 with 1 KiB blocks wrote a 4 KiB page as 3 KiB + 1 KiB), and
    /// nothing orders them before a flush.
    TornTail(u64),
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
    /// `block`-byte blocks performs them: a truncate that shrinks a file to
    /// a size inside a block also zeroes the rest of that block in place
    /// ([`LogOp::TruncateZeroing`], after the truncate), and a write that
    /// grows a file overwrites in place what lies below the old size
    /// ([`LogOp::WriteInPlace`], after the write), and a grow past such a
    /// truncate may show the block's old bytes until its own zeroing
    /// reaches the disk ([`LogOp::GrowStale`], [`LogOp::GrowZeroing`], after
    /// the grow); the rest as they are.
    pub fn from_recorded(initial: Tree, ops: impl IntoIterator<Item = LogOp>, block: u64) -> Log {
        let mut log = Log::new(initial);
        // Each file's size so far, as `size_of` would find it.
        let mut sizes: HashMap<NodeId, u64> = HashMap::new();
        // A truncate into a block: where it left the size, and the old bytes
        // from there to the block's end (until the file grows or is written there).
        let mut tails: HashMap<NodeId, (u64, Vec<u8>)> = HashMap::new();
        for op in ops {
            let size = |node: &NodeId, sizes: &mut HashMap<NodeId, u64>| {
                *sizes.entry(*node).or_insert_with(|| log.size_of(*node, 0))
            };
            let mut after = Vec::new();
            match &op {
                LogOp::Write { node, offset, data } => {
                    let end = offset + data.len() as u64;
                    let old = size(node, &mut sizes);
                    sizes.insert(*node, old.max(end));
                    if *offset < old && end > old {
                        after.push(LogOp::WriteInPlace {
                            node: *node,
                            offset: *offset,
                            data: data[..(old - offset) as usize].to_vec(),
                        });
                    }
                    // A write wholly below the tail leaves it on the disk;
                    // one that starts past it grows over it (the gap below
                    // the write shows it); one into it replaces it.
                    if let Some((at, stale)) = tails.remove(node) {
                        if end <= at {
                            tails.insert(*node, (at, stale));
                        } else if old == at && *offset > at {
                            after.extend(grow_over(*node, at, &stale, *offset));
                        }
                    }
                }
                &LogOp::SetLen { node, len } => {
                    let old = size(&node, &mut sizes);
                    sizes.insert(node, len);
                    let end = (len.div_ceil(block) * block).min(old);
                    match tails.remove(&node) {
                        Some((at, stale)) if old == at && len > at => {
                            after.extend(grow_over(node, at, &stale, len));
                        }
                        // The same size again: nothing moves.
                        Some(tail) if len == old => {
                            tails.insert(node, tail);
                        }
                        _ => {}
                    }
                    if end > len {
                        after.push(LogOp::TruncateZeroing {
                            node,
                            offset: len,
                            len: end - len,
                        });
                        let content = log.file_content(node);
                        let stale = content
                            .get(len as usize..end as usize)
                            .map(<[u8]>::to_vec)
                            .unwrap_or_default();
                        if stale.iter().any(|b| *b != 0) {
                            tails.insert(node, (len, stale));
                        }
                    }
                }
                _ => {}
            };
            log.push(op);
            log.ops.extend(after);
        }
        log
    }

    /// File `node`'s content after the operations so far.
    fn file_content(&self, node: NodeId) -> Vec<u8> {
        let mut file = Tree::empty(self.initial.root);
        if let Some(initial) = self.initial.nodes.get(&node) {
            file.nodes.insert(node, initial.clone());
        }
        for op in self.ops.iter().filter(|op| op.data_node() == Some(node)) {
            file.apply(op);
        }
        file.nodes
            .get(&node)
            .and_then(Node::data)
            .map(<[u8]>::to_vec)
            .unwrap_or_default()
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
                (Keep::TornTail(bytes), LogOp::Write { node, offset, data }) => {
                    let from = (*bytes as usize).min(data.len());
                    tree.apply(&LogOp::Write {
                        node: *node,
                        offset: offset + from as u64,
                        data: data[from..].to_vec(),
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

/// A grow of `node` from `at` (where a truncate left `stale` on the disk) to
/// `to`: the old bytes it may show, then the zeros that cover them.
fn grow_over(node: NodeId, at: u64, stale: &[u8], to: u64) -> [LogOp; 2] {
    let shown = &stale[..((to - at) as usize).min(stale.len())];
    [
        LogOp::GrowStale {
            node,
            offset: at,
            data: shown.to_vec(),
        },
        LogOp::GrowZeroing {
            node,
            offset: at,
            len: shown.len() as u64,
        },
    ]
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
            if let Keep::Torn(bytes) | Keep::TornTail(bytes) = keep {
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

    /// The zeroing's end comes from each file's size as the recorded ops
    /// left it (written, truncated, written again), not only the initial
    /// tree's.
    #[test]
    fn a_truncates_zeroing_ends_at_the_size_the_ops_so_far_made() {
        let ops = LogBuilder::new()
            .create("f", 2)
            .write(2, 0, vec![1; 8192])
            .set_len(2, 100)
            .write(2, 5000, vec![2; 100])
            .set_len(2, 4200)
            .build()
            .ops()
            .to_vec();
        let log = Log::from_recorded(Tree::empty(1), ops, 4096);
        let zeroings: Vec<&LogOp> = log
            .ops()
            .iter()
            .filter(|op| matches!(op, LogOp::TruncateZeroing { .. }))
            .collect();
        assert_eq!(
            zeroings,
            [
                &LogOp::TruncateZeroing {
                    node: 2,
                    offset: 100,
                    len: 3996
                },
                &LogOp::TruncateZeroing {
                    node: 2,
                    offset: 4200,
                    len: 900
                },
            ]
        );
    }
}

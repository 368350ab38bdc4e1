//! btrfs's log tree: which operations an fsync persists without a transaction
//! commit (fs/btrfs/tree-log.c: `btrfs_log_inode_parent`, `log_new_ancestors`,
//! `btrfs_log_all_parents`).
//!
//! * An fsync of a file or a directory logs the names it gained or lost
//!   (create, link, rename, remove, truncate of it) and the directories above
//!   it that are new (their create; their rename while that create is still
//!   pending).
//! * After a rename or unlink of the fsynced file, btrfs logs its parent
//!   directories whole: every entry change in them persists with it, while
//!   that rename or unlink is still pending.
//! * An fsync of a directory also logs the entries of its new subdirectories.
//!
//! "New" is approximated from the log, which has no transaction boundaries:
//! a parent logged whole after a rename counts while the rename is pending
//! under strict POSIX at the crash; a subdirectory is new while no directory
//! fsync or sync has made its create durable. The kernel asks whether the
//! change is in the running transaction (`last_unlink_trans`,
//! `btrfs_inode_in_log`), and a periodic commit between the change and the
//! fsync makes it log less: those loggings are approximate
//! ([`super::labels`]), a state that only they rule out is unknown on btrfs,
//! not never. An fsync's own names and its new ancestors' creates are sure
//! (logged, or committed before by the transaction that made them old).
//!
//! A removed name stays removed only on kernels with upstream commit
//! 5e85262e542d (6.16, backported to stable); older ones can bring it back.

use std::collections::{HashMap, HashSet};

use super::labels::Rules;
use crate::durability::{Log, LogOp, Node, NodeId, Tree};

/// One fsync that logs an operation, and the operation that must still be
/// pending at the crash for it to count.
#[derive(Debug, Clone, Copy)]
struct Logged {
    fsync: usize,
    while_pending: Option<usize>,
    /// Whether it rests on the log's approximation of "new".
    approximate: bool,
}

/// For every operation of a log, the fsyncs that log it.
#[derive(Debug, Clone)]
pub(super) struct LogTree {
    logged_by: Vec<Vec<Logged>>,
}

impl LogTree {
    /// Replays `log` once.
    pub(super) fn new(log: &Log) -> LogTree {
        let ops = log.ops();
        let mut tree = log.initial().clone();
        let mut logged_by = vec![Vec::new(); ops.len()];
        // The node each remove took away, and where each node was created.
        let mut removed: HashMap<usize, NodeId> = HashMap::new();
        let mut created: HashMap<NodeId, usize> = HashMap::new();
        for (i, op) in ops.iter().enumerate() {
            let target = match op {
                LogOp::Fsync { node, .. } => Some(*node),
                LogOp::FsyncDir { dir } => Some(*dir),
                _ => None,
            };
            if let Some(target) = target {
                let mut log_if = |j: usize, while_pending: Option<usize>, approximate: bool| {
                    logged_by[j].push(Logged {
                        fsync: i,
                        while_pending,
                        approximate,
                    })
                };
                // Its own names.
                for (j, earlier) in ops[..i].iter().enumerate() {
                    if names(earlier, j, &removed).contains(&target) {
                        log_if(j, None, false);
                    }
                }
                // New directories above it.
                for ancestor in ancestors(&tree, target) {
                    if let Some(&create) = created.get(&ancestor) {
                        log_if(create, None, false);
                        for (j, earlier) in ops[..i].iter().enumerate() {
                            if matches!(earlier, LogOp::Rename { node, .. } if *node == ancestor) {
                                log_if(j, Some(create), true);
                            }
                        }
                    }
                }
                // After a rename or unlink of a file, its parents whole.
                if matches!(op, LogOp::Fsync { .. }) {
                    let moved: Vec<usize> = (0..i)
                        .filter(|&j| {
                            matches!(ops[j], LogOp::Rename { .. } | LogOp::Remove { .. })
                                && names(&ops[j], j, &removed).contains(&target)
                        })
                        .collect();
                    let parents = parents(&tree, target);
                    for &r in &moved {
                        for (j, earlier) in ops[..i].iter().enumerate() {
                            if earlier.dirs().iter().any(|d| parents.contains(d)) {
                                log_if(j, Some(r), true);
                            }
                        }
                    }
                }
                // A directory's new subdirectories (created, and no directory
                // fsync or sync since), whole.
                if let (LogOp::FsyncDir { .. }, Some(Node::Dir(entries))) =
                    (op, tree.nodes.get(&target))
                {
                    for child in entries.values() {
                        let Some(&create) = created.get(child) else {
                            continue;
                        };
                        let LogOp::Create { dir: home, .. } = &ops[create] else {
                            continue;
                        };
                        let is_new = !ops[create + 1..i].iter().any(|o| {
                            matches!(o, LogOp::Sync)
                                || matches!(o, LogOp::FsyncDir { dir } if dir == home)
                        });
                        if !is_new || !matches!(tree.nodes.get(child), Some(Node::Dir(_))) {
                            continue;
                        }
                        for (j, earlier) in ops[..i].iter().enumerate() {
                            if earlier.dirs().contains(child) {
                                log_if(j, None, true);
                            }
                        }
                    }
                }
            }
            match op {
                LogOp::Remove { dir, name } => {
                    if let Some(Node::Dir(entries)) = tree.nodes.get(dir) {
                        if let Some(node) = entries.get(name) {
                            removed.insert(i, *node);
                        }
                    }
                }
                LogOp::Create { node, .. } => {
                    created.insert(*node, i);
                }
                _ => {}
            }
            tree.apply_shape(op);
        }
        LogTree { logged_by }
    }

    /// Whether an fsync before crash point `point` logged operation `i`
    /// (`pending`: the operations not durable under strict POSIX, sorted);
    /// under [`Rules::Sure`], surely logged it.
    pub(super) fn logged(&self, rules: Rules, i: usize, point: usize, pending: &[usize]) -> bool {
        self.logged_by[i].iter().any(|l| {
            l.fsync < point
                && (rules == Rules::All || !l.approximate)
                && l.while_pending
                    .is_none_or(|op| pending.binary_search(&op).is_ok())
        })
    }
}

/// The nodes an operation gives a name to, takes one from, or resizes.
fn names(op: &LogOp, index: usize, removed: &HashMap<usize, NodeId>) -> Vec<NodeId> {
    match op {
        LogOp::Create { node, .. } | LogOp::Link { node, .. } | LogOp::SetLen { node, .. } => {
            vec![*node]
        }
        LogOp::Rename {
            node, exchanged, ..
        } => std::iter::once(*node).chain(*exchanged).collect(),
        LogOp::Remove { .. } => removed.get(&index).copied().into_iter().collect(),
        _ => Vec::new(),
    }
}

/// The directories holding an entry for `node` in `tree`.
fn parents(tree: &Tree, node: NodeId) -> HashSet<NodeId> {
    tree.nodes
        .iter()
        .filter(|(_, n)| matches!(n, Node::Dir(entries) if entries.values().any(|c| *c == node)))
        .map(|(id, _)| *id)
        .collect()
}

/// Every directory above `node` in `tree`.
fn ancestors(tree: &Tree, node: NodeId) -> HashSet<NodeId> {
    let mut found = HashSet::new();
    let mut frontier = vec![node];
    while let Some(child) = frontier.pop() {
        for parent in parents(tree, child) {
            if found.insert(parent) {
                frontier.push(parent);
            }
        }
    }
    found
}

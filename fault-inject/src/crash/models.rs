//! Filesystem persistence models: which of the crash states the strict POSIX
//! model allows a real filesystem can leave.
//!
//! `strict` (the default) keeps only what fsync and sync promise: any subset
//! of the pending operations may survive, writes torn at sector boundaries.
//! Real filesystems keep more, in order. Two journaling models, after ALICE
//! (Pillai et al., OSDI'14, §4 and its persistence-property table) and
//! CuttleFS (Rebello et al., ATC'20), each rule one a program can rely on:
//!
//! * **metadata in log order** (both): create, link, remove, rename and
//!   truncate go through the journal (ext4) or log (XFS) in order, whole: a
//!   crash keeps a prefix of them;
//! * **an fsync commits what its inode needs** (both): an fsync, fdatasync
//!   or directory fsync forces the journal up to the transaction holding
//!   the synced inode's last change (for fdatasync: its last size change or
//!   allocating write; none after in-place overwrites), so every metadata
//!   operation up to that change persists, and later ones need not
//!   (`SyncReach` cites the kernel functions);
//! * **allocated data after its metadata** (both): a write that needs new
//!   blocks (it reaches past the file's size in the durable tree the log
//!   starts from) becomes visible through an allocation logged no earlier
//!   than the first such write to the file, so it persists only with all
//!   metadata before that first write. Delayed allocation means the converse
//!   does not hold: later metadata may persist without it (ALICE's ext4 has
//!   no ordered appends; ext4 `nodelalloc`, which has them, is not modelled);
//! * **`auto_da_alloc`** (ext4-ordered only): a rename over an existing file
//!   writes the renamed file's data first (Documentation/filesystems/ext4.rst):
//!   if the rename persists, so do the file's writes before it;
//! * overwrites of written blocks persist or not, in any order, torn at
//!   sectors (both);
//! * **a size without its data** (both, under `--torn`): an appending write
//!   may persist as its size alone, the new bytes reading as zeros. Real
//!   ext4 (`data=ordered`, its defaults, 6.18) left six git objects of their
//!   full size and all zeros at a flush, nothing dropped (`explore --fs
//!   ext4`, docs/results/2026-12-05-realfs-models.md). The likely
//!   mechanism, not traced in the kernel here: with `dioread_nolock` (ext4's
//!   default) writeback allocates an unwritten extent, the size reaches the
//!   journal, and the extent is marked written in a later transaction after
//!   the I/O completes; `data=ordered` promises no stale data, not data
//!   before the size. btrfs never does it (its size moves when the data
//!   extent is written).
//!
//! `xfs` also stands for ext4 `data=writeback`: among the states slowfs
//! enumerates they keep the same; ext4 `data=writeback` can also expose stale
//! blocks behind a persisted size, a state slowfs generates under no model.
//!
//! `btrfs` is not a journal but copy-on-write transactions plus a log tree
//! for fsync (btrfs docs, "Tree-log"; ALICE §3's btrfs column; CrashMonkey,
//! Mohan et al., OSDI'18, for the fsync rules):
//!
//! * **the last transaction**: a crash keeps every operation up to some
//!   point (the last committed transaction), metadata whole and in order;
//!   data written before that point may or may not have been written back
//!   (a file's size grows only with its written data), nothing after it;
//! * **an fsync logs one file, not the rest**: fsync of a file persists its
//!   data, size and names, and the names of new directories above it, without
//!   the other operations before it (the details, after a rename and for
//!   directories, in `log_tree`). So an fsync commits less than a journal's
//!   (an earlier create elsewhere may be lost) and more than strict POSIX (the
//!   file's new name survives without a directory fsync);
//! * **a size grows over written data only**: a file's on-disk size moves past
//!   a range once the data before it is written, so appends persist in order.
//!
//! btrfs starts writeback of a renamed file's data at a rename that replaces
//! a file but does not wait for it; the model does not count on it. Files
//! without copy-on-write (`chattr +C`, `nodatacow`) are overwritten in place,
//! so their overwrites can persist past the last transaction: not modelled.
//!
//! * **a truncate's zeroing in place** (ext4, XFS): a truncate to a size
//!   inside a block zeroes the rest of that block in the page cache
//!   (`ext4_block_truncate_page`; XFS `xfs_truncate_page` ->
//!   `iomap_truncate_page`), written back in place like an overwrite, so it
//!   can reach the disk before the journal commits the new size: the old
//!   size with a run of zeros (seen on ext4 by the `ace` generator). btrfs
//!   writes the zeroed block copy-on-write, in the truncate's transaction or
//!   later, so never before the size ([`LogOp::TruncateZeroing`] follows its
//!   truncate in the log).
//!
//! * **a growing write's bytes below the old size in place** (ext4, XFS):
//!   a write that grows a file overwrites the blocks it already has in
//!   place; they can reach the disk in a write-back (ext4's ordered data,
//!   XFS's I/O completion that logs the size after it) before the new size
//!   is committed: the old size with the new bytes (seen on ext4 by the
//!   `ace` generator, `A=jj`). btrfs writes them copy-on-write with the
//!   rest of the write ([`LogOp::WriteInPlace`] follows its write).
//!
//! Not modelled: the flush on close after a truncate to zero (ext4 and XFS).
//!
//! Every model allows a subset of the states of the one it refines
//! ([`FsModel::refines`]): strict allows them all. A state is a strict state
//! the model can also produce, so one strict exploration says for each
//! violation under which models it can happen. A few rules only approximate
//! the kernel; a state only they rule out is "unknown" on the model, not
//! "never" ([`super::labels`], [`ModelFacts::label`]).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::labels::Rules;
pub use super::labels::{Label, Labels};
use super::log_tree::LogTree;
use crate::durability::{Keep, Kept, Log, LogOp, Node, NodeId};

/// A persistence model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum FsModel {
    /// Only what fsync and sync promise (POSIX).
    Strict,
    /// XFS: metadata in log order, data unordered (also ext4 `data=writeback`).
    Xfs,
    /// ext4 with `data=ordered` (its default).
    Ext4Ordered,
    /// btrfs: transactions in order, fsync through the log tree.
    Btrfs,
}

impl FsModel {
    /// Every model, strict first.
    pub const ALL: &'static [FsModel] = &[
        FsModel::Strict,
        FsModel::Xfs,
        FsModel::Ext4Ordered,
        FsModel::Btrfs,
    ];

    /// The model whose states this one's are a subset of (none for strict).
    pub fn refines(self) -> Option<FsModel> {
        match self {
            FsModel::Strict => None,
            FsModel::Xfs | FsModel::Btrfs => Some(FsModel::Strict),
            FsModel::Ext4Ordered => Some(FsModel::Xfs),
        }
    }

    /// Whether a failed fsync also drops the file's dirty pages from the page
    /// cache, so that reads show what is on disk (btrfs), rather than keeping
    /// them marked clean (ext4, XFS; CuttleFS, Rebello et al. ATC'20).
    pub fn evicts_after_failed_fsync(self) -> bool {
        matches!(self, FsModel::Btrfs)
    }

    /// The model's name in flags and reports.
    pub fn name(self) -> &'static str {
        match self {
            FsModel::Strict => "strict",
            FsModel::Xfs => "xfs",
            FsModel::Ext4Ordered => "ext4-ordered",
            FsModel::Btrfs => "btrfs",
        }
    }
}

impl fmt::Display for FsModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FsModel {
    type Err = String;

    fn from_str(text: &str) -> Result<FsModel, String> {
        // The same states (see the module doc).
        if text == "ext4-writeback" {
            return Ok(FsModel::Xfs);
        }
        FsModel::ALL
            .iter()
            .copied()
            .find(|m| m.name() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = FsModel::ALL.iter().map(|m| m.name()).collect();
                format!(
                    "unknown filesystem model '{text}' (expected one of: {}; ext4-writeback keeps the states of xfs)",
                    names.join(", ")
                )
            })
    }
}

/// What the models need to know about each operation of a log, found by
/// replaying it once.
#[derive(Debug, Clone)]
pub struct ModelFacts {
    /// Whether the op is metadata (create, link, remove, rename, truncate):
    /// it goes through the journal in order.
    metadata: Vec<bool>,
    /// For a write that needs new blocks (past its file's size in the
    /// initial tree): the first write to that file that did, whose
    /// allocation it waits for.
    allocating_from: Vec<Option<usize>>,
    /// For a rename over an existing name: the writes to the renamed node
    /// before it (ext4 writes their data before the rename commits).
    replacing: Vec<Option<Vec<usize>>>,
    /// For an fsync, fdatasync or directory fsync: the operations before
    /// this index are committed by it (it forces the journal or log only up
    /// to the transaction holding the synced inode's last change: see
    /// [`SyncReach`]); `None` where it forces nothing.
    commits_upto: Vec<Option<usize>>,
    /// The same, counting only changes that surely reach the inode's
    /// transaction (not a timestamp-only write: see [`SyncReach`]).
    commits_surely_upto: Vec<Option<usize>>,
    /// Which operations btrfs's fsyncs log.
    log_tree: LogTree,
}

/// How far an fsync forces a journal (ext4's jbd2, XFS's log): to the
/// transaction holding the last change of the synced inode, not to the
/// fsync itself. Everything before that change is committed with it; what
/// came after may sit in a later, uncommitted transaction (the running one
/// is usually committed too, but a periodic commit between the change and
/// the fsync leaves later operations pending).
///
/// * ext4: `ext4_sync_file` -> `ext4_fsync_journal` commits
///   `datasync ? ei->i_datasync_tid : ei->i_sync_tid` with
///   `jbd2_complete_transaction`, which does nothing for a transaction
///   already committed. `i_sync_tid` moves at every change of the inode
///   (timestamps included, `ext4_update_inode_fsync_trans`);
///   `i_datasync_tid` only at changes fdatasync needs: block allocation
///   (`ext4_map_blocks`) and size (`ext4_setattr`, writeback's
///   `i_disksize` update).
/// * XFS: `xfs_file_fsync` -> `xfs_fsync_flush_log` -> `xfs_fsync_seq`
///   forces the log to the inode's `ili_commit_seq`, and for fdatasync not
///   at all when only timestamps are dirty (`ili_fsync_fields &
///   ~XFS_ILOG_TIMESTAMP` empty); `xfs_dir_fsync` likewise for a directory.
///
/// So an fdatasync after in-place overwrites (only timestamps change)
/// commits nothing: a file created before it is still not durable when it
/// returns (seen on real ext4 and XFS, issue 43).
///
/// Approximate (see [`super::labels`]): an in-place overwrite changes the
/// inode only if its timestamps move (`file_modified` ->
/// `inode_needs_update_time`, at the coarse clock's granularity), so an
/// fsync's reach through such a write is not sure; `changed_surely` leaves
/// those writes out.
#[derive(Debug, Default)]
struct SyncReach {
    /// Per inode: its last change of any kind (what fsync forces).
    changed: HashMap<NodeId, usize>,
    /// Per inode: its last change that is more than timestamps.
    changed_surely: HashMap<NodeId, usize>,
    /// Per file: its last size change or allocating write (what fdatasync
    /// forces).
    data_changed: HashMap<NodeId, usize>,
    /// Per file: its size as the log has it so far.
    sizes: HashMap<NodeId, u64>,
}

impl SyncReach {
    /// Notes operation `i`, `tree` being the shape before it; returns how
    /// far it commits, if it is a sync, and how far it surely commits.
    fn see(
        &mut self,
        log: &Log,
        tree: &crate::durability::Tree,
        i: usize,
        op: &LogOp,
    ) -> (Option<usize>, Option<usize>) {
        let entry = |dir: &NodeId, name: &str| match tree.nodes.get(dir) {
            Some(Node::Dir(entries)) => entries.get(name).copied(),
            _ => None,
        };
        match op {
            LogOp::Write { node, offset, data } => {
                self.changed.insert(*node, i);
                let size = self.size(log, *node);
                let end = offset + data.len() as u64;
                if end > size {
                    self.sizes.insert(*node, end);
                    self.data_changed.insert(*node, i);
                    self.changed_surely.insert(*node, i);
                }
            }
            LogOp::SetLen { node, len } => {
                self.touch(i, &[Some(*node)]);
                self.sizes.insert(*node, *len);
                self.data_changed.insert(*node, i);
            }
            // Bytes in the page cache: no change of the inode of its own.
            LogOp::TruncateZeroing { node, .. }
            | LogOp::WriteInPlace { node, .. }
            | LogOp::GrowStale { node, .. }
            | LogOp::GrowZeroing { node, .. } => {
                self.changed.insert(*node, i);
            }
            LogOp::Create { dir, node, .. } | LogOp::Link { dir, node, .. } => {
                self.touch(i, &[Some(*dir), Some(*node)]);
            }
            LogOp::Remove { dir, name } => self.touch(i, &[Some(*dir), entry(dir, name)]),
            LogOp::Rename {
                from_dir,
                to_dir,
                to_name,
                node,
                exchanged,
                ..
            } => self.touch(
                i,
                &[
                    Some(*from_dir),
                    Some(*to_dir),
                    Some(*node),
                    *exchanged,
                    entry(to_dir, to_name),
                ],
            ),
            LogOp::Fsync { node, datasync } => {
                let after = |map: &HashMap<NodeId, usize>| map.get(node).map(|j| j + 1);
                return if *datasync {
                    (after(&self.data_changed), after(&self.data_changed))
                } else {
                    (after(&self.changed), after(&self.changed_surely))
                };
            }
            LogOp::FsyncDir { dir } => {
                let after = self.changed.get(dir).map(|j| j + 1);
                return (after, after);
            }
            LogOp::Sync => return (Some(i), Some(i)),
        }
        (None, None)
    }

    /// Operation `i` changed `nodes` (more than their timestamps).
    fn touch(&mut self, i: usize, nodes: &[Option<NodeId>]) {
        for node in nodes.iter().flatten() {
            self.changed.insert(*node, i);
            self.changed_surely.insert(*node, i);
        }
    }

    fn size(&mut self, log: &Log, node: NodeId) -> u64 {
        *self
            .sizes
            .entry(node)
            .or_insert_with(|| match log.initial().nodes.get(&node) {
                Some(Node::File(bytes)) => bytes.len() as u64,
                _ => 0,
            })
    }
}

impl ModelFacts {
    /// Replays `log` once.
    pub fn new(log: &Log) -> ModelFacts {
        let mut tree = log.initial().clone();
        let n = log.ops().len();
        let (mut metadata, mut allocating_from, mut replacing) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        let initial_size = |node: &NodeId| match log.initial().nodes.get(node) {
            Some(Node::File(bytes)) => bytes.len() as u64,
            _ => 0,
        };
        // Per file: its first write past its initial size.
        let mut first_allocating: HashMap<NodeId, usize> = HashMap::new();
        let mut reach = SyncReach::default();
        let (mut commits_upto, mut commits_surely_upto) =
            (Vec::with_capacity(n), Vec::with_capacity(n));
        for (i, op) in log.ops().iter().enumerate() {
            let (upto, surely) = reach.see(log, &tree, i, op);
            commits_upto.push(upto);
            commits_surely_upto.push(surely);
            let mut replaced = None;
            let (is_metadata, allocation) = match op {
                LogOp::Write { node, offset, data } => {
                    let allocates = offset + data.len() as u64 > initial_size(node);
                    let from = allocates.then(|| *first_allocating.entry(*node).or_insert(i));
                    (false, from)
                }
                LogOp::Rename {
                    to_dir,
                    to_name,
                    node,
                    exchanged: None,
                    ..
                } => {
                    let exists = matches!(
                        tree.nodes.get(to_dir),
                        Some(Node::Dir(entries)) if entries.contains_key(to_name)
                    );
                    if exists {
                        replaced = Some(
                            log.ops()[..replacing.len()]
                                .iter()
                                .enumerate()
                                .filter(|(_, op)| {
                                    matches!(op, LogOp::Write { node: n, .. } if n == node)
                                })
                                .map(|(j, _)| j)
                                .collect(),
                        );
                    }
                    (true, None)
                }
                // Bytes in place, in a block the file already has.
                LogOp::TruncateZeroing { .. }
                | LogOp::WriteInPlace { .. }
                | LogOp::GrowStale { .. }
                | LogOp::GrowZeroing { .. } => (false, None),
                LogOp::Fsync { .. } | LogOp::FsyncDir { .. } | LogOp::Sync => (false, None),
                _ => (true, None),
            };
            metadata.push(is_metadata);
            allocating_from.push(allocation);
            replacing.push(replaced);
            tree.apply_shape(op);
        }
        ModelFacts {
            metadata,
            allocating_from,
            replacing,
            commits_upto,
            commits_surely_upto,
            log_tree: LogTree::new(log),
        }
    }

    /// Whether `model` can leave the state that keeps `kept` of the
    /// operations `pending` at crash point `point` of `log`.
    pub fn allows(
        &self,
        model: FsModel,
        log: &Log,
        point: usize,
        pending: &[usize],
        kept: &Kept,
    ) -> bool {
        self.allows_under(Rules::All, model, log, point, pending, kept)
    }

    /// Whether `model`, deciding by `rules`, can leave the state.
    fn allows_under(
        &self,
        rules: Rules,
        model: FsModel,
        log: &Log,
        point: usize,
        pending: &[usize],
        kept: &Kept,
    ) -> bool {
        match model {
            FsModel::Strict => true,
            FsModel::Xfs => {
                self.journal(rules, point, pending, kept)
                    // Sure for XFS, not for ext4 data=writeback, which this
                    // model also stands for.
                    && (rules == Rules::Sure || zeroed_before_grown(log, pending, kept))
            }
            FsModel::Ext4Ordered => {
                self.journal(rules, point, pending, kept)
                    && self.data_before_replacing_rename(rules, point, pending, kept)
                    && zeroed_before_grown(log, pending, kept)
            }
            FsModel::Btrfs => self.transactions_and_log_tree(rules, log, point, pending, kept),
        }
    }

    /// What `model` says of the state: it can leave it; only an approximate
    /// rule rules it out (unknown); or its sure rules rule it out (never).
    pub fn label(
        &self,
        model: FsModel,
        log: &Log,
        point: usize,
        pending: &[usize],
        kept: &Kept,
    ) -> Label {
        if self.allows_under(Rules::All, model, log, point, pending, kept) {
            Label::Can
        } else if self.allows_under(Rules::Sure, model, log, point, pending, kept) {
            Label::Unknown
        } else {
            Label::Never
        }
    }

    /// Every model's [`label`](Self::label) of the state.
    pub fn labels(&self, log: &Log, point: usize, pending: &[usize], kept: &Kept) -> Labels {
        let mut labels = Labels::default();
        for &model in FsModel::ALL {
            match self.label(model, log, point, pending, kept) {
                Label::Can => labels.can.push(model),
                Label::Unknown => labels.unknown.push(model),
                Label::Never => {}
            }
        }
        labels
    }

    /// The models that can leave this state.
    pub fn models_allowing(
        &self,
        log: &Log,
        point: usize,
        pending: &[usize],
        kept: &Kept,
    ) -> Vec<FsModel> {
        self.labels(log, point, pending, kept).can
    }

    /// A journal (ext4's, XFS's log): pending metadata persists as a prefix,
    /// each operation whole; an fsync commits every one before it; a kept
    /// write that needed new blocks keeps every metadata operation before
    /// the allocation it waited for.
    fn journal(&self, rules: Rules, point: usize, pending: &[usize], kept: &Kept) -> bool {
        let whole = |i: usize| kept.get(&i) == Some(&Keep::Whole);
        let journaled: Vec<usize> = pending
            .iter()
            .copied()
            .filter(|&i| self.metadata[i])
            .collect();
        let prefix = journaled.iter().take_while(|&&i| whole(i)).count();
        if journaled[prefix..].iter().any(|i| kept.contains_key(i)) {
            return false;
        }
        // The first pending metadata operation not kept: nothing logged after
        // it persisted, and no sync before the crash committed it.
        let first_lost = journaled.get(prefix).copied();
        let commits = match rules {
            Rules::All => &self.commits_upto,
            Rules::Sure => &self.commits_surely_upto,
        };
        let committed = commits[..point].iter().flatten().max();
        if let (Some(lost), Some(&committed)) = (first_lost, committed) {
            if lost < committed {
                return false;
            }
        }
        first_lost.is_none_or(|lost| {
            !pending.iter().any(|&i| {
                kept.contains_key(&i) && self.allocating_from[i].is_some_and(|from| from > lost)
            })
        })
    }

    /// btrfs: what an fsync logged is kept; of the rest, a prefix of the
    /// metadata up to the last kept operation (the last transaction), with
    /// any of the data written before it, a file's size growing only over
    /// data written.
    fn transactions_and_log_tree(
        &self,
        rules: Rules,
        log: &Log,
        point: usize,
        pending: &[usize],
        kept: &Kept,
    ) -> bool {
        let whole = |i: usize| kept.get(&i) == Some(&Keep::Whole);
        let logged = |i: usize| self.log_tree.logged(Rules::All, i, point, pending);
        // What the fsyncs logged persists whole; under the sure rules only
        // what they surely logged (an operation they may have logged is
        // still left out of the last transaction below, either way).
        if pending
            .iter()
            .any(|&i| self.log_tree.logged(rules, i, point, pending) && !whole(i))
        {
            return false;
        }
        // btrfs updates a file's size when a data extent of the file is
        // written (ordered extent completion), to the whole in-memory size
        // under NO_HOLES (`btrfs_inode_safe_disk_i_size_write`): a size over
        // unwritten data only when another write to the file completed
        // after it grew. Approximate (other updates of the inode item may
        // carry it too): the sure rules say nothing here.
        let carried = |w: usize| {
            let node = log.ops()[w].data_node();
            (0..point).any(|j| {
                j != w
                    && matches!(log.ops()[j], LogOp::Write { .. })
                    && log.ops()[j].data_node() == node
                    && (j > w || pending.contains(&j))
                    // Its data reached the disk: durable, or kept.
                    && (!pending.contains(&j)
                        || kept.get(&j).is_some_and(|k| *k != Keep::SizeOnly))
            })
        };
        if rules == Rules::All
            && kept
                .iter()
                .any(|(&w, k)| *k == Keep::SizeOnly && !carried(w))
        {
            return false;
        }
        // A growing write's bytes below the old size go copy-on-write with
        // the rest of it (one extent, one transaction): never without it
        // (its write is the operation before it, see Log::from_recorded).
        let write_lost =
            |i: usize| i > 0 && pending.contains(&(i - 1)) && !kept.contains_key(&(i - 1));
        if kept
            .keys()
            .any(|&i| matches!(log.ops()[i], LogOp::WriteInPlace { .. }) && write_lost(i))
        {
            return false;
        }
        // The size covers written data only: a kept write past the file's
        // size needs the earlier such writes below its end.
        let mut lowest_lost: HashMap<NodeId, u64> = HashMap::new();
        for &i in pending {
            let LogOp::Write { node, offset, data } = &log.ops()[i] else {
                continue;
            };
            if self.allocating_from[i].is_none() {
                continue;
            }
            let end = offset + data.len() as u64;
            if !kept.contains_key(&i) {
                let lowest = lowest_lost.entry(*node).or_insert(*offset);
                *lowest = (*lowest).min(*offset);
            } else if lowest_lost.get(node).is_some_and(|&lost| lost < end) {
                return false;
            }
        }
        let transaction_end = pending
            .iter()
            .copied()
            .filter(|&i| !logged(i) && kept.contains_key(&i))
            .max()
            .map_or(0, |i| i + 1);
        pending
            .iter()
            .all(|&i| i >= transaction_end || !self.metadata[i] || whole(i))
    }

    /// ext4's `auto_da_alloc`: a kept rename over a file keeps the renamed
    /// file's earlier writes. Sure only for a write that needed new blocks
    /// and is lost whole: `ext4_rename` -> `ext4_alloc_da_blocks` flushes
    /// only delayed-allocation blocks (none when `i_reserved_data_blocks`
    /// is 0) with `filemap_flush`, which allocates them and sets the size in
    /// a transaction no later than the rename's but does not wait for the
    /// data; with `dioread_nolock` (the default) the new extents are
    /// unwritten, off the ordered-data list (`ext4_map_blocks`), until the
    /// I/O ends. So the rename can persist over the size without the data
    /// (zeros), part of it, or an overwrite not yet written.
    fn data_before_replacing_rename(
        &self,
        rules: Rules,
        point: usize,
        pending: &[usize],
        kept: &Kept,
    ) -> bool {
        let whole = |i: usize| kept.get(&i) == Some(&Keep::Whole);
        let pending_set: HashSet<usize> = pending.iter().copied().collect();
        let dropped = |i: usize| pending_set.contains(&i) && !whole(i);
        let counts = |j: usize| match rules {
            Rules::All => dropped(j),
            Rules::Sure => {
                pending_set.contains(&j)
                    && !kept.contains_key(&j)
                    && self.allocating_from[j].is_some()
            }
        };
        !self
            .replacing
            .iter()
            .enumerate()
            .take(point)
            .any(|(i, writes)| {
                writes
                    .as_ref()
                    .is_some_and(|writes| !dropped(i) && writes.iter().any(|&j| counts(j)))
            })
    }
}

/// ext4 (data=ordered) writes a truncate's zeroed block before the
/// truncate's transaction commits (`ext4_block_truncate_page`, ordered
/// data), XFS the zeroed range before it logs a grow (`xfs_setattr_size`:
/// `xfs_zero_range`, then `filemap_write_and_wait_range`): a grow never shows
/// the block's old bytes ([`LogOp::GrowStale`] kept, its zeroing after it
/// lost). btrfs can: it zeroes at the grow, in a delayed write.
fn zeroed_before_grown(log: &Log, pending: &[usize], kept: &Kept) -> bool {
    // A pending GrowStale's zeroing is pending too, or (a crash point
    // between the two) not done yet: either way it must be kept.
    !pending.iter().any(|&i| {
        matches!(log.ops()[i], LogOp::GrowStale { .. })
            && kept.contains_key(&i)
            && !kept.contains_key(&(i + 1))
    })
}

/// Every crash point of `log` and every subset of its pending operations
/// kept whole: `(point, pending, kept ops)`, for tests that check a property
/// over all of them.
#[cfg(test)]
pub(crate) fn every_kept_subset(log: &Log, mut check: impl FnMut(usize, &[usize], &[usize])) {
    for point in 0..=log.ops().len() {
        let pending = log.pending(point);
        for mask in 0..(1u32 << pending.len()) {
            let ops: Vec<usize> = (0..pending.len())
                .filter(|b| mask & (1 << b) != 0)
                .map(|b| pending[b])
                .collect();
            check(point, &pending, &ops);
        }
    }
}

/// Operations `ops` kept whole.
#[cfg(test)]
pub(crate) fn kept(ops: &[usize]) -> Kept {
    ops.iter().map(|&i| (i, Keep::Whole)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durability::{LogBuilder, NodeKind, Tree};

    #[test]
    fn the_facts_hold_no_file_content_a_write_far_into_a_disk_image_costs_nothing() {
        // A block device's image written 1 TiB in: replaying its data would
        // allocate the whole terabyte (an abort), where the facts need names.
        let log = LogBuilder::new()
            .initial_file("image", 2, Vec::new())
            .write(2, 1 << 40, [7; 512])
            .fsync(2)
            .build();
        let facts = ModelFacts::new(&log);
        assert_eq!(facts.metadata, [false, false]);
    }

    /// The save pattern ALICE calls "replace via rename": write a temp file,
    /// rename it over the old one, no fsync.
    fn replace_via_rename() -> Log {
        LogBuilder::new()
            .initial_file("f", 2, b"old")
            .create("tmp", 3)
            .write(3, 0, b"new")
            .rename("tmp", "f", 3)
            .build()
    }

    /// A tree whose root holds file `A` (node 2) with `content`.
    fn file_a_of(content: &[u8]) -> Tree {
        let mut tree = Tree::empty(1);
        tree.apply(&LogOp::Create {
            dir: 1,
            name: "A".into(),
            node: 2,
            kind: NodeKind::File,
        });
        tree.apply(&LogOp::Write {
            node: 2,
            offset: 0,
            data: content.to_vec(),
        });
        tree
    }

    /// The `ace` generator's ext4 state `A=ggZZgggg`: a truncate from 8 KiB
    /// to 2 KiB whose zeroing of its block reached the disk without the new
    /// size. ext4 and XFS can leave it; btrfs cannot (copy-on-write).
    #[test]
    fn a_truncates_zeroing_can_persist_without_its_size_except_on_btrfs() {
        let initial = file_a_of(&[b'g'; 8192]);
        let log = Log::from_recorded(initial, [LogOp::SetLen { node: 2, len: 2048 }], 4096);
        assert_eq!(
            log.ops()[1],
            LogOp::TruncateZeroing {
                node: 2,
                offset: 2048,
                len: 2048
            }
        );
        let zeroing_alone = kept(&[1]);
        let mut expected = vec![b'g'; 8192];
        expected[2048..4096].fill(0);
        assert_eq!(a_in(&log, 2, &zeroing_alone), expected);
        assert_eq!(
            allowing(&log, 2, &zeroing_alone),
            [FsModel::Strict, FsModel::Xfs, FsModel::Ext4Ordered]
        );
        // Both kept, the zeros lie past the size: the truncate alone.
        assert_eq!(a_in(&log, 2, &kept(&[0, 1])), [b'g'; 2048]);
        // A block-aligned truncate, or a growing one, zeroes nothing.
        for len in [4096, 16384] {
            let log = Log::from_recorded(Tree::empty(1), [LogOp::SetLen { node: 2, len }], 4096);
            assert_eq!(log.ops().len(), 1, "truncate to {len}");
        }
    }

    /// The `ace` generator's ext4 MODEL GAP `A=jj` (seq-2, 5 of 1,000): A
    /// truncated to 2 KiB, then a 4 KiB write at 0 that grows it: the write's
    /// block is A's own, overwritten in place, and reached the disk before
    /// the journal committed the new size. ext4 and XFS can leave the old
    /// size with the new bytes; btrfs cannot (copy-on-write, one transaction).
    #[test]
    fn a_growing_writes_bytes_below_the_old_size_can_persist_without_the_size_except_on_btrfs() {
        let initial = file_a_of(&[b'g'; 2048]);
        let write = LogOp::Write {
            node: 2,
            offset: 0,
            data: vec![b'j'; 4096],
        };
        let log = Log::from_recorded(initial, [write], 4096);
        assert_eq!(
            log.ops()[1],
            LogOp::WriteInPlace {
                node: 2,
                offset: 0,
                data: vec![b'j'; 2048]
            }
        );
        let in_place_alone = kept(&[1]);
        assert_eq!(a_in(&log, 2, &in_place_alone), [b'j'; 2048]);
        assert_eq!(
            allowing(&log, 2, &in_place_alone),
            [FsModel::Strict, FsModel::Xfs, FsModel::Ext4Ordered]
        );
        // Both kept: the write.
        assert_eq!(a_in(&log, 2, &kept(&[0, 1])), [b'j'; 4096]);
        // A write inside the size, or past it, or an append: nothing in place
        // beyond what the write itself is.
        for (offset, len) in [(0, 1024), (4096, 10), (2048, 100)] {
            let initial = file_a_of(&[b'g'; 2048]);
            let write = LogOp::Write {
                node: 2,
                offset,
                data: vec![b'j'; len],
            };
            let log = Log::from_recorded(initial, [write], 4096);
            assert_eq!(log.ops().len(), 1, "write of {len} at {offset}");
        }
    }

    #[test]
    fn ext4_ordered_keeps_a_prefix_and_the_data_a_replacing_rename_needs() {
        let log = replace_via_rename();
        let facts = ModelFacts::new(&log);
        let pending = log.pending(3);
        assert_eq!(pending, vec![0, 1, 2]);
        let ext4 =
            |ops: &[usize]| facts.allows(FsModel::Ext4Ordered, &log, 3, &pending, &kept(ops));
        // The rename without the data: strict allows it (an empty f), ext4 not.
        assert!(facts.allows(FsModel::Strict, &log, 3, &pending, &kept(&[0, 2])));
        assert!(!ext4(&[0, 2]));
        // Prefixes of the journal: nothing, the create, create + append, all.
        assert!(ext4(&[]) && ext4(&[0]) && ext4(&[0, 1]) && ext4(&[0, 1, 2]));
        // Not a prefix: the append without its create.
        assert!(!ext4(&[1]));
        assert_eq!(
            facts.models_allowing(&log, 3, &pending, &kept(&[0, 2])),
            vec![FsModel::Strict, FsModel::Xfs, FsModel::Btrfs]
        );
    }

    /// "Safe on ext4 ordered, unsafe on xfs": XFS keeps the metadata in order
    /// but does not write a file's data before the rename that replaces.
    #[test]
    fn xfs_keeps_metadata_in_order_but_not_the_data_a_rename_needs() {
        let log = replace_via_rename();
        let facts = ModelFacts::new(&log);
        let pending = log.pending(3);
        let xfs = |ops: &[usize]| facts.allows(FsModel::Xfs, &log, 3, &pending, &kept(ops));
        assert!(xfs(&[0, 2]), "the rename without the data");
        assert!(xfs(&[0, 1]) && xfs(&[0, 1, 2]) && xfs(&[]));
        assert!(!xfs(&[1]), "allocated data without the create before it");
        assert!(!xfs(&[2]), "the rename without the create before it");
    }

    /// Delayed allocation: an append persists only with the metadata before
    /// it, but metadata after it may persist without it (no ordered appends).
    #[test]
    fn appends_follow_earlier_metadata_but_do_not_hold_back_later_metadata() {
        let log = LogBuilder::new()
            .create("f", 2)
            .set_len(2, 1 << 20)
            // Into the hole the truncate made: needs new blocks.
            .write(2, 8192, [1; 4096])
            .create("g", 3)
            .build();
        let facts = ModelFacts::new(&log);
        let pending = log.pending(4);
        for model in [FsModel::Xfs, FsModel::Ext4Ordered] {
            let allows = |ops: &[usize]| facts.allows(model, &log, 4, &pending, &kept(ops));
            assert!(
                allows(&[0, 1, 3]),
                "{model}: later metadata without the data"
            );
            assert!(
                allows(&[0, 1, 2]),
                "{model}: the data without later metadata"
            );
            assert!(
                !allows(&[0, 2]),
                "{model}: the data without the truncate before it"
            );
        }
        // Rewriting those blocks waits for the same allocation...
        let mut log = log.clone();
        log.push(LogOp::Write {
            node: 2,
            offset: 8192,
            data: vec![2; 512],
        });
        let facts = ModelFacts::new(&log);
        let pending = log.pending(5);
        assert!(!facts.allows(FsModel::Ext4Ordered, &log, 5, &pending, &kept(&[0, 4])));
        // ...while overwriting blocks of the initial tree needs none: free.
        let log = LogBuilder::new()
            .initial_file("f", 2, b"old")
            .create("g", 5)
            .write(2, 0, b"o")
            .build();
        let facts = ModelFacts::new(&log);
        let pending = log.pending(2);
        assert!(facts.allows(FsModel::Xfs, &log, 2, &pending, &kept(&[1])));
    }

    /// Each model allows a subset of the states of the one it refines, over
    /// every kept subset of a few logs.
    #[test]
    fn each_model_allows_a_subset_of_the_one_before() {
        let mut synced = replace_via_rename();
        synced.push(LogOp::Fsync {
            node: 3,
            datasync: false,
        });
        synced.push(LogOp::Write {
            node: 3,
            offset: 0,
            data: b"newer".to_vec(),
        });
        for log in [replace_via_rename(), synced] {
            let facts = ModelFacts::new(&log);
            every_kept_subset(&log, |point, pending, ops| {
                let allows = |m: FsModel| facts.allows(m, &log, point, pending, &kept(ops));
                for model in FsModel::ALL {
                    if let Some(wider) = model.refines() {
                        assert!(
                            !allows(*model) || allows(wider),
                            "point {point}, kept {ops:?}: {model} but not {wider}"
                        );
                    }
                }
            });
        }
    }

    #[test]
    fn an_fsync_commits_the_metadata_before_it() {
        let mut log = replace_via_rename();
        log.push(LogOp::Fsync {
            node: 3,
            datasync: false,
        });
        let facts = ModelFacts::new(&log);
        let pending = log.pending(4);
        // The fsync made node 3's data durable; the create and rename stay
        // pending under strict, but ext4's commit took them along.
        assert!(pending.contains(&0) && pending.contains(&2));
        let ext4 =
            |ops: &[usize]| facts.allows(FsModel::Ext4Ordered, &log, 4, &pending, &kept(ops));
        assert!(!ext4(&[]));
        assert!(ext4(&pending));
    }

    /// The fdatasync workload of issue 43: after in-place overwrites only
    /// timestamps change, so neither ext4 nor XFS commits at fdatasync and
    /// `baz`, created before it, may be lost; an fsync (the control) forces
    /// the transaction holding foo's last change, which holds the create.
    #[test]
    fn fdatasync_after_overwrites_commits_nothing_and_fsync_does() {
        let run = |datasync: bool| {
            let mut tree = Tree::empty(1);
            tree.nodes.insert(
                1,
                Node::Dir(std::collections::BTreeMap::from([("foo".into(), 2)])),
            );
            tree.nodes.insert(2, Node::File(vec![b'o'; 8192]));
            let mut log = Log::new(tree);
            let overwrite = |offset: u64| LogOp::Write {
                node: 2,
                offset,
                data: vec![b'n'; 4096],
            };
            log.push(LogOp::Write {
                node: 2,
                offset: 0,
                data: vec![b'o'; 4096],
            });
            log.push(create(1, "baz", 3, NodeKind::File));
            log.push(overwrite(0));
            log.push(LogOp::Fsync { node: 2, datasync });
            log.push(overwrite(4096));
            log.push(LogOp::Fsync { node: 2, datasync });
            let facts = ModelFacts::new(&log);
            let pending = log.pending(6);
            assert_eq!(pending, vec![1], "only the create is pending under strict");
            FsModel::ALL
                .iter()
                .filter(|m| facts.allows(**m, &log, 6, &pending, &kept(&[])))
                .map(|m| m.name())
                .collect::<Vec<_>>()
        };
        assert_eq!(run(true), ["strict", "xfs", "ext4-ordered", "btrfs"]);
        let with_fsync = run(false);
        assert!(
            !with_fsync.contains(&"xfs") && !with_fsync.contains(&"ext4-ordered"),
            "{with_fsync:?}"
        );
        // An appending write changes the size: fdatasync then commits.
        let log = LogBuilder::new()
            .create("foo", 2)
            .create("baz", 3)
            .write(2, 0, b"data")
            .fdatasync(2)
            .build();
        let facts = ModelFacts::new(&log);
        let pending = log.pending(4);
        assert!(!facts.allows(FsModel::Xfs, &log, 4, &pending, &kept(&[])));
    }

    /// btrfs: an fsync logs its file with its name and the new directories
    /// above it, and nothing else; without it, the last transaction keeps a
    /// prefix of the metadata.
    #[test]
    fn btrfs_fsync_logs_one_file_with_its_names_and_no_other_operation() {
        let log = LogBuilder::new()
            .create("other", 2)
            .mkdir("d", 3)
            .create_in(3, "f", 4)
            .write(4, 0, b"data")
            .fsync(4)
            .create("later", 5)
            .build();
        let facts = ModelFacts::new(&log);
        let pending = log.pending(6);
        assert_eq!(
            pending,
            vec![0, 1, 2, 5],
            "the write is durable under strict"
        );
        let btrfs = |ops: &[usize]| facts.allows(FsModel::Btrfs, &log, 6, &pending, &kept(ops));
        let xfs = |ops: &[usize]| facts.allows(FsModel::Xfs, &log, 6, &pending, &kept(ops));
        // f's names (and d, new above it) survive the fsync; "other" need not.
        assert!(
            btrfs(&[1, 2]),
            "the fsynced file without the earlier create"
        );
        assert!(
            !xfs(&[1, 2]),
            "a journal's fsync commits the earlier create"
        );
        assert!(!btrfs(&[]) && !btrfs(&[2]), "f or d lost after f's fsync");
        assert!(facts.allows(FsModel::Strict, &log, 6, &pending, &kept(&[])));
        // A later transaction keeps a prefix: "later" only with "other".
        assert!(btrfs(&[0, 1, 2, 5]));
        assert!(
            !btrfs(&[1, 2, 5]),
            "a transaction without an operation before it"
        );
    }

    fn tree(entries: &[(NodeId, &str, NodeId)], files: &[NodeId], dirs: &[NodeId]) -> Tree {
        let mut tree = Tree::empty(1);
        for &d in dirs {
            tree.nodes.insert(d, Node::Dir(Default::default()));
        }
        for &f in files {
            tree.nodes.insert(f, Node::File(b"old".to_vec()));
        }
        for &(dir, name, node) in entries {
            if let Some(Node::Dir(e)) = tree.nodes.get_mut(&dir) {
                e.insert(name.into(), node);
            }
        }
        tree
    }

    fn create(dir: NodeId, name: &str, node: NodeId, kind: NodeKind) -> LogOp {
        LogOp::Create {
            dir,
            name: name.into(),
            node,
            kind,
        }
    }

    fn rename(dir: NodeId, from: &str, to: &str, node: NodeId) -> LogOp {
        LogOp::Rename {
            from_dir: dir,
            from_name: from.into(),
            to_dir: dir,
            to_name: to.into(),
            node,
            exchanged: None,
        }
    }

    /// The log tree's finer rules: an old directory above the file is not
    /// logged; a renamed file's parent is logged whole; a directory fsync
    /// logs its new subdirectories' entries and its own name; nothing is
    /// logged before the fsync runs; appends persist in order.
    #[test]
    fn btrfs_log_tree_details() {
        let btrfs = |log: &Log, point: usize, ops: &[usize]| {
            let facts = ModelFacts::new(log);
            facts.allows(FsModel::Btrfs, log, point, &log.pending(point), &kept(ops))
        };
        // /a/f, both old; rename /a to /b, write and fsync f: /b may be lost.
        let mut log = Log::new(tree(&[(1, "a", 2), (2, "f", 3)], &[3], &[2]));
        log.push(rename(1, "a", "b", 2));
        log.push(LogOp::Write {
            node: 3,
            offset: 0,
            data: b"new".to_vec(),
        });
        log.push(LogOp::Fsync {
            node: 3,
            datasync: false,
        });
        assert_eq!(log.pending(3), vec![0]);
        assert!(
            btrfs(&log, 3, &[]),
            "an old directory's rename is not logged"
        );
        // P/f old; create /other and P/x, rename P/f to P/g, fsync f: P whole.
        let mut log = Log::new(tree(&[(1, "p", 2), (2, "f", 3)], &[3], &[2]));
        log.push(create(1, "other", 4, NodeKind::File));
        log.push(create(2, "x", 5, NodeKind::File));
        log.push(rename(2, "f", "g", 3));
        log.push(LogOp::Fsync {
            node: 3,
            datasync: false,
        });
        assert!(btrfs(&log, 4, &[1, 2]), "the parent logged, not /other");
        assert!(!btrfs(&log, 4, &[2]), "the parent logged whole: x kept");
        // D old; create /other, D/sub and sub/y, fsync D: sub's entries logged.
        let mut log = Log::new(tree(&[(1, "d", 2)], &[], &[2]));
        log.push(create(1, "other", 3, NodeKind::File));
        log.push(create(2, "sub", 4, NodeKind::Dir));
        log.push(create(4, "y", 5, NodeKind::File));
        log.push(LogOp::FsyncDir { dir: 2 });
        assert_eq!(log.pending(4), vec![0, 2]);
        assert!(btrfs(&log, 4, &[2]), "y without /other");
        assert!(!btrfs(&log, 4, &[]), "a new subdirectory's entries logged");
        // A new directory's fsync logs its own name.
        let mut log = Log::new(Tree::empty(1));
        log.push(create(1, "d", 2, NodeKind::Dir));
        log.push(LogOp::FsyncDir { dir: 2 });
        assert!(!btrfs(&log, 2, &[]) && btrfs(&log, 2, &[0]));
        // Before the fsync runs, nothing is logged.
        let mut log = Log::new(tree(&[(1, "a", 2), (2, "f", 3)], &[3], &[2]));
        log.push(create(1, "other", 4, NodeKind::File));
        log.push(create(2, "g", 5, NodeKind::File));
        log.push(LogOp::Fsync {
            node: 5,
            datasync: false,
        });
        assert!(btrfs(&log, 2, &[]) && !btrfs(&log, 3, &[]));
        // Appends in order: the second without the first, never.
        let mut log = Log::new(tree(&[(1, "f", 2)], &[2], &[]));
        for offset in [0u64, 4096] {
            log.push(LogOp::Write {
                node: 2,
                offset: 3 + offset,
                data: vec![1; 4096],
            });
        }
        assert!(btrfs(&log, 2, &[0]) && btrfs(&log, 2, &[0, 1]) && btrfs(&log, 2, &[]));
        assert!(!btrfs(&log, 2, &[1]), "a size past data never written");
        assert!(facts_allow_strict(&log, 2, &[1]));
        // A lost write above a kept one leaves no gap below the size.
        let mut log = Log::new(tree(&[(1, "f", 2)], &[2], &[]));
        for offset in [8192u64, 0] {
            log.push(LogOp::Write {
                node: 2,
                offset: 3 + offset,
                data: vec![1; 4096],
            });
        }
        assert!(
            btrfs(&log, 2, &[1]),
            "the lower write without the higher one"
        );
    }

    fn facts_allow_strict(log: &Log, point: usize, ops: &[usize]) -> bool {
        ModelFacts::new(log).allows(FsModel::Strict, log, point, &log.pending(point), &kept(ops))
    }

    #[test]
    fn overwrites_inside_a_file_are_free_and_may_tear() {
        let log = LogBuilder::new()
            .initial_file("f", 2, vec![0; 8192])
            .write(2, 0, [1; 4096])
            .write(2, 4096, [1; 4096])
            .build();
        let facts = ModelFacts::new(&log);
        let pending = log.pending(2);
        let torn = Kept::from([(1, Keep::Torn(512))]);
        assert!(facts.allows(FsModel::Ext4Ordered, &log, 2, &pending, &torn));
        assert!(facts.allows(FsModel::Ext4Ordered, &log, 2, &pending, &kept(&[1])));
    }

    #[test]
    fn an_append_may_keep_its_size_without_its_data_except_on_btrfs() {
        let log = LogBuilder::new()
            .create("object", 2)
            .write(2, 0, [0x78; 100])
            .build();
        let facts = ModelFacts::new(&log);
        let pending = log.pending(2);
        let size_only = Kept::from([(0, Keep::Whole), (1, Keep::SizeOnly)]);
        assert_eq!(
            facts.models_allowing(&log, 2, &pending, &size_only),
            [FsModel::Strict, FsModel::Xfs, FsModel::Ext4Ordered]
        );
        // What such a state holds: the size, zeros.
        let tree = log.state_with(2, &size_only);
        assert_eq!(
            tree.lookup("object").and_then(Node::data),
            Some(&[0u8; 100][..])
        );
    }

    /// The `ace` generator's btrfs MODEL SAYS NEVER (seq-2, 1 of 1,000,
    /// `append-A ; direct-write-A`): A appended to, then written at 0;
    /// real btrfs left A at its new size with zeros for the append. The
    /// other write's ordered extent set the inode's disk size to the whole
    /// in-memory size (NO_HOLES, `btrfs_inode_safe_disk_i_size_write`),
    /// over the append's unwritten data. Alone, the append's size without
    /// its data stays ruled out on btrfs, by an approximate rule: unknown.
    #[test]
    fn btrfs_keeps_a_size_over_unwritten_data_when_another_write_carries_it() {
        let append = LogOp::Write {
            node: 2,
            offset: 8192,
            data: vec![b'i'; 4096],
        };
        let direct = LogOp::Write {
            node: 2,
            offset: 0,
            data: vec![b'j'; 4096],
        };
        let log = Log::from_recorded(file_a_of(&[b'g'; 8192]), [append, direct], 4096);
        let state = Kept::from([(0, Keep::SizeOnly), (1, Keep::Whole)]);
        let mut expected = vec![b'j'; 4096];
        expected.extend([b'g'; 4096]);
        expected.extend([0; 4096]);
        assert_eq!(a_in(&log, 2, &state), expected);
        assert_eq!(label_of(FsModel::Btrfs, &log, 2, &state), Label::Can);
        // The direct write lost too: nothing carried the size (unknown).
        let size_only = Kept::from([(0, Keep::SizeOnly)]);
        assert_eq!(
            label_of(FsModel::Btrfs, &log, 2, &size_only),
            Label::Unknown
        );
        // Negative control: the append alone.
        let log = Log::from_recorded(file_a_of(&[b'g'; 8192]), [log.ops()[0].clone()], 4096);
        assert_eq!(
            label_of(FsModel::Btrfs, &log, 1, &size_only),
            Label::Unknown
        );
    }

    /// The `ace` generator's btrfs MODEL GAPs (seq-2, 2 of 1,000:
    /// `truncate-A-shrink ; falloc-A-grow` and `; truncate-A-grow`): A (8 KiB
    /// of g) truncated to 2 KiB, then grown to 16 KiB; real btrfs left
    /// `A=gggg` and zeros: the new size, and the block's old bytes past the
    /// old size. btrfs zeroes them at the grow in a delayed write that may
    /// reach the disk after the size. ext4 and XFS wrote the zeros first.
    #[test]
    fn a_grow_past_a_truncate_into_a_block_may_show_its_old_bytes_on_btrfs() {
        let ops = [
            LogOp::SetLen { node: 2, len: 2048 },
            LogOp::SetLen {
                node: 2,
                len: 16384,
            },
        ];
        let log = Log::from_recorded(file_a_of(&[b'g'; 8192]), ops, 4096);
        // truncate, its zeroing, grow, the old bytes, the grow's zeroing.
        assert_eq!(log.ops().len(), 5, "{:?}", log.ops());
        assert_eq!(
            log.ops()[3],
            LogOp::GrowStale {
                node: 2,
                offset: 2048,
                data: vec![b'g'; 2048]
            }
        );
        let stale = kept(&[0, 1, 2, 3]);
        let mut expected = vec![b'g'; 4096];
        expected.resize(16384, 0);
        assert_eq!(a_in(&log, 5, &stale), expected);
        let labels = ModelFacts::new(&log).labels(&log, 5, &log.pending(5), &stale);
        assert_eq!(labels.can, [FsModel::Strict, FsModel::Btrfs]);
        assert_eq!(labels.unknown, [FsModel::Xfs], "ext4 data=writeback can");
        // Every op kept: zeros (the workload's own view).
        let mut zeros = vec![b'g'; 2048];
        zeros.resize(16384, 0);
        assert_eq!(a_in(&log, 5, &kept(&[0, 1, 2, 3, 4])), zeros);
        // A later operation kept beside it (a create elsewhere, in a later
        // transaction): the grow's zeroing is data, not a metadata operation
        // a later transaction would have to carry.
        let mut later = log.clone();
        later.push(create(1, "C", 9, NodeKind::File));
        let stale_and_create = kept(&[0, 1, 2, 3, 5]);
        assert_eq!(
            label_of(FsModel::Btrfs, &later, 6, &stale_and_create),
            Label::Can
        );
        // Synced in between, the stale bytes are still on the disk on
        // btrfs (the truncate wrote no zeros there), so the grow after it
        // may show them: the durable state holds them hidden no more, but
        // the grow's own ops carry them.
        let log = Log::from_recorded(
            file_a_of(&[b'g'; 8192]),
            [
                LogOp::SetLen { node: 2, len: 2048 },
                LogOp::Fsync {
                    node: 2,
                    datasync: true,
                },
                LogOp::SetLen {
                    node: 2,
                    len: 16384,
                },
            ],
            4096,
        );
        let grow = log.ops().len();
        assert_eq!(a_in(&log, grow, &kept(&[grow - 3, grow - 2])), expected);
    }

    /// A's content in the state at `point` that keeps `kept`.
    fn a_in(log: &Log, point: usize, kept: &Kept) -> Vec<u8> {
        let state = log.state_with(point, kept);
        state
            .lookup("A")
            .and_then(Node::data)
            .expect("A is a file")
            .to_vec()
    }

    /// `model`'s label of that state (its point's own pending operations).
    fn label_of(model: FsModel, log: &Log, point: usize, kept: &Kept) -> Label {
        ModelFacts::new(log).label(model, log, point, &log.pending(point), kept)
    }

    /// The models that can leave that state.
    fn allowing(log: &Log, point: usize, kept: &Kept) -> Vec<FsModel> {
        ModelFacts::new(log).models_allowing(log, point, &log.pending(point), kept)
    }

    #[test]
    fn model_names_round_trip_and_a_typo_lists_them() {
        for model in FsModel::ALL {
            assert_eq!(model.name().parse::<FsModel>(), Ok(*model));
        }
        let e = "ext4".parse::<FsModel>().unwrap_err();
        assert!(e.contains("strict, xfs, ext4-ordered, btrfs"), "{e}");
        assert_eq!("ext4-writeback".parse::<FsModel>(), Ok(FsModel::Xfs));
    }
}

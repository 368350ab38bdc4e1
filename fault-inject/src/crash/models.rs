//! Filesystem persistence models: which of the crash states the strict POSIX
//! model allows a real filesystem can leave.
//!
//! `strict` (the default) keeps only what fsync and sync promise: any subset
//! of the pending operations may survive, writes torn at sector boundaries.
//! Real filesystems keep more, in order. `ext4-ordered` models ext4's default
//! `data=ordered` journal (Documentation/filesystems/ext4.rst, "Data Mode";
//! the same simplifications as ALICE, Pillai et al. OSDI'14, §4, and CuttleFS,
//! Rebello et al. ATC'20):
//!
//! * metadata (create, link, remove, rename, truncate) and every write that
//!   extends its file (the size is metadata; ordered mode writes the data
//!   blocks before the journal commit that exposes them) persist in log
//!   order, whole: a crash keeps a prefix of them;
//! * an fsync, fdatasync or directory fsync commits the journal: every
//!   metadata operation before it persists with it;
//! * a rename over an existing file first writes the renamed file's data
//!   (`auto_da_alloc`): if the rename persists, so do the writes before it;
//! * overwrites inside a file persist or not, in any order, torn at sectors.
//!
//! A state is a strict state the model can also produce, so one strict
//! exploration says for each violation under which models it can happen.

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::durability::{Keep, Kept, Log, LogOp, Node};

/// A persistence model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum FsModel {
    /// Only what fsync and sync promise (POSIX).
    Strict,
    /// ext4 with `data=ordered` (its default).
    Ext4Ordered,
}

impl FsModel {
    /// Every model, the strictest first.
    pub const ALL: &'static [FsModel] = &[FsModel::Strict, FsModel::Ext4Ordered];

    /// The model's name in flags and reports.
    pub fn name(self) -> &'static str {
        match self {
            FsModel::Strict => "strict",
            FsModel::Ext4Ordered => "ext4-ordered",
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
        FsModel::ALL
            .iter()
            .copied()
            .find(|m| m.name() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = FsModel::ALL.iter().map(|m| m.name()).collect();
                format!(
                    "unknown filesystem model '{text}' (expected one of: {})",
                    names.join(", ")
                )
            })
    }
}

/// What the models need to know about each operation of a log, found by
/// replaying it once.
#[derive(Debug, Clone)]
pub struct ModelFacts {
    /// Whether the op goes through ext4's journal in order: metadata, and
    /// writes that extend their file.
    ordered: Vec<bool>,
    /// For a rename over an existing name: the writes to the renamed node
    /// before it (ext4 writes their data before the rename commits).
    replacing: Vec<Option<Vec<usize>>>,
}

impl ModelFacts {
    /// Replays `log` once.
    pub fn new(log: &Log) -> ModelFacts {
        let mut tree = log.initial().clone();
        let mut ordered = Vec::with_capacity(log.ops().len());
        let mut replacing = Vec::with_capacity(log.ops().len());
        for op in log.ops() {
            let (is_ordered, replaced) = match op {
                LogOp::Write { node, offset, data } => {
                    let size = match tree.nodes.get(node) {
                        Some(Node::File(bytes)) => bytes.len() as u64,
                        _ => 0,
                    };
                    (offset + data.len() as u64 > size, None)
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
                    let writes = || {
                        log.ops()
                            .iter()
                            .enumerate()
                            .take(replacing.len())
                            .filter(
                                |(_, op)| matches!(op, LogOp::Write { node: n, .. } if n == node),
                            )
                            .map(|(j, _)| j)
                            .collect()
                    };
                    (true, exists.then(writes))
                }
                LogOp::Fsync { .. } | LogOp::FsyncDir { .. } | LogOp::Sync => (false, None),
                _ => (true, None),
            };
            ordered.push(is_ordered);
            replacing.push(replaced);
            tree.apply(op);
        }
        ModelFacts { ordered, replacing }
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
        match model {
            FsModel::Strict => true,
            FsModel::Ext4Ordered => self.ext4_ordered(log, point, pending, kept),
        }
    }

    /// The models that can leave this state.
    pub fn models_allowing(
        &self,
        log: &Log,
        point: usize,
        pending: &[usize],
        kept: &Kept,
    ) -> Vec<FsModel> {
        FsModel::ALL
            .iter()
            .copied()
            .filter(|m| self.allows(*m, log, point, pending, kept))
            .collect()
    }

    fn ext4_ordered(&self, log: &Log, point: usize, pending: &[usize], kept: &Kept) -> bool {
        let whole = |i: usize| kept.get(&i) == Some(&Keep::Whole);
        let ordered: Vec<usize> = pending
            .iter()
            .copied()
            .filter(|&i| self.ordered[i])
            .collect();
        // A prefix of the journal, each operation whole.
        let prefix = ordered.iter().take_while(|&&i| whole(i)).count();
        if ordered[prefix..].iter().any(|i| kept.contains_key(i)) {
            return false;
        }
        // An fsync commits every metadata operation before it.
        let ops = &log.ops()[..point];
        if let Some(last_commit) = ops
            .iter()
            .rposition(|op| matches!(op, LogOp::Fsync { .. } | LogOp::FsyncDir { .. }))
        {
            if ordered.iter().any(|&i| i < last_commit && !whole(i)) {
                return false;
            }
        }
        // auto_da_alloc: a kept rename over a file keeps the renamed file's
        // earlier writes.
        let pending_set: HashSet<usize> = pending.iter().copied().collect();
        let dropped = |i: usize| pending_set.contains(&i) && !whole(i);
        !self
            .replacing
            .iter()
            .enumerate()
            .take(point)
            .any(|(i, writes)| {
                writes
                    .as_ref()
                    .is_some_and(|writes| !dropped(i) && writes.iter().any(|&j| dropped(j)))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durability::{NodeKind, Tree};

    /// The save pattern ALICE calls "replace via rename": write a temp file,
    /// rename it over the old one, no fsync.
    fn replace_via_rename() -> Log {
        let mut tree = Tree::empty(1);
        tree.nodes.insert(
            1,
            Node::Dir(std::collections::BTreeMap::from([("f".into(), 2)])),
        );
        tree.nodes.insert(2, Node::File(b"old".to_vec()));
        let mut log = Log::new(tree);
        log.push(LogOp::Create {
            dir: 1,
            name: "tmp".into(),
            node: 3,
            kind: NodeKind::File,
        });
        log.push(LogOp::Write {
            node: 3,
            offset: 0,
            data: b"new".to_vec(),
        });
        log.push(LogOp::Rename {
            from_dir: 1,
            from_name: "tmp".into(),
            to_dir: 1,
            to_name: "f".into(),
            node: 3,
            exchanged: None,
        });
        log
    }

    fn kept(ops: &[usize]) -> Kept {
        ops.iter().map(|&i| (i, Keep::Whole)).collect()
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
            vec![FsModel::Strict]
        );
    }

    #[test]
    fn an_fsync_commits_the_metadata_before_it() {
        let mut log = replace_via_rename();
        log.push(LogOp::Fsync { node: 3 });
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

    #[test]
    fn overwrites_inside_a_file_are_free_and_may_tear() {
        let mut tree = Tree::empty(1);
        tree.nodes.insert(
            1,
            Node::Dir(std::collections::BTreeMap::from([("f".into(), 2)])),
        );
        tree.nodes.insert(2, Node::File(vec![0; 8192]));
        let mut log = Log::new(tree);
        for offset in [0, 4096] {
            log.push(LogOp::Write {
                node: 2,
                offset,
                data: vec![1; 4096],
            });
        }
        let facts = ModelFacts::new(&log);
        let pending = log.pending(2);
        let torn = Kept::from([(1, Keep::Torn(512))]);
        assert!(facts.allows(FsModel::Ext4Ordered, &log, 2, &pending, &torn));
        assert!(facts.allows(FsModel::Ext4Ordered, &log, 2, &pending, &kept(&[1])));
    }

    #[test]
    fn model_names_round_trip_and_a_typo_lists_them() {
        for model in FsModel::ALL {
            assert_eq!(model.name().parse::<FsModel>(), Ok(*model));
        }
        let e = "ext4".parse::<FsModel>().unwrap_err();
        assert!(e.contains("strict, ext4-ordered"), "{e}");
    }
}

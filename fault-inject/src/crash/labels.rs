//! Three answers per persistence model, not two: a crash state **can**
//! happen on a model, is **unknown** on it, or **never** happens on it.
//!
//! Most rules of [`super::models`] follow the kernel's code. A few only
//! approximate it, in the direction that can rule a state out wrongly; a
//! "never" that rests on one of them would be a claim the model cannot back.
//! So each model decides twice: with all its rules (`Rules::All`, "can")
//! and with only its sure ones (`Rules::Sure`); a state the first rules
//! out and the second allows is "unknown". "Never" is said only where the
//! sure rules rule the state out. The approximate rules, and why:
//!
//! * **fsync's reach through an in-place overwrite** (xfs, ext4-ordered): an
//!   fsync forces the journal to the inode's last change, and the model
//!   counts every write as one; an overwrite that neither grows nor
//!   allocates changes only timestamps, and only when they move
//!   (`file_modified` -> `inode_needs_update_time`, at the coarse clock's
//!   granularity; ext4 `ext4_dirty_inode` -> `ext4_update_inode_fsync_trans`,
//!   XFS `xfs_vn_update_time`). Otherwise the fsync forces less. Sure: size
//!   changes (`i_disksize`, `ext4_do_update_inode`), directory entry changes
//!   (the directory inode is logged every time), fdatasync's reach.
//! * **`auto_da_alloc` beyond a new file's lost data** (ext4-ordered):
//!   sure only that a rename over a file does not persist while a write to
//!   the renamed file that needed new blocks is lost whole (its allocation
//!   and size go in a transaction no later than the rename's); a size
//!   without its data, a torn write or an overwrite of blocks the file had
//!   may persist behind the rename (`ext4_alloc_da_blocks`,
//!   `filemap_flush` does not wait; unwritten extents under
//!   `dioread_nolock` are not ordered data).
//! * **btrfs's log tree where "new" is guessed** (btrfs): parents logged
//!   whole after a rename or unlink, renames of new ancestors, a directory
//!   fsync's new subdirectories (`crash::log_tree`); the kernel logs them
//!   only while the change is in the running transaction.
//! * **btrfs's size over unwritten data** (btrfs): only where another write
//!   to the file completed after it grew (NO_HOLES: an ordered extent's
//!   completion writes the whole in-memory size,
//!   `btrfs_inode_safe_disk_i_size_write`); other updates of the inode item
//!   may carry it too.
//! * **a grow's zeroing before its size** (xfs): XFS writes the zeroed range
//!   before it logs a grow (`xfs_setattr_size`); ext4 data=writeback, which
//!   the xfs model also stands for, orders no data.
//!
//! Sure, by the code they follow: metadata in journal order and whole, data
//! that needed new blocks after the metadata before its first write (delayed
//! allocation only moves the allocation later), fdatasync's size test (a
//! write into a hole allocates and makes the kernel commit more, never
//! less), btrfs's transactions, its truncate's zeroing never before the size
//! (copy-on-write; `nodatacow` files are not modelled at all), and ext4
//! data=ordered's zeroed block before the truncate commits.

use serde::{Deserialize, Serialize};

use super::models::FsModel;

/// Which of a model's rules decide a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rules {
    /// Every rule, as the model states it.
    All,
    /// Only the rules the kernel surely follows (the approximate ones left
    /// out, or weakened to their sure part).
    Sure,
}

/// What one model says of one crash state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    /// The model can leave it.
    Can,
    /// Only an approximate rule rules it out: the model cannot say never.
    Unknown,
    /// The model's sure rules rule it out.
    Never,
}

/// Every model's label of one state: those not listed say never.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels {
    /// The models that can leave it.
    pub can: Vec<FsModel>,
    /// The models that rule it out only by an approximate rule.
    pub unknown: Vec<FsModel>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crash::models::{every_kept_subset, kept, ModelFacts};
    use crate::durability::{Keep, Kept, Log, LogBuilder, LogOp};

    fn labels(log: &Log, point: usize, kept: &Kept) -> Labels {
        ModelFacts::new(log).labels(log, point, &log.pending(point), kept)
    }

    /// f holds 8 KiB; overwrite its first byte, create g, overwrite again,
    /// fsync f. The model's fsync reaches the second overwrite and so
    /// commits g's create; the kernel's reaches it only if that overwrite
    /// moved f's timestamps.
    fn overwrite_create_overwrite_fsync(grow: bool) -> Log {
        let last = if grow { 8192 } else { 0 };
        LogBuilder::new()
            .initial_file("f", 2, vec![b'o'; 8192])
            .write(2, 0, b"x")
            .create("g", 3)
            .write(2, last, b"y")
            .fsync(2)
            .build()
    }

    #[test]
    fn a_state_only_an_fsyncs_reach_through_an_overwrite_rules_out_is_unknown() {
        let log = overwrite_create_overwrite_fsync(false);
        // After the fsync, g's create lost (the writes are durable).
        let state = labels(&log, 4, &Kept::new());
        assert_eq!(state.can, [FsModel::Strict, FsModel::Btrfs]);
        assert_eq!(state.unknown, [FsModel::Xfs, FsModel::Ext4Ordered]);
        // Negative control: when the last write grows f, its size change
        // surely reaches the inode's transaction: never.
        let log = overwrite_create_overwrite_fsync(true);
        let state = labels(&log, 4, &Kept::new());
        assert_eq!(state.can, [FsModel::Strict, FsModel::Btrfs]);
        assert!(state.unknown.is_empty(), "{state:?}");
    }

    /// The export without fsync: config holds "old"; create tmp, write
    /// "new", rename tmp over config.
    fn replace(data: Keep) -> (Log, Kept) {
        let log = LogBuilder::new()
            .initial_file("config", 2, b"old")
            .create("tmp", 3)
            .write(3, 0, b"new")
            .rename("tmp", "config", 3)
            .build();
        let mut kept = kept(&[0, 2]);
        kept.insert(1, data);
        (log, kept)
    }

    #[test]
    fn auto_da_alloc_is_sure_only_for_new_data_lost_whole() {
        // The renamed file at its size, zeros for data: only auto_da_alloc
        // rules it out on ext4, and unwritten extents let it through.
        // (btrfs: unknown too, a size over unwritten data needs another
        // write to carry it, an approximate rule; see models.)
        let (log, size_only) = replace(Keep::SizeOnly);
        let state = labels(&log, 3, &size_only);
        assert_eq!(state.can, [FsModel::Strict, FsModel::Xfs]);
        assert_eq!(state.unknown, [FsModel::Ext4Ordered, FsModel::Btrfs]);
        // Negative control: the data lost whole (an empty config) stays
        // never on ext4: its allocation and size commit with the rename.
        let (log, mut lost) = replace(Keep::Whole);
        lost.remove(&1);
        let state = labels(&log, 3, &lost);
        assert_eq!(state.can, [FsModel::Strict, FsModel::Xfs, FsModel::Btrfs]);
        assert!(state.unknown.is_empty(), "{state:?}");
    }

    #[test]
    fn an_overwrite_behind_a_replacing_rename_is_unknown_on_ext4() {
        // b (4 KiB) is overwritten in place, then renamed over a.
        let log = LogBuilder::new()
            .initial_file("a", 2, b"old")
            .initial_file("b", 3, vec![b'o'; 4096])
            .write(3, 0, b"new")
            .rename("b", "a", 3)
            .build();
        let state = labels(&log, 2, &kept(&[1]));
        assert!(state.can.contains(&FsModel::Xfs), "{state:?}");
        assert_eq!(state.unknown, [FsModel::Ext4Ordered]);
    }

    /// btrfs: a is renamed to b, c is created in the same directory, then
    /// a (now b) is fsynced: the model has the parent logged whole, so c's
    /// create persists with the fsync; the kernel logs the parent only if
    /// the rename is in the running transaction.
    #[test]
    fn btrfs_parents_logged_after_a_rename_are_unknown_and_its_own_names_never() {
        let log = LogBuilder::new()
            .initial_file("a", 2, b"a")
            .rename("a", "b", 2)
            .create("c", 3)
            .fsync(2)
            .build();
        // c's create lost, the rename kept.
        let state = labels(&log, 3, &kept(&[0]));
        assert!(state.unknown.contains(&FsModel::Btrfs), "{state:?}");
        assert!(!state.can.contains(&FsModel::Btrfs), "{state:?}");
        // Negative control: the fsynced file's own rename lost is never.
        let state = labels(&log, 3, &kept(&[1]));
        assert!(!state.can.contains(&FsModel::Btrfs), "{state:?}");
        assert!(!state.unknown.contains(&FsModel::Btrfs), "{state:?}");
    }

    /// Over every kept subset of a few logs: a model that can leave a state
    /// never labels it unknown, and the sure rules never rule out a state
    /// all rules allow; each model's can-or-unknown states are a subset of
    /// the model it refines.
    #[test]
    fn labels_are_consistent_with_refinement() {
        let (replace_log, _) = replace(Keep::Whole);
        let mut synced = overwrite_create_overwrite_fsync(false);
        synced.push(LogOp::Rename {
            from_dir: 1,
            from_name: "g".into(),
            to_dir: 1,
            to_name: "f".into(),
            node: 3,
            exchanged: None,
        });
        for log in [replace_log, synced] {
            let facts = ModelFacts::new(&log);
            every_kept_subset(&log, |point, pending, ops| {
                let l = facts.labels(&log, point, pending, &kept(ops));
                assert!(l.can.iter().all(|m| !l.unknown.contains(m)));
                let maybe = |m: FsModel| l.can.contains(&m) || l.unknown.contains(&m);
                for &model in FsModel::ALL {
                    if let Some(wider) = model.refines() {
                        assert!(
                            !maybe(model) || maybe(wider),
                            "point {point}, kept {ops:?}: {model} but not {wider}"
                        );
                    }
                }
            });
        }
    }
}

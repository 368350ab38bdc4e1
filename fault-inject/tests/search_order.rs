//! The crash-state search hands out the same states in the same order for the
//! same seed, over both state spaces (a log's file trees, a block device's
//! image): explore's `--seed` replays a run, and shards split one sequence.
//! The expected sequences were recorded before the two searches became one
//! (those with tears again when a torn write could keep its tail).

use std::fmt::Write as _;
use std::sync::Arc;

use slowfs_faults::crash::blocks::{BlockSpace, Device};
use slowfs_faults::crash::search::Search;
use slowfs_faults::crash::trees::{TreeConfig, TreeSpace};
use slowfs_faults::durability::{Keep, Kept, Log, LogBuilder};

/// A candidate as one line: its crash point and what it keeps of each
/// pending operation (`w` whole, `tN` torn after N bytes, `s` size only).
fn line(point: usize, kept: &Kept) -> String {
    let mut out = format!("{point}:");
    for (i, keep) in kept {
        let _ = match keep {
            Keep::Whole => write!(out, " {i}w"),
            Keep::Torn(n) => write!(out, " {i}t{n}"),
            Keep::TornTail(n) => write!(out, " {i}T{n}"),
            Keep::SizeOnly => write!(out, " {i}s"),
        };
    }
    out
}

/// FNV-1a of a sequence's text: stable across Rust versions, unlike std's hashers.
fn digest(lines: &[String]) -> u64 {
    lines
        .join("\n")
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
}

/// config holds "old"; tmp is created, written "new", renamed over config,
/// synced halfway: a small space, every state spelled out.
fn replace_log() -> Log {
    LogBuilder::new()
        .initial_file("config", 2, b"old")
        .create("tmp", 3)
        .write(3, 0, b"new!")
        .fsync(3)
        .rename("tmp", "config", 3)
        .write(3, 4, b"+more")
        .build()
}

/// Three files created, written and appended to, never synced: 9 pending
/// operations at the end, more states than are enumerated, so sampled.
fn three_files_log() -> Log {
    let mut log = LogBuilder::new();
    for (node, name) in [(100, "a"), (101, "b"), (102, "c")] {
        log.create(name, node)
            .write(node, 0, b"x\n")
            .write(node, 2, b"yy\n");
    }
    log.build()
}

const IMAGE: u64 = 2;

/// An image with two flush epochs: three writes, then nine (one a repeat),
/// two sectors each: the second epoch has more states than are enumerated.
fn device_log() -> Log {
    let mut log = LogBuilder::new();
    log.initial_file("image", IMAGE, Vec::new());
    for (sector, byte) in [(0, 1), (8, 2), (16, 3)] {
        log.write(IMAGE, sector * 512, [byte; 1024]);
    }
    log.fsync(IMAGE);
    let epoch = [
        (0, 4),
        (8, 5),
        (4, 6),
        (0, 4),
        (24, 7),
        (2, 8),
        (8, 9),
        (30, 10),
        (12, 11),
    ];
    for (sector, byte) in epoch {
        log.write(IMAGE, sector * 512, [byte; 1024]);
    }
    log.build()
}

/// Every state a tree search hands out, as lines (with models, their names).
fn tree_sequence(log: &Log, config: TreeConfig, seed: u64) -> (Vec<String>, usize) {
    let mut search = Search::new(TreeSpace::new(log, config), seed);
    let mut lines = Vec::new();
    for c in search.by_ref() {
        let mut text = line(c.point, &c.kept);
        for model in &c.models {
            let _ = write!(text, " {}", model.name());
        }
        lines.push(text);
    }
    assert!(search.finished() && search.summary().complete());
    (lines, search.duplicates())
}

/// Every state a block search hands out, as lines.
fn block_sequence(log: &Log, sector: Option<u64>, seed: u64) -> (Vec<String>, usize) {
    let device = Arc::new(Device::new(log, IMAGE).unwrap());
    let mut search = Search::new(BlockSpace::new(device, log, sector), seed);
    let mut lines = Vec::new();
    while let Some(c) = search.next_unless(&|| false) {
        lines.push(line(c.point, &c.kept));
    }
    assert!(search.finished() && search.summary().complete());
    (lines, search.duplicates())
}

#[test]
fn a_small_tree_space_is_walked_in_the_recorded_order() {
    let log = replace_log();
    let mut config = TreeConfig::all(log.ops().len());
    config.models = true;
    let (lines, duplicates) = tree_sequence(&log, config, 1);
    assert_eq!(
        lines,
        [
            "0: strict xfs ext4-ordered btrfs",
            "1: 0w strict xfs ext4-ordered btrfs",
            "2: 0w 1w strict xfs ext4-ordered btrfs",
            "4: 0w 3w strict xfs ext4-ordered btrfs",
            "5: 0w 3w 4w strict xfs ext4-ordered btrfs",
            "5: 0w 4w strict xfs ext4-ordered",
        ]
    );
    assert_eq!(duplicates, 45);
}

#[test]
fn a_sampled_tree_space_is_walked_in_the_recorded_order() {
    let log = three_files_log();
    let recorded = [
        (1, false, 1143, 6785, 0x845cd13f426953cc),
        (2026, true, 2726, 13404, 0x4b83bc021218602c),
    ];
    for (seed, per_point, states, duplicates, sequence) in recorded {
        let mut config = TreeConfig::all(log.ops().len());
        config.sector = Some(1);
        config.size_only = true;
        config.per_point = per_point;
        let (lines, skipped) = tree_sequence(&log, config, seed);
        assert_eq!(
            (lines.len(), skipped, digest(&lines)),
            (states, duplicates, sequence),
            "seed {seed}"
        );
    }
}

#[test]
fn a_block_space_is_walked_in_the_recorded_order() {
    let log = device_log();
    let (lines, duplicates) = block_sequence(&log, None, 1);
    // Every epoch's extremes, then epoch by epoch its in-order prefixes,
    // each write alone, each dropped alone; then samples.
    assert_eq!(
        lines[..16],
        [
            "3:",
            "3: 0w 1w 2w",
            "13: 4w 5w 6w 7w 8w 9w 10w 11w 12w",
            "3: 0w",
            "3: 0w 1w",
            "3: 2w",
            "3: 1w 2w",
            "3: 0w 2w",
            "13: 4w",
            "13: 4w 5w",
            "13: 4w 5w 6w",
            "13: 4w 5w 6w 7w 8w",
            "13: 4w 5w 6w 7w 8w 9w",
            "13: 4w 5w 6w 7w 8w 9w 10w",
            "13: 4w 5w 6w 7w 8w 9w 10w 11w",
            "13: 6w",
        ]
    );
    let recorded = (176, 461, 0x9150_ce32_3a0f_ea22);
    assert_eq!((lines.len(), duplicates, digest(&lines)), recorded);
    let (torn, duplicates) = block_sequence(&log, Some(512), 7);
    let recorded = (11953, 20687, 0xac80904c08a2a411);
    assert_eq!((torn.len(), duplicates, digest(&torn)), recorded);
}

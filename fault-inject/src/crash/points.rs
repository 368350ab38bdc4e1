//! The crash points of a log, walked in order: at each point the surely-durable
//! tree and the operations still pending, kept up to date op by op instead of
//! recomputed from the start (which costs O(k) per point, O(n²) in all, and
//! `Log::pending`'s O(k²) per point).

use crate::durability::{Log, LogOp, NodeId, Tree};

/// One crash point: a crash right after the first `k` operations.
#[derive(Debug, Clone)]
pub struct Point {
    /// Operations done before the crash.
    pub k: usize,
    /// Indices of the operations that a crash here may or may not keep.
    pub pending: Vec<usize>,
    /// The state that surely survives a crash here.
    pub durable: Tree,
}

/// The operations pending after each step of a log, kept up to date.
#[derive(Debug, Default, Clone)]
struct Pending {
    /// Pending ops, each with the directories whose fsync it still waits for
    /// (empty for data ops, which wait for their file's fsync).
    ops: Vec<(usize, Vec<NodeId>)>,
}

impl Pending {
    /// Takes in operation `i` of `ops`.
    fn step(&mut self, ops: &[LogOp], i: usize) {
        let op = &ops[i];
        match op {
            LogOp::Write { .. }
            | LogOp::SetLen { .. }
            | LogOp::TruncateZeroing { .. }
            | LogOp::WriteInPlace { .. }
            | LogOp::GrowStale { .. }
            | LogOp::GrowZeroing { .. } => self.ops.push((i, Vec::new())),
            LogOp::Create { .. }
            | LogOp::Link { .. }
            | LogOp::Remove { .. }
            | LogOp::Rename { .. } => {
                let mut dirs = op.dirs();
                dirs.dedup();
                self.ops.push((i, dirs));
            }
            LogOp::Fsync { node, .. } => {
                self.ops.retain(|(p, _)| ops[*p].data_node() != Some(*node))
            }
            LogOp::FsyncDir { dir } => {
                for (_, dirs) in &mut self.ops {
                    dirs.retain(|d| d != dir);
                }
                self.ops
                    .retain(|(p, dirs)| ops[*p].data_node().is_some() || !dirs.is_empty());
            }
            LogOp::Sync => self.ops.clear(),
        }
    }

    fn indices(&self) -> Vec<usize> {
        self.ops.iter().map(|(i, _)| *i).collect()
    }
}

/// How many operations are pending at each crash point `first..=last`: one
/// pass, no trees (for planning and ETAs).
pub fn pending_counts(log: &Log, first: usize, last: usize) -> Vec<usize> {
    let last = last.min(log.ops().len());
    let mut pending = Pending::default();
    let mut counts = Vec::new();
    for k in 0..=last {
        if k >= first {
            counts.push(pending.ops.len());
        }
        if k < last {
            pending.step(log.ops(), k);
        }
    }
    counts
}

/// The crash point `k` alone (O(k): a walk from the start).
pub fn point(log: &Log, k: usize) -> Point {
    Sweep::new(log, k, k)
        .next()
        .expect("a point within the log")
}

/// Walks crash points `first..=last` of a log, one step per call.
#[derive(Debug)]
pub struct Sweep<'a> {
    log: &'a Log,
    next: usize,
    last: usize,
    volatile: Tree,
    durable: Tree,
    pending: Pending,
    finished: bool,
}

impl<'a> Sweep<'a> {
    /// A walk over crash points `first..=last` (clamped to the log).
    pub fn new(log: &'a Log, first: usize, last: usize) -> Sweep<'a> {
        let last = last.min(log.ops().len());
        let mut sweep = Sweep {
            log,
            next: 0,
            last,
            volatile: log.initial().clone(),
            durable: log.initial().clone(),
            pending: Pending::default(),
            finished: first > last,
        };
        while sweep.next < first.min(last) {
            sweep.advance();
        }
        sweep
    }

    /// Crash point `k`, walking on to it without building the points between
    /// (O(1) per operation); `None` if the walk is past it or it is beyond the
    /// walk's last point.
    pub fn seek(&mut self, k: usize) -> Option<Point> {
        if self.finished || k < self.next || k > self.last {
            return None;
        }
        while self.next < k {
            self.advance();
        }
        self.next()
    }

    /// Applies operation `self.next` to the walk's state.
    fn advance(&mut self) {
        let i = self.next;
        let op = &self.log.ops()[i];
        self.volatile.apply(op);
        self.durable.absorb(&self.volatile, op);
        self.pending.step(self.log.ops(), i);
        self.next += 1;
    }
}

impl Iterator for Sweep<'_> {
    type Item = Point;

    fn next(&mut self) -> Option<Point> {
        if self.finished || self.next > self.last {
            return None;
        }
        let point = Point {
            k: self.next,
            pending: self.pending.indices(),
            durable: self.durable.clone(),
        };
        if self.next < self.last {
            self.advance();
        } else {
            self.finished = true;
        }
        Some(point)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durability::LogBuilder;

    fn log() -> Log {
        LogBuilder::new()
            .create("a", 2)
            .write(2, 0, b"x")
            .fsync(2)
            .mkdir("b", 3)
            .rename_in((1, "a"), (3, "a"), 2)
            .fsync_dir(1)
            .write(2, 1, b"y")
            .sync()
            .set_len(2, 0)
            .build()
    }

    #[test]
    fn the_sweep_agrees_with_the_log_at_every_point() {
        let log = log();
        let points: Vec<Point> = Sweep::new(&log, 0, log.ops().len()).collect();
        assert_eq!(points.len(), log.ops().len() + 1);
        for p in &points {
            assert_eq!(p.pending, log.pending(p.k), "pending at {}", p.k);
            assert_eq!(p.durable, log.durable_state(p.k), "durable at {}", p.k);
        }
        let some: Vec<usize> = Sweep::new(&log, 3, 5).map(|p| p.k).collect();
        assert_eq!(some, [3, 4, 5]);
        let counts = pending_counts(&log, 2, 6);
        let expected: Vec<usize> = (2..=6).map(|k| log.pending(k).len()).collect();
        assert_eq!(counts, expected);
        assert_eq!(point(&log, 4).pending, log.pending(4));
        let mut walk = Sweep::new(&log, 1, 7);
        assert_eq!(walk.seek(3).map(|p| p.k), Some(3));
        assert_eq!(walk.seek(6).map(|p| p.pending), Some(log.pending(6)));
        assert!(walk.seek(5).is_none() && walk.seek(8).is_none());
        assert_eq!(walk.map(|p| p.k).collect::<Vec<_>>(), [7]);
    }
}

//! The crash states of a block device, recorded as the writes and flushes of
//! its image file (a loop device turns a filesystem's block writes into writes
//! of its backing file, and its flushes into fsyncs of it): what the last
//! completed flush covered is on the disk; any subset of the writes after it
//! may be, and with a sector size a write may be cut at a sector boundary.
//!
//! A state is the base image plus the writes it keeps, so it costs the writes,
//! not the image: [`Device::writes`] lists them, [`Device::fingerprint`]
//! hashes only the sectors they cover. [`BlockSearch`] hands states out in the
//! order of [`super::search`] (each flush epoch's extremes first, then its
//! in-order prefixes, each write dropped or kept alone and the last torn, then
//! samples), each distinct state once, and hears a stop between any two.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::BuildHasher;
use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::search::{Candidate, CoverageSummary, PointCoverage, ENUMERATE_UP_TO, SATURATED_AFTER};
use super::states::PointStates;
use crate::durability::{Keep, Kept, Log, LogOp, NodeId, Tree};

/// The unit a block device writes: writes are whole sectors at sector offsets.
pub const SECTOR: u64 = 512;

/// One write of the device.
#[derive(Debug, Clone)]
struct BlockWrite {
    offset: u64,
    data: Arc<[u8]>,
}

/// The writes between two flushes, and the crash point at their end.
#[derive(Debug, Clone)]
pub struct Epoch {
    /// Crash after this many operations of the log: just before the flush
    /// that ends the epoch (or at the log's end).
    pub point: usize,
    /// Its writes, as indices into the log.
    pub writes: Vec<usize>,
}

/// A recorded block device: its writes by epoch.
#[derive(Debug, Clone)]
pub struct Device {
    writes: HashMap<usize, BlockWrite>,
    epochs: Vec<Epoch>,
    root: NodeId,
}

impl Device {
    /// The device whose image is node `image` of `log`: its writes, and its
    /// fsyncs (or a sync) as flushes. Anything else done to the image (a
    /// truncate, a rename) or a write that is not whole sectors is refused:
    /// the log is then not a block device's.
    pub fn new(log: &Log, image: NodeId) -> Result<Device, String> {
        let mut writes = HashMap::new();
        let mut epochs = Vec::new();
        let mut current = Vec::new();
        for (i, op) in log.ops().iter().enumerate() {
            match op {
                LogOp::Write { node, offset, data } if *node == image => {
                    if offset % SECTOR != 0 || data.len() as u64 % SECTOR != 0 {
                        return Err(format!(
                            "operation {i} writes {} bytes at {offset}: not whole {SECTOR}-byte \
                             sectors, so not a block device's write",
                            data.len()
                        ));
                    }
                    writes.insert(
                        i,
                        BlockWrite {
                            offset: *offset,
                            data: data.as_slice().into(),
                        },
                    );
                    current.push(i);
                }
                LogOp::Fsync { node, .. } if *node == image => flush(&mut epochs, &mut current, i),
                LogOp::Sync => flush(&mut epochs, &mut current, i),
                LogOp::Write { .. } => {}
                op if op.clone().nodes_mut().into_iter().any(|n| *n == image) => {
                    return Err(format!(
                        "operation {i} ({op}) changes the image file itself, not its blocks"
                    ));
                }
                _ => {}
            }
        }
        flush(&mut epochs, &mut current, log.ops().len());
        Ok(Device {
            writes,
            epochs,
            root: log.initial().root,
        })
    }

    /// The flush epochs that have writes, in order.
    pub fn epochs(&self) -> &[Epoch] {
        &self.epochs
    }

    /// Writes recorded in all.
    pub fn write_count(&self) -> usize {
        self.writes.len()
    }

    /// Bytes written in all.
    pub fn bytes_written(&self) -> u64 {
        self.writes.values().map(|w| w.data.len() as u64).sum()
    }

    /// Every write's byte range (offset, end), in no order.
    pub fn extents(&self) -> Vec<(u64, u64)> {
        self.writes
            .values()
            .map(|w| (w.offset, w.offset + w.data.len() as u64))
            .collect()
    }

    /// The epoch whose crash point is `point`.
    pub fn epoch_at(&self, point: usize) -> Option<usize> {
        self.epochs.binary_search_by_key(&point, |e| e.point).ok()
    }

    /// What a state writes over the base image, in order: every write of the
    /// epochs before `epoch`, then the ones of `epoch` that `kept` keeps (a
    /// torn one cut short).
    pub fn writes(&self, epoch: usize, kept: &Kept) -> Vec<(u64, &[u8])> {
        let durable = self.epochs[..epoch]
            .iter()
            .flat_map(|e| &e.writes)
            .map(|i| (*i, Keep::Whole));
        let pending = self.epochs[epoch]
            .writes
            .iter()
            .filter_map(|i| kept.get(i).map(|keep| (*i, *keep)));
        durable
            .chain(pending)
            .map(|(i, keep)| {
                let w = &self.writes[&i];
                let len = match keep {
                    Keep::Whole => w.data.len(),
                    // A block write has no size of its own: nothing of it.
                    Keep::SizeOnly => 0,
                    Keep::Torn(bytes) => (bytes as usize).min(w.data.len()),
                };
                (w.offset, &w.data[..len])
            })
            .collect()
    }

    /// A hash of the state's content over the base image: of each sector its
    /// writes leave, whatever the order they came in.
    pub fn fingerprint(&self, epoch: usize, kept: &Kept) -> u64 {
        let mut sectors: HashMap<u64, &[u8]> = HashMap::new();
        for (offset, data) in self.writes(epoch, kept) {
            for (n, chunk) in data.chunks(SECTOR as usize).enumerate() {
                sectors.insert(offset / SECTOR + n as u64, chunk);
            }
        }
        let state =
            std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default();
        sectors
            .iter()
            .map(|entry| state.hash_one(entry))
            .fold(0u64, u64::wrapping_add)
    }
}

fn flush(epochs: &mut Vec<Epoch>, current: &mut Vec<usize>, point: usize) {
    if !current.is_empty() {
        epochs.push(Epoch {
            point,
            writes: std::mem::take(current),
        });
    }
}

/// The high-yield states of an epoch: its extremes, then its writes kept in
/// order up to each one (a disk that writes in order), then what
/// [`PointStates`] ranks high (each kept alone, each dropped alone, the last
/// torn).
fn high_yield(states: &PointStates, writes: &[usize]) -> Vec<Kept> {
    let mut out: Vec<Kept> = states.extremes().into();
    for end in 1..writes.len() {
        out.push(writes[..end].iter().map(|i| (*i, Keep::Whole)).collect());
    }
    let mut r = 2; // high_yield_nth's first two are the extremes
    while let Some(kept) = states.high_yield_nth(r) {
        out.push(kept);
        r += 1;
    }
    out
}

enum Phase {
    HighYield { epoch: usize, rank: usize },
    Sampling { queue: VecDeque<usize> },
    Done,
}

/// Hands out a device's crash states: every epoch's high-yield states, epoch
/// by epoch (the extremes of all epochs first), then samples; each distinct
/// content once.
pub struct BlockSearch {
    device: Arc<Device>,
    log_len: usize,
    sector: Option<u64>,
    /// Per epoch: its states and its high-yield list.
    points: Vec<(PointStates, Vec<Kept>)>,
    phase: Phase,
    extremes_done: bool,
    seen: HashSet<u64>,
    coverage: Vec<PointCoverage>,
    misses: Vec<usize>,
    rng: ChaCha8Rng,
    duplicates: usize,
}

impl BlockSearch {
    /// A search of `device`'s states (`log` is the log it was made from);
    /// with `sector`, pending writes may tear at its multiples.
    pub fn new(device: Arc<Device>, log: &Log, sector: Option<u64>, seed: u64) -> BlockSearch {
        let points: Vec<(PointStates, Vec<Kept>)> = device
            .epochs
            .iter()
            .map(|e| {
                let states = PointStates::new(log, &e.writes, sector, false);
                let list = high_yield(&states, &e.writes);
                (states, list)
            })
            .collect();
        let coverage = points
            .iter()
            .map(|(states, list)| PointCoverage {
                high_yield: list.len(),
                states: states.count(),
                ..PointCoverage::default()
            })
            .collect::<Vec<_>>();
        BlockSearch {
            misses: vec![0; points.len()],
            points,
            coverage,
            device,
            log_len: log.ops().len(),
            sector,
            phase: Phase::HighYield { epoch: 0, rank: 0 },
            extremes_done: false,
            seen: HashSet::new(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            duplicates: 0,
        }
    }

    /// The crash points searched: those of the first and last epoch.
    pub fn range(&self) -> (usize, usize) {
        match (self.device.epochs.first(), self.device.epochs.last()) {
            (Some(a), Some(b)) => (a.point, b.point),
            _ => (self.log_len, self.log_len),
        }
    }

    /// The sector size writes may tear at.
    pub fn sector(&self) -> Option<u64> {
        self.sector
    }

    /// States skipped because the same content was handed out before.
    pub fn duplicates(&self) -> usize {
        self.duplicates
    }

    /// Whether every epoch's high-yield states have been handed out.
    pub fn high_yield_finished(&self) -> bool {
        !matches!(self.phase, Phase::HighYield { .. })
    }

    /// Whether every planned state has been handed out.
    pub fn finished(&self) -> bool {
        matches!(self.phase, Phase::Done)
    }

    /// High-yield states not yet handed out.
    pub fn high_yield_left(&self) -> usize {
        super::search::high_yield_left(&self.coverage)
    }

    /// The coverage, per epoch (an epoch is a crash point here).
    pub fn summary(&self) -> CoverageSummary {
        CoverageSummary::of(&self.coverage, |n| self.device.epochs[n].point)
    }

    /// The next distinct state, or `None` when there is none left or as soon
    /// as `stop()` says so (asked before every state built).
    pub fn next_unless(&mut self, stop: &dyn Fn() -> bool) -> Option<Candidate> {
        loop {
            if stop() {
                return None;
            }
            match &mut self.phase {
                Phase::Done => return None,
                Phase::HighYield { epoch, rank } => {
                    let (e, r) = (*epoch, *rank);
                    if e == self.points.len() {
                        if !self.extremes_done {
                            // Extremes of every epoch handed out; now the rest.
                            self.extremes_done = true;
                            self.phase = Phase::HighYield { epoch: 0, rank: 2 };
                        } else {
                            self.phase = Phase::Sampling {
                                queue: (0..self.points.len()).collect(),
                            };
                        }
                        continue;
                    }
                    let list = &self.points[e].1;
                    let end = if self.extremes_done {
                        list.len()
                    } else {
                        2.min(list.len())
                    };
                    if r >= end {
                        self.phase = Phase::HighYield {
                            epoch: e + 1,
                            rank: if self.extremes_done { 2 } else { 0 },
                        };
                        continue;
                    }
                    self.phase = Phase::HighYield {
                        epoch: e,
                        rank: r + 1,
                    };
                    let kept = self.points[e].1[r].clone();
                    self.coverage[e].high_yield_done += 1;
                    if let Some(c) = self.offer(e, kept) {
                        return Some(c);
                    }
                }
                Phase::Sampling { queue } => {
                    let Some(e) = queue.pop_front() else {
                        self.phase = Phase::Done;
                        return None;
                    };
                    let found = self.sample(e, stop);
                    let c = &self.coverage[e];
                    let again =
                        found.is_some() || (!c.exhausted && self.misses[e] < SATURATED_AFTER);
                    if again {
                        if let Phase::Sampling { queue } = &mut self.phase {
                            queue.push_back(e);
                        }
                    }
                    if found.is_some() {
                        return found;
                    }
                }
            }
        }
    }

    fn sample(&mut self, e: usize, stop: &dyn Fn() -> bool) -> Option<Candidate> {
        if self.coverage[e].exhausted {
            return None;
        }
        if let Some(all) = self.points[e].0.all_states(ENUMERATE_UP_TO) {
            for kept in all {
                if stop() {
                    return None;
                }
                if let Some(c) = self.offer(e, kept) {
                    return Some(c);
                }
            }
            self.coverage[e].exhausted = true;
            return None;
        }
        let kept = self.points[e].0.sample(&mut self.rng);
        match self.offer(e, kept) {
            Some(c) => {
                self.misses[e] = 0;
                self.coverage[e].sampled += 1;
                Some(c)
            }
            None => {
                self.misses[e] += 1;
                None
            }
        }
    }

    fn offer(&mut self, e: usize, kept: Kept) -> Option<Candidate> {
        if !self.seen.insert(self.device.fingerprint(e, &kept)) {
            self.duplicates += 1;
            return None;
        }
        let epoch = &self.device.epochs[e];
        Some(Candidate {
            point: epoch.point,
            kept,
            pending: epoch.writes.clone(),
            // The state is the base image plus `Device::writes`, not a tree.
            tree: Tree::empty(self.device.root),
            models: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durability::NodeKind;

    const IMAGE: NodeId = 2;

    /// An image with two epochs: two writes then a flush, then three writes.
    fn device_log() -> Log {
        let mut tree = Tree::empty(1);
        tree.apply(&LogOp::Create {
            dir: 1,
            name: "image".into(),
            node: IMAGE,
            kind: NodeKind::File,
        });
        let mut log = Log::new(tree);
        let write = |offset: u64, byte: u8| LogOp::Write {
            node: IMAGE,
            offset,
            data: vec![byte; 1024],
        };
        log.push(write(0, 1));
        log.push(write(4096, 2));
        log.push(LogOp::Fsync {
            node: IMAGE,
            datasync: false,
        });
        log.push(write(0, 3));
        log.push(write(8192, 4));
        log.push(write(0, 3)); // the same content again
        log
    }

    #[test]
    fn epochs_end_at_flushes_and_states_keep_what_came_before() {
        let log = device_log();
        let device = Device::new(&log, IMAGE).unwrap();
        let points: Vec<usize> = device.epochs().iter().map(|e| e.point).collect();
        assert_eq!(points, [2, 6]);
        // Nothing of epoch 1 kept: epoch 0's writes are on the disk.
        let none = device.writes(1, &Kept::new());
        assert_eq!(none.iter().map(|w| w.0).collect::<Vec<_>>(), [0, 4096]);
        // Writes 3 and 5 hold the same bytes: keeping either is one state.
        let a = Kept::from([(3, Keep::Whole)]);
        let b = Kept::from([(5, Keep::Whole)]);
        assert_eq!(device.fingerprint(1, &a), device.fingerprint(1, &b));
        assert_ne!(
            device.fingerprint(1, &a),
            device.fingerprint(1, &Kept::new())
        );
    }

    #[test]
    fn every_distinct_state_is_handed_out_once_and_a_stop_is_heard() {
        let log = device_log();
        let device = Arc::new(Device::new(&log, IMAGE).unwrap());
        let mut search = BlockSearch::new(Arc::clone(&device), &log, None, 7);
        let mut prints = HashSet::new();
        while let Some(c) = search.next_unless(&|| false) {
            let e = device.epoch_at(c.point).unwrap();
            assert!(prints.insert(device.fingerprint(e, &c.kept)));
        }
        assert!(search.finished() && search.summary().complete());
        // epoch 0: 4 subsets; epoch 1: {} {3|5} {4} {3|5,4} -> 4, one of
        // them (nothing kept) the same content as epoch 0's all-kept.
        assert_eq!(prints.len(), 7);
        let mut stopped = BlockSearch::new(device, &log, None, 7);
        assert!(stopped.next_unless(&|| true).is_none());
        assert!(!stopped.finished());
    }

    #[test]
    fn a_write_that_is_not_whole_sectors_or_a_truncate_is_refused() {
        let mut log = Log::new(Tree::empty(1));
        log.push(LogOp::Write {
            node: IMAGE,
            offset: 10,
            data: vec![0; 512],
        });
        assert!(Device::new(&log, IMAGE).unwrap_err().contains("sectors"));
        let mut log = Log::new(Tree::empty(1));
        log.push(LogOp::SetLen {
            node: IMAGE,
            len: 0,
        });
        assert!(Device::new(&log, IMAGE)
            .unwrap_err()
            .contains("image file itself"));
    }
}

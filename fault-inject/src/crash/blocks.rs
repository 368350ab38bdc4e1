//! The crash states of a block device, recorded as the writes and flushes of
//! its image file (a loop device turns a filesystem's block writes into writes
//! of its backing file, and its flushes into fsyncs of it): what the last
//! completed flush covered is on the disk; any subset of the writes after it
//! may be, and with a sector size a write may be cut at a sector boundary.
//!
//! A state is the base image plus the writes it keeps, so it costs the writes,
//! not the image: [`Device::writes`] lists them, [`Device::fingerprint`]
//! hashes only the sectors they cover. [`BlockSpace`] is their space for
//! [`super::search::Search`], a flush epoch a crash point: an epoch's
//! high-yield states are its extremes, its in-order prefixes, then writes
//! kept or dropped alone and the last torn.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use super::coverage::PointCoverage;
use super::search::StateSpace;
use super::states::PointStates;
use crate::durability::{Keep, Kept, Log, LogOp, NodeId};

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
        Ok(Device { writes, epochs })
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
                let (from, to) = match keep {
                    Keep::Whole => (0, w.data.len()),
                    // A block write has no size of its own: nothing of it.
                    Keep::SizeOnly => (0, 0),
                    Keep::Torn(bytes) => (0, (bytes as usize).min(w.data.len())),
                    Keep::TornTail(bytes) => ((bytes as usize).min(w.data.len()), w.data.len()),
                };
                (w.offset + from as u64, &w.data[from..to])
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
    // From rank 2: the first write kept alone is the first prefix above, and
    // the second alone is left to the samples (an old choice, kept so that
    // runs replay the same states).
    let mut r = 2;
    while let Some(kept) = states.high_yield_nth(r) {
        out.push(kept);
        r += 1;
    }
    out
}

/// The crash states of a recorded block device: slot `n` is epoch `n`, a
/// state is the base image plus the writes it keeps (so it carries nothing
/// of its own), and its content is [`Device::fingerprint`].
pub struct BlockSpace {
    device: Arc<Device>,
    log_len: usize,
    /// Per epoch: its states and its high-yield list.
    points: Vec<(PointStates, Vec<Kept>)>,
}

impl BlockSpace {
    /// The states of `device` (`log` is the log it was made from); with
    /// `sector`, pending writes may tear at its multiples.
    pub fn new(device: Arc<Device>, log: &Log, sector: Option<u64>) -> BlockSpace {
        let points = device
            .epochs
            .iter()
            .map(|e| {
                let states = PointStates::new(log, &e.writes, sector, false);
                let list = high_yield(&states, &e.writes);
                (states, list)
            })
            .collect();
        BlockSpace {
            device,
            log_len: log.ops().len(),
            points,
        }
    }
}

impl StateSpace for BlockSpace {
    type State = ();

    /// Those of the first and last epoch.
    fn range(&self) -> (usize, usize) {
        match (self.device.epochs.first(), self.device.epochs.last()) {
            (Some(a), Some(b)) => (a.point, b.point),
            _ => (self.log_len, self.log_len),
        }
    }

    fn plan(&self) -> Vec<PointCoverage> {
        self.points
            .iter()
            .map(|(states, list)| PointCoverage {
                high_yield: list.len(),
                states: states.count(),
                ..PointCoverage::default()
            })
            .collect()
    }

    fn crash_point(&self, slot: usize) -> usize {
        self.device.epochs[slot].point
    }

    fn states(&mut self, slot: usize) -> &PointStates {
        &self.points[slot].0
    }

    fn high_yield(&mut self, slot: usize, rank: usize) -> Option<Kept> {
        self.points[slot].1.get(rank).cloned()
    }

    fn high_yield_len(&mut self, slot: usize) -> usize {
        self.points[slot].1.len()
    }

    fn build(&mut self, slot: usize, kept: &Kept) -> (u64, ()) {
        (self.device.fingerprint(slot, kept), ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crash::search::Search;
    use crate::durability::LogBuilder;
    use std::collections::HashSet;

    const IMAGE: NodeId = 2;

    /// An image with two epochs: two writes then a flush, then three writes.
    fn device_log() -> Log {
        LogBuilder::new()
            .initial_file("image", IMAGE, Vec::new())
            .write(IMAGE, 0, [1; 1024])
            .write(IMAGE, 4096, [2; 1024])
            .fsync(IMAGE)
            .write(IMAGE, 0, [3; 1024])
            .write(IMAGE, 8192, [4; 1024])
            .write(IMAGE, 0, [3; 1024]) // the same content again
            .build()
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
        let space = BlockSpace::new(Arc::clone(&device), &log, None);
        let mut search = Search::new(space, 7);
        let mut prints = HashSet::new();
        while let Some(c) = search.next_unless(&|| false) {
            let e = device.epoch_at(c.point).unwrap();
            assert!(prints.insert(device.fingerprint(e, &c.kept)));
        }
        assert!(search.finished() && search.summary().complete());
        // epoch 0: 4 subsets; epoch 1: {} {3|5} {4} {3|5,4} -> 4, one of
        // them (nothing kept) the same content as epoch 0's all-kept.
        assert_eq!(prints.len(), 7);
        let mut stopped = Search::new(BlockSpace::new(device, &log, None), 7);
        assert!(stopped.next_unless(&|| true).is_none());
        assert!(!stopped.finished());
    }

    #[test]
    fn a_write_that_is_not_whole_sectors_or_a_truncate_is_refused() {
        let log = LogBuilder::new().write(IMAGE, 10, [0; 512]).build();
        assert!(Device::new(&log, IMAGE).unwrap_err().contains("sectors"));
        let log = LogBuilder::new().set_len(IMAGE, 0).build();
        assert!(Device::new(&log, IMAGE)
            .unwrap_err()
            .contains("image file itself"));
    }
}

//! The crash states of one crash point: which pending operations survive, and
//! how much of each. One enumerator serves every user: explore's search, the
//! conformance suites' atomic-replace check, `ctl durable`.

use rand::Rng;

use crate::durability::{Keep, Kept, Log, LogOp};

/// The ways a crash at one point can end: each pending operation dropped, kept
/// whole, or (a write, with a sector size) torn at a sector boundary inside it:
/// its head kept or its tail.
#[derive(Debug, Clone)]
pub struct PointStates {
    /// Pending operations with the ways each survives (`Keep::Whole` first).
    options: Vec<(usize, Vec<Keep>)>,
    /// The last pending write (its tears are high-yield).
    last_write: Option<usize>,
}

impl PointStates {
    /// The states of a crash with `pending` operations of `log` (see
    /// `Log::pending`); with `sector`, pending writes may tear, and with
    /// `size_only` keep their size without their data (files; a block
    /// device's writes have no size).
    pub fn new(log: &Log, pending: &[usize], sector: Option<u64>, size_only: bool) -> PointStates {
        let options: Vec<(usize, Vec<Keep>)> = pending
            .iter()
            .map(|&i| {
                let mut keeps = vec![Keep::Whole];
                if let Some(sector) = sector {
                    let tears = log.tears(i, sector);
                    keeps.extend(tears.iter().copied().map(Keep::Torn));
                    keeps.extend(tears.into_iter().map(Keep::TornTail));
                }
                if size_only && log.extends_size(i) {
                    keeps.push(Keep::SizeOnly);
                }
                (i, keeps)
            })
            .collect();
        let last_write = pending
            .iter()
            .rev()
            .copied()
            .find(|&i| matches!(log.ops()[i], LogOp::Write { .. }));
        PointStates {
            options,
            last_write,
        }
    }

    /// How many states there are in all (`None`: more than `usize`).
    pub fn count(&self) -> Option<usize> {
        self.options
            .iter()
            .try_fold(1usize, |acc, (_, keeps)| acc.checked_mul(keeps.len() + 1))
    }

    /// How many pending operations there are.
    pub fn pending(&self) -> usize {
        self.options.len()
    }

    /// The pending operations (indices into the log), in the order
    /// [`PointStates::new`] was given them.
    pub fn pending_ops(&self) -> Vec<usize> {
        self.options.iter().map(|(i, _)| *i).collect()
    }

    /// The two states every point checks first: the surely-durable one
    /// (nothing pending kept) and the no-crash one (everything kept).
    pub fn extremes(&self) -> [Kept; 2] {
        [Kept::new(), self.all()]
    }

    fn all(&self) -> Kept {
        self.options
            .iter()
            .map(|(i, _)| (*i, Keep::Whole))
            .collect()
    }

    /// The rest of the high-yield states, the ones ALICE-style tools find most
    /// bugs with: each pending operation kept alone, each dropped alone, and the
    /// torn variants of the last pending write. Generated one at a time (a point
    /// with p pending operations has O(p) of them, each O(p) big).
    pub fn high_yield(&self) -> impl Iterator<Item = Kept> + '_ {
        let alone = self
            .options
            .iter()
            .map(|(i, _)| Kept::from([(*i, Keep::Whole)]));
        let dropped = self.options.iter().map(|(dropped, _)| {
            let mut kept = self.all();
            kept.remove(dropped);
            kept
        });
        let torn = self
            .last_write
            .and_then(|w| self.options.iter().find(|(i, _)| *i == w))
            .into_iter()
            .flat_map(move |(i, keeps)| {
                keeps.iter().skip(1).map(move |keep| {
                    let mut kept = self.all();
                    kept.insert(*i, *keep);
                    kept
                })
            });
        alone.chain(dropped).chain(torn)
    }

    /// High-yield state number `r` (as [`PointStates::high_yield`] orders them),
    /// built on its own: a search can hold its place in a point with many
    /// pending operations without holding the list.
    pub fn high_yield_nth(&self, r: usize) -> Option<Kept> {
        let p = self.options.len();
        if r < p {
            return Some(Kept::from([(self.options[r].0, Keep::Whole)]));
        }
        if r < 2 * p {
            let mut kept = self.all();
            kept.remove(&self.options[r - p].0);
            return Some(kept);
        }
        let (i, keeps) = self
            .last_write
            .and_then(|w| self.options.iter().find(|(i, _)| *i == w))?;
        let keep = keeps.get(1 + r - 2 * p)?;
        let mut kept = self.all();
        kept.insert(*i, *keep);
        Some(kept)
    }

    /// How many states [`PointStates::extremes`] and
    /// [`PointStates::high_yield`] give (duplicates among them included).
    pub fn high_yield_len(&self) -> usize {
        let p = self.options.len();
        let tears = self
            .last_write
            .and_then(|w| self.options.iter().find(|(i, _)| *i == w))
            .map_or(0, |(_, keeps)| keeps.len() - 1);
        2 + 2 * p + tears
    }

    /// One random state: each pending operation kept with probability 1/2, a
    /// kept write that can tear torn at a random boundary half the time.
    pub fn sample(&self, rng: &mut impl Rng) -> Kept {
        let mut kept = Kept::new();
        for (i, keeps) in &self.options {
            if rng.gen_bool(0.5) {
                continue;
            }
            let keep = if keeps.len() > 1 && rng.gen_bool(0.5) {
                keeps[rng.gen_range(1..keeps.len())]
            } else {
                Keep::Whole
            };
            kept.insert(*i, keep);
        }
        kept
    }

    /// Every state, when there are at most `limit`; `None` otherwise.
    pub fn all_states(&self, limit: usize) -> Option<Vec<Kept>> {
        let total = self.count().filter(|t| *t <= limit)?;
        Some(
            (0..total)
                .map(|mut code| {
                    // A mixed-radix counter over (drop, keep options...).
                    let mut kept = Kept::new();
                    for (i, keeps) in &self.options {
                        let radix = keeps.len() + 1;
                        let digit = code % radix;
                        code /= radix;
                        if digit > 0 {
                            kept.insert(*i, keeps[digit - 1]);
                        }
                    }
                    kept
                })
                .collect(),
        )
    }

    /// At most `limit` distinct states: all of them if they fit, else the
    /// high-yield ones first and random ones from `rng` for the rest. The
    /// second value says whether the list is a sample.
    pub fn up_to(&self, limit: usize, rng: &mut impl Rng) -> (Vec<Kept>, bool) {
        if let Some(all) = self.all_states(limit) {
            return (all, false);
        }
        let mut out: Vec<Kept> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let candidates = self
            .extremes()
            .into_iter()
            .chain(self.high_yield())
            .chain(std::iter::repeat_with(|| self.sample(rng)).take(limit * 4));
        for kept in candidates {
            if out.len() >= limit {
                break;
            }
            if seen.insert(kept.clone()) {
                out.push(kept);
            }
        }
        (out, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durability::LogBuilder;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use std::collections::BTreeSet;

    fn writes(n: usize) -> Log {
        let mut log = LogBuilder::new();
        log.create("f", 2);
        for i in 0..n {
            log.write(2, i as u64 * 8192, vec![i as u8; 8192]);
        }
        log.build()
    }

    #[test]
    fn high_yield_states_come_in_the_documented_order() {
        let log = writes(3);
        let k = log.ops().len();
        let states = PointStates::new(&log, &log.pending(k), Some(4096), false);
        let [durable, all] = states.extremes();
        assert!(durable.is_empty());
        assert_eq!(all.len(), 4);
        let rest: Vec<Kept> = states.high_yield().collect();
        let nth: Vec<Kept> = (0..).map_while(|r| states.high_yield_nth(r)).collect();
        assert_eq!(nth, rest);
        // 4 alone, 4 dropped, 2 tears of the last write (8192 bytes, 4096
        // sectors): its head kept, then its tail.
        assert_eq!(rest.len(), 10);
        assert_eq!(states.high_yield_len(), 2 + rest.len());
        assert_eq!(rest[8][&3], Keep::Torn(4096));
        assert_eq!(rest[9][&3], Keep::TornTail(4096));
        assert_eq!(states.count(), Some(2 * 4 * 4 * 4));
    }

    proptest! {
        /// All states are distinct and as many as `count` says; a sample list
        /// never exceeds its limit and holds no duplicate.
        #[test]
        fn enumeration_is_exact_and_sampling_bounded(n in 0usize..5, limit in 1usize..40, seed: u64) {
            let log = writes(n);
            let k = log.ops().len();
            let states = PointStates::new(&log, &log.pending(k), Some(4096), false);
            if let Some(all) = states.all_states(usize::MAX) {
                let distinct: std::collections::HashSet<_> = all.iter().cloned().collect();
                prop_assert_eq!(distinct.len(), all.len());
                prop_assert_eq!(Some(all.len()), states.count());
            }
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let (some, sampled) = states.up_to(limit, &mut rng);
            prop_assert!(some.len() <= limit);
            let distinct: std::collections::HashSet<_> = some.iter().cloned().collect();
            prop_assert_eq!(distinct.len(), some.len());
            prop_assert_eq!(sampled, states.count().is_none_or(|c| c > limit));
        }
    }

    #[test]
    fn a_file_write_that_grows_its_file_may_keep_only_its_size() {
        let log = writes(2);
        let k = log.ops().len();
        let files = PointStates::new(&log, &log.pending(k), Some(4096), true);
        let blocks = PointStates::new(&log, &log.pending(k), Some(4096), false);
        let size_only = |s: &PointStates| {
            s.high_yield()
                .filter(|kept| kept.values().any(|k| *k == Keep::SizeOnly))
                .count()
        };
        assert_eq!(size_only(&files), 1, "the last write, its size only");
        assert_eq!(size_only(&blocks), 0);
        assert_eq!(files.high_yield_len(), blocks.high_yield_len() + 1);
        // Without tears too (the default is sound: delayed allocation leaves
        // sizes without data whatever the tearing).
        let untorn = PointStates::new(&log, &log.pending(k), None, true);
        assert_eq!(size_only(&untorn), 1, "not only under --torn");
        let whole = PointStates::new(&log, &log.pending(k), None, false);
        assert_eq!(size_only(&whole), 0, "--whole-writes");
    }

    /// ext4 with 1 KiB blocks wrote a 4 KiB overwrite's page as 3 KiB and
    /// 1 KiB, either lost: the write's last block alone (`gggj`) is a state
    /// as much as its first three (`jjjg`). Before, only heads were.
    #[test]
    fn a_torn_write_may_keep_its_head_or_its_tail() {
        let log = LogBuilder::new()
            .initial_file("foo", 2, b"gggg")
            .write(2, 0, b"jjjj")
            .build();
        let k = log.ops().len();
        let states = PointStates::new(&log, &log.pending(k), Some(1), false);
        let contents: BTreeSet<Vec<u8>> = states
            .all_states(100)
            .unwrap()
            .iter()
            .map(|kept| {
                log.state_with(k, kept)
                    .lookup("foo")
                    .unwrap()
                    .data()
                    .unwrap()
                    .to_vec()
            })
            .collect();
        let expected = [
            "gggg", "jjjj", "jggg", "jjgg", "jjjg", "gjjj", "ggjj", "gggj",
        ];
        assert_eq!(
            contents,
            expected
                .iter()
                .map(|s| s.as_bytes().to_vec())
                .collect::<BTreeSet<_>>()
        );
    }
}

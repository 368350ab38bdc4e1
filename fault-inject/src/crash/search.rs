//! The search schedule: which crash state to check next, each distinct state
//! once, and what has been covered. One [`Search`] serves every space of
//! crash states ([`StateSpace`]: a log's file trees in [`super::trees`], a
//! block device's image in [`super::blocks`]); the space says what a crash
//! point's states are, the search decides their order.
//!
//! Order, so that a budget too small for everything still reaches every crash
//! point with what matters most:
//!
//! 1. every point's two extreme states: the surely-durable one, the no-crash one;
//! 2. every point's other high-yield states (as the space ranks them: each
//!    pending operation kept alone, each dropped alone, the last pending write
//!    torn), point by point;
//! 3. what is left of the budget: every state of points with few of them, random
//!    states (seeded) of the others, round-robin, until each point is done or
//!    saturated (its samples keep landing on states already checked).
//!
//! Memory is bounded by design: O(states handed out) for the set of state
//! fingerprints checked, O(crash points) for coverage, and what the space
//! holds (one point's trees at a time for a log); nothing grows with the
//! number of possible states (2^pending).

use std::collections::{HashMap, VecDeque};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::coverage::{high_yield_left, CoverageSummary, PointCoverage};
use super::models::{FsModel, Labels};
use super::states::PointStates;
use crate::durability::Kept;

/// Points with at most this many states get every one of them in phase 3.
pub const ENUMERATE_UP_TO: usize = 256;
/// A point is saturated after this many samples in a row that were duplicates.
const SATURATED_AFTER: usize = 32;

/// A space of crash states: its crash points (each at a slot, `0..` in
/// order), the states of each, and what a state leaves. A space answers; the
/// [`Search`] over it decides what to ask.
pub trait StateSpace {
    /// What a candidate carries for its checker besides the operations it
    /// keeps: a file tree, or nothing for a block device (whose state is its
    /// base image plus the writes kept).
    type State;

    /// The crash points searched, as operations done: the first, the last.
    fn range(&self) -> (usize, usize);

    /// Every point's coverage before any of its states is built (one entry
    /// a slot): its high-yield states, as far as they can be told cheaply.
    fn plan(&self) -> Vec<PointCoverage>;

    /// The crash point (operations done) at `slot`.
    fn crash_point(&self, slot: usize) -> usize;

    /// The states of the point at `slot`. Slots are asked for in order
    /// (twice), then round robin: a space may walk its points.
    fn states(&mut self, slot: usize) -> &PointStates;

    /// High-yield state number `rank` at `slot`, the two extremes first
    /// ([`PointStates::extremes`]); `None` past the last.
    fn high_yield(&mut self, slot: usize, rank: usize) -> Option<Kept>;

    /// How many high-yield states `slot` has, its extremes included.
    fn high_yield_len(&mut self, slot: usize) -> usize;

    /// What keeping `kept` at `slot` leaves: a fingerprint of its content
    /// (states with one fingerprint are one state to check), and the state.
    fn build(&mut self, slot: usize, kept: &Kept) -> (u64, Self::State);

    /// Whether the space labels its states with the persistence models that
    /// can leave them ([`Candidate::models`]).
    fn labels(&self) -> bool {
        false
    }

    /// What each model says of `kept` at `slot`; asked only if [`Self::labels`].
    fn models(&mut self, _slot: usize, _kept: &Kept) -> Labels {
        Labels::default()
    }

    /// Whether a content is checked once per crash point it occurs at,
    /// rather than once in all.
    fn per_point(&self) -> bool {
        false
    }
}

/// A crash state to check.
#[derive(Debug, Clone)]
pub struct Candidate<T> {
    /// Crash after this many operations.
    pub point: usize,
    /// The pending operations kept (the rest dropped), and how much of each.
    pub kept: Kept,
    /// The pending operations at that point.
    pub pending: Vec<usize>,
    /// The state for the checker ([`StateSpace::State`]).
    pub state: T,
    /// If the space [labels](StateSpace::labels) its states: the models
    /// that can leave this set of kept operations (empty otherwise).
    pub models: Vec<FsModel>,
    /// Likewise, the models that rule it out only by an approximate rule
    /// ([`super::labels`]).
    pub unknown: Vec<FsModel>,
}

/// Phases 1 and 2 walk the points with the same cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Phase 1: ranks 0 and 1.
    Extremes,
    /// Phase 2: rank 2 on.
    Rest,
}

/// Where the search stands.
enum Phase {
    /// Phases 1 and 2: the next high-yield state is `rank` at `slot`.
    HighYield {
        pass: Pass,
        slot: usize,
        rank: usize,
    },
    /// Phase 3: the slots still sampled, round robin.
    Sampling {
        queue: VecDeque<usize>,
    },
    Done,
}

/// Hands out the crash states of a [`StateSpace`], in the documented order,
/// each distinct state once.
pub struct Search<S: StateSpace> {
    space: S,
    phase: Phase,
    /// Contents handed out, with the models some set of kept operations
    /// leading to them is allowed by (a bit per model; 1 without models),
    /// and those it is unknown on (the same bits, 4 higher).
    seen: HashMap<(usize, u64), u8>,
    coverage: Vec<PointCoverage>,
    /// Phase 3, per point: duplicate samples in a row.
    misses: Vec<usize>,
    rng: ChaCha8Rng,
    duplicates: usize,
}

impl<S: StateSpace> Search<S> {
    /// A search of `space`, its samples drawn from `seed`.
    pub fn new(space: S, seed: u64) -> Search<S> {
        let coverage = space.plan();
        Search {
            space,
            phase: Phase::HighYield {
                pass: Pass::Extremes,
                slot: 0,
                rank: 0,
            },
            seen: HashMap::new(),
            misses: vec![0; coverage.len()],
            coverage,
            rng: ChaCha8Rng::seed_from_u64(seed),
            duplicates: 0,
        }
    }

    /// The space searched.
    pub fn space(&self) -> &S {
        &self.space
    }

    /// The crash points searched: the first, the last.
    pub fn range(&self) -> (usize, usize) {
        self.space.range()
    }

    /// States skipped because the same content was handed out before.
    pub fn duplicates(&self) -> usize {
        self.duplicates
    }

    /// Per point, in slot order.
    pub fn coverage(&self) -> &[PointCoverage] {
        &self.coverage
    }

    /// Whether every point's high-yield states have been handed out (the
    /// search is sampling, or done).
    pub fn high_yield_finished(&self) -> bool {
        !matches!(self.phase, Phase::HighYield { .. })
    }

    /// Whether every planned state has been handed out (phase 3 included).
    pub fn finished(&self) -> bool {
        matches!(self.phase, Phase::Done)
    }

    /// High-yield states not yet handed out (or found checked): what the
    /// search still owes.
    pub fn high_yield_left(&self) -> usize {
        high_yield_left(&self.coverage)
    }

    /// The coverage in four categories that add up.
    pub fn summary(&self) -> CoverageSummary {
        CoverageSummary::of(&self.coverage, |slot| self.space.crash_point(slot))
    }

    /// The next distinct state, or `None` when there is none left or as soon
    /// as `stop()` says so: it is asked before every state built, duplicates
    /// included, since a run of duplicates can be long and each costs a
    /// state's build (with [`Self::finished`] false, the search can go on
    /// later).
    pub fn next_unless(&mut self, stop: &dyn Fn() -> bool) -> Option<Candidate<S::State>> {
        loop {
            if stop() {
                return None;
            }
            let found = match &mut self.phase {
                Phase::Done => return None,
                &mut Phase::HighYield { pass, slot, rank } => {
                    self.high_yield_step(pass, slot, rank)
                }
                Phase::Sampling { queue } => match queue.pop_front() {
                    Some(slot) => self.sampling_step(slot, stop),
                    None => {
                        self.phase = Phase::Done;
                        return None;
                    }
                },
            };
            if found.is_some() {
                return found;
            }
        }
    }

    /// Phases 1 and 2 at `slot`: its high-yield state `rank`, if that is new.
    fn high_yield_step(
        &mut self,
        pass: Pass,
        slot: usize,
        rank: usize,
    ) -> Option<Candidate<S::State>> {
        if slot == self.coverage.len() {
            self.phase = match pass {
                Pass::Extremes => Phase::HighYield {
                    pass: Pass::Rest,
                    slot: 0,
                    rank: 2,
                },
                Pass::Rest => Phase::Sampling {
                    queue: (0..self.coverage.len()).collect(),
                },
            };
            return None;
        }
        if pass == Pass::Extremes && rank == 0 {
            // The plan was a guess: now the point's states are known.
            self.coverage[slot].high_yield = self.space.high_yield_len(slot);
            self.coverage[slot].states = self.space.states(slot).count();
        }
        let kept = match pass {
            Pass::Extremes if rank >= 2 => None,
            _ => self.space.high_yield(slot, rank),
        };
        let Some(kept) = kept else {
            let rank = if pass == Pass::Extremes { 0 } else { 2 };
            let slot = slot + 1;
            self.phase = Phase::HighYield { pass, slot, rank };
            return None;
        };
        let rank = rank + 1;
        self.phase = Phase::HighYield { pass, slot, rank };
        self.coverage[slot].high_yield_done += 1;
        self.offer(slot, kept)
    }

    /// Phase 3 at `slot`: a new state if one is found; the slot stays in the
    /// round unless it is done or saturated.
    fn sampling_step(
        &mut self,
        slot: usize,
        stop: &dyn Fn() -> bool,
    ) -> Option<Candidate<S::State>> {
        let found = self.sample(slot, stop);
        let c = &self.coverage[slot];
        if found.is_some() || (!c.exhausted && self.misses[slot] < SATURATED_AFTER) {
            if let Phase::Sampling { queue } = &mut self.phase {
                queue.push_back(slot);
            }
        }
        found
    }

    /// Every state of `slot` if there are few, else one random state; `None`
    /// when that was a duplicate or the point is done.
    fn sample(&mut self, slot: usize, stop: &dyn Fn() -> bool) -> Option<Candidate<S::State>> {
        if self.coverage[slot].exhausted {
            return None;
        }
        let states = self.space.states(slot);
        if let Some(all) = states.all_states(ENUMERATE_UP_TO) {
            // Few states: the next one not yet seen, in order.
            for kept in all {
                if stop() {
                    return None;
                }
                if let Some(c) = self.offer(slot, kept) {
                    return Some(c);
                }
            }
            self.coverage[slot].exhausted = true;
            return None;
        }
        let kept = states.sample(&mut self.rng);
        let found = self.offer(slot, kept);
        if found.is_some() {
            self.misses[slot] = 0;
            self.coverage[slot].sampled += 1;
        } else {
            self.misses[slot] += 1;
        }
        found
    }

    /// The state `kept` at `slot`, unless its content was handed out before
    /// (at this point, with [`StateSpace::per_point`]) with every model this
    /// set of kept operations is allowed by, and every model it is unknown
    /// on (allowed or unknown).
    fn offer(&mut self, slot: usize, kept: Kept) -> Option<Candidate<S::State>> {
        let (fingerprint, state) = self.space.build(slot, &kept);
        let point = self.space.crash_point(slot);
        let key = (if self.space.per_point() { point } else { 0 }, fingerprint);
        let seen = self.seen.get(&key).copied();
        let labels = self.space.labels();
        let all = model_bits(FsModel::ALL);
        let models = match seen {
            _ if !labels => Labels::default(),
            // Every model already covers this content: no set can add one.
            Some(seen) if seen & all == all => Labels::default(),
            _ => self.space.models(slot, &kept),
        };
        let bits = if labels {
            model_bits(&models.can) | model_bits(&models.unknown) << 4
        } else {
            1
        };
        if seen.is_some_and(|seen| !adds_labels(seen, bits)) {
            self.duplicates += 1;
            return None;
        }
        *self.seen.entry(key).or_default() |= bits;
        Some(Candidate {
            point,
            kept,
            pending: self.space.states(slot).pending_ops(),
            state,
            models: models.can,
            unknown: models.unknown,
        })
    }
}

impl<S: StateSpace> Iterator for Search<S> {
    type Item = Candidate<S::State>;

    /// The next distinct state to check; `None` when there is none left.
    fn next(&mut self) -> Option<Candidate<S::State>> {
        self.next_unless(&|| false)
    }
}

/// Whether labels `bits` (can in the low 4 bits, unknown in the high 4)
/// say more than `seen` did: a model that can, where none could; or one
/// unknown, where it was neither can nor unknown (a content once labelled
/// can stays can, so unknown adds nothing there).
fn adds_labels(seen: u8, bits: u8) -> bool {
    let all = model_bits(FsModel::ALL);
    let can = seen & all;
    bits & all & !can != 0 || (bits >> 4) & !(can | seen >> 4) != 0
}

/// A bit per model, in [`FsModel::ALL`]'s order.
fn model_bits(models: &[FsModel]) -> u8 {
    models
        .iter()
        .map(|m| 1 << FsModel::ALL.iter().position(|a| a == m).expect("a model"))
        .fold(0, |a, b| a | b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crash::trees::{TreeConfig, TreeSpace};
    use crate::durability::{Log, LogBuilder, Node};
    use proptest::prelude::*;

    /// A search of every crash point of `log`, as `config` says.
    fn tree_search(
        log: &Log,
        config: impl FnOnce(&mut TreeConfig),
        seed: u64,
    ) -> Search<TreeSpace<'_>> {
        let mut all = TreeConfig::all(log.ops().len());
        config(&mut all);
        Search::new(TreeSpace::new(log, all), seed)
    }

    /// `for i in 1..=n; do echo x > j; echo y >> j; rm j; done`, never synced:
    /// every operation stays pending, 2^ops states at the last point.
    fn churn(n: usize) -> Log {
        let mut log = LogBuilder::new();
        for node in 100..100 + n as u64 {
            log.create("j", node)
                .write(node, 0, b"x\n")
                .write(node, 2, b"y\n")
                .remove("j");
        }
        log.build()
    }

    #[test]
    fn a_huge_state_space_ends_with_bounded_work_and_full_high_yield_coverage() {
        let log = churn(12); // 48 ops pending at the end: 2^48 states there
        let mut search = tree_search(&log, |_| {}, 1);
        let mut handed = 0;
        while search.next().is_some() {
            handed += 1;
            assert!(handed < 100_000, "the search does not end");
        }
        assert!(search.finished());
        let summary = search.summary();
        assert!(summary.complete(), "{summary:?}");
        assert_eq!(
            summary.every_state
                + summary.high_yield_and_sampled
                + summary.high_yield_only
                + summary.incomplete.len(),
            summary.points
        );
        assert_eq!(summary.points, log.ops().len() + 1);
        // Distinct contents only: the set of fingerprints is all it keeps.
        assert_eq!(search.seen.len(), handed);
    }

    #[test]
    fn a_stop_is_heard_while_every_sample_is_a_duplicate() {
        // 12 identical writes never synced: 2^12 states at the last points,
        // two distinct contents, so sampling finds duplicates almost only.
        let mut log = LogBuilder::new();
        log.create("f", 2);
        for _ in 0..12 {
            log.write(2, 0, b"same");
        }
        let log = log.build();
        let mut unbounded = tree_search(&log, |_| {}, 1);
        while unbounded.next().is_some() {}
        assert!(
            unbounded.duplicates() > 400,
            "{} duplicates",
            unbounded.duplicates()
        );

        let asked = std::cell::Cell::new(0);
        let stop_after_200 = || {
            asked.set(asked.get() + 1);
            asked.get() > 200
        };
        let mut search = tree_search(&log, |_| {}, 1);
        let mut handed = 0;
        while search.next_unless(&stop_after_200).is_some() {
            handed += 1;
        }
        assert!(!search.finished(), "it stopped, it did not run out");
        assert!(
            handed + search.duplicates() <= 200,
            "a state built after the stop"
        );
    }

    /// The export without fsync: config holds "old"; create tmp, write
    /// "new" to it, rename it over config, nothing synced.
    fn unsynced_replace() -> Log {
        LogBuilder::new()
            .initial_file("config", 2, b"old")
            .create("tmp", 3)
            .write(3, 0, b"new")
            .rename("tmp", "config", 3)
            .build()
    }

    #[test]
    fn a_content_is_labelled_with_every_model_of_every_set_that_leads_to_it() {
        // An empty config comes from {rename} (its create lost: strict only)
        // and from {create, rename} (the data lost: XFS too). Checked once
        // per content, the label was the first set's: "never on xfs", which
        // real XFS contradicts.
        let log = unsynced_replace();
        let mut labelled = tree_search(&log, |c| c.models = true, 1);
        let mut empty_config = std::collections::BTreeSet::new();
        let mut handed = 0;
        for c in labelled.by_ref() {
            handed += 1;
            if c.state.lookup("config").and_then(Node::data) == Some(&b""[..]) {
                empty_config.extend(c.models.iter().copied());
            }
        }
        assert!(empty_config.contains(&FsModel::Xfs), "{empty_config:?}");
        assert!(empty_config.contains(&FsModel::Btrfs), "{empty_config:?}");
        assert!(
            !empty_config.contains(&FsModel::Ext4Ordered),
            "{empty_config:?}"
        );
        // Without labels, each content once.
        let mut plain = tree_search(&log, |_| {}, 1);
        let mut distinct = 0;
        while plain.next().is_some() {
            distinct += 1;
        }
        assert!(handed > distinct, "{handed} labelled, {distinct} distinct");
    }

    #[test]
    fn a_content_is_handed_out_again_only_for_a_label_it_lacked() {
        let can = |m: &[FsModel]| model_bits(m);
        let unknown = |m: &[FsModel]| model_bits(m) << 4;
        let strict = can(&[FsModel::Strict]);
        let ext4 = &[FsModel::Ext4Ordered][..];
        // Never on ext4, then unknown there: new.
        assert!(adds_labels(strict, strict | unknown(ext4)));
        // Unknown, then can: new; unknown again: not.
        assert!(adds_labels(strict | unknown(ext4), strict | can(ext4)));
        assert!(!adds_labels(strict | unknown(ext4), strict | unknown(ext4)));
        // Can, then unknown: nothing new (can stays can).
        assert!(!adds_labels(strict | can(ext4), strict | unknown(ext4)));
    }

    #[test]
    fn a_budget_that_stops_early_reports_the_points_it_did_not_cover() {
        let log = churn(4);
        let mut search = tree_search(&log, |_| {}, 1);
        for _ in 0..5 {
            search.next();
        }
        let summary = search.summary();
        assert!(!summary.complete());
        assert!(summary.high_yield.1 < summary.high_yield.0);
        assert!(search.high_yield_left() > 0);
    }

    proptest! {
        /// Every state handed out is one the model allows at its point, built
        /// as `Log::state_with` builds it, and no content is handed out twice.
        #[test]
        fn handed_out_states_are_allowed_and_distinct(n in 1usize..4, seed: u64, torn: bool) {
            let log = churn(n);
            let mut search = tree_search(&log, |c| c.sector = torn.then_some(1), seed);
            let mut seen = std::collections::HashSet::new();
            for c in search.by_ref() {
                prop_assert!(log.validate(c.point, &c.kept).is_ok());
                prop_assert_eq!(c.state.clone(), log.state_with(c.point, &c.kept));
                prop_assert!(seen.insert(c.state.fingerprint()));
            }
            prop_assert!(search.summary().complete());
        }
    }
}

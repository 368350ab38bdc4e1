//! The search schedule: which crash state to check next, each distinct state
//! once, and what has been covered.
//!
//! Order, so that a budget too small for everything still reaches every crash
//! point with what matters most:
//!
//! 1. every point's two extreme states: the surely-durable one, the no-crash one;
//! 2. every point's other high-yield states (each pending operation kept alone,
//!    each dropped alone, the last pending write torn), point by point;
//! 3. what is left of the budget: every state of points with few of them, random
//!    states (seeded) of the others, round-robin, until each point is done or
//!    saturated (its samples keep landing on states already checked).
//!
//! Memory is bounded by design: O(states handed out) for the set of state
//! fingerprints checked, O(crash points) for coverage, and one point's trees at a
//! time; nothing grows with the number of possible states (2^pending).

use std::collections::{HashMap, VecDeque};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::models::{FsModel, ModelFacts};
use super::points::{pending_counts, point, Point, Sweep};
use super::states::PointStates;
use crate::durability::{Kept, Log, Tree};

/// Points with at most this many states get every one of them in phase 3.
pub const ENUMERATE_UP_TO: usize = 256;
/// A point is saturated after this many samples in a row that were duplicates.
pub(crate) const SATURATED_AFTER: usize = 32;

/// What to search.
#[derive(Debug, Clone)]
pub struct SearchConfig {
    /// Crash points `first..=last` (clamped to the log).
    pub first: usize,
    /// See `first`.
    pub last: usize,
    /// Pending writes may tear at boundaries of this many bytes.
    pub sector: Option<u64>,
    /// A pending write that grows its file may persist as its size alone,
    /// the new bytes zeros (delayed allocation, unwritten extents).
    pub size_only: bool,
    /// Check a state once per crash point it occurs at, not once in all.
    pub per_point: bool,
    /// Paths left out of every state (already compiled).
    pub ignore: globset::GlobSet,
    /// Seed of the random samples.
    pub seed: u64,
    /// Label each state with the persistence models that can leave it
    /// ([`Candidate::models`]), and hand a content out again when another
    /// set of kept operations leading to it adds a model: a content is
    /// possible on every model that can leave any of the sets it comes from.
    pub models: bool,
}

impl SearchConfig {
    /// Every crash point of a log with `ops` operations, nothing torn or ignored.
    pub fn all(ops: usize) -> SearchConfig {
        SearchConfig {
            first: 0,
            last: ops,
            sector: None,
            size_only: false,
            per_point: false,
            ignore: globset::GlobSet::empty(),
            seed: 1,
            models: false,
        }
    }
}

/// A crash state to check.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Crash after this many operations.
    pub point: usize,
    /// The pending operations kept (the rest dropped), and how much of each.
    pub kept: Kept,
    /// The pending operations at that point.
    pub pending: Vec<usize>,
    /// The state, ignored paths left out.
    pub tree: Tree,
    /// With [`SearchConfig::models`]: the models that can leave this set of
    /// kept operations (empty otherwise).
    pub models: Vec<FsModel>,
}

/// How far one crash point has been covered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PointCoverage {
    /// High-yield states it has (duplicates among them included).
    pub high_yield: usize,
    /// Of those, how many were handed out or found already checked.
    pub high_yield_done: usize,
    /// States in all, if countable.
    pub states: Option<usize>,
    /// Phase 3: every state was handed out or found checked.
    pub exhausted: bool,
    /// Phase 3: random states handed out.
    pub sampled: usize,
}

/// How a whole search stands. The four categories add up to `points`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CoverageSummary {
    /// Crash points in the search.
    pub points: usize,
    /// Points whose every state was checked.
    pub every_state: usize,
    /// Points whose high-yield states were checked, with random states beyond.
    pub high_yield_and_sampled: usize,
    /// Points that got their high-yield states only.
    pub high_yield_only: usize,
    /// Points whose high-yield states were not all checked: the search did
    /// not keep its promise there.
    pub incomplete: Vec<usize>,
    /// High-yield states planned in all, and how many were covered.
    pub high_yield: (usize, usize),
}

impl CoverageSummary {
    /// The summary of per-point coverage; `point(n)` is the crash point of
    /// the `n`th entry (named in `incomplete`).
    pub fn of(coverage: &[PointCoverage], point: impl Fn(usize) -> usize) -> CoverageSummary {
        let mut summary = CoverageSummary {
            points: coverage.len(),
            ..CoverageSummary::default()
        };
        for (n, c) in coverage.iter().enumerate() {
            summary.high_yield.0 += c.high_yield;
            summary.high_yield.1 += c.high_yield_done.min(c.high_yield);
            if c.high_yield_done < c.high_yield {
                summary.incomplete.push(point(n));
            } else if c.exhausted {
                summary.every_state += 1;
            } else if c.sampled > 0 {
                summary.high_yield_and_sampled += 1;
            } else {
                summary.high_yield_only += 1;
            }
        }
        summary
    }

    /// Whether every point got at least its high-yield states.
    pub fn complete(&self) -> bool {
        self.incomplete.is_empty()
    }
}

enum Phase<'a> {
    Extremes(Sweep<'a>),
    HighYield {
        sweep: Sweep<'a>,
        current: Option<(Point, PointStates, usize)>,
    },
    Sampling {
        queue: VecDeque<usize>,
    },
    Done,
}

/// Hands out crash states to check, in the documented order, each distinct
/// state once.
pub struct Search<'a> {
    log: &'a Log,
    config: SearchConfig,
    phase: Phase<'a>,
    /// States found and not handed out yet (a point's two extremes).
    ready: VecDeque<Candidate>,
    /// Contents handed out, with the models some set of kept operations
    /// leading to them is allowed by (a bit per model; 1 without models).
    seen: HashMap<(usize, u64), u8>,
    facts: Option<ModelFacts>,
    coverage: Vec<PointCoverage>,
    /// Phase 3, per point: duplicate samples in a row.
    misses: Vec<usize>,
    rng: ChaCha8Rng,
    duplicates: usize,
}

impl<'a> Search<'a> {
    /// A search of `log`'s crash states.
    pub fn new(log: &'a Log, config: SearchConfig) -> Search<'a> {
        let last = config.last.min(log.ops().len());
        let first = config.first.min(last);
        let config = SearchConfig {
            first,
            last,
            ..config
        };
        // Planned from the pending counts; a point's torn variants are added when
        // the search reaches it.
        let coverage = pending_counts(log, first, last)
            .iter()
            .map(|p| PointCoverage {
                high_yield: 2 + 2 * p,
                ..PointCoverage::default()
            })
            .collect::<Vec<_>>();
        Search {
            log,
            phase: Phase::Extremes(Sweep::new(log, first, last)),
            ready: VecDeque::new(),
            misses: vec![0; coverage.len()],
            coverage,
            seen: HashMap::new(),
            facts: config.models.then(|| ModelFacts::new(log)),
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            config,
            duplicates: 0,
        }
    }

    /// Crash points `first..=last` of this search.
    pub fn range(&self) -> (usize, usize) {
        (self.config.first, self.config.last)
    }

    /// States skipped because the same content was handed out before.
    pub fn duplicates(&self) -> usize {
        self.duplicates
    }

    /// Per point, from `first`.
    pub fn coverage(&self) -> &[PointCoverage] {
        &self.coverage
    }

    /// Whether every point's high-yield states have been handed out (the
    /// search is sampling, or done).
    pub fn high_yield_finished(&self) -> bool {
        matches!(self.phase, Phase::Sampling { .. } | Phase::Done)
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
        CoverageSummary::of(&self.coverage, |n| self.config.first + n)
    }

    /// The next distinct state to check; `None` when there is none left.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Candidate> {
        self.next_unless(&|| false)
    }

    /// The next distinct state, or `None` as soon as `stop()` says so: it is
    /// asked before every state built, duplicates included, since a run of
    /// duplicates can be long and each costs a state's build (with
    /// [`Self::finished`] false, the search can go on later).
    pub fn next_unless(&mut self, stop: &dyn Fn() -> bool) -> Option<Candidate> {
        loop {
            if stop() {
                return None;
            }
            if let Some(ready) = self.ready.pop_front() {
                return Some(ready);
            }
            match &mut self.phase {
                Phase::Done => return None,
                Phase::Extremes(sweep) => match sweep.next() {
                    Some(point) => {
                        let states = PointStates::new(
                            self.log,
                            &point.pending,
                            self.config.sector,
                            self.config.size_only,
                        );
                        let slot = point.k - self.config.first;
                        self.coverage[slot].high_yield = states.high_yield_len();
                        self.coverage[slot].states = states.count();
                        for kept in states.extremes() {
                            self.coverage[slot].high_yield_done += 1;
                            if let Some(c) = self.offer(&point, kept) {
                                self.ready.push_back(c);
                            }
                        }
                    }
                    None => {
                        self.phase = Phase::HighYield {
                            sweep: Sweep::new(self.log, self.config.first, self.config.last),
                            current: None,
                        };
                    }
                },
                Phase::HighYield { sweep, current } => {
                    if current.is_none() {
                        match sweep.next() {
                            Some(point) => {
                                let states = PointStates::new(
                                    self.log,
                                    &point.pending,
                                    self.config.sector,
                                    self.config.size_only,
                                );
                                *current = Some((point, states, 0));
                            }
                            None => {
                                self.phase = Phase::Sampling {
                                    queue: (self.config.first..=self.config.last).collect(),
                                };
                                continue;
                            }
                        }
                    }
                    let (point, states, r) = current.as_mut().expect("set above");
                    match states.high_yield_nth(*r) {
                        Some(kept) => {
                            *r += 1;
                            let point = point.clone();
                            self.coverage[point.k - self.config.first].high_yield_done += 1;
                            if let Some(c) = self.offer(&point, kept) {
                                return Some(c);
                            }
                        }
                        None => *current = None,
                    }
                }
                Phase::Sampling { queue } => {
                    let Some(k) = queue.pop_front() else {
                        self.phase = Phase::Done;
                        return None;
                    };
                    if let Some(c) = self.sample(k, stop) {
                        if let Phase::Sampling { queue } = &mut self.phase {
                            queue.push_back(k);
                        }
                        return Some(c);
                    }
                    let slot = k - self.config.first;
                    let c = &self.coverage[slot];
                    if !c.exhausted && self.misses[slot] < SATURATED_AFTER {
                        if let Phase::Sampling { queue } = &mut self.phase {
                            queue.push_back(k);
                        }
                    }
                }
            }
        }
    }

    /// Phase 3 at point `k`: every state if there are few, else one random
    /// state; `None` when that was a duplicate or the point is done.
    fn sample(&mut self, k: usize, stop: &dyn Fn() -> bool) -> Option<Candidate> {
        let slot = k - self.config.first;
        if self.coverage[slot].exhausted {
            return None;
        }
        let point = point(self.log, k);
        let states = PointStates::new(
            self.log,
            &point.pending,
            self.config.sector,
            self.config.size_only,
        );
        if let Some(all) = states.all_states(ENUMERATE_UP_TO) {
            // Few states: the next one not yet seen, in order.
            for kept in all {
                if stop() {
                    return None;
                }
                if let Some(c) = self.offer(&point, kept) {
                    return Some(c);
                }
            }
            self.coverage[slot].exhausted = true;
            return None;
        }
        let kept = states.sample(&mut self.rng);
        match self.offer(&point, kept) {
            Some(c) => {
                self.misses[slot] = 0;
                self.coverage[slot].sampled += 1;
                Some(c)
            }
            None => {
                self.misses[slot] += 1;
                None
            }
        }
    }

    /// The state `kept` at `point`, unless its content was handed out before
    /// (at this point, with `per_point`).
    fn offer(&mut self, point: &Point, kept: Kept) -> Option<Candidate> {
        let tree = self
            .log
            .state_on(point.durable.clone(), point.k, &kept)
            .without(&self.config.ignore);
        let key = (
            if self.config.per_point { point.k } else { 0 },
            tree.fingerprint(),
        );
        let seen = self.seen.get(&key).copied();
        let models = match &self.facts {
            None => Vec::new(),
            // Every model already covers this content: no set can add one.
            Some(_) if seen == Some(model_bits(FsModel::ALL)) => Vec::new(),
            Some(facts) => facts.models_allowing(self.log, point.k, &point.pending, &kept),
        };
        let bits = if self.facts.is_some() {
            model_bits(&models)
        } else {
            1
        };
        if seen.is_some_and(|seen| bits & !seen == 0) {
            self.duplicates += 1;
            return None;
        }
        *self.seen.entry(key).or_default() |= bits;
        Some(Candidate {
            point: point.k,
            kept,
            pending: point.pending.clone(),
            tree,
            models,
        })
    }
}

/// High-yield states of `coverage` not yet handed out (or found checked).
pub(crate) fn high_yield_left(coverage: &[PointCoverage]) -> usize {
    coverage
        .iter()
        .map(|c| c.high_yield.saturating_sub(c.high_yield_done))
        .sum()
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
    use crate::durability::{LogOp, Node, NodeKind};
    use proptest::prelude::*;

    /// `for i in 1..=n; do echo x > j; echo y >> j; rm j; done`, never synced:
    /// every operation stays pending, 2^ops states at the last point.
    fn churn(n: usize) -> Log {
        let mut log = Log::new(Tree::empty(1));
        for i in 0..n as u64 {
            let node = 100 + i;
            log.push(LogOp::Create {
                dir: 1,
                name: "j".into(),
                node,
                kind: NodeKind::File,
            });
            log.push(LogOp::Write {
                node,
                offset: 0,
                data: b"x\n".to_vec(),
            });
            log.push(LogOp::Write {
                node,
                offset: 2,
                data: b"y\n".to_vec(),
            });
            log.push(LogOp::Remove {
                dir: 1,
                name: "j".into(),
            });
        }
        log
    }

    #[test]
    fn a_huge_state_space_ends_with_bounded_work_and_full_high_yield_coverage() {
        let log = churn(12); // 48 ops pending at the end: 2^48 states there
        let mut search = Search::new(&log, SearchConfig::all(log.ops().len()));
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
        let mut log = Log::new(Tree::empty(1));
        log.push(LogOp::Create {
            dir: 1,
            name: "f".into(),
            node: 2,
            kind: NodeKind::File,
        });
        for _ in 0..12 {
            log.push(LogOp::Write {
                node: 2,
                offset: 0,
                data: b"same".to_vec(),
            });
        }
        let mut unbounded = Search::new(&log, SearchConfig::all(log.ops().len()));
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
        let mut search = Search::new(&log, SearchConfig::all(log.ops().len()));
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
        let mut initial = Tree::empty(1);
        initial.apply(&LogOp::Create {
            dir: 1,
            name: "config".into(),
            node: 2,
            kind: NodeKind::File,
        });
        initial.apply(&LogOp::Write {
            node: 2,
            offset: 0,
            data: b"old".to_vec(),
        });
        let mut log = Log::new(initial);
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
            to_name: "config".into(),
            node: 3,
            exchanged: None,
        });
        log
    }

    #[test]
    fn a_content_is_labelled_with_every_model_of_every_set_that_leads_to_it() {
        // An empty config comes from {rename} (its create lost: strict only)
        // and from {create, rename} (the data lost: XFS too). Checked once
        // per content, the label was the first set's: "never on xfs", which
        // real XFS contradicts.
        let log = unsynced_replace();
        let mut config = SearchConfig::all(log.ops().len());
        config.models = true;
        let mut search = Search::new(&log, config);
        let mut empty_config = std::collections::BTreeSet::new();
        let mut handed = 0;
        while let Some(c) = search.next() {
            handed += 1;
            if c.tree.lookup("config").and_then(Node::data) == Some(&b""[..]) {
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
        let mut plain = Search::new(&log, SearchConfig::all(log.ops().len()));
        let mut distinct = 0;
        while plain.next().is_some() {
            distinct += 1;
        }
        assert!(handed > distinct, "{handed} labelled, {distinct} distinct");
    }

    #[test]
    fn a_budget_that_stops_early_reports_the_points_it_did_not_cover() {
        let log = churn(4);
        let mut search = Search::new(&log, SearchConfig::all(log.ops().len()));
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
            let mut config = SearchConfig::all(log.ops().len());
            config.seed = seed;
            config.sector = torn.then_some(1);
            let mut search = Search::new(&log, config);
            let mut seen = std::collections::HashSet::new();
            while let Some(c) = search.next() {
                prop_assert!(log.validate(c.point, &c.kept).is_ok());
                prop_assert_eq!(c.tree.clone(), log.state_with(c.point, &c.kept));
                prop_assert!(seen.insert(c.tree.fingerprint()));
            }
            prop_assert!(search.summary().complete());
        }
    }
}

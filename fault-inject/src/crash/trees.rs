//! The crash states of a log's file tree, as a [`StateSpace`]: a state is
//! the tree a crash leaves (the surely-durable tree plus the pending
//! operations it keeps, ignored paths left out), and its content is that
//! tree's fingerprint.

use super::coverage::PointCoverage;
use super::models::{Labels, ModelFacts};
use super::points::{pending_counts, Point, Sweep};
use super::search::StateSpace;
use super::states::PointStates;
use crate::durability::{Kept, Log, Tree};

/// Which of a log's crash states to search.
#[derive(Debug, Clone)]
pub struct TreeConfig {
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
    /// Label each state with the persistence models that can leave it
    /// ([`super::search::Candidate::models`]), and hand a content out again
    /// when another set of kept operations leading to it adds a model: a
    /// content is possible on every model that can leave any of the sets it
    /// comes from.
    pub models: bool,
}

impl TreeConfig {
    /// Every crash point of a log with `ops` operations, nothing torn or ignored.
    pub fn all(ops: usize) -> TreeConfig {
        TreeConfig {
            first: 0,
            last: ops,
            sector: None,
            size_only: false,
            per_point: false,
            ignore: globset::GlobSet::empty(),
            models: false,
        }
    }
}

/// The crash states of a log's file tree; slot `n` is crash point `first + n`.
pub struct TreeSpace<'a> {
    log: &'a Log,
    config: TreeConfig,
    cursor: Cursor<'a>,
    facts: Option<ModelFacts>,
}

impl<'a> TreeSpace<'a> {
    /// The space of `log`'s crash states that `config` describes.
    pub fn new(log: &'a Log, config: TreeConfig) -> TreeSpace<'a> {
        let last = config.last.min(log.ops().len());
        let first = config.first.min(last);
        TreeSpace {
            log,
            cursor: Cursor {
                log,
                last,
                sector: config.sector,
                size_only: config.size_only,
                walk: None,
                current: None,
            },
            facts: config.models.then(|| ModelFacts::new(log)),
            config: TreeConfig {
                first,
                last,
                ..config
            },
        }
    }

    fn at(&mut self, slot: usize) -> &(Point, PointStates) {
        self.cursor.at(self.config.first + slot)
    }
}

impl StateSpace for TreeSpace<'_> {
    type State = Tree;

    fn range(&self) -> (usize, usize) {
        (self.config.first, self.config.last)
    }

    /// From the pending counts alone: a point's torn variants are added
    /// when the search reaches it.
    fn plan(&self) -> Vec<PointCoverage> {
        pending_counts(self.log, self.config.first, self.config.last)
            .iter()
            .map(|p| PointCoverage {
                high_yield: 2 + 2 * p,
                ..PointCoverage::default()
            })
            .collect()
    }

    fn crash_point(&self, slot: usize) -> usize {
        self.config.first + slot
    }

    fn states(&mut self, slot: usize) -> &PointStates {
        &self.at(slot).1
    }

    fn high_yield(&mut self, slot: usize, rank: usize) -> Option<Kept> {
        let states = &self.at(slot).1;
        match rank {
            0 | 1 => states.extremes().into_iter().nth(rank),
            _ => states.high_yield_nth(rank - 2),
        }
    }

    fn high_yield_len(&mut self, slot: usize) -> usize {
        self.at(slot).1.high_yield_len()
    }

    fn build(&mut self, slot: usize, kept: &Kept) -> (u64, Tree) {
        let k = self.config.first + slot;
        let (point, _) = self.cursor.at(k);
        let tree = self
            .log
            .state_on(point.durable.clone(), k, kept)
            .without(&self.config.ignore);
        (tree.fingerprint(), tree)
    }

    fn labels(&self) -> bool {
        self.facts.is_some()
    }

    fn models(&mut self, slot: usize, kept: &Kept) -> Labels {
        let k = self.config.first + slot;
        let (point, _) = self.cursor.at(k);
        match &self.facts {
            Some(facts) => facts.labels(self.log, k, &point.pending, kept),
            None => Labels::default(),
        }
    }

    fn per_point(&self) -> bool {
        self.config.per_point
    }
}

/// The crash point last asked for, with its states. Points asked for in
/// order are walked to (O(1) per operation); one behind the walk starts a
/// new walk from the log's start (O(k)).
struct Cursor<'a> {
    log: &'a Log,
    last: usize,
    sector: Option<u64>,
    size_only: bool,
    walk: Option<Sweep<'a>>,
    current: Option<(Point, PointStates)>,
}

impl Cursor<'_> {
    fn at(&mut self, k: usize) -> &(Point, PointStates) {
        if self.current.as_ref().is_none_or(|(point, _)| point.k != k) {
            let point = match self.walk.as_mut().and_then(|walk| walk.seek(k)) {
                Some(point) => point,
                None => {
                    let mut walk = Sweep::new(self.log, k, self.last);
                    let point = walk.next().expect("a point within the log");
                    self.walk = Some(walk);
                    point
                }
            };
            let states = PointStates::new(self.log, &point.pending, self.sector, self.size_only);
            self.current = Some((point, states));
        }
        self.current.as_ref().expect("set above")
    }
}

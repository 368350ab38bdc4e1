//! How far a crash-state search has covered its crash points: per point, and
//! summed up in four categories that add up, for the report and its promise
//! (every point's high-yield states checked).

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

/// High-yield states of `coverage` not yet handed out (or found checked).
pub(crate) fn high_yield_left(coverage: &[PointCoverage]) -> usize {
    coverage
        .iter()
        .map(|c| c.high_yield.saturating_sub(c.high_yield_done))
        .sum()
}

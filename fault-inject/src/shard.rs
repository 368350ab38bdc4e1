//! Splitting one run over CI jobs: shard K of N takes every Nth item of a
//! plan that every shard computes alike (the conformance matrix's cells,
//! explore's sequence of distinct crash states), so that the shards' reports
//! join into the unsharded run's.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Shard `index` (1-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// Which shard, from 1.
    pub index: usize,
    /// How many shards the run is split into.
    pub count: usize,
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Shard, String> {
        let bad = || format!("'{text}' is not a shard: expected K/N with 1 <= K <= N, e.g. 2/4");
        let (k, n) = text.split_once('/').ok_or_else(bad)?;
        let index: usize = k.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if index == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// Whether item `i` (from 0) of a plan is this shard's: items index-1,
    /// index-1+count, ... (round robin, so slow parts spread over the shards).
    pub fn owns(self, i: usize) -> bool {
        i % self.count == self.index - 1
    }

    /// This shard's part of a plan.
    pub fn select<T>(self, plan: Vec<T>) -> Vec<T> {
        plan.into_iter()
            .enumerate()
            .filter(|(i, _)| self.owns(*i))
            .map(|(_, item)| item)
            .collect()
    }
}

/// Checks that `shards` (each report's shard, in the order given; `None` for a
/// report that is not a shard's) are every shard of one run, once each;
/// returns how many shards the run has. The errors name the report (from 1).
pub fn check_complete(shards: &[Option<Shard>]) -> Result<usize, String> {
    let first = shards.first().ok_or("no reports to merge")?;
    let count = first
        .ok_or("the first report is not a shard's (run with --shard K/N)")?
        .count;
    let mut seen = vec![false; count];
    for (i, shard) in shards.iter().enumerate() {
        let n = i + 1;
        let shard =
            shard.ok_or_else(|| format!("report {n} is not a shard's (run with --shard K/N)"))?;
        if shard.count != count {
            return Err(format!(
                "report {n} is shard {shard}, the first is one of {count}: shards of different runs"
            ));
        }
        if std::mem::replace(&mut seen[shard.index - 1], true) {
            return Err(format!("shard {shard} is given twice"));
        }
    }
    let missing: Vec<String> = (1..=count)
        .filter(|k| !seen[k - 1])
        .map(|k| format!("{k}/{count}"))
        .collect();
    if missing.is_empty() {
        Ok(count)
    } else {
        Err(format!("missing shard(s): {}", missing.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_the_plan_and_interleave_back() {
        let plan: Vec<usize> = (0..11).collect();
        let shards: Vec<Vec<usize>> = (1..=3)
            .map(|k| Shard { index: k, count: 3 }.select(plan.clone()))
            .collect();
        let mut all: Vec<usize> = shards.iter().flatten().copied().collect();
        all.sort();
        assert_eq!(all, plan);
        assert_eq!(shards[1], vec![1, 4, 7, 10]);
    }

    #[test]
    fn bad_shards_say_the_form() {
        for bad in ["0/3", "4/3", "3", "a/b", "1/0"] {
            let e = bad.parse::<Shard>().unwrap_err();
            assert!(e.contains("K/N"), "{e}");
        }
        assert_eq!(
            "2/4".parse::<Shard>().unwrap(),
            Shard { index: 2, count: 4 }
        );
    }
}

//! Sharding a run over CI jobs: `run --shard K/N` runs every Nth cell of the
//! plan, and [`merge`] joins the shards' reports into the report the unsharded
//! run gives (same seed, same cells, same order).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::report::{Report, Stopped};

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
    /// This shard's part of a plan: items index-1, index-1+count, ...
    /// (round robin, so slow engines or suites spread over the shards).
    pub fn select<T>(self, plan: Vec<T>) -> Vec<T> {
        plan.into_iter()
            .enumerate()
            .filter(|(i, _)| i % self.count == self.index - 1)
            .map(|(_, item)| item)
            .collect()
    }
}

/// Joins the reports of every shard of one run, in any order, into the
/// unsharded run's report. Refuses reports that are not the shards of one
/// run: a missing or repeated shard, different seeds or shard counts.
pub fn merge(mut reports: Vec<Report>) -> Result<Report, String> {
    let first = reports.first().ok_or("no reports to merge")?;
    let seed = first.seed;
    let count = first
        .shard
        .ok_or("the first report is not a shard's (run with --shard K/N)")?
        .count;
    let mut seen = vec![false; count];
    for (i, r) in reports.iter().enumerate() {
        let shard = r
            .shard
            .ok_or_else(|| format!("report {} is not a shard's (run with --shard K/N)", i + 1))?;
        if shard.count != count {
            return Err(format!(
                "report {} is shard {shard}, the first is one of {count}: shards of different runs",
                i + 1
            ));
        }
        if r.seed != seed {
            return Err(format!(
                "report {} has seed {}, the first {seed}: shards must share one --seed",
                i + 1,
                r.seed
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
    if !missing.is_empty() {
        return Err(format!("missing shard(s): {}", missing.join(", ")));
    }
    reports.sort_by_key(|r| r.shard.map(|s| s.index));
    // A shard that finished planned what it ran.
    let planned: usize = reports
        .iter()
        .map(|r| r.stopped.as_ref().map_or(r.cells.len(), |s| s.planned))
        .sum();
    // Cell i of the plan is cell i / count of shard i % count.
    let longest = reports.iter().map(|r| r.cells.len()).max().unwrap_or(0);
    let mut merged = Report::new(seed);
    let mut cells: Vec<_> = reports
        .iter_mut()
        .map(|r| std::mem::take(&mut r.cells).into_iter())
        .collect();
    for _ in 0..longest {
        for shard in cells.iter_mut() {
            if let Some(cell) = shard.next() {
                merged.cells.push(cell);
            }
        }
    }
    merged.stopped = reports
        .iter()
        .filter_map(|r| r.stopped.as_ref())
        .map(|s| Stopped {
            by: format!("{} (in a shard)", s.by),
            planned,
        })
        .next();
    Ok(merged)
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

    #[test]
    fn merge_refuses_what_is_not_one_run() {
        let shard = |k, n, seed| {
            let mut r = Report::new(seed);
            r.shard = Some(Shard { index: k, count: n });
            r
        };
        assert!(merge(vec![shard(1, 2, 7)])
            .unwrap_err()
            .contains("missing shard(s): 2/2"));
        assert!(merge(vec![shard(1, 2, 7), shard(1, 2, 7)])
            .unwrap_err()
            .contains("twice"));
        assert!(merge(vec![shard(1, 2, 7), shard(2, 2, 8)])
            .unwrap_err()
            .contains("--seed"));
        assert!(merge(vec![shard(1, 2, 7), shard(2, 3, 7)])
            .unwrap_err()
            .contains("different runs"));
        assert!(merge(vec![Report::new(7)]).unwrap_err().contains("--shard"));
        assert!(merge(vec![shard(2, 2, 7), shard(1, 2, 7)]).is_ok());
    }
}

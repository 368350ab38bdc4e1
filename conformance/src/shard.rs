//! Sharding a run over CI jobs: `run --shard K/N` runs every Nth cell of the
//! plan, and [`merge`] joins the shards' reports into the report the unsharded
//! run gives (same seed, same cells, same order).

pub use slowfs_faults::shard::Shard;

use crate::report::{Report, Stopped};

/// Joins the reports of every shard of one run, in any order, into the
/// unsharded run's report. Refuses reports that are not the shards of one
/// run: a missing or repeated shard, different seeds or shard counts.
pub fn merge(mut reports: Vec<Report>) -> Result<Report, String> {
    let shards: Vec<Option<Shard>> = reports.iter().map(|r| r.shard).collect();
    slowfs_faults::shard::check_complete(&shards)?;
    let seed = reports[0].seed;
    if let Some((i, r)) = reports.iter().enumerate().find(|(_, r)| r.seed != seed) {
        return Err(format!(
            "report {} has seed {}, the first {seed}: shards must share one --seed",
            i + 1,
            r.seed
        ));
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

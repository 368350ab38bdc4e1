//! Sharding a run over CI jobs: `run --shard K/N` runs every Nth cell of the
//! plan, and [`merge`] joins the shards' reports into the report the unsharded
//! run gives (same seed, same cells, same order).

pub use slowfs_faults::shard::Shard;

use crate::report::{Report, Stopped};

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

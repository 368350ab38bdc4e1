//! A long exploration spread over CI jobs: each job records the workload and
//! walks the same sequence of distinct states, checking only its shard's
//! (`ExploreConfig::shard`); [`merge`] joins their [`ShardReport`]s into what
//! the unsharded run reports.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use slowfs_faults::durability::Log;

use slowfs_faults::shard::Shard;

use super::{Cut, Exploration};

/// One shard's result and what must agree between the shards of one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardReport {
    /// What the shard found.
    pub exploration: Exploration,
    /// The recorded log's fingerprint ([`log_digest`]): shards that recorded
    /// different operations explored different programs.
    pub log_digest: String,
    /// `--seed`.
    pub seed: u64,
    /// `--max-states`.
    pub max_states: usize,
    /// `--per-point`.
    pub per_point: bool,
    /// Where writes tear.
    pub torn_sector: Option<u64>,
    /// Whether writes may persist as their size alone.
    #[serde(default)]
    pub size_only: bool,
    /// `--ignore` globs.
    pub ignore: Vec<String>,
    /// `--fs-model`.
    #[serde(default)]
    pub fs_model: Option<slowfs_faults::crash::models::FsModel>,
    /// Whether a time budget could have stopped it (states then differ
    /// between shards; the merge keeps only what they all covered).
    pub time_budget: bool,
    /// Where the shard saved its run for `--replay`, if it did.
    pub saved_run: Option<PathBuf>,
}

/// A recorded log's fingerprint ([`Log::fingerprint`]) as the reports spell it.
pub fn log_digest(log: &Log) -> String {
    format!("{:016x}", log.fingerprint())
}

/// Joins the reports of every shard of one run, in any order. Refuses what
/// is not one run: a missing or repeated shard, different settings, or a
/// workload that recorded differently on some shard.
pub fn merge(mut shards: Vec<ShardReport>) -> Result<ShardReport, String> {
    let ids: Vec<Option<Shard>> = shards.iter().map(|s| s.exploration.shard).collect();
    slowfs_faults::shard::check_complete(&ids)?;
    let first = &shards[0];
    let settings = |r: &ShardReport| {
        (
            r.seed,
            r.max_states,
            r.per_point,
            r.torn_sector,
            r.size_only,
            r.ignore.clone(),
            r.fs_model,
            r.exploration.crash_points,
        )
    };
    for (i, r) in shards.iter().enumerate() {
        let n = i + 1;
        if settings(r) != settings(first) {
            return Err(format!(
                "report {n} was run with other settings than the first (--seed, --max-states, \
                 --per-point, --torn, --ignore, --fs-model or --crash-points): give every shard the same flags"
            ));
        }
        if r.log_digest != first.log_digest {
            let shard = r
                .exploration
                .shard
                .expect("every report is a shard's (checked)");
            return Err(format!(
                "shard {shard} recorded other operations than the first ({} ops, log {}; the \
                 first {} ops, log {}): the workload is not deterministic, so its shards \
                 explored different programs",
                r.exploration.ops, r.log_digest, first.exploration.ops, first.log_digest
            ));
        }
    }
    // Every shard walked the same sequence; one stopped by its time budget
    // walked less of it. What they all walked was checked by its owners:
    // that shard's coverage is the run's.
    shards.sort_by_key(|s| (s.exploration.states, s.exploration.shard.map(|s| s.index)));
    let mut merged = shards[0].clone();
    let e = &mut merged.exploration;
    e.shard = None;
    e.checked_here = e.states;
    e.cut = [
        Cut::Interrupted,
        Cut::OwnError,
        Cut::TimeBudget,
        Cut::MaxStates,
    ]
    .into_iter()
    .find(|cut| shards.iter().any(|s| s.exploration.cut == Some(*cut)));
    e.error = shards.iter().find_map(|s| s.exploration.error.clone());
    e.finished = shards.iter().all(|s| s.exploration.finished);
    e.seconds = shards
        .iter()
        .map(|s| s.exploration.seconds)
        .fold(0.0, f64::max);
    e.high_yield_seconds = shards
        .iter()
        .map(|s| s.exploration.high_yield_seconds)
        .try_fold(0.0, |most: f64, s| s.map(|s| most.max(s)));
    e.tally = Default::default();
    for shard in &shards {
        e.tally.merge(shard.exploration.tally.clone());
    }
    e.violations = e.tally.total();
    e.groups = e.tally.groups();
    merged.saved_run = shards.iter().find_map(|s| s.saved_run.clone());
    Ok(merged)
}

//! One typed report per exploration: what `slowfs explore` prints, writes as
//! `--json` and `--html`, and exits with are all views of an
//! [`ExploreReport`], and its [`ExploreVerdict`] is decided in one place
//! ([`ExploreVerdict::judge`]) from the report's own facts, so that no two
//! of them can disagree.

mod compare;
mod text;
mod verdict;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use slowfs_faults::crash::coverage::CoverageSummary;
use slowfs_faults::crash::models::FsModel;
use slowfs_faults::crash::oracle::Prediction;
use slowfs_faults::crash::report::{Example, Group};
use slowfs_faults::durability::{Log, NodeId};

pub use compare::{Comparison, ModelRun};
pub use verdict::{ExploreVerdict, RefusedInput};

use super::{Cut, Exploration, ShardReport};

/// Everything an exploration says, for people (`Display`), for programs
/// (JSON: this type serialised), for a browser ([`super::html::page`]) and
/// for the shell ([`ExploreReport::exit_code`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExploreReport {
    /// Operations recorded.
    pub ops: usize,
    /// The crash points visited (inclusive).
    pub crash_points: (usize, usize),
    /// Distinct states checked.
    pub states: usize,
    /// States skipped because the same content had been checked.
    pub duplicates: usize,
    /// States skipped because `--fs-model` cannot leave them.
    #[serde(default)]
    pub ruled_out: usize,
    /// Of the states checked, how many each persistence model can leave.
    #[serde(default)]
    pub per_model: BTreeMap<String, usize>,
    /// The shard this run was (`K/N`), if it was one, and what it checked.
    #[serde(default)]
    pub shard: Option<String>,
    /// Distinct states this run checked itself.
    #[serde(default)]
    pub checked_here: usize,
    /// What was covered.
    pub coverage: Coverage,
    /// Why it stopped early, if it did.
    pub cut: Option<Cut>,
    /// Explore's own error, if any.
    pub error: Option<String>,
    /// Seconds spent checking.
    pub seconds: f64,
    /// When every crash point's high-yield states had been checked.
    pub high_yield_seconds: Option<f64>,
    /// Where the run was saved for `--replay` (a CI artifact to keep).
    pub saved_run: Option<PathBuf>,
    /// How the run was made: the choices that decide which states exist.
    #[serde(default)]
    pub settings: ReportSettings,
    /// Violations in this run (the `--fsync-fails` runs count apart).
    pub violations: usize,
    /// Them, grouped by cause, largest group first.
    pub groups: Vec<ReportGroup>,
    /// With `--fs`: the real filesystem the states were checked on.
    #[serde(default)]
    pub real_fs: Option<String>,
    /// With `--fs`: the crash point that ends each flush epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flush_epochs: Option<Vec<usize>>,
    /// With `--compare-with`: the model run each group was judged against.
    #[serde(default)]
    pub compared_with: Option<Comparison>,
    /// With `--fsync-fails`: one report per failing fsync.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fsync_fails: Vec<FsyncFailRun>,
    /// With `--shard`: what `--merge` joins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_report: Option<Box<ShardReport>>,
    /// The verdict, typed: what the run can promise.
    pub outcome: ExploreVerdict,
    /// The verdict as the last line of the text says it.
    pub verdict: String,
    /// The exit code `slowfs explore` ends with (the outcome's).
    pub exit_code: u8,
}

/// The run's coverage as the report spells it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    /// Crash points in the run.
    pub points: usize,
    /// Points whose every state was checked.
    pub every_state: usize,
    /// Points whose high-yield states were checked, with random ones beyond.
    pub high_yield_and_sampled: usize,
    /// Points that got their high-yield states only.
    pub high_yield_only: usize,
    /// Points whose high-yield states were not all checked.
    pub incomplete: Vec<usize>,
    /// High-yield states checked, and planned.
    pub high_yield_states: (usize, usize),
    /// Every point's high-yield states were checked.
    pub complete: bool,
    /// Every state of every point was checked (the search ran out of
    /// states, not of budget): what the run did not see, it cannot produce.
    #[serde(default)]
    pub exhaustive: bool,
}

impl Coverage {
    fn of(summary: &CoverageSummary, finished: bool, cut: Option<Cut>) -> Coverage {
        Coverage {
            points: summary.points,
            every_state: summary.every_state,
            high_yield_and_sampled: summary.high_yield_and_sampled,
            high_yield_only: summary.high_yield_only,
            incomplete: summary.incomplete.clone(),
            high_yield_states: (summary.high_yield.1, summary.high_yield.0),
            complete: summary.complete(),
            exhaustive: summary.complete()
                && summary.every_state == summary.points
                && finished
                && cut.is_none(),
        }
    }

    /// High-yield states planned but not checked.
    pub fn high_yield_left(&self) -> usize {
        self.high_yield_states
            .1
            .saturating_sub(self.high_yield_states.0)
    }
}

/// The choices of a run that decide which crash states it makes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportSettings {
    /// Pending writes may tear at this size.
    pub torn_sector: Option<u64>,
    /// A pending write that grew its file may persist as its size alone.
    #[serde(default)]
    pub size_only: bool,
    /// `--fs-model`: only this model's states were checked.
    pub fs_model: Option<FsModel>,
    /// `--per-point`.
    pub per_point: bool,
    /// Whether a `--time-budget` was given.
    pub time_budget: bool,
    /// `--partial-ok`: a run that did not cover every point is accepted.
    pub partial_ok: bool,
    /// `--seed`.
    pub seed: u64,
    /// `--max-states`.
    pub max_states: usize,
}

/// A violation group as reported: the group, where to replay its examples,
/// and with `--compare-with` what the model run said of it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReportGroup {
    /// The checker's message, normalised.
    pub message: String,
    /// How many violations.
    pub count: usize,
    /// Their crash points, as ranges.
    pub points: String,
    /// Patterns of lost operations, most common first, with counts.
    pub patterns: Vec<(String, usize)>,
    /// A few examples, smallest first.
    pub examples: Vec<ReportExample>,
    /// The persistence models under which its states can happen.
    #[serde(default)]
    pub models: Vec<String>,
    /// The models it is unknown on: none of its states can happen there,
    /// but one is ruled out only by an approximate rule (never "never").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<String>,
    /// With `--compare-with`: the model run's judgement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Judged>,
}

impl ReportGroup {
    /// The group as the crash search made it (for the oracle).
    pub fn group(&self) -> Group {
        Group {
            message: self.message.clone(),
            count: self.count,
            points: self.points.clone(),
            patterns: self.patterns.clone(),
            examples: self.examples.iter().map(|e| e.example.clone()).collect(),
            models: self.models.clone(),
            unknown: self.unknown.clone(),
        }
    }

    /// The persistence models that never leave its states (neither can
    /// nor unknown).
    pub fn never(&self) -> Vec<&'static str> {
        FsModel::ALL
            .iter()
            .map(|m| m.name())
            .filter(|name| !self.models.iter().chain(&self.unknown).any(|m| m == name))
            .collect()
    }
}

/// One example of a group, with how to replay it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ReportExample {
    /// The example.
    #[serde(flatten)]
    pub example: Example,
    /// The command that replays it (when the run was saved).
    #[serde(default)]
    pub replay: Option<String>,
    /// With `--fs`: the flush epoch (from 1) its crash point ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flush_epoch: Option<usize>,
}

/// What a model run said about a group a real filesystem showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Judged {
    /// The model standing for the filesystem.
    pub model: FsModel,
    /// Its judgement.
    pub prediction: Prediction,
    /// The model run's group with the same message (from 1).
    pub model_group: Option<usize>,
}

/// One `--fsync-fails` run: the workload again with fsync number
/// `failing_fsync` failing, and its own report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FsyncFailRun {
    /// Which fsync failed (from 1).
    pub failing_fsync: usize,
    /// The workload's exit code in that run.
    pub workload_exit: Option<i32>,
    /// That run's crash states.
    pub report: Box<ExploreReport>,
}

/// What a report is made from besides the exploration itself.
#[derive(Debug, Default)]
pub struct ReportContext<'a> {
    /// Where the run was saved for `--replay`.
    pub saved: Option<PathBuf>,
    /// The run's settings.
    pub settings: ReportSettings,
    /// With `--fs`: the crash point of each flush epoch.
    pub epochs: Option<Vec<usize>>,
    /// With `--compare-with`: the model run and the model that stands for
    /// the real filesystem.
    pub model_run: Option<(&'a ModelRun, FsModel)>,
}

impl ExploreReport {
    /// The report of `result`, its verdict judged.
    pub fn new(result: &Exploration, context: ReportContext<'_>) -> ExploreReport {
        let epoch_of = |point: usize| epoch_of(context.epochs.as_deref(), point);
        let replay = |state: &str| {
            context.saved.as_ref().map(|saved| {
                format!(
                    "slowfs explore --replay {} --state {state}",
                    saved.display()
                )
            })
        };
        let groups: Vec<ReportGroup> = result
            .groups
            .iter()
            .map(|g| ReportGroup {
                message: g.message.clone(),
                count: g.count,
                points: g.points.clone(),
                patterns: g.patterns.clone(),
                examples: g
                    .examples
                    .iter()
                    .map(|e| ReportExample {
                        example: e.clone(),
                        replay: replay(&e.state),
                        flush_epoch: epoch_of(e.point),
                    })
                    .collect(),
                models: g.models.clone(),
                unknown: g.unknown.clone(),
                model: None,
            })
            .collect();
        let mut report = ExploreReport {
            ops: result.ops,
            crash_points: result.crash_points,
            states: result.states,
            duplicates: result.duplicates,
            ruled_out: result.ruled_out,
            per_model: result.per_model.clone(),
            shard: result.shard.map(|s| s.to_string()),
            checked_here: result.checked_here,
            coverage: Coverage::of(&result.coverage, result.finished, result.cut),
            cut: result.cut,
            error: result.error.clone(),
            seconds: result.seconds,
            high_yield_seconds: result.high_yield_seconds,
            saved_run: context.saved.clone(),
            settings: context.settings,
            violations: result.violations,
            groups,
            real_fs: result.real_fs.clone(),
            flush_epochs: context.epochs.clone(),
            compared_with: None,
            fsync_fails: Vec::new(),
            shard_report: None,
            outcome: ExploreVerdict::Interrupted { states: 0 },
            verdict: String::new(),
            exit_code: 0,
        };
        if let Some((run, model)) = context.model_run {
            compare::judge_groups(&mut report, run, model);
        }
        report.judge();
        report
    }

    /// A report for a run refused before any state was checked: its
    /// outcome says why (exit 2), with nothing explored.
    pub fn refused(reason: RefusedInput) -> ExploreReport {
        let mut report = ExploreReport::new(&Exploration::default(), ReportContext::default());
        report.outcome = ExploreVerdict::Refused(reason);
        report.verdict = report.outcome.to_string();
        report.exit_code = report.outcome.exit_code();
        report
    }

    /// Adds the `--fsync-fails` runs and judges again (their violations
    /// count against the verdict).
    pub fn with_fsync_fails(mut self, runs: Vec<FsyncFailRun>) -> ExploreReport {
        self.fsync_fails = runs;
        self.judge();
        self
    }

    /// Decides the verdict from the report's facts, and what the text and
    /// the exit code say of it.
    pub fn judge(&mut self) {
        self.outcome = ExploreVerdict::judge(self);
        self.verdict = self.outcome.to_string();
        self.exit_code = self.outcome.exit_code();
    }

    /// Violations of the `--fsync-fails` runs, all together.
    pub fn fsync_fail_violations(&self) -> usize {
        self.fsync_fails.iter().map(|r| r.report.violations).sum()
    }

    /// The report as JSON (what `--json` writes).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report serialises")
    }

    /// The flush epoch (from 1) that crash point `point` ends, with `--fs`.
    pub fn epoch_of(&self, point: usize) -> Option<usize> {
        epoch_of(self.flush_epochs.as_deref(), point)
    }
}

/// The flush epoch (from 1) that crash point `point` ends, given the crash
/// point that ends each epoch.
fn epoch_of(epochs: Option<&[usize]>, point: usize) -> Option<usize> {
    epochs?.binary_search(&point).ok().map(|i| i + 1)
}

/// Names for the nodes of a recorded log, as the text and JSON use them
/// (`doc.tmp`, not an inode number).
pub fn op_names(log: &Log) -> HashMap<NodeId, String> {
    slowfs_faults::crash::text::node_names(log)
}

#[cfg(test)]
mod tests;

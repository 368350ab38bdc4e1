//! The verdict of an exploration: one value, decided once, that the text's
//! last line, the JSON's `outcome`, the HTML page and the exit code all say.

use std::fmt;

use serde::{Deserialize, Serialize};
use slowfs_faults::crash::oracle::Prediction;
use slowfs_faults::crash::text::ranges;

use super::{Cut, ExploreReport};

/// What an exploration can promise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExploreVerdict {
    /// Every crash point's high-yield states were checked and accepted.
    Clean {
        /// Distinct states checked.
        states: usize,
    },
    /// The checker rejected states (in the run, or in an `--fsync-fails`
    /// run), or a model run judged against a real filesystem was wrong.
    Violations {
        /// Violations in the run itself.
        violations: usize,
        /// Its groups.
        groups: usize,
        /// Violations in the `--fsync-fails` runs.
        fsync_fails: usize,
        /// `--compare-with`: groups the model says never happen (the model
        /// is wrong there).
        model_says_never: usize,
        /// `--compare-with`: groups a model run that checked every state
        /// did not produce (the model cannot: a gap in it).
        model_gap: usize,
        /// The model judged, with `--compare-with`.
        model: Option<String>,
    },
    /// Some crash points did not get all their high-yield states.
    NotFullyCovered {
        /// Distinct states checked.
        states: usize,
        /// The points left incomplete.
        incomplete: Vec<usize>,
        /// `--max-states` that would finish the job.
        needed: usize,
        /// A `--time-budget` was given (and must grow too).
        time_budget: bool,
        /// `--partial-ok`: accepted all the same (exit 0).
        accepted: bool,
    },
    /// One shard of a sharded run: no violation in its part; the run's
    /// verdict is `--merge`'s.
    ShardClean {
        /// The shard, `K/N`.
        shard: String,
        /// States it checked.
        checked_here: usize,
        /// Its part of the high-yield states was all checked.
        complete: bool,
        /// `--partial-ok`.
        accepted: bool,
    },
    /// Explore's own temporary space failed: clean so far only.
    OwnError {
        /// What failed.
        error: String,
    },
    /// Stopped from outside (Ctrl-C, SIGTERM): not a verdict.
    Interrupted {
        /// States checked by then.
        states: usize,
    },
    /// Nothing was checked: the input was refused.
    Refused(RefusedInput),
}

/// Why a run checked nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum RefusedInput {
    /// The workload exited non-zero.
    WorkloadFailed {
        /// How it ended.
        status: String,
    },
    /// The workload wrote nothing where explore records.
    NothingRecorded {
        /// What happened and what to do about it.
        hint: String,
    },
    /// Interrupted while the workload ran.
    InterruptedDuringWorkload,
}

impl ExploreVerdict {
    /// The verdict of `report`'s facts. Order matters: an interrupted run
    /// promises nothing; violations are a verdict whatever else happened;
    /// then explore's own failure, then coverage.
    pub fn judge(report: &ExploreReport) -> ExploreVerdict {
        if let ExploreVerdict::Refused(reason) = &report.outcome {
            return ExploreVerdict::Refused(reason.clone());
        }
        if report.cut == Some(Cut::Interrupted) {
            return ExploreVerdict::Interrupted {
                states: report.states,
            };
        }
        let count = |wanted: Prediction| {
            report
                .groups
                .iter()
                .filter(|g| g.model.is_some_and(|j| j.prediction == wanted))
                .count()
        };
        let (model_says_never, model_gap) = (count(Prediction::SaidNever), count(Prediction::Gap));
        let fsync_fails = report.fsync_fail_violations();
        if report.violations > 0 || fsync_fails > 0 {
            return ExploreVerdict::Violations {
                violations: report.violations,
                groups: report.groups.len(),
                fsync_fails,
                model_says_never,
                model_gap,
                model: report
                    .compared_with
                    .as_ref()
                    .map(|c| c.model.name().to_string()),
            };
        }
        if let Some(shard) = &report.shard {
            return ExploreVerdict::ShardClean {
                shard: shard.clone(),
                checked_here: report.checked_here,
                complete: report.coverage.complete,
                accepted: report.settings.partial_ok,
            };
        }
        if report.error.is_some() || report.cut == Some(Cut::OwnError) {
            return ExploreVerdict::OwnError {
                error: report
                    .error
                    .clone()
                    .unwrap_or_else(|| "explore's own temporary space failed".into()),
            };
        }
        if report.coverage.complete {
            return ExploreVerdict::Clean {
                states: report.states,
            };
        }
        ExploreVerdict::NotFullyCovered {
            states: report.states,
            incomplete: report.coverage.incomplete.clone(),
            needed: report.states + report.coverage.high_yield_left(),
            time_budget: report.settings.time_budget,
            accepted: report.settings.partial_ok,
        }
    }

    /// 0 clean (or a partial run `--partial-ok` accepts), 1 violations,
    /// 2 refused input, 3 not every point covered, 4 explore's own error,
    /// 130 interrupted.
    pub fn exit_code(&self) -> u8 {
        match self {
            ExploreVerdict::Clean { .. } => 0,
            ExploreVerdict::Violations { .. } => 1,
            ExploreVerdict::Refused(RefusedInput::InterruptedDuringWorkload) => 130,
            ExploreVerdict::Refused(_) => 2,
            ExploreVerdict::NotFullyCovered { accepted, .. } => {
                if *accepted {
                    0
                } else {
                    3
                }
            }
            ExploreVerdict::ShardClean {
                complete, accepted, ..
            } => {
                if *complete || *accepted {
                    0
                } else {
                    3
                }
            }
            ExploreVerdict::OwnError { .. } => 4,
            ExploreVerdict::Interrupted { .. } => 130,
        }
    }

    /// Whether a CI may take the run as passing.
    pub fn passed(&self) -> bool {
        self.exit_code() == 0
    }
}

impl fmt::Display for ExploreVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExploreVerdict::Clean { states } => write!(
                f,
                "verdict: clean: every crash point's high-yield states checked ({states} states)"
            ),
            ExploreVerdict::Violations {
                violations,
                groups,
                fsync_fails,
                model_says_never,
                model_gap,
                model,
            } => {
                write!(f, "verdict: {} VIOLATION(S)", violations + fsync_fails)?;
                match (violations, fsync_fails) {
                    (_, 0) => write!(f, " in {groups} group(s)")?,
                    (0, n) => write!(
                        f,
                        ", all {n} in the --fsync-fails runs (none without a failing fsync)"
                    )?,
                    (v, n) => write!(
                        f,
                        ": {v} in {groups} group(s), {n} more in the --fsync-fails runs"
                    )?,
                }
                let model = model.as_deref().unwrap_or("filesystem's");
                if *model_says_never > 0 {
                    write!(
                        f,
                        "; {model_says_never} of them the {model} model says never happen: the \
                         model is wrong there"
                    )?;
                }
                if *model_gap > 0 {
                    write!(
                        f,
                        "; {model_gap} of them the {model} model cannot produce (MODEL GAP: its \
                         run checked every state)"
                    )?;
                }
                Ok(())
            }
            ExploreVerdict::NotFullyCovered {
                incomplete,
                needed,
                time_budget,
                accepted,
                ..
            } => {
                let (a, b) = (
                    incomplete.first().copied().unwrap_or(0),
                    incomplete.last().copied().unwrap_or(0),
                );
                write!(
                    f,
                    "verdict: CLEAN SO FAR, NOT CLEAN: {} crash point(s) did not get all their \
                     high-yield states ({}). To finish: run again with --max-states {needed}{} \
                     (or only those points: --crash-points {a}..{b})",
                    incomplete.len(),
                    ranges(incomplete),
                    if *time_budget {
                        " and a longer --time-budget"
                    } else {
                        ""
                    }
                )?;
                if *accepted {
                    write!(f, "; accepted by --partial-ok")
                } else {
                    write!(f, "; --partial-ok accepts a partial run")
                }
            }
            ExploreVerdict::ShardClean {
                shard,
                checked_here,
                ..
            } => write!(
                f,
                "verdict: shard {shard}: no violation in its {checked_here} states; the run's \
                 verdict is `slowfs explore --merge` of every shard's --json report"
            ),
            ExploreVerdict::OwnError { error } => write!(
                f,
                "verdict: STOPPED by explore's own error ({error}): clean so far only"
            ),
            ExploreVerdict::Interrupted { states } => write!(
                f,
                "verdict: INTERRUPTED after {states} states: not a verdict"
            ),
            ExploreVerdict::Refused(RefusedInput::WorkloadFailed { status }) => write!(
                f,
                "verdict: NOT RUN: the workload failed ({status}); no crash states were checked"
            ),
            ExploreVerdict::Refused(RefusedInput::NothingRecorded { hint }) => {
                write!(f, "verdict: NOT RUN: {hint}")
            }
            ExploreVerdict::Refused(RefusedInput::InterruptedDuringWorkload) => write!(
                f,
                "verdict: INTERRUPTED during the workload: no crash states were checked"
            ),
        }
    }
}

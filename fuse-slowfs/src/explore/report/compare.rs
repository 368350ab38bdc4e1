//! `--compare-with`: the groups a real filesystem showed, judged against a
//! model run's report of the same workload ([`slowfs_faults::crash::oracle`]).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use slowfs_faults::crash::models::FsModel;
use slowfs_faults::crash::oracle::{self, ModelRunScope};
use slowfs_faults::crash::report::Group;

use super::{ExploreReport, Judged};

/// A model run's report, read back.
#[derive(Debug, Clone)]
pub struct ModelRun {
    /// Where it was read from.
    pub path: PathBuf,
    /// Its groups.
    pub groups: Vec<Group>,
    /// What the run covered and which settings made its states.
    pub scope: ModelRunScope,
}

/// What a report says of the model run it was judged against.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comparison {
    /// The model run's report.
    pub run: PathBuf,
    /// The model standing for the real filesystem.
    pub model: FsModel,
    /// What the model run covered, and its settings.
    #[serde(default)]
    pub scope: ModelRunScope,
    /// The model run's groups the model allows that this run did not show
    /// (one timeline: not seen, not never).
    pub not_shown: Vec<String>,
}

impl ModelRun {
    /// Reads a model run's `--json` report; refuses a report of an `--fs`
    /// run or anything that is not a report, saying what to give instead.
    pub fn load(path: &Path) -> Result<ModelRun, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--compare-with {}: {e}", path.display()))?;
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            format!(
                "--compare-with {}: not JSON ({e}): give the --json report of a model run",
                path.display()
            )
        })?;
        if let Some(fs) = value.get("real_fs").and_then(|fs| fs.as_str()) {
            return Err(format!(
                "--compare-with {}: that is a report of a run on {fs} (--fs), not of a model \
                 run: run the workload without --fs, e.g. slowfs explore --json model.json \
                 --check CHECK -- WORKLOAD",
                path.display()
            ));
        }
        let report: ExploreReport = serde_json::from_value(value).map_err(|e| {
            format!(
                "--compare-with {}: not a `slowfs explore --json` report ({e}); make one with \
                 slowfs explore --json model.json --check CHECK -- WORKLOAD",
                path.display()
            )
        })?;
        Ok(ModelRun {
            path: path.to_path_buf(),
            groups: report.groups.iter().map(|g| g.group()).collect(),
            scope: ModelRunScope {
                exhaustive: report.coverage.exhaustive,
                states: report.states,
                torn_sector: report.settings.torn_sector,
                size_only: report.settings.size_only,
            },
        })
    }
}

/// Judges each of `report`'s groups against `run` under `model`.
pub(super) fn judge_groups(report: &mut ExploreReport, run: &ModelRun, model: FsModel) {
    let real: Vec<Group> = report.groups.iter().map(|g| g.group()).collect();
    let judged = oracle::predictions(&real, &run.groups, model, &run.scope);
    for (group, (prediction, model_group)) in report.groups.iter_mut().zip(judged) {
        group.model = Some(Judged {
            model,
            prediction,
            model_group: model_group.map(|i| i + 1),
        });
    }
    report.compared_with = Some(Comparison {
        run: run.path.clone(),
        model,
        scope: run.scope,
        not_shown: oracle::not_shown(&real, &run.groups, model)
            .iter()
            .map(|g| g.message.clone())
            .collect(),
    });
}

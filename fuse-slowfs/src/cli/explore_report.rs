//! `slowfs explore`'s report: the run's coverage, its violation groups with
//! their smallest examples (and, with `--compare-with`, what a model run said
//! about each), the verdict line, and the same as JSON.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use slowfs::explore::{Cut, Exploration};
use slowfs_faults::crash::models::FsModel;
use slowfs_faults::crash::oracle::{allows, not_shown, predictions, Prediction};
use slowfs_faults::crash::report::Group;
use slowfs_faults::crash::text::ranges;

/// Violation groups printed in full; `--json` has them all.
const GROUPS_SHOWN: usize = 10;

/// The results, for people and for `--json`.
pub struct Report<'a> {
    pub result: &'a Exploration,
    pub saved: Option<&'a Path>,
    /// `--per-point`: states are distinct per crash point.
    pub per_point: bool,
    /// Whether a `--time-budget` was given (the advice to finish names it).
    pub time_budget: bool,
    /// With `--fs`: the crash point of each flush epoch.
    pub epochs: Option<Vec<usize>>,
    /// `--compare-with`: the model run, and the model that stands for the
    /// real filesystem.
    pub model_run: Option<(&'a ModelRun, FsModel)>,
}

/// A model run's report (`--compare-with`): its groups, labelled with the
/// models they can happen on.
pub struct ModelRun {
    path: PathBuf,
    groups: Vec<Group>,
}

impl ModelRun {
    pub fn load(path: &Path) -> anyhow::Result<ModelRun> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--compare-with {}", path.display()))?;
        let json: serde_json::Value = serde_json::from_str(&text).with_context(|| {
            format!(
                "--compare-with {}: not JSON (give the --json report of a model run)",
                path.display()
            )
        })?;
        if json.get("real_fs").is_some_and(|fs| !fs.is_null()) {
            bail!(
                "--compare-with {}: that is a report of a run on {} (--fs), not of a model run: \
                 run the workload without --fs, e.g. slowfs explore --json model.json --check \
                 CHECK -- WORKLOAD",
                path.display(),
                json["real_fs"]
            );
        }
        let groups = json
            .get("groups")
            .cloned()
            .map(serde_json::from_value::<Vec<Group>>)
            .transpose()
            .ok()
            .flatten()
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--compare-with {}: not a `slowfs explore --json` report (it has no list of \
                     violation groups)",
                    path.display()
                )
            })?;
        Ok(ModelRun {
            path: path.to_path_buf(),
            groups,
        })
    }
}

impl Report<'_> {
    pub fn print(&self) {
        let r = self.result;
        let c = &r.coverage;
        println!("ops recorded: {}", r.ops);
        println!(
            "crash points: {}..={} ({} in all)",
            r.crash_points.0, r.crash_points.1, c.points
        );
        if let Some(shard) = r.shard {
            println!(
                "shard {shard}: {} of the run's distinct states checked here",
                r.checked_here
            );
        }
        println!(
            "states checked: {} distinct ({} skipped as already checked{}), {:.0}/s",
            r.states,
            r.duplicates,
            if self.per_point {
                " at the same crash point"
            } else {
                ""
            },
            r.states as f64 / r.seconds.max(1e-9)
        );
        if r.ruled_out > 0 {
            println!(
                "states the filesystem model cannot leave, skipped: {}",
                r.ruled_out
            );
        }
        if !r.per_model.is_empty() {
            // In the models' own order, strict first.
            let counts: Vec<String> = slowfs_faults::crash::models::FsModel::ALL
                .iter()
                .filter_map(|m| {
                    r.per_model
                        .get(m.name())
                        .map(|n| format!("{} {n}", m.name()))
                })
                .collect();
            println!(
                "states checked that each model can leave: {}",
                counts.join(", ")
            );
        }
        println!("coverage of the {} crash points:", c.points);
        println!("  every state checked              {:>7}", c.every_state);
        println!(
            "  high-yield states + random ones  {:>7}",
            c.high_yield_and_sampled
        );
        println!(
            "  high-yield states only           {:>7}",
            c.high_yield_only
        );
        println!(
            "  high-yield states NOT all checked{:>7}{}",
            c.incomplete.len(),
            if c.incomplete.is_empty() {
                String::new()
            } else {
                format!(" (points {})", ranges(&c.incomplete))
            }
        );
        println!(
            "  high-yield states checked: {} of {} (duplicates included){}",
            c.high_yield.1,
            c.high_yield.0,
            r.high_yield_seconds
                .map(|s| format!(", all of them after {s:.0} s"))
                .unwrap_or_default()
        );
        if let Some(cut) = r.cut {
            let why = match cut {
                Cut::MaxStates => "--max-states was reached",
                Cut::TimeBudget => "--time-budget ran out",
                Cut::Interrupted => "interrupted",
                Cut::OwnError => "explore's own temporary space failed",
            };
            println!("stopped early: {why}");
        }
        if let Some(e) = &r.error {
            println!("error: {e}");
        }
        println!("violations: {}", r.violations);
        self.print_groups();
        println!("\n{}", self.verdict());
    }

    /// The last line: what the run can promise, and how to finish the job.
    fn verdict(&self) -> String {
        let r = self.result;
        let c = &r.coverage;
        if r.cut == Some(Cut::Interrupted) {
            return format!(
                "verdict: INTERRUPTED after {} states: not a verdict",
                r.states
            );
        }
        if r.violations > 0 {
            let said_never = self
                .predictions()
                .unwrap_or_default()
                .iter()
                .filter(|(p, _)| *p == Prediction::SaidNever)
                .count();
            let wrong = match self.model_run {
                Some((_, model)) if said_never > 0 => format!(
                    "; {said_never} of them the {model} model says never happen: the model is \
                     wrong there"
                ),
                _ => String::new(),
            };
            return format!(
                "verdict: {} VIOLATION(S) in {} group(s){wrong}",
                r.violations,
                r.groups.len()
            );
        }
        if let Some(shard) = r.shard {
            return format!(
                "verdict: shard {shard}: no violation in its {} states; the run's verdict is \
                 `slowfs explore --merge` of every shard's --json report",
                r.checked_here
            );
        }
        if let Some(e) = &r.error {
            return format!("verdict: STOPPED by explore's own error ({e}): clean so far only");
        }
        if c.complete() {
            return format!(
                "verdict: clean: every crash point's high-yield states checked ({} states)",
                r.states
            );
        }
        let needed = r.states + c.high_yield.0.saturating_sub(c.high_yield.1);
        let (a, b) = (
            c.incomplete.first().copied().unwrap_or(0),
            c.incomplete.last().copied().unwrap_or(0),
        );
        format!(
            "verdict: CLEAN SO FAR, NOT CLEAN: {} crash point(s) did not get all their high-yield \
             states ({}). To finish: run again with --max-states {needed}{} (or only those points: \
             --crash-points {a}..{b}); --partial-ok accepts a partial run",
            c.incomplete.len(),
            ranges(&c.incomplete),
            if self.time_budget {
                " and a longer --time-budget"
            } else {
                ""
            }
        )
    }

    fn print_groups(&self) {
        let groups = &self.result.groups;
        let judged = self.predictions();
        if !groups.is_empty() {
            println!(
                "\n{} violation group(s), one per cause (the checker's message with numbers, \
                 hashes and temp names masked):",
                groups.len()
            );
        }
        for (n, group) in groups.iter().enumerate().take(GROUPS_SHOWN) {
            self.print_group(n + 1, group, judged.as_ref().map(|j| j[n]));
        }
        if groups.len() > GROUPS_SHOWN {
            println!(
                "\n... and {} more group(s) (--json FILE has them all)",
                groups.len() - GROUPS_SHOWN
            );
        }
        if let Some((run, model)) = self.model_run {
            let unseen = not_shown(groups, &run.groups, model);
            println!(
                "\nthe model run ({}): {} group(s), {} of them possible on {model}; {} of those \
                 not shown by this run (one timeline: not seen, not never){}",
                run.path.display(),
                run.groups.len(),
                run.groups.iter().filter(|g| allows(g, model)).count(),
                unseen.len(),
                if unseen.is_empty() { "" } else { ":" }
            );
            for group in unseen.iter().take(GROUPS_SHOWN) {
                println!("  - {}", group.message);
            }
        }
    }

    /// With `--fs`: the flush epoch (from 1) that crash point `point` ends.
    fn epoch_of(&self, point: usize) -> Option<usize> {
        let points = self.epochs.as_ref()?;
        points.binary_search(&point).ok().map(|i| i + 1)
    }

    /// `--compare-with`: each group's prediction, and the model run's group.
    fn predictions(&self) -> Option<Vec<(Prediction, Option<usize>)>> {
        self.model_run
            .map(|(run, model)| predictions(&self.result.groups, &run.groups, model))
    }

    fn print_group(&self, n: usize, group: &Group, judged: Option<(Prediction, Option<usize>)>) {
        println!(
            "\ngroup {n}: {} violation(s) at crash points {}",
            group.count, group.points
        );
        println!("  checker: {}", group.message);
        match &self.result.real_fs {
            Some(fs) => println!("  observed on {fs}, after its own recovery (not a model)"),
            None => println!("  {}", models_line(&group.models)),
        }
        if let (Some((prediction, model_group)), Some((_, model))) = (judged, self.model_run) {
            println!(
                "  {}{}",
                prediction.describe(model),
                model_group
                    .map(|i| format!(" (the model run's group {})", i + 1))
                    .unwrap_or_default()
            );
        }
        for (pattern, count) in group.patterns.iter().take(3) {
            let pattern = match (pattern.is_empty(), &self.result.real_fs) {
                (true, Some(_)) => "nothing lost (the disk as it was at a flush)",
                (true, None) => "nothing lost (the no-crash state itself)",
                (false, _) => pattern,
            };
            println!("  {count:>6} x {pattern}");
        }
        let Some(example) = group.examples.first() else {
            return;
        };
        let epoch = self.epoch_of(example.point).map(|n| {
            format!(
                " (in flush epoch {n} of {}: every write before its flush kept)",
                self.epochs.as_ref().map_or(0, Vec::len)
            )
        });
        println!(
            "  smallest example: crash after {} of {} operations{}; {} pending operation(s) kept whole, and:",
            example.point,
            self.result.ops,
            epoch.unwrap_or_default(),
            example.kept
        );
        if example.lost.is_empty() {
            if self.result.real_fs.is_some() {
                println!("    (nothing lost: the disk as the workload left it at that point)");
            } else {
                println!("    (nothing lost but ignored files)");
            }
        }
        for lost in example.lost.iter().take(8) {
            println!("    {lost}");
        }
        if example.lost.len() > 8 {
            println!("    ... {} more lost", example.lost.len() - 8);
        }
        for line in example.output.lines().take(5) {
            println!("    checker: {line}");
        }
        if let Some(command) = self.replay_command(&example.state) {
            println!("    replay: {command}");
        }
    }

    fn replay_command(&self, state: &str) -> Option<String> {
        Some(format!(
            "slowfs explore --replay {} --state {state}",
            self.saved?.display()
        ))
    }

    pub fn json(&self) -> serde_json::Value {
        let r = self.result;
        let c = &r.coverage;
        let judged = self.predictions();
        let groups: Vec<serde_json::Value> = r
            .groups
            .iter()
            .enumerate()
            .map(|(n, g)| {
                let mut value = serde_json::to_value(g).expect("serializes");
                if let (Some(judged), Some((_, model))) = (&judged, self.model_run) {
                    let (prediction, model_group) = judged[n];
                    value["model"] = serde_json::json!({
                        "model": model.name(),
                        "prediction": prediction,
                        "model_group": model_group.map(|i| i + 1),
                    });
                }
                for (example, json) in g.examples.iter().zip(
                    value["examples"]
                        .as_array_mut()
                        .expect("examples are a list")
                        .iter_mut(),
                ) {
                    json["replay"] = serde_json::json!(self.replay_command(&example.state));
                    if let Some(epoch) = self.epoch_of(example.point) {
                        json["flush_epoch"] = serde_json::json!(epoch);
                    }
                }
                value
            })
            .collect();
        serde_json::json!({
            "ops": r.ops,
            "crash_points": [r.crash_points.0, r.crash_points.1],
            "states": r.states,
            "duplicates": r.duplicates,
            "coverage": {
                "points": c.points,
                "every_state": c.every_state,
                "high_yield_and_sampled": c.high_yield_and_sampled,
                "high_yield_only": c.high_yield_only,
                "incomplete": c.incomplete,
                "high_yield_states": [c.high_yield.1, c.high_yield.0],
                "complete": c.complete(),
            },
            "cut": r.cut.map(|c| format!("{c:?}")),
            "error": r.error,
            "seconds": r.seconds,
            "high_yield_seconds": r.high_yield_seconds,
            "saved_run": self.saved,
            "violations": r.violations,
            "groups": groups,
            "real_fs": r.real_fs,
            "compared_with": self.model_run.map(|(run, model)| serde_json::json!({
                "run": run.path,
                "model": model.name(),
                "not_shown": not_shown(&r.groups, &run.groups, model)
                    .iter()
                    .map(|g| &g.message)
                    .collect::<Vec<_>>(),
            })),
            "verdict": self.verdict(),
        })
    }
}

/// Under which persistence models a group's states can happen, and which
/// would never leave them.
fn models_line(models: &[String]) -> String {
    use slowfs_faults::crash::models::FsModel;
    let never: Vec<&str> = FsModel::ALL
        .iter()
        .map(|m| m.name())
        .filter(|name| !models.iter().any(|m| m == name))
        .collect();
    if never.is_empty() {
        format!("can happen on: {} (every model)", models.join(", "))
    } else {
        format!(
            "can happen on: {}; never on: {}",
            models.join(", "),
            never.join(", ")
        )
    }
}

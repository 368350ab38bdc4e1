//! The report as `slowfs explore` prints it: coverage, groups with their
//! smallest examples, and the verdict as the last line.

use std::fmt::{self, Display, Formatter};

use slowfs_faults::crash::models::FsModel;
use slowfs_faults::crash::text::ranges;

use super::{Cut, ExploreReport, ReportGroup};

/// Violation groups printed in full; `--json` has them all.
const GROUPS_SHOWN: usize = 10;

impl Display for ExploreReport {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        self.body(f)?;
        if !self.fsync_fails.is_empty() {
            let evicts = self
                .settings
                .fs_model
                .is_some_and(FsModel::evicts_after_failed_fsync);
            writeln!(
                f,
                "\n--fsync-fails: the workload ran again {} time(s), each time with one fsync \
                 failing (EIO, its unsynced data dropped and {}; a retry succeeds)",
                self.fsync_fails.len(),
                if evicts {
                    "evicted from the cache as btrfs does"
                } else {
                    "kept in the cache as clean pages as ext4 and XFS do"
                }
            )?;
        }
        for run in &self.fsync_fails {
            writeln!(
                f,
                "\n== fsync #{} fails: the workload {} ==",
                run.failing_fsync,
                match run.workload_exit {
                    Some(0) => "carried on and exited 0".to_string(),
                    Some(code) => format!("stopped (exit status {code})"),
                    None => "was killed by a signal".to_string(),
                }
            )?;
            writeln!(
                f,
                "(the data that fsync dropped is gone from every state of this run, the \
                 no-crash state included: it was lost at the fsync, not at a crash)"
            )?;
            run.report.body(f)?;
        }
        if !self.fsync_fails.is_empty() {
            writeln!(
                f,
                "\nfsync-fails violations: {}",
                self.fsync_fail_violations()
            )?;
        }
        write!(f, "\n{}", self.verdict)
    }
}

impl ExploreReport {
    /// Everything but the verdict.
    fn body(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if let super::ExploreVerdict::Refused(_) = self.outcome {
            return Ok(());
        }
        let c = &self.coverage;
        writeln!(f, "ops recorded: {}", self.ops)?;
        writeln!(
            f,
            "crash points: {}..={} ({} in all)",
            self.crash_points.0, self.crash_points.1, c.points
        )?;
        if let Some(shard) = &self.shard {
            writeln!(
                f,
                "shard {shard}: {} of the run's distinct states checked here",
                self.checked_here
            )?;
        }
        writeln!(
            f,
            "states checked: {} distinct ({} skipped as already checked{}), {:.0}/s",
            self.states,
            self.duplicates,
            if self.settings.per_point {
                " at the same crash point"
            } else {
                ""
            },
            self.states as f64 / self.seconds.max(1e-9)
        )?;
        writeln!(f, "model choices: {}", self.settings.describe())?;
        if self.ruled_out > 0 {
            writeln!(
                f,
                "states the filesystem model cannot leave, skipped: {}",
                self.ruled_out
            )?;
        }
        if !self.per_model.is_empty() {
            let counts: Vec<String> = FsModel::ALL
                .iter()
                .filter_map(|m| {
                    self.per_model
                        .get(m.name())
                        .map(|n| format!("{} {n}", m.name()))
                })
                .collect();
            writeln!(
                f,
                "states checked that each model can leave: {}",
                counts.join(", ")
            )?;
        }
        writeln!(f, "coverage of the {} crash points:", c.points)?;
        writeln!(f, "  every state checked              {:>7}", c.every_state)?;
        writeln!(
            f,
            "  high-yield states + random ones  {:>7}",
            c.high_yield_and_sampled
        )?;
        writeln!(
            f,
            "  high-yield states only           {:>7}",
            c.high_yield_only
        )?;
        writeln!(
            f,
            "  high-yield states NOT all checked{:>7}{}",
            c.incomplete.len(),
            if c.incomplete.is_empty() {
                String::new()
            } else {
                format!(" (points {})", ranges(&c.incomplete))
            }
        )?;
        writeln!(
            f,
            "  high-yield states checked: {} of {} (duplicates included){}",
            c.high_yield_states.0,
            c.high_yield_states.1,
            self.high_yield_seconds
                .map(|s| format!(", all of them after {s:.0} s"))
                .unwrap_or_default()
        )?;
        if let Some(cut) = self.cut {
            let why = match cut {
                Cut::MaxStates => "--max-states was reached",
                Cut::TimeBudget => "--time-budget ran out",
                Cut::Interrupted => "interrupted",
                Cut::OwnError => "explore's own temporary space failed",
            };
            writeln!(f, "stopped early: {why}")?;
        }
        if let Some(e) = &self.error {
            writeln!(f, "error: {e}")?;
        }
        writeln!(f, "violations: {}", self.violations)?;
        self.groups_text(f)
    }

    fn groups_text(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let groups = &self.groups;
        if !groups.is_empty() {
            writeln!(
                f,
                "\n{} violation group(s), one per cause (the checker's message with numbers, \
                 hashes and temp names masked):",
                groups.len()
            )?;
        }
        for (n, group) in groups.iter().enumerate().take(GROUPS_SHOWN) {
            self.group_text(f, n + 1, group)?;
        }
        if groups.len() > GROUPS_SHOWN {
            writeln!(
                f,
                "\n... and {} more group(s) (--json FILE has them all)",
                groups.len() - GROUPS_SHOWN
            )?;
        }
        if let Some(compared) = &self.compared_with {
            writeln!(
                f,
                "\nthe model run ({}{}): {} of its groups possible on {} not shown by this run \
                 (one timeline: not seen, not never){}",
                compared.run.display(),
                if compared.scope.exhaustive {
                    ", every state checked"
                } else {
                    ""
                },
                compared.not_shown.len(),
                compared.model,
                if compared.not_shown.is_empty() {
                    ""
                } else {
                    ":"
                }
            )?;
            for message in compared.not_shown.iter().take(GROUPS_SHOWN) {
                writeln!(f, "  - {message}")?;
            }
        }
        Ok(())
    }

    fn group_text(&self, f: &mut Formatter<'_>, n: usize, group: &ReportGroup) -> fmt::Result {
        writeln!(
            f,
            "\ngroup {n}: {} violation(s) at crash points {}",
            group.count, group.points
        )?;
        writeln!(f, "  checker: {}", group.message)?;
        match &self.real_fs {
            Some(fs) => writeln!(
                f,
                "  observed on {fs}, after its own recovery (not a model)"
            )?,
            None => writeln!(f, "  {}", models_line(group))?,
        }
        if let Some(judged) = group.model {
            let scope = self
                .compared_with
                .as_ref()
                .map(|c| c.scope)
                .unwrap_or_default();
            writeln!(
                f,
                "  {}{}",
                judged.prediction.describe(judged.model, &scope),
                judged
                    .model_group
                    .map(|i| format!(" (the model run's group {i})"))
                    .unwrap_or_default()
            )?;
        }
        for (pattern, count) in group.patterns.iter().take(3) {
            let pattern = match (pattern.is_empty(), &self.real_fs) {
                (true, Some(_)) => "nothing lost (the disk as it was at a flush)",
                (true, None) => "nothing lost (the no-crash state itself)",
                (false, _) => pattern,
            };
            writeln!(f, "  {count:>6} x {pattern}")?;
        }
        let Some(example) = group.examples.first() else {
            return Ok(());
        };
        let epoch = example.flush_epoch.map(|n| {
            format!(
                " (in flush epoch {n} of {}: every write before its flush kept)",
                self.flush_epochs.as_ref().map_or(0, Vec::len)
            )
        });
        let e = &example.example;
        writeln!(
            f,
            "  smallest example: crash after {} of {} operations{}; {} pending operation(s) kept \
             whole, and:",
            e.point,
            self.ops,
            epoch.unwrap_or_default(),
            e.kept
        )?;
        if e.lost.is_empty() {
            if self.real_fs.is_some() {
                writeln!(
                    f,
                    "    (nothing lost: the disk as the workload left it at that point)"
                )?;
            } else {
                writeln!(f, "    (nothing lost but ignored files)")?;
            }
        }
        for lost in e.lost.iter().take(8) {
            writeln!(f, "    {lost}")?;
        }
        if e.lost.len() > 8 {
            writeln!(f, "    ... {} more lost", e.lost.len() - 8)?;
        }
        for line in e.output.lines().take(5) {
            writeln!(f, "    checker: {line}")?;
        }
        if let Some(command) = &example.replay {
            writeln!(f, "    replay: {command}")?;
        }
        Ok(())
    }
}

/// Under which persistence models a group's states can happen, on which
/// the model cannot tell (an approximate rule), and which would never leave
/// them.
pub fn models_line(group: &ReportGroup) -> String {
    let never = group.never();
    let mut line = format!("can happen on: {}", group.models.join(", "));
    if !group.unknown.is_empty() {
        line += &format!("; unknown on: {}", group.unknown.join(", "));
    }
    if !never.is_empty() {
        line += &format!("; never on: {}", never.join(", "));
    } else if group.unknown.is_empty() {
        line += " (every model)";
    }
    line
}

impl super::ReportSettings {
    /// The choices in force, for the report's header.
    pub fn describe(&self) -> String {
        let torn = match (self.torn_sector, self.size_only) {
            (Some(sector), true) => {
                format!("pending writes may tear at {sector} bytes or persist as their size alone")
            }
            (Some(sector), false) => format!("pending writes may tear at {sector} bytes"),
            (None, true) => "pending writes may persist as their size alone".to_string(),
            (None, false) => {
                "pending writes persist whole or not at all (--whole-writes: not sound)".to_string()
            }
        };
        let model = match self.fs_model {
            Some(model) => format!("only the {model} model's states (--fs-model)"),
            None => "every state the strict model allows, each labelled with the models that can \
                     leave it"
                .to_string(),
        };
        format!("{torn}; {model}")
    }
}

//! Every path of a verdict, and the four views of it agreeing: the text's
//! last line, the JSON (read back), the HTML page and the exit code.

use slowfs_faults::crash::coverage::CoverageSummary;
use slowfs_faults::crash::models::FsModel;
use slowfs_faults::crash::oracle::{ModelRunScope, Prediction};
use slowfs_faults::crash::report::{Example, Group};
use slowfs_faults::durability::{Log, Tree};

use super::*;
use crate::explore::Exploration;

fn covered(points: usize) -> CoverageSummary {
    CoverageSummary {
        points,
        every_state: points,
        high_yield: (points * 2, points * 2),
        ..CoverageSummary::default()
    }
}

fn group(message: &str) -> Group {
    Group {
        message: message.into(),
        count: 2,
        points: "3..4".into(),
        patterns: vec![("lost: write doc.tmp [#..#)".into(), 2)],
        examples: vec![Example {
            state: "3/".into(),
            point: 3,
            lost: vec!["op 1 lost: write doc.tmp [0..10)".into()],
            kept: 0,
            output: "doc is ''".into(),
        }],
        models: vec!["strict".into()],
        unknown: Vec::new(),
    }
}

fn exploration() -> Exploration {
    Exploration {
        ops: 5,
        crash_points: (0, 5),
        states: 12,
        checked_here: 12,
        coverage: covered(6),
        finished: true,
        seconds: 0.5,
        ..Exploration::default()
    }
}

fn with_violations(mut e: Exploration) -> Exploration {
    e.violations = 2;
    e.groups = vec![group("doc is ''")];
    e
}

fn not_covered(mut e: Exploration, cut: Cut) -> Exploration {
    e.coverage.incomplete = vec![4, 5];
    e.coverage.every_state = 4;
    e.coverage.high_yield = (12, 9);
    e.cut = Some(cut);
    e.finished = false;
    e
}

fn report(e: &Exploration, settings: ReportSettings) -> ExploreReport {
    ExploreReport::new(
        e,
        ReportContext {
            settings,
            ..ReportContext::default()
        },
    )
}

/// The four views of `report` say one thing; returns its exit code.
fn views_agree(report: &ExploreReport) -> u8 {
    let text = report.to_string();
    assert_eq!(
        text.lines().last(),
        Some(report.verdict.as_str()),
        "the text ends with the verdict"
    );
    assert_eq!(report.verdict, report.outcome.to_string());
    assert_eq!(report.exit_code, report.outcome.exit_code());
    let read: ExploreReport = serde_json::from_str(&report.to_json()).expect("JSON reads back");
    assert_eq!(read.outcome, report.outcome, "JSON outcome");
    assert_eq!(read.exit_code, report.exit_code, "JSON exit code");
    assert_eq!(read.verdict, report.verdict, "JSON verdict");
    // Judging the JSON's own facts again gives the same verdict.
    let mut rejudged = read.clone();
    rejudged.judge();
    assert_eq!(
        rejudged.outcome, report.outcome,
        "the JSON's facts judge alike"
    );
    let html =
        crate::explore::html::page(report, Log::new(Tree::empty(1)).ops(), &Default::default());
    assert!(
        html.contains(&crate::explore::html::escape(&report.verdict)),
        "the page shows the verdict"
    );
    assert!(html.contains(&format!("data-exit-code=\"{}\"", report.exit_code)));
    report.exit_code
}

#[test]
fn every_path_of_the_verdict_agrees_in_text_json_html_and_exit_code() {
    let plain = ReportSettings::default();
    let partial_ok = ReportSettings {
        partial_ok: true,
        ..ReportSettings::default()
    };
    let fsync_fail_run = |violations: usize| FsyncFailRun {
        failing_fsync: 1,
        workload_exit: Some(0),
        report: Box::new(report(
            &if violations > 0 {
                with_violations(exploration())
            } else {
                exploration()
            },
            plain.clone(),
        )),
    };
    let mut shard = exploration();
    shard.shard = Some(slowfs_faults::shard::Shard { index: 1, count: 2 });
    let mut own_error = not_covered(exploration(), Cut::OwnError);
    own_error.error = Some("no space left on the scratch directory".into());
    let table: Vec<(&str, ExploreReport, u8, &str)> = vec![
        ("clean", report(&exploration(), plain.clone()), 0, "clean"),
        (
            "violations",
            report(&with_violations(exploration()), plain.clone()),
            1,
            "VIOLATION",
        ),
        (
            "fsync-fails violations only",
            report(&exploration(), plain.clone()).with_fsync_fails(vec![fsync_fail_run(1)]),
            1,
            "in the --fsync-fails runs",
        ),
        (
            "fsync-fails runs clean",
            report(&exploration(), plain.clone()).with_fsync_fails(vec![fsync_fail_run(0)]),
            0,
            "clean",
        ),
        (
            "budget: max states",
            report(&not_covered(exploration(), Cut::MaxStates), plain.clone()),
            3,
            "NOT CLEAN",
        ),
        (
            "budget: time",
            report(&not_covered(exploration(), Cut::TimeBudget), plain.clone()),
            3,
            "--max-states",
        ),
        (
            "partial accepted",
            report(&not_covered(exploration(), Cut::MaxStates), partial_ok),
            0,
            "accepted by --partial-ok",
        ),
        (
            "interrupted",
            report(&not_covered(exploration(), Cut::Interrupted), plain.clone()),
            130,
            "INTERRUPTED",
        ),
        (
            "interrupted with violations",
            report(
                &not_covered(with_violations(exploration()), Cut::Interrupted),
                plain.clone(),
            ),
            130,
            "INTERRUPTED",
        ),
        ("own error", report(&own_error, plain.clone()), 4, "STOPPED"),
        ("shard", report(&shard, plain.clone()), 0, "--merge"),
        (
            "refused: workload failed",
            ExploreReport::refused(RefusedInput::WorkloadFailed {
                status: "exit status: 3".into(),
            }),
            2,
            "the workload failed",
        ),
        (
            "refused: nothing recorded",
            ExploreReport::refused(RefusedInput::NothingRecorded {
                hint: "the workload changed nothing on the recording mount".into(),
            }),
            2,
            "changed nothing",
        ),
    ];
    for (path, report, code, says) in &table {
        assert_eq!(views_agree(report), *code, "{path}: exit code");
        assert!(
            report.verdict.contains(says),
            "{path}: the verdict says {says:?}: {}",
            report.verdict
        );
    }
}

#[test]
fn a_model_run_that_checked_everything_turns_an_unmatched_group_into_a_model_gap() {
    let real = with_violations(exploration());
    let judged = |exhaustive: bool| {
        let run = ModelRun {
            path: "model.json".into(),
            groups: vec![group("something else")],
            scope: ModelRunScope {
                exhaustive,
                states: 40,
                torn_sector: None,
                size_only: false,
            },
        };
        ExploreReport::new(
            &real,
            ReportContext {
                model_run: Some((&run, FsModel::Ext4Ordered)),
                ..ReportContext::default()
            },
        )
    };
    let partial = judged(false);
    assert!(matches!(
        partial.outcome,
        ExploreVerdict::Violations { model_gap: 0, .. }
    ));
    assert!(partial.to_string().contains("not in the model run"));
    let complete = judged(true);
    assert!(matches!(
        complete.outcome,
        ExploreVerdict::Violations { model_gap: 1, .. }
    ));
    assert!(
        complete.verdict.contains("MODEL GAP"),
        "{}",
        complete.verdict
    );
    assert!(complete
        .to_string()
        .contains("did not tear (--whole-writes)"));
    views_agree(&complete);
}

#[test]
fn a_state_the_checker_timed_out_on_is_no_model_gap() {
    // Under load a checker killed for time made a group of its own, which an
    // exhaustive model run never has: it was judged MODEL GAP (3 ace rows on
    // btrfs, all agreeing when rerun).
    let mut real = with_violations(exploration());
    real.groups
        .push(group("checker timed out after # (restarted)"));
    let run = ModelRun {
        path: "model.json".into(),
        groups: vec![group("something else")],
        scope: ModelRunScope {
            exhaustive: true,
            states: 40,
            torn_sector: Some(4096),
            size_only: true,
        },
    };
    let report = ExploreReport::new(
        &real,
        ReportContext {
            model_run: Some((&run, FsModel::Ext4Ordered)),
            ..ReportContext::default()
        },
    );
    assert!(
        matches!(
            report.outcome,
            ExploreVerdict::Violations {
                model_gap: 1,
                model_says_never: 0,
                ..
            }
        ),
        "{}",
        report.verdict
    );
    let judged: Vec<_> = report
        .groups
        .iter()
        .map(|g| g.model.map(|j| j.prediction))
        .collect();
    // Control: the ordinary group the model run lacks is a gap.
    assert_eq!(judged, [Some(Prediction::Gap), Some(Prediction::TimedOut)]);
    assert!(report
        .to_string()
        .contains("no answer: the checker timed out"));
    views_agree(&report);
}

#[test]
fn the_html_names_files_as_the_text_does_and_suggests_the_fix() {
    // A node id as the recorder hands them out, past every inode number.
    let doc = 4_611_686_018_427_387_904;
    let log = slowfs_faults::durability::LogBuilder::new()
        .create("doc.tmp", doc)
        .write(doc, 0, b"version 2\n")
        .build();
    let report = report(&with_violations(exploration()), ReportSettings::default());
    let html = crate::explore::html::page(&report, log.ops(), &op_names(&log));
    assert!(html.contains("write doc.tmp [0..10)"), "{html}");
    assert!(!html.contains("#4611686018427387904"), "{html}");
    assert!(html.contains("fsync doc.tmp before the rename"), "{html}");
    assert!(html.contains("Legend"));
}

#[test]
fn a_group_unknown_on_a_model_is_labelled_so_and_is_not_model_says_never() {
    let mut unknown = group("doc is ''");
    unknown.unknown = vec!["ext4-ordered".into()];
    let mut model_side = with_violations(exploration());
    model_side.groups = vec![unknown.clone()];
    let labelled = report(&model_side, ReportSettings::default());
    assert_eq!(labelled.groups[0].never(), ["xfs", "btrfs"]);
    let text = labelled.to_string();
    assert!(
        text.contains("can happen on: strict; unknown on: ext4-ordered; never on: xfs, btrfs"),
        "{text}"
    );
    let read: ExploreReport = serde_json::from_str(&labelled.to_json()).expect("JSON reads back");
    assert_eq!(read.groups[0].unknown, ["ext4-ordered"]);
    let html = crate::explore::html::page(&labelled, &[], &Default::default());
    assert!(
        html.contains("unknown on: ext4-ordered; never on: xfs, btrfs"),
        "{html}"
    );
    // The kernel shows it: unknown to the model, not MODEL SAYS NEVER.
    let run = ModelRun {
        path: "model.json".into(),
        groups: vec![unknown],
        scope: ModelRunScope::default(),
    };
    let judge = |model| {
        ExploreReport::new(
            &with_violations(exploration()),
            ReportContext {
                model_run: Some((&run, model)),
                ..ReportContext::default()
            },
        )
    };
    let on_ext4 = judge(FsModel::Ext4Ordered);
    assert!(matches!(
        on_ext4.outcome,
        ExploreVerdict::Violations {
            model_says_never: 0,
            model_gap: 0,
            ..
        }
    ));
    assert!(
        on_ext4.to_string().contains("unknown to the model"),
        "{on_ext4}"
    );
    views_agree(&on_ext4);
    // Negative control: on xfs the same group is never: MODEL SAYS NEVER.
    let on_xfs = judge(FsModel::Xfs);
    assert!(matches!(
        on_xfs.outcome,
        ExploreVerdict::Violations {
            model_says_never: 1,
            ..
        }
    ));
}

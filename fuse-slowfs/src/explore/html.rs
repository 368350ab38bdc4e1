//! An exploration as one self-contained HTML page (no scripts, no network), for
//! a CI artifact: the verdict and coverage, a timeline of the recorded
//! operations with fsyncs set apart and the crash points where violations were
//! found marked, then each violation group with the models it can happen on,
//! every example with its replay command. Built from the same typed report
//! that `--json` serialises, so the two say the same; elements carry `data-`
//! attributes for checking the page against it.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;

use slowfs_faults::crash::text::describe;
use slowfs_faults::durability::{LogOp, NodeId};

use super::report::{ExploreReport, ReportGroup};

/// The page for an exploration's report and its recorded operations,
/// named as the text and JSON name them (`names`: [`super::report::op_names`]).
pub fn page(report: &ExploreReport, ops: &[LogOp], names: &HashMap<NodeId, String>) -> String {
    let marked: BTreeSet<usize> = report
        .groups
        .iter()
        .flat_map(|g| points(&g.points))
        .collect();
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>slowfs explore: {verdict}</title><style>{STYLE}</style></head><body>\n\
         <h1>slowfs explore</h1>\n<p class=\"verdict {kind}\" data-violations=\"{violations}\" \
         data-exit-code=\"{exit}\" data-outcome=\"{kind}\"><strong>{verdict}</strong> \
         (exit code {exit})</p>\n<p>{ops} operations recorded; {states} distinct \
         states checked ({duplicates} duplicates skipped) in {seconds:.1} s. Model choices: \
         {choices}.</p>\n",
        verdict = escape(&report.verdict),
        kind = outcome_kind(report),
        exit = report.exit_code,
        violations = report.violations + report.fsync_fail_violations(),
        ops = ops.len(),
        states = report.states,
        duplicates = report.duplicates,
        seconds = report.seconds,
        choices = escape(&report.settings.describe()),
    );
    saved_run(&mut out, report);
    out.push_str(LEGEND);
    timeline(&mut out, ops, names, &marked);
    let _ = writeln!(out, "<h2>Violation groups ({})</h2>", report.groups.len());
    if report.groups.is_empty() {
        out.push_str("<p>None.</p>\n");
    }
    for (i, group) in report.groups.iter().enumerate() {
        group_section(&mut out, i + 1, group, report.real_fs.as_deref());
    }
    for run in &report.fsync_fails {
        let _ = writeln!(
            out,
            "<h2 class=\"fsync-fails\">When fsync #{} fails: {} violation(s)</h2>",
            run.failing_fsync, run.report.violations
        );
        for (i, group) in run.report.groups.iter().enumerate() {
            group_section(&mut out, i + 1, group, None);
        }
    }
    out.push_str("</body></html>\n");
    out
}

/// The verdict's kind as the JSON's `outcome.kind` spells it.
fn outcome_kind(report: &ExploreReport) -> String {
    serde_json::to_value(&report.outcome)
        .ok()
        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(String::from))
        .unwrap_or_else(|| "refused".into())
}

/// Where the saved run is: the replay commands need it, so a CI keeps it.
fn saved_run(out: &mut String, report: &ExploreReport) {
    match &report.saved_run {
        Some(path) => {
            let _ = writeln!(
                out,
                "<p class=\"saved\">The replay commands below need the saved run \
                 <code>{}</code>: keep it as a CI artifact beside this page \
                 (<code>--log-dir DIR</code> chooses where it goes).</p>",
                escape(&path.display().to_string())
            );
        }
        None if report.violations > 0 => out.push_str(
            "<p class=\"saved\">The run was not saved: give <code>--log-dir DIR</code> to \
             replay its states.</p>\n",
        ),
        None => {}
    }
}

const LEGEND: &str = "<p class=\"legend\">Legend: <span class=\"sync\">green: a sync \
    (fsync, fdatasync, sync)</span>, <span class=\"meta\">blue: a name or metadata change</span>, \
    black: a data write or size change, <span class=\"crash\">red line: a crash point where \
    violations were found</span>.</p>\n";

/// Crash point k is "after k operations": its marker goes before operation k.
fn timeline(
    out: &mut String,
    ops: &[LogOp],
    names: &HashMap<NodeId, String>,
    marked: &BTreeSet<usize>,
) {
    out.push_str("<h2>Recorded operations</h2>\n<ol class=\"timeline\" start=\"0\">\n");
    for k in 0..=ops.len() {
        if marked.contains(&k) {
            let _ = writeln!(
                out,
                "<li class=\"crash\" data-point=\"{k}\" value=\"{k}\">crash after {k} operation(s): violations found</li>"
            );
        }
        let Some(op) = ops.get(k) else { break };
        let kind = if op.is_sync() {
            "sync"
        } else if op.data_node().is_some() {
            "data"
        } else {
            "meta"
        };
        let _ = writeln!(
            out,
            "<li class=\"op {kind}\" data-op=\"{k}\" value=\"{k}\">{}</li>",
            escape(&describe(op, names))
        );
    }
    out.push_str("</ol>\n");
}

/// A list for the page, "(none)" if empty.
fn none_if_empty(list: &str) -> String {
    if list.is_empty() {
        "(none)".to_string()
    } else {
        escape(list)
    }
}

fn group_section(out: &mut String, n: usize, group: &ReportGroup, real_fs: Option<&str>) {
    let never = group.never();
    let _ = write!(
        out,
        "<section class=\"group\" data-group=\"{n}\" data-models=\"{models}\" \
         data-unknown=\"{unknown}\"><h3>group {n}: \
         {count} violation(s) at crash points {points}</h3><p>checker: <q>{message}</q></p>\
         <p class=\"models\">{labels}</p>",
        count = group.count,
        points = escape(&group.points),
        message = escape(&group.message),
        models = escape(&group.models.join(", ")),
        unknown = escape(&group.unknown.join(", ")),
        labels = match real_fs {
            Some(fs) => format!("observed on {} after its own recovery", escape(fs)),
            None => format!(
                "can happen on: {}; unknown on: {}; never on: {}",
                escape(&group.models.join(", ")),
                none_if_empty(&group.unknown.join(", ")),
                none_if_empty(&never.join(", ")),
            ),
        },
    );
    if let Some(judged) = group.model {
        let _ = write!(
            out,
            "<p class=\"prediction\" data-prediction=\"{:?}\">{}</p>",
            judged.prediction,
            escape(
                &judged
                    .prediction
                    .describe(judged.model, &Default::default())
            )
        );
    }
    if let Some(fix) = suggested_fix(group) {
        let _ = write!(out, "<p class=\"fix\">Likely fix: {}</p>", escape(&fix));
    }
    for (i, example) in group.examples.iter().enumerate() {
        let e = &example.example;
        let _ = write!(
            out,
            "<h4>{} example: crash after {} operation(s), {} pending kept whole</h4><ul class=\"lost\">",
            if i == 0 { "smallest" } else { "another" },
            e.point,
            e.kept
        );
        for lost in &e.lost {
            let _ = write!(out, "<li>{}</li>", escape(lost));
        }
        let _ = write!(
            out,
            "</ul><pre class=\"output\">{}</pre>",
            escape(&e.output)
        );
        if let Some(replay) = &example.replay {
            let _ = write!(
                out,
                "<p>replay: <code class=\"replay\">{}</code></p>",
                escape(replay)
            );
        }
    }
    out.push_str("</section>\n");
}

/// The fix a group's smallest example points at: a write that was not
/// durable when the name publishing it was (fsync it first), or a name
/// change that was not durable (fsync its directory).
pub fn suggested_fix(group: &ReportGroup) -> Option<String> {
    let lost = &group.examples.first()?.example.lost;
    // `op 2 lost: write doc.tmp [0..10)` -> `write doc.tmp [0..10)`
    let what: Vec<&str> = lost
        .iter()
        .filter_map(|l| l.split_once(": ").map(|(_, w)| w))
        .collect();
    let entry = what.iter().find(|w| {
        ["rename ", "exchange ", "create ", "link ", "remove "]
            .iter()
            .any(|kind| w.starts_with(kind))
    });
    let write = what.iter().find_map(|w| {
        w.strip_prefix("write ")
            .or_else(|| w.strip_prefix("truncate "))
            .and_then(|rest| rest.split_whitespace().next())
    });
    match (write, entry) {
        (Some(file), None) => Some(format!(
            "fsync {file} before the rename or link that publishes it (its data was not durable \
             when its name was)"
        )),
        (_, Some(op)) => Some(format!(
            "fsync the parent directory after `{op}` (the name change was not durable)"
        )),
        (None, None) => None,
    }
}

/// The crash points of a group's `points` text: `3`, `0..1`, `2, 4..6`.
fn points(text: &str) -> Vec<usize> {
    text.split(',')
        .filter_map(|part| {
            let part = part.trim();
            let (from, to) = part.split_once("..").unwrap_or((part, part));
            Some(from.trim().parse().ok()?..=to.trim().trim_start_matches('=').parse().ok()?)
        })
        .flatten()
        .collect()
}

/// Text made safe inside HTML elements and attribute values (also what
/// `slowfs-conformance --html` uses).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:2em;color:#222}\
ol.timeline{font-family:monospace}li.sync{color:#137333;font-weight:600}\
li.meta{color:#1a73e8}li.crash{list-style:none;color:#d93025;font-weight:600;\
border-top:2px solid #d93025;margin:.3em 0}section.group{border-top:1px solid #ddd;margin-top:1em}\
p.models{color:#555}pre{white-space:pre-wrap;background:#f8f9fa;padding:.6em}\
span.sync{color:#137333;font-weight:600}span.meta{color:#1a73e8}span.crash{color:#d93025;font-weight:600}\
p.fix{background:#fef7e0;padding:.4em}p.verdict.violations strong,p.verdict.interrupted strong{color:#d93025}";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_everywhere() {
        assert_eq!(
            escape("<a href=\"x\">&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn crash_points_are_read_from_ranges() {
        assert_eq!(points("3"), [3]);
        assert_eq!(points("0..2"), [0, 1, 2]);
        assert_eq!(points("1, 4..5"), [1, 4, 5]);
        assert_eq!(points("0..=1"), [0, 1]);
        assert!(points("").is_empty());
    }
}

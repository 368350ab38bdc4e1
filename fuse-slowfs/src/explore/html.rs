//! An exploration as one self-contained HTML page (no scripts, no network), for
//! a CI artifact: the verdict and coverage, a timeline of the recorded
//! operations with fsyncs set apart and the crash points where violations were
//! found marked, then each violation group with the models it can happen on,
//! its smallest example and the replay command. Built from the same JSON that
//! `--json` writes, so the two say the same; elements carry `data-` attributes
//! for checking the page against it.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde_json::Value;
use slowfs_faults::durability::LogOp;

/// The page for an exploration's JSON report and its recorded operations.
pub fn page(report: &Value, ops: &[LogOp]) -> String {
    let groups = report["groups"].as_array().cloned().unwrap_or_default();
    let marked: BTreeSet<usize> = groups
        .iter()
        .flat_map(|g| points(g["points"].as_str().unwrap_or_default()))
        .collect();
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>slowfs explore: {verdict}</title><style>{STYLE}</style></head><body>\n\
         <h1>slowfs explore</h1>\n<p class=\"verdict\" data-violations=\"{violations}\">\
         <strong>{verdict}</strong></p>\n<p>{ops} operations recorded; {states} distinct \
         states checked ({duplicates} duplicates skipped) in {seconds:.1} s.</p>\n",
        verdict = escape(report["verdict"].as_str().unwrap_or_default()),
        violations = report["violations"].as_u64().unwrap_or(0),
        ops = ops.len(),
        states = report["states"].as_u64().unwrap_or(0),
        duplicates = report["duplicates"].as_u64().unwrap_or(0),
        seconds = report["seconds"].as_f64().unwrap_or(0.0),
    );
    timeline(&mut out, ops, &marked);
    let _ = writeln!(out, "<h2>Violation groups ({})</h2>", groups.len());
    if groups.is_empty() {
        out.push_str("<p>None.</p>\n");
    }
    for (i, group) in groups.iter().enumerate() {
        group_section(&mut out, i + 1, group, report["real_fs"].as_str());
    }
    out.push_str("</body></html>\n");
    out
}

/// Crash point k is "after k operations": its marker goes before operation k.
fn timeline(out: &mut String, ops: &[LogOp], marked: &BTreeSet<usize>) {
    out.push_str("<h2>Recorded operations</h2>\n<ol class=\"timeline\" start=\"0\">\n");
    for k in 0..=ops.len() {
        if marked.contains(&k) {
            let _ = writeln!(
                out,
                "<li class=\"crash\" data-point=\"{k}\" value=\"{k}\">crash after {k} operation(s): violations found</li>"
            );
        }
        let Some(op) = ops.get(k) else { break };
        let kind = match op {
            LogOp::Fsync { .. } | LogOp::FsyncDir { .. } | LogOp::Sync => "sync",
            LogOp::Write { .. } | LogOp::SetLen { .. } => "data",
            _ => "meta",
        };
        let _ = writeln!(
            out,
            "<li class=\"op {kind}\" data-op=\"{k}\" value=\"{k}\">{}</li>",
            escape(&op.to_string())
        );
    }
    out.push_str("</ol>\n");
}

fn group_section(out: &mut String, n: usize, group: &Value, real_fs: Option<&str>) {
    let models: Vec<&str> = group["models"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let never: Vec<&str> = slowfs_faults::crash::models::FsModel::ALL
        .iter()
        .map(|m| m.name())
        .filter(|name| !models.contains(name))
        .collect();
    let _ = write!(
        out,
        "<section class=\"group\" data-group=\"{n}\" data-models=\"{models}\"><h3>group {n}: \
         {count} violation(s) at crash points {points}</h3><p>checker: <q>{message}</q></p>\
         <p class=\"models\">{labels}</p>",
        count = group["count"].as_u64().unwrap_or(0),
        points = escape(group["points"].as_str().unwrap_or_default()),
        message = escape(group["message"].as_str().unwrap_or_default()),
        models = escape(&models.join(", ")),
        labels = match real_fs {
            Some(fs) => format!("observed on {} after its own recovery", escape(fs)),
            None => format!(
                "can happen on: {}; never on: {}",
                escape(&models.join(", ")),
                match never.join(", ") {
                    none if none.is_empty() => "(none)".to_string(),
                    some => escape(&some),
                }
            ),
        },
    );
    if let Some(example) = group["examples"].as_array().and_then(|e| e.first()) {
        let _ = write!(
            out,
            "<h4>smallest example: crash after {} operation(s), {} pending kept whole</h4><ul class=\"lost\">",
            example["point"].as_u64().unwrap_or(0),
            example["kept"].as_u64().unwrap_or(0)
        );
        for lost in example["lost"].as_array().into_iter().flatten() {
            let _ = write!(
                out,
                "<li>{}</li>",
                escape(lost.as_str().unwrap_or_default())
            );
        }
        let _ = write!(
            out,
            "</ul><pre class=\"output\">{}</pre>",
            escape(example["output"].as_str().unwrap_or_default())
        );
        if let Some(replay) = example["replay"].as_str() {
            let _ = write!(
                out,
                "<p>replay: <code class=\"replay\">{}</code></p>",
                escape(replay)
            );
        }
    }
    out.push_str("</section>\n");
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
p.models{color:#555}pre{white-space:pre-wrap;background:#f8f9fa;padding:.6em}";

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

//! The matrix as one self-contained HTML page (no scripts, no network), for a
//! CI artifact: the suites by engines with each cell's status, then every
//! cell's reason and its replay command. Each cell carries `data-engine`,
//! `data-suite` and `data-status`, so the page can be checked against the JSON.

use std::fmt::Write as _;

use slowfs::explore::html::escape;

use crate::report::{Cell, Report, Status};

/// The page for `report`.
pub fn page(report: &Report) -> String {
    let (engines, suites) = report.engines_and_suites();
    let unexpected = report
        .cells
        .iter()
        .filter(|c| c.unexpected.is_some())
        .count();
    let verdict = if report.ok() {
        format!("as expected ({} cells)", report.cells.len())
    } else if report.cells.is_empty() {
        "no cell ran".to_string()
    } else {
        format!(
            "{unexpected} unexpected of {} cells{}",
            report.cells.len(),
            report
                .stopped
                .as_ref()
                .map(|s| format!("; stopped by {}", s.by))
                .unwrap_or_default()
        )
    };
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>slowfs-conformance, seed {seed}</title><style>{STYLE}</style></head><body>\n\
         <h1>slowfs-conformance</h1>\n<p class=\"summary\" data-ok=\"{ok}\">seed <code>{seed}</code>{shard}: \
         <strong>{verdict}</strong></p>\n<table class=\"matrix\"><thead><tr><th>suite</th>",
        seed = report.seed,
        ok = report.ok(),
        shard = report
            .shard
            .as_ref()
            .map(|s| format!(", shard {s:?}"))
            .unwrap_or_default(),
        verdict = escape(&verdict),
    );
    for engine in &engines {
        let _ = write!(out, "<th>{}</th>", escape(engine));
    }
    out.push_str("</tr></thead><tbody>\n");
    for suite in &suites {
        let _ = write!(out, "<tr><th>{}</th>", escape(suite));
        for engine in &engines {
            match report
                .cells
                .iter()
                .position(|c| c.engine == *engine && c.suite == *suite)
            {
                Some(i) => cell_in_matrix(&mut out, i, &report.cells[i]),
                None => out.push_str("<td class=\"none\">-</td>"),
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n<h2>Cells</h2>\n");
    for (i, cell) in report.cells.iter().enumerate() {
        cell_details(&mut out, i, cell);
    }
    out.push_str("</body></html>\n");
    out
}

fn cell_in_matrix(out: &mut String, i: usize, cell: &Cell) {
    let measure = match cell.max_lag_ms {
        Some(lag) => format!("{lag:.0} ms"),
        None if cell.status == Status::Unsupported => String::new(),
        None => format!("{} / {:.1}s", cell.cases, cell.seconds),
    };
    let _ = write!(
        out,
        "<td class=\"{class}{unexpected}\" data-engine=\"{engine}\" data-suite=\"{suite}\" \
         data-status=\"{status}\"><a href=\"#cell-{i}\">{status}</a><small>{measure}</small></td>",
        class = cell.status.name(),
        unexpected = if cell.unexpected.is_some() {
            " unexpected"
        } else {
            ""
        },
        engine = escape(&cell.engine),
        suite = escape(&cell.suite),
        status = cell.status.name(),
    );
}

fn cell_details(out: &mut String, i: usize, cell: &Cell) {
    let _ = write!(
        out,
        "<section id=\"cell-{i}\" class=\"cell {status}\"><h3>{suite} &times; {engine}: {status}</h3>",
        status = cell.status.name(),
        suite = escape(&cell.suite),
        engine = escape(&cell.engine),
    );
    if let Some(why) = &cell.unexpected {
        let _ = write!(
            out,
            "<p class=\"unexpected\">unexpected: {}</p>",
            escape(why)
        );
    }
    if let Some(expected) = &cell.expected {
        let _ = write!(
            out,
            "<p class=\"expected\">expected: {}</p>",
            escape(expected)
        );
    }
    let _ = write!(
        out,
        "<pre class=\"detail\">{}</pre><p>replay: <code class=\"replay\">{}</code></p>",
        escape(&cell.detail),
        escape(&cell.replay)
    );
    if let Some(traces) = &cell.fault_traces {
        let _ = write!(out, "<p>fault traces: <code>{}</code></p>", escape(traces));
    }
    out.push_str("</section>\n");
}

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:2em;color:#222}\
table.matrix{border-collapse:collapse}th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left}\
td small{display:block;color:#666}td a{color:inherit;font-weight:600}\
.pass,.caught{background:#e6f4ea}.fail,.timeout{background:#fce8e6}\
.unsupported,.inconclusive{background:#f1f3f4}.unexpected{outline:3px solid #d93025}\
p.unexpected{color:#d93025;outline:none}pre{white-space:pre-wrap;background:#f8f9fa;padding:.6em}\
section.cell{border-top:1px solid #ddd;margin-top:1em}";

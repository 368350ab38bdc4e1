//! The matrix as one self-contained HTML page (no scripts, no network), for a
//! CI artifact: the suites by engines with each cell's status (suites with
//! unexpected cells or failures first; a known finding, `fail*`, apart from a
//! new failure), a legend, the negative controls in a table of their own,
//! then every cell's reason and its replay command, unexpected cells first. Each cell carries `data-engine`,
//! `data-suite` and `data-status`, so the page can be checked against the JSON.

use std::fmt::Write as _;

use slowfs::explore::html::escape;

use crate::report::{Cell, Report, Status};

/// Whether `engine` is a negative control (a deliberately broken engine).
fn is_control(engine: &str) -> bool {
    engine.starts_with("broken:")
}

/// How urgent a cell is for the reader: unexpected cells first, then the
/// other failures (a new one is unexpected, so these are known findings),
/// then the rest.
fn urgency(cell: &Cell) -> u8 {
    match (cell.unexpected.is_some(), cell.status) {
        (true, _) => 0,
        (false, Status::Fail | Status::Timeout) => 1,
        _ => 2,
    }
}

/// A failure the expectations name (a known finding), not a new one.
fn known_finding(cell: &Cell) -> bool {
    cell.unexpected.is_none()
        && cell.expected.is_some()
        && matches!(cell.status, Status::Fail | Status::Timeout)
}

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
    let (own, controls): (Vec<&str>, Vec<&str>) = engines.iter().partition(|e| !is_control(e));
    // Suites with an unexpected cell first, then those with a failure; a
    // suite only controls ran is in their table alone.
    let mut suites: Vec<&str> = suites
        .into_iter()
        .filter(|suite| {
            own.is_empty()
                || report
                    .cells
                    .iter()
                    .any(|c| c.suite == *suite && !is_control(&c.engine))
        })
        .collect();
    suites.sort_by_key(|suite| {
        report
            .cells
            .iter()
            .filter(|c| c.suite == *suite && !is_control(&c.engine))
            .map(urgency)
            .min()
            .unwrap_or(2)
    });
    for engine in &own {
        let _ = write!(out, "<th>{}</th>", escape(engine));
    }
    out.push_str("</tr></thead><tbody>\n");
    for suite in &suites {
        let _ = write!(out, "<tr><th>{}</th>", escape(suite));
        for engine in &own {
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
    out.push_str("</tbody></table>\n");
    out.push_str(LEGEND);
    if !controls.is_empty() {
        // One row per control cell: the deliberately broken engines each
        // suite must catch, apart from the engines under test (nine more
        // columns made the matrix wider than a screen).
        out.push_str(
            "<h2>Negative controls</h2>\n<p>Deliberately broken engines: each suite must \
             catch its control (<code>caught</code>); one it misses fails the run.</p>\n\
             <table class=\"controls\"><thead><tr><th>control</th><th>suite</th>\
             <th>status</th></tr></thead><tbody>\n",
        );
        let mut rows: Vec<usize> = (0..report.cells.len())
            .filter(|&i| is_control(&report.cells[i].engine))
            .collect();
        rows.sort_by_key(|&i| urgency(&report.cells[i]));
        for i in rows {
            let cell = &report.cells[i];
            let _ = write!(
                out,
                "<tr><th>{}</th><td>{}</td>",
                escape(cell.engine.trim_start_matches("broken:")),
                escape(&cell.suite)
            );
            cell_in_matrix(&mut out, i, cell);
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody></table>\n");
    }
    out.push_str(
        "<h2>Cells</h2>\n<p>Unexpected cells first, then known findings, then the rest.</p>\n",
    );
    let mut order: Vec<usize> = (0..report.cells.len()).collect();
    order.sort_by_key(|&i| urgency(&report.cells[i]));
    for i in order {
        cell_details(&mut out, i, &report.cells[i]);
    }
    out.push_str("</body></html>\n");
    out
}

/// What the colours and marks mean.
const LEGEND: &str = "<table class=\"legend\"><caption>Legend</caption><tbody>\
<tr><td class=\"pass\">pass</td><td>the engine kept the suite's promise</td></tr>\
<tr><td class=\"fail unexpected\">fail</td><td>a new failure: not in the expectations \
(outlined: the cell differs from what was expected, and fails the run)</td></tr>\
<tr><td class=\"fail expected\">fail*</td><td>a known finding: the expectations \
name it and why (see the cell); it does not fail the run</td></tr>\
<tr><td class=\"caught\">caught</td><td>a negative control, caught as it must be</td></tr>\
<tr><td class=\"timeout\">timeout</td><td>did not finish in its time limit</td></tr>\
<tr><td class=\"unsupported\">unsupported</td><td>the suite does not apply to the \
engine (the cell says why)</td></tr>\
<tr><td class=\"inconclusive\">inconclusive</td><td>too little work for a verdict</td></tr>\
</tbody></table>\n";

fn cell_in_matrix(out: &mut String, i: usize, cell: &Cell) {
    let measure = match cell.max_lag_ms {
        Some(lag) => format!("{lag:.0} ms"),
        None if cell.status == Status::Unsupported => String::new(),
        None => format!("{} / {:.1}s", cell.cases, cell.seconds),
    };
    let known = known_finding(cell);
    let _ = write!(
        out,
        "<td class=\"{class}{mark}\" data-engine=\"{engine}\" data-suite=\"{suite}\" \
         data-status=\"{status}\" data-expected=\"{known}\"><a href=\"#cell-{i}\">{status}{star}</a>\
         <small>{measure}</small></td>",
        class = cell.status.name(),
        mark = if cell.unexpected.is_some() {
            " unexpected"
        } else if known {
            " expected"
        } else {
            ""
        },
        engine = escape(&cell.engine),
        suite = escape(&cell.suite),
        status = cell.status.name(),
        // As the terminal marks it (FAIL*): a known finding, see the legend.
        star = if known { "*" } else { "" },
    );
}

fn cell_details(out: &mut String, i: usize, cell: &Cell) {
    let _ = write!(
        out,
        "<section id=\"cell-{i}\" class=\"cell {status}{mark}\"><h3>{suite} &times; {engine}: {status}{star}</h3>",
        status = cell.status.name(),
        mark = if known_finding(cell) { " expected" } else { "" },
        star = if known_finding(cell) {
            "* (a known finding)"
        } else {
            ""
        },
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
td.expected,section.expected{background:#fef7e0;color:#7a5900}\
.unsupported,.inconclusive{background:#f1f3f4}.unexpected{outline:3px solid #d93025;outline-offset:-3px}\
table.legend{margin-top:1em;border-collapse:collapse}table.legend caption{text-align:left;font-weight:600}\
table.legend td:first-child{font-weight:600;width:7em}table.controls{border-collapse:collapse}\
p.unexpected{color:#d93025;outline:none}pre{white-space:pre-wrap;background:#f8f9fa;padding:.6em}\
section.cell{border-top:1px solid #ddd;margin-top:1em}";

//! The matrix: one cell per (suite, engine), printed for people and written as
//! JSON and JUnit XML for CI.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::runner::PlannedCell;
use crate::{Outcome, SuiteConfig};

/// A cell's status.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The engine kept the promise.
    Pass,
    /// It broke it (or a negative control went uncaught).
    Fail,
    /// The suite does not apply to the engine.
    Unsupported,
    /// A negative control, caught as it must be.
    Caught,
    /// Too little work was done for a verdict (never counts as a pass).
    Inconclusive,
    /// The cell did not finish within its time limit (or was not run because
    /// an earlier cell of its engine did not): never a pass.
    Timeout,
}

impl Status {
    /// The status as expectations files and JSON spell it.
    pub fn name(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Unsupported => "unsupported",
            Status::Caught => "caught",
            Status::Inconclusive => "inconclusive",
            Status::Timeout => "timeout",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Status::Fail => "FAIL",
            Status::Timeout => "TIMEOUT",
            other => other.name(),
        }
    }
}

/// One (suite, engine) result.
#[non_exhaustive]
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cell {
    /// Engine name.
    pub engine: String,
    /// Suite name.
    pub suite: String,
    /// The status.
    pub status: Status,
    /// Cases run (a failing one included, its shrinking not).
    pub cases: u32,
    /// Runs spent shrinking a failing case.
    #[serde(default, skip_serializing_if = "crate::is_zero")]
    pub shrink_steps: u32,
    /// Wall time.
    pub seconds: f64,
    /// What happened: the failure with its minimal trace, or why unsupported.
    pub detail: String,
    /// The command that replays this cell.
    pub replay: String,
    /// Where the faults its mounts fired were kept (a failed cell; the replay
    /// command replays them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_traces: Option<String>,
    /// Set when the cell matched a known finding: why it is expected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// Set when the cell differs from what was expected; changes the exit code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unexpected: Option<String>,
    /// loop-lag: worst heartbeat lateness.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_lag_ms: Option<f64>,
    /// loop-lag: 99th percentile lateness.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_lag_ms: Option<f64>,
}

impl Cell {
    /// A cell for `planned` with `status`, carrying the outcome's measurements;
    /// no expectation applied yet.
    pub fn new(
        planned: &PlannedCell,
        status: Status,
        outcome: &Outcome,
        config: &SuiteConfig,
    ) -> Cell {
        Cell {
            engine: planned.engine.name.clone(),
            suite: planned.suite.name().to_string(),
            status,
            cases: outcome.cases,
            shrink_steps: outcome.shrink_steps,
            seconds: outcome.seconds,
            detail: outcome.detail(),
            replay: planned.replay(config),
            fault_traces: None,
            expected: None,
            unexpected: None,
            max_lag_ms: outcome.max_lag_ms,
            p99_lag_ms: outcome.p99_lag_ms,
        }
    }

    /// A cell that did not finish: `timeout`, with what happened.
    pub fn timed_out(
        planned: &PlannedCell,
        seconds: f64,
        detail: String,
        config: &SuiteConfig,
    ) -> Cell {
        Cell {
            engine: planned.engine.name.clone(),
            suite: planned.suite.name().to_string(),
            status: Status::Timeout,
            cases: 0,
            shrink_steps: 0,
            seconds,
            unexpected: Some(detail.clone()),
            detail,
            replay: planned.replay(config),
            fault_traces: None,
            expected: None,
            max_lag_ms: None,
            p99_lag_ms: None,
        }
    }
}

/// A whole run.
#[non_exhaustive]
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// The run seed.
    pub seed: u64,
    /// Every cell.
    pub cells: Vec<Cell>,
    /// Set when the run was stopped before every cell ran (a signal, or the
    /// run's time limit): why, and how many cells were planned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stopped>,
    /// The shard of the run this report covers (`run --shard K/N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::shard::Shard>,
}

/// Why a run ended early.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Stopped {
    /// What stopped it (`SIGINT`, `SIGTERM`, `run timeout after 30m`).
    pub by: String,
    /// Cells the run had planned.
    pub planned: usize,
}

impl Report {
    /// An empty report for a run with `seed`.
    pub fn new(seed: u64) -> Report {
        Report {
            seed,
            cells: Vec::new(),
            stopped: None,
            shard: None,
        }
    }

    /// Whether the run is clean: it ran something, finished, and nothing was
    /// unexpected.
    pub fn ok(&self) -> bool {
        !self.cells.is_empty()
            && self.stopped.is_none()
            && self.cells.iter().all(|c| c.unexpected.is_none())
    }

    /// The engines and the suites of the cells, each once, in the order
    /// they first appear (the matrix's columns and rows).
    pub fn engines_and_suites(&self) -> (Vec<&str>, Vec<&str>) {
        let mut engines: Vec<&str> = Vec::new();
        let mut suites: Vec<&str> = Vec::new();
        for cell in &self.cells {
            if !engines.contains(&cell.engine.as_str()) {
                engines.push(&cell.engine);
            }
            if !suites.contains(&cell.suite.as_str()) {
                suites.push(&cell.suite);
            }
        }
        (engines, suites)
    }

    /// The matrix and the details of every failure, for people.
    pub fn render(&self) -> String {
        let (engines, suites) = self.engines_and_suites();
        // Wide enough for every engine's name, with a space between columns.
        let width = engines
            .iter()
            .filter(|e| !e.starts_with("broken:"))
            .map(|e| e.len() + 1)
            .max()
            .unwrap_or(0)
            .max(15);
        let mut out = format!("slowfs-conformance, seed {}\n\n{:<16}", self.seed, "suite");
        let (own, controls): (Vec<&str>, Vec<&str>) =
            engines.iter().partition(|e| !e.starts_with("broken:"));
        for engine in &own {
            let _ = write!(out, "{engine:>width$}");
        }
        let _ = writeln!(out, "  {:>width$}", "negative control");
        for suite in &suites {
            let _ = write!(out, "{suite:<16}");
            for engine in &own {
                let text = self
                    .cells
                    .iter()
                    .find(|c| &c.engine == engine && &c.suite == suite)
                    .map_or("-".to_string(), cell_text);
                let _ = write!(out, "{text:>width$}");
            }
            let control = self
                .cells
                .iter()
                .filter(|c| &c.suite == suite && controls.contains(&c.engine.as_str()))
                .map(|c| {
                    format!(
                        "{} {}",
                        c.engine.trim_start_matches("broken:"),
                        cell_text(c)
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            let _ = writeln!(out, "  {control}");
        }
        let _ = writeln!(
            out,
            "\n(cell: status/cases/seconds; loop-lag shows the max lag)"
        );
        for cell in &self.cells {
            if cell.status == Status::Fail || cell.unexpected.is_some() {
                let _ = writeln!(
                    out,
                    "\n{} x {}: {}",
                    cell.suite,
                    cell.engine,
                    cell.status.label()
                );
                for line in cell.detail.lines() {
                    let _ = writeln!(out, "    {line}");
                }
                if let Some(why) = &cell.expected {
                    let _ = writeln!(out, "    expected: {why}");
                }
                if let Some(what) = &cell.unexpected {
                    let _ = writeln!(out, "    UNEXPECTED: {what}");
                }
                if let Some(dir) = &cell.fault_traces {
                    let _ = writeln!(out, "    fault traces: {dir}");
                }
                let _ = writeln!(out, "    replay: {}", cell.replay);
            }
        }
        let unsupported: Vec<String> = self
            .cells
            .iter()
            .filter(|c| c.status == Status::Unsupported)
            .map(|c| format!("  {} x {}: {}", c.suite, c.engine, c.detail))
            .collect();
        if !unsupported.is_empty() {
            let _ = writeln!(out, "\nunsupported:\n{}", unsupported.join("\n"));
        }
        let unexpected = self.cells.iter().filter(|c| c.unexpected.is_some()).count();
        let result = match (&self.stopped, unexpected) {
            _ if self.cells.is_empty() && self.stopped.is_none() => {
                "result: NOTHING RAN (no cell was planned)".to_string()
            }
            (Some(stopped), _) => format!(
                "result: STOPPED by {} after {} of {} cells ({unexpected} unexpected so far): not a verdict",
                stopped.by,
                self.cells.len(),
                stopped.planned
            ),
            (None, 0) => format!("result: as expected ({} cells)", self.cells.len()),
            (None, n) => format!("result: {n} UNEXPECTED cell(s) of {} (see above)", self.cells.len()),
        };
        let _ = writeln!(out, "\n{result}");
        out
    }

    /// JUnit XML: one test case per cell.
    pub fn junit(&self) -> String {
        let failures = self.cells.iter().filter(|c| c.unexpected.is_some()).count();
        let skipped = self
            .cells
            .iter()
            .filter(|c| c.status == Status::Unsupported)
            .count();
        let mut out = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n<testsuite name=\"slowfs-conformance\" tests=\"{}\" failures=\"{failures}\" skipped=\"{skipped}\">\n",
            self.cells.len()
        );
        for cell in &self.cells {
            let _ = write!(
                out,
                "  <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\">",
                xml(&cell.engine),
                xml(&cell.suite),
                cell.seconds
            );
            if let Some(what) = &cell.unexpected {
                let _ = write!(
                    out,
                    "<failure message=\"{}\">{}\nreplay: {}</failure>",
                    xml(what),
                    xml(&cell.detail),
                    xml(&cell.replay)
                );
            } else if cell.status == Status::Unsupported {
                let _ = write!(out, "<skipped message=\"{}\"/>", xml(&cell.detail));
            }
            out.push_str("</testcase>\n");
        }
        out.push_str("</testsuite>\n</testsuites>\n");
        out
    }
}

fn cell_text(cell: &Cell) -> String {
    let mark = if cell.unexpected.is_some() {
        "!"
    } else if cell.expected.is_some() {
        "*"
    } else {
        ""
    };
    match (cell.status, cell.max_lag_ms) {
        (Status::Unsupported, _) => format!("unsupp{mark}"),
        (status, Some(lag)) => format!("{}{mark} {lag:.0}ms", status.label()),
        (status, None) => format!(
            "{}{mark} {}/{:.1}s",
            status.label(),
            cell.cases,
            cell.seconds
        ),
    }
}

fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

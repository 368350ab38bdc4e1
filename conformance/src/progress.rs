//! Progress lines on stderr: what the run is doing now, and each cell's result.
//! On a terminal the running cell's line updates in place every second; in a
//! log (CI) a cell's start is printed, then a line every 30 s while it runs.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use crate::report::Cell;
use crate::runner::PlannedCell;

/// Prints a run's progress.
#[derive(Debug)]
pub struct Progress {
    total: usize,
    live: bool,
    /// The last time shown for the running cell (seconds), to print each once.
    shown: u64,
}

impl Progress {
    /// Progress for a run of `total` cells; live when stderr is a terminal.
    pub fn new(total: usize) -> Progress {
        Progress {
            total,
            live: std::io::stderr().is_terminal(),
            shown: 0,
        }
    }

    fn label(&self, index: usize, planned: &PlannedCell) -> String {
        format!(
            "[{:>width$}/{}] {} x {}",
            index + 1,
            self.total,
            planned.suite.name(),
            planned.engine.name,
            width = self.total.to_string().len()
        )
    }

    /// Cell `index` starts.
    pub fn start(&mut self, index: usize, planned: &PlannedCell) {
        self.shown = 0;
        let label = self.label(index, planned);
        if self.live {
            eprint!("\r\x1b[K  {label} ...");
        } else {
            eprintln!("  {label} ...");
        }
        let _ = std::io::stderr().flush();
    }

    /// Cell `index` has run for `ran` of its `limit`.
    pub fn running(&mut self, index: usize, planned: &PlannedCell, ran: Duration, limit: Duration) {
        let secs = ran.as_secs();
        let every = if self.live { 1 } else { 30 };
        if secs == 0 || secs == self.shown || secs % every != 0 {
            return;
        }
        self.shown = secs;
        let label = self.label(index, planned);
        let limit = limit.as_secs();
        if self.live {
            eprint!("\r\x1b[K  {label} ... {secs}s (limit {limit}s)");
            let _ = std::io::stderr().flush();
        } else {
            eprintln!("  {label} still running: {secs}s (limit {limit}s)");
        }
    }

    /// Cell `index` ended as `cell`.
    pub fn done(&mut self, index: usize, planned: &PlannedCell, cell: &Cell) {
        let label = self.label(index, planned);
        let clear = if self.live { "\r\x1b[K" } else { "" };
        let mark = if cell.unexpected.is_some() {
            "  UNEXPECTED"
        } else if cell.expected.is_some() {
            "  (expected)"
        } else {
            ""
        };
        let shrunk = match cell.shrink_steps {
            0 => String::new(),
            n => format!(", {n} shrink steps"),
        };
        eprintln!(
            "{clear}  {label}: {} ({} cases{shrunk}, {:.1}s){mark}",
            cell.status.name(),
            cell.cases,
            cell.seconds
        );
    }
}

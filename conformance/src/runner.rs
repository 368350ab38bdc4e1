//! Running the matrix: engines x suites, negative controls, expectations.

use std::sync::Arc;

use harness::{AnyEngine, Engine};

use crate::broken::{BrokenEngine, Defect};
use crate::expectations::{self, Expectation};
use crate::report::{Cell, Report, Status};
use crate::{run_suite, Outcome, Suite, SuiteConfig, Verdict};

/// Engines we wrote: every cell must pass (or be unsupported).
pub const OWN_ENGINES: &[&str] = &["uring", "threadpool", "blocking"];

/// The engine and suite that form a built-in negative control, besides the
/// broken engines: `blocking` must fail loop-lag.
fn is_control(engine: &str, suite: Suite) -> bool {
    engine.starts_with("broken:") || (engine == "blocking" && suite == Suite::LoopLag)
}

fn replay(engine: &str, suite: Suite, config: &SuiteConfig) -> String {
    let engine = if engine.contains(' ') {
        format!("'{engine}'")
    } else {
        engine.to_string()
    };
    let mut cmd = format!(
        "slowfs-conformance run --engine {engine} --suite {} --seed {} --cases {}",
        suite.name(),
        config.seed,
        config.cases
    );
    if let Some(p) = &config.profile {
        cmd.push_str(&format!(" --profile {p}"));
    }
    cmd
}

fn cell(
    engine: &str,
    suite: Suite,
    outcome: Outcome,
    config: &SuiteConfig,
    expectations: &[Expectation],
) -> Cell {
    let control = is_control(engine, suite);
    let (status, mut unexpected) = match (&outcome.verdict, control) {
        (Verdict::Pass, false) => (Status::Pass, None),
        (Verdict::Fail { .. }, false) => (Status::Fail, Some("failed".to_string())),
        (Verdict::Unsupported { .. }, _) => (Status::Unsupported, None),
        (Verdict::Fail { .. }, true) => (Status::Caught, None),
        (Verdict::Pass, true) => (
            Status::Fail,
            Some("negative control NOT caught: the suite cannot see this defect".to_string()),
        ),
        (Verdict::Inconclusive { .. }, false) => (
            Status::Inconclusive,
            Some("inconclusive: the engine did too little work for a verdict".to_string()),
        ),
        (Verdict::Inconclusive { .. }, true) => (
            Status::Inconclusive,
            Some("negative control inconclusive: not caught".to_string()),
        ),
    };
    let mut expected = None;
    if let Some(exp) = expectations::find(expectations, engine, suite.name()) {
        let label = match status {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Unsupported => "unsupported",
            Status::Caught => "caught",
            Status::Inconclusive => "inconclusive",
        };
        // "fail|pass": a finding that depends on timing; either is expected.
        if exp.status.split('|').any(|s| s.trim() == label) {
            expected = Some(exp.why.clone());
            unexpected = None;
        } else {
            unexpected = Some(format!(
                "expected {} ({}), got {label}: update the expectations file if this is a fix",
                exp.status, exp.why
            ));
        }
    }
    Cell {
        engine: engine.to_string(),
        suite: suite.name().to_string(),
        status,
        cases: outcome.cases,
        seconds: outcome.seconds,
        detail: outcome.detail(),
        replay: replay(engine, suite, config),
        expected,
        unexpected,
        max_lag_ms: outcome.max_lag_ms,
        p99_lag_ms: outcome.p99_lag_ms,
    }
}

/// Runs one named engine (built-in, `broken:...` or `cmd:...`) through one suite;
/// returns the outcome and the engine's own name (a driver names its library).
pub fn run_named(
    engine: &str,
    suite: Suite,
    config: &SuiteConfig,
) -> Result<(Outcome, String), String> {
    if let Some(defect) = Defect::ALL.iter().find(|d| d.name() == engine) {
        let inner = AnyEngine::by_name("threadpool").map_err(|e| e.to_string())?;
        let outcome = run_suite(suite, Arc::new(BrokenEngine::new(inner, *defect)), config);
        return Ok((outcome, engine.to_string()));
    }
    let engine = AnyEngine::by_name(engine).map_err(|e| e.to_string())?;
    let name = engine.name().to_string();
    Ok((run_suite(suite, Arc::new(engine), config), name))
}

/// Runs a third-party engine through the suites (for library authors' own runners).
pub fn run_engine<E: Engine>(
    engine: Arc<E>,
    suites: &[Suite],
    config: &SuiteConfig,
) -> Vec<(Suite, Outcome)> {
    suites
        .iter()
        .map(|&suite| (suite, run_suite(suite, Arc::clone(&engine), config)))
        .collect()
}

/// Runs every (suite, engine) cell, then each negative control against the suite
/// that must catch it; `progress` hears about each cell as it finishes.
pub fn run_matrix(
    engines: &[String],
    suites: &[Suite],
    controls: bool,
    config: &SuiteConfig,
    expectations: &[Expectation],
    mut progress: impl FnMut(&Cell),
) -> Report {
    let mut cells = Vec::new();
    let mut plan: Vec<(String, Suite)> = Vec::new();
    for &suite in suites {
        for engine in engines {
            plan.push((engine.clone(), suite));
        }
    }
    if controls {
        for defect in Defect::ALL {
            if suites.contains(&defect.caught_by()) {
                plan.push((defect.name().to_string(), defect.caught_by()));
            }
        }
    }
    for (engine, suite) in plan {
        let (outcome, shown) = run_named(&engine, suite, config).unwrap_or_else(|e| {
            let failed = crate::outcome(
                Verdict::Fail {
                    reason: format!("cannot start engine: {e}"),
                    trace: String::new(),
                },
                0,
            );
            (failed, engine.clone())
        });
        let mut cell = cell(&shown, suite, outcome, config, expectations);
        cell.replay = replay(&engine, suite, config);
        progress(&cell);
        cells.push(cell);
    }
    Report {
        seed: config.seed,
        cells,
    }
}

//! Running the matrix: engines x suites, negative controls, expectations.
//!
//! A run is planned ([`plan`]) from engines checked up front ([`preflight`]:
//! every handshake valid, every name distinct), each cell's outcome is judged
//! against what was expected of it ([`judge`]), and the cells make a
//! [`Report`]. [`run_matrix`] does all of it in this process; the
//! `slowfs-conformance` command runs each cell in a child process instead
//! ([`crate::isolation`]), so that a cell can be timed out and a signal
//! leaves nothing mounted.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use slowfs_harness::{AnyEngine, Capability, Engine};

use crate::broken::{BrokenEngine, Defect};
use crate::expectations::{self, Expectation};
use crate::report::{Cell, Report, Status};
use crate::{run_suite, Outcome, Suite, SuiteConfig, Verdict};

/// Engines we wrote: every cell must pass (or be unsupported, with a reason).
pub const OWN_ENGINES: &[&str] = &["uring", "threadpool", "blocking"];

/// An engine as the command line names it: what to start (a built-in name,
/// `broken:DEFECT` or `cmd:COMMAND`), and optionally the label the matrix
/// shows for it (`LABEL=ENGINE`), which overrides the name a driver gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineSpec {
    /// The label, if one was given.
    pub label: Option<String>,
    /// What to start.
    pub source: String,
}

impl FromStr for EngineSpec {
    type Err = std::convert::Infallible;

    /// `uring`, `cmd:python3 d.py`, or `py311=cmd:python3.11 d.py`.
    ///
    /// ```
    /// use slowfs_conformance::runner::EngineSpec;
    /// let spec: EngineSpec = "py311=cmd:python3.11 d.py --lib aiofiles".parse().unwrap();
    /// assert_eq!(spec.label.as_deref(), Some("py311"));
    /// assert_eq!(spec.source, "cmd:python3.11 d.py --lib aiofiles");
    /// let plain: EngineSpec = "cmd:env A=1 python3 d.py".parse().unwrap();
    /// assert_eq!(plain.label, None);
    /// ```
    fn from_str(text: &str) -> Result<EngineSpec, Self::Err> {
        if let Some((label, source)) = text.split_once('=') {
            let is_label = !label.is_empty()
                && !label.contains(':')
                && !label.chars().any(char::is_whitespace);
            if is_label && (source.starts_with("cmd:") || !source.contains(' ')) {
                return Ok(EngineSpec {
                    label: Some(label.to_string()),
                    source: source.to_string(),
                });
            }
        }
        Ok(EngineSpec {
            label: None,
            source: text.to_string(),
        })
    }
}

impl fmt::Display for EngineSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.label {
            Some(label) => write!(f, "{label}={}", self.source),
            None => f.write_str(&self.source),
        }
    }
}

/// An engine that passed [`preflight`]: its spec and the name the matrix shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedEngine {
    /// How to start it.
    pub spec: EngineSpec,
    /// Its name in the matrix and in expectations files.
    pub name: String,
    /// Whether it lacks, for every suite, a capability the suite needs: no
    /// suite could test anything of it.
    pub useless: bool,
}

/// Starts an engine by spec: a negative control, or any [`AnyEngine`].
fn start(source: &str) -> Result<Started, String> {
    if let Some(defect) = Defect::ALL.iter().find(|d| d.name() == source) {
        let inner = AnyEngine::by_name("threadpool").map_err(|e| e.to_string())?;
        return Ok(Started::Broken(BrokenEngine::new(inner, *defect)));
    }
    AnyEngine::by_name(source)
        .map(Started::Any)
        .map_err(|e| e.to_string())
}

enum Started {
    Broken(BrokenEngine<AnyEngine>),
    Any(AnyEngine),
}

impl Started {
    fn name(&self) -> String {
        match self {
            Started::Broken(e) => e.name().to_string(),
            Started::Any(e) => e.name().to_string(),
        }
    }

    fn supports(&self, capability: Capability) -> bool {
        match self {
            Started::Broken(e) => e.supports(capability),
            Started::Any(e) => e.supports(capability),
        }
    }
}

/// Starts every engine once, before any cell runs: a driver whose handshake is
/// invalid (an unknown capability, a bad `loop_thread`) or that cannot start
/// is an error, and so are two engines that would show under the same name
/// (their columns and expectations would merge). The error says how to fix it.
pub fn preflight(specs: &[EngineSpec]) -> Result<Vec<CheckedEngine>, String> {
    let mut checked: Vec<CheckedEngine> = Vec::new();
    for spec in specs {
        let started = start(&spec.source).map_err(|e| format!("engine `{spec}`: {e}"))?;
        let name = spec.label.clone().unwrap_or_else(|| started.name());
        if let Some(twin) = checked.iter().find(|c| c.name == name) {
            return Err(format!(
                "engines `{}` and `{spec}` both call themselves '{name}': their columns and expectations would merge. \
                 Label one: --engine 'OTHER_NAME={}' (or give the driver a distinct `engine` in its handshake)",
                twin.spec, spec.source
            ));
        }
        let useless = !Suite::ALL.iter().any(|suite| {
            [Capability::Open, Capability::Close]
                .iter()
                .chain(suite.requires())
                .all(|cap| started.supports(*cap))
        });
        checked.push(CheckedEngine {
            spec: spec.clone(),
            name,
            useless,
        });
    }
    Ok(checked)
}

/// One cell to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedCell {
    /// The engine, as checked.
    pub engine: CheckedEngine,
    /// The suite.
    pub suite: Suite,
}

impl PlannedCell {
    /// Whether the cell is a negative control (it must fail).
    pub fn is_control(&self) -> bool {
        self.engine.spec.source.starts_with("broken:")
            || (self.engine.spec.source == "blocking" && self.suite == Suite::LoopLag)
    }

    /// The command that replays this cell.
    pub fn replay(&self, config: &SuiteConfig) -> String {
        let engine = self.engine.spec.to_string();
        let engine = if engine.contains(' ') {
            format!("'{engine}'")
        } else {
            engine
        };
        let mut cmd = format!(
            "slowfs-conformance run --engine {engine} --suite {} --seed {} --cases {}",
            self.suite.name(),
            config.seed,
            config.cases
        );
        if let Some(p) = &config.profile {
            cmd.push_str(&format!(" --profile {p}"));
        }
        cmd
    }
}

/// Every (suite, engine) cell, then each negative control against every suite
/// that must catch it (when `controls`).
pub fn plan(engines: &[CheckedEngine], suites: &[Suite], controls: bool) -> Vec<PlannedCell> {
    let mut cells = Vec::new();
    for &suite in suites {
        for engine in engines {
            cells.push(PlannedCell {
                engine: engine.clone(),
                suite,
            });
        }
    }
    if controls {
        for defect in Defect::ALL {
            for &suite in defect.caught_by() {
                if suites.contains(&suite) {
                    let spec = EngineSpec {
                        label: None,
                        source: defect.name().to_string(),
                    };
                    cells.push(PlannedCell {
                        engine: CheckedEngine {
                            name: defect.name().to_string(),
                            spec,
                            useless: false,
                        },
                        suite,
                    });
                }
            }
        }
    }
    cells
}

/// Runs one planned cell in this process.
pub fn run_cell(cell: &PlannedCell, config: &SuiteConfig) -> Outcome {
    match start(&cell.engine.spec.source) {
        Ok(Started::Broken(engine)) => run_suite(cell.suite, Arc::new(engine), config),
        Ok(Started::Any(engine)) => run_suite(cell.suite, Arc::new(engine), config),
        Err(e) => crate::outcome(
            Verdict::Fail {
                reason: format!("cannot start engine: {e}"),
                trace: String::new(),
            },
            0,
        ),
    }
}

/// Judges an outcome against what was expected of its cell: our engines and
/// third-party cells without an expectation must pass; a control must be
/// caught; `unsupported` is expected only where the engine said why or the
/// expectations list it; anything else is unexpected and fails the run.
pub fn judge(
    planned: &PlannedCell,
    outcome: Outcome,
    config: &SuiteConfig,
    expectations: &[Expectation],
) -> Cell {
    let control = planned.is_control();
    let (status, unexpected) = match (&outcome.verdict, control) {
        (Verdict::Pass, false) => (Status::Pass, None),
        (Verdict::Fail { .. }, false) => (Status::Fail, Some("failed".to_string())),
        (Verdict::Unsupported { explained, .. }, _) => (
            Status::Unsupported,
            (!explained).then(|| {
                if planned.engine.useless {
                    "the engine declares none of the capabilities any suite needs: nothing was tested (does its handshake list `capabilities`?)".to_string()
                } else {
                    "unsupported with no reason given: declare why in the handshake's `unsupported` map, or list the cell in an expectations file".to_string()
                }
            }),
        ),
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
    let mut cell = Cell::new(planned, status, &outcome, config);
    cell.unexpected = unexpected;
    expect(&mut cell, expectations);
    cell
}

/// Applies the cell's expectation, if any: a match is expected (with its why),
/// a mismatch is unexpected.
pub fn expect(cell: &mut Cell, expectations: &[Expectation]) {
    if let Some(exp) = expectations::find(expectations, &cell.engine, &cell.suite) {
        let label = cell.status.name();
        // "fail|pass": a finding that depends on timing; either is expected.
        if exp.status.split('|').any(|s| s.trim() == label) {
            cell.expected = Some(exp.why.clone());
            cell.unexpected = None;
        } else {
            cell.unexpected = Some(format!(
                "expected {} ({}), got {label}: update the expectations file if this is a fix",
                exp.status, exp.why
            ));
        }
    }
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

/// Runs every (suite, engine) cell in this process, then each negative control
/// against the suites that must catch it; `progress` hears about each cell as
/// it finishes. Fails (before running anything) where [`preflight`] does.
pub fn run_matrix(
    engines: &[String],
    suites: &[Suite],
    controls: bool,
    config: &SuiteConfig,
    expectations: &[Expectation],
    mut progress: impl FnMut(&Cell),
) -> Result<Report, String> {
    let specs: Vec<EngineSpec> = engines
        .iter()
        .map(|e| e.parse().expect("infallible"))
        .collect();
    let checked = preflight(&specs)?;
    let mut report = Report::new(config.seed);
    for planned in plan(&checked, suites, controls) {
        let outcome = run_cell(&planned, config);
        let cell = judge(&planned, outcome, config, expectations);
        progress(&cell);
        report.cells.push(cell);
    }
    Ok(report)
}

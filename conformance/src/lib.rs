//! Conformance suites for async file engines, run on a real slowfs mount.
//!
//! Each suite checks one promise of the engine contract (see `slowfs_harness::engine`)
//! with property-based tests: every case is derived from the run seed, and a
//! failing case shrinks to a minimal operation sequence printed as a trace. Every
//! suite has a negative control — a deliberately broken engine ([`broken`]) it
//! must catch — so a suite that goes blind fails.
//!
//! Library authors implement [`slowfs_harness::Engine`] for their library and call the
//! suites from their own tests:
//!
//! ```no_run
//! use std::sync::Arc;
//! use slowfs_conformance::{run_suite, Suite, SuiteConfig};
//!
//! # fn my_engine() -> slowfs_harness::AnyEngine { slowfs_harness::AnyEngine::by_name("threadpool").unwrap() }
//! let engine = Arc::new(my_engine());
//! for suite in [Suite::Positioned, Suite::ShortIo, Suite::Cancel, Suite::Errors] {
//!     let outcome = run_suite(suite, Arc::clone(&engine), &SuiteConfig::default());
//!     assert!(outcome.passed(), "{}: {}", suite.name(), outcome.detail());
//! }
//! ```
//!
//! # Stability (semver)
//!
//! The same policy as `harness`'s: [`Verdict`], [`Suite`],
//! [`report::Status`] are `#[non_exhaustive]` (a new suite or verdict is a minor
//! release: match with a `_` arm); [`SuiteConfig`], [`Outcome`],
//! [`report::Cell`] and [`report::Report`] are `#[non_exhaustive]` structs
//! (build a config with `SuiteConfig::default().cases(8).seed(5)`). The JSON
//! report only gains fields within a major version.
//!
//! ```compile_fail,E0004
//! fn passed(v: &slowfs_conformance::Verdict) -> bool {
//!     match v {
//!         slowfs_conformance::Verdict::Pass => true,
//!         slowfs_conformance::Verdict::Fail { .. } => false,
//!         slowfs_conformance::Verdict::Unsupported { .. } => false,
//!         slowfs_conformance::Verdict::Inconclusive { .. } => false,
//!     }
//! }
//! ```
#![deny(missing_docs)]

pub mod broken;
pub mod expectations;
pub mod fault_traces;
pub mod html;
pub mod isolation;
pub mod model;
pub mod progress;
mod proptest_run;
pub mod report;
pub mod runner;
pub mod shard;
pub mod suites;

use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use slowfs_harness::{Capability, Engine};

/// The suites, in matrix order.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Suite {
    /// Positioned I/O against an in-memory model.
    Positioned,
    /// Short reads and writes are reported exactly; the `_all` forms loop.
    ShortIo,
    /// Cancelled operations leak nothing and touch nothing.
    Cancel,
    /// Injected errnos reach the caller; failed writes are never durable.
    Errors,
    /// A successful fsync makes what was written durable (crash model).
    Durability,
    /// `atomic_write` leaves old-or-new at every crash point (crash model).
    AtomicReplace,
    /// The event loop stays responsive while file operations stall.
    LoopLag,
}

impl Suite {
    /// Every suite.
    pub const ALL: &'static [Suite] = &[
        Suite::Positioned,
        Suite::ShortIo,
        Suite::Cancel,
        Suite::Errors,
        Suite::Durability,
        Suite::AtomicReplace,
        Suite::LoopLag,
    ];

    /// The suite's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Suite::Positioned => "positioned",
            Suite::ShortIo => "short-io",
            Suite::Cancel => "cancel",
            Suite::Errors => "errors",
            Suite::Durability => "durability",
            Suite::AtomicReplace => "atomic-replace",
            Suite::LoopLag => "loop-lag",
        }
    }

    /// Looks a suite up by name.
    pub fn from_name(name: &str) -> Option<Suite> {
        Suite::ALL.iter().copied().find(|s| s.name() == name)
    }

    /// The capabilities the suite needs (besides `open` and `close`, which every
    /// suite uses). An engine without one of them is `unsupported` in the suite.
    pub fn requires(self) -> &'static [Capability] {
        use Capability::*;
        match self {
            Suite::Positioned => &[
                Positioned, ReadAt, WriteAt, ReadMany, WriteMany, Read, SetLen,
            ],
            Suite::ShortIo => &[ReadAt, WriteAt],
            Suite::Cancel => &[ReadAt, WriteAt, Cancel],
            Suite::Errors => &[ReadAt, WriteAt, Fsync],
            Suite::Durability => &[WriteAt, Fsync, Fdatasync],
            Suite::AtomicReplace => &[WriteAt, Fsync, Rename, SyncDir],
            Suite::LoopLag => &[Read, Fsync, Lag],
        }
    }

    /// One line on what it checks.
    pub fn summary(self) -> &'static str {
        match self {
            Suite::Positioned => "read_at/write_at/append/set_len/batches/cursor reads match a model under short I/O, offsets past 4 GiB",
            Suite::ShortIo => "a single read/write reports exactly what moved; *_all/*_exact loop; a 0-byte write is an error",
            Suite::Cancel => "dropped in-flight ops: no touched buffers, no leaked fds or ops, old-or-new bytes, engine usable",
            Suite::Errors => "EIO/ENOSPC/EDQUOT reach the caller; a failed write is never reported durable",
            Suite::Durability => "after fsync returns, a crash keeps everything reported written (crash model)",
            Suite::AtomicReplace => "atomic_write leaves old or new at every crash point (crash model)",
            Suite::LoopLag => "heartbeat lag stays under the bound while ops are delayed 100 ms (fsync 250 ms)",
        }
    }
}

/// Knobs for a suite run. Build it from [`SuiteConfig::default`] and the
/// setters (fields may be added in a minor release).
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct SuiteConfig {
    /// Property cases per suite.
    pub cases: u32,
    /// Seed of every random choice.
    pub seed: u64,
    /// loop-lag: the largest acceptable heartbeat lateness, in ms; `None`: half
    /// of `op_delay_ms` (a loop that waits for one operation is late by all of it).
    pub lag_bound_ms: Option<f64>,
    /// loop-lag: the delay on every op, in ms (fsync gets 250 ms).
    pub op_delay_ms: u64,
    /// An extra slowfs profile to run under (e.g. `nfs`), if any.
    pub profile: Option<String>,
    /// Record the faults each mount fires, or replay recorded ones.
    pub fault_traces: Option<fault_traces::FaultTraces>,
}

impl Default for SuiteConfig {
    fn default() -> Self {
        SuiteConfig {
            cases: 24,
            seed: 1,
            lag_bound_ms: None,
            op_delay_ms: 100,
            profile: None,
            fault_traces: None,
        }
    }
}

impl SuiteConfig {
    /// Sets the property cases per suite.
    pub fn cases(mut self, cases: u32) -> Self {
        self.cases = cases;
        self
    }

    /// Sets the seed.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets the extra slowfs profile.
    pub fn profile(mut self, profile: Option<String>) -> Self {
        self.profile = profile;
        self
    }

    /// Sets loop-lag's bound (`None`: half of the injected delay).
    pub fn lag_bound_ms(mut self, bound: Option<f64>) -> Self {
        self.lag_bound_ms = bound;
        self
    }

    /// Records each mount's faults into, or replays them from, a directory.
    pub fn fault_traces(mut self, traces: Option<fault_traces::FaultTraces>) -> Self {
        self.fault_traces = traces;
        self
    }

    /// The loop-lag bound in force.
    pub fn lag_bound(&self) -> f64 {
        self.lag_bound_ms.unwrap_or(self.op_delay_ms as f64 / 2.0)
    }
}

/// What a suite found.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "lowercase")]
pub enum Verdict {
    /// Every case kept the promise.
    Pass,
    /// A case broke it: why, and the minimal failing trace.
    Fail {
        /// What went wrong.
        reason: String,
        /// The minimal operation sequence, one step per line.
        trace: String,
    },
    /// The engine cannot take part: it lacks capabilities the suite needs.
    #[non_exhaustive]
    Unsupported {
        /// Why, with the engine's own reasons where it gave them.
        reason: String,
        /// The capabilities it lacks.
        missing: Vec<Capability>,
        /// Whether the engine said why it lacks every one of them (a cell that
        /// is unsupported for no stated reason is unexpected in a run).
        explained: bool,
    },
    /// The engine did too little of the work the suite requires for a verdict
    /// (never a pass): what it did, against what was needed.
    Inconclusive {
        /// Why.
        reason: String,
    },
}

impl Verdict {
    /// `Unsupported` for an engine that lacks `missing`, with its reasons.
    pub fn unsupported<E: Engine>(engine: &E, missing: Vec<Capability>) -> Verdict {
        let reasons: Vec<String> = missing
            .iter()
            .map(|cap| match engine.unsupported_reason(*cap) {
                Some(why) => format!("{cap} ({why})"),
                None => cap.to_string(),
            })
            .collect();
        Verdict::Unsupported {
            reason: format!("the engine has no {}", reasons.join(", ")),
            explained: missing
                .iter()
                .all(|cap| engine.unsupported_reason(*cap).is_some()),
            missing,
        }
    }
}

impl std::fmt::Display for Verdict {
    /// `pass`, `FAIL: reason` with the minimal trace, `unsupported: reason`, or
    /// `inconclusive: reason`.
    ///
    /// ```
    /// let v = slowfs_conformance::Verdict::Inconclusive { reason: "3 of 32 rounds".into() };
    /// assert_eq!(v.to_string(), "inconclusive: 3 of 32 rounds");
    /// ```
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Pass => write!(f, "pass"),
            Verdict::Fail { reason, trace } if trace.is_empty() => write!(f, "FAIL: {reason}"),
            Verdict::Fail { reason, trace } => {
                write!(f, "FAIL: {reason}\nminimal trace:\n{trace}")
            }
            Verdict::Unsupported { reason, .. } => write!(f, "unsupported: {reason}"),
            Verdict::Inconclusive { reason } => write!(f, "inconclusive: {reason}"),
        }
    }
}

/// A suite run's result with its measurements.
#[non_exhaustive]
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outcome {
    /// The finding.
    pub verdict: Verdict,
    /// Cases run (a failing one included, its shrinking not).
    pub cases: u32,
    /// Runs of the property spent shrinking a failing case to its minimal trace.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shrink_steps: u32,
    /// Wall time.
    pub seconds: f64,
    /// loop-lag: worst heartbeat lateness.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_lag_ms: Option<f64>,
    /// The work the engine did, where a suite requires some (loop-lag).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub work: Option<String>,
    /// loop-lag: 99th percentile lateness.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_lag_ms: Option<f64>,
}

impl Outcome {
    /// Whether the suite passed.
    pub fn passed(&self) -> bool {
        self.verdict == Verdict::Pass
    }

    /// A one-paragraph explanation.
    pub fn detail(&self) -> String {
        match &self.verdict {
            Verdict::Pass => match &self.work {
                Some(work) => format!("{} cases passed; {work}", self.cases),
                None => format!("{} cases passed", self.cases),
            },
            Verdict::Fail { reason, trace } if self.shrink_steps > 0 => format!(
                "{reason}\nminimal trace (case {} failed; {} shrink steps):\n{trace}",
                self.cases, self.shrink_steps
            ),
            Verdict::Fail { reason, trace } => format!("{reason}\nminimal trace:\n{trace}"),
            Verdict::Unsupported { reason, .. } | Verdict::Inconclusive { reason } => {
                reason.clone()
            }
        }
    }
}

/// Runs one suite against an engine. The suites build their own runtimes, so when
/// called from inside one (`#[tokio::test]`) the suite runs on a thread of its own
/// and this call blocks that runtime thread until it is done.
pub fn run_suite<E: Engine>(suite: Suite, engine: Arc<E>, config: &SuiteConfig) -> Outcome {
    if tokio::runtime::Handle::try_current().is_ok() {
        return std::thread::scope(|scope| {
            scope
                .spawn(|| run_suite_here(suite, engine, config))
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        });
    }
    run_suite_here(suite, engine, config)
}

fn run_suite_here<E: Engine>(suite: Suite, engine: Arc<E>, config: &SuiteConfig) -> Outcome {
    let start = Instant::now();
    let missing: Vec<Capability> = [Capability::Open, Capability::Close]
        .iter()
        .chain(suite.requires())
        .copied()
        .filter(|cap| !engine.supports(*cap))
        .collect();
    if !missing.is_empty() {
        return outcome(Verdict::unsupported(&*engine, missing), 0);
    }
    if let Err(failed) = suites::verify_io(&*engine, suite, config) {
        return outcome(failed, 1);
    }
    let mut outcome = match suite {
        Suite::Positioned => suites::positioned::run(engine, config),
        Suite::ShortIo => suites::short_io::run(engine, config),
        Suite::Cancel => suites::cancel::run(engine, config),
        Suite::Errors => suites::errors::run(engine, config),
        Suite::Durability => suites::durability::run(engine, config),
        Suite::AtomicReplace => suites::atomic_replace::run(engine, config),
        Suite::LoopLag => suites::loop_lag::run(engine, config),
    };
    outcome.seconds = start.elapsed().as_secs_f64();
    outcome
}

/// A multi-thread runtime for the suites that do not measure the loop itself.
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("building a tokio runtime")
}

/// The outcome of a cell that could not run to a verdict (its process
/// crashed, it could not start): a failure saying why.
pub fn crashed_outcome(reason: String) -> Outcome {
    outcome(
        Verdict::Fail {
            reason,
            trace: String::new(),
        },
        0,
    )
}

/// For serde: a zero count is left out.
pub(crate) fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// An outcome with no measurements yet.
pub(crate) fn outcome(verdict: Verdict, cases: u32) -> Outcome {
    Outcome {
        verdict,
        cases,
        shrink_steps: 0,
        seconds: 0.0,
        max_lag_ms: None,
        p99_lag_ms: None,
        work: None,
    }
}

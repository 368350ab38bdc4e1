//! One module per suite.

pub mod atomic_replace;
pub mod cancel;
pub mod durability;
pub mod errors;
pub mod loop_lag;
pub mod positioned;
pub mod short_io;

use harness::mount::SlowMount;

use crate::{outcome, Outcome, SuiteConfig, Verdict};

/// Mounts slowfs with the run's seed, the suite's rules and the run's profile.
pub(crate) fn mount(config: &SuiteConfig, rules: &[&str]) -> Result<SlowMount, Outcome> {
    let mut spec = fault_inject::FaultSpec {
        seed: Some(config.seed),
        ..Default::default()
    };
    let fail = |e: String| {
        outcome(
            Verdict::Fail {
                reason: format!("cannot mount slowfs: {e}"),
                trace: String::new(),
            },
            0,
        )
    };
    if let Some(profile) = &config.profile {
        spec.add_profile(profile).map_err(|e| fail(e.to_string()))?;
    }
    for rule in rules {
        spec.add_rule("suite", rule)
            .map_err(|e| fail(e.to_string()))?;
    }
    SlowMount::start(spec).map_err(|e| fail(e.to_string()))
}

/// Mounts a recording slowfs (for the suites that ask the durability model).
pub(crate) fn recording_mount(config: &SuiteConfig) -> Result<SlowMount, Outcome> {
    SlowMount::recording(config.seed).map_err(|e| {
        outcome(
            Verdict::Fail {
                reason: format!("cannot mount slowfs: {e}"),
                trace: String::new(),
            },
            0,
        )
    })
}

/// `Err(message)` unless `condition`.
pub(crate) fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), String> {
    if condition {
        Ok(())
    } else {
        Err(message())
    }
}

/// `Err(unsupported)` when the engine lacks an operation the suite needs.
pub(crate) fn require<E: harness::Engine>(engine: &E, ops: &[&str]) -> Result<(), Outcome> {
    let missing: Vec<&str> = ops
        .iter()
        .copied()
        .filter(|op| !engine.supports(op))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(outcome(
            Verdict::Unsupported {
                reason: format!("the engine has no {}", missing.join(", ")),
            },
            0,
        ))
    }
}

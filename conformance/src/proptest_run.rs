//! Running a property with proptest: seeded, shrinking, failures as readable traces.

use std::fmt::Debug;

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

use crate::{outcome, Outcome, Verdict};

/// The step a failure names (`step 3: ...` or `step 3 op: ...`), counted from 0.
fn failing_step(reason: &str) -> Option<usize> {
    let digits: String = reason
        .strip_prefix("step ")?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Checks `property` on `cases` inputs drawn from `strategy` with `seed`. A failure
/// shrinks to a minimal input, rendered by `trace`.
pub(crate) fn check<S, F, T>(seed: u64, cases: u32, strategy: S, trace: T, property: F) -> Outcome
where
    S: Strategy,
    S::Value: Debug,
    F: Fn(&S::Value) -> Result<(), String>,
    T: Fn(&S::Value) -> String,
{
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 64,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(
        config,
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    // Runs up to and including the first failure are cases; after it, shrinking.
    let cases = std::cell::Cell::new(0u32);
    let shrink_steps = std::cell::Cell::new(0u32);
    let failed = std::cell::Cell::new(false);
    let result = runner.run(&strategy, |input| {
        if failed.get() {
            shrink_steps.set(shrink_steps.get() + 1);
        } else {
            cases.set(cases.get() + 1);
        }
        let result = property(&input);
        failed.set(failed.get() || result.is_err());
        result.map_err(TestCaseError::fail)
    });
    let outcome = |verdict| Outcome {
        shrink_steps: shrink_steps.get(),
        ..outcome(verdict, cases.get())
    };
    match result {
        Ok(()) => outcome(Verdict::Pass),
        Err(TestError::Fail(reason, minimal)) => {
            let reason = reason.to_string();
            let mut rendered = trace(&minimal);
            // The trace ends at the step that failed: later steps never ran.
            if let Some(step) = failing_step(&reason) {
                rendered = rendered
                    .lines()
                    .take(step + 1)
                    .collect::<Vec<_>>()
                    .join("\n");
            }
            outcome(Verdict::Fail {
                reason,
                trace: rendered,
            })
        }
        Err(TestError::Abort(reason)) => outcome(Verdict::Fail {
            reason: format!("aborted: {reason}"),
            trace: String::new(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_failing_step_is_read_from_the_reason() {
        assert_eq!(failing_step("step 0 h1.write_all_at(20000): EIO"), Some(0));
        assert_eq!(failing_step("step 12: write_at: EIO"), Some(12));
        assert_eq!(failing_step("heartbeat late"), None);
    }

    #[test]
    fn a_minimal_trace_ends_at_the_failing_step() {
        let outcome = check(
            1,
            8,
            proptest::collection::vec(0u8..4, 5..10),
            |steps| {
                steps
                    .iter()
                    .map(|s| format!("  op {s}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            },
            |steps| match steps.iter().position(|&s| s == 3) {
                Some(i) => Err(format!("step {i}: op 3 fails")),
                None => Ok(()),
            },
        );
        assert!(outcome.cases <= 8, "cases: {}", outcome.cases);
        assert!(outcome.shrink_steps > 0, "the failing case was shrunk");
        let Verdict::Fail { trace, .. } = outcome.verdict else {
            panic!("some case has a 3");
        };
        assert!(trace.lines().last().unwrap().ends_with("op 3"), "{trace}");
    }
}

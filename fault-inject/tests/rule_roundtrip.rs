//! Property: every rule prints as a string that parses back to the same rule.

use std::time::Duration;

mod common;

use proptest::prelude::*;
use slowfs_faults::{parse_rule, Action, DelayDist, Op, OpSet, PathGlob, Rule, Spike, Trigger};

fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        (0u64..10_000).prop_map(Duration::from_millis),
        (0u64..10_000_000).prop_map(Duration::from_nanos),
    ]
}

fn dist() -> impl Strategy<Value = DelayDist> {
    prop_oneof![
        duration().prop_map(DelayDist::Fixed),
        (duration(), duration()).prop_map(|(a, b)| DelayDist::Uniform(a.min(b), a.max(b))),
        (duration(), duration()).prop_map(|(mean, sd)| DelayDist::Normal { mean, sd }),
        (1u64..1_000_000, 0.0f64..3.0).prop_map(|(us, sigma)| DelayDist::LogNormal {
            median: Duration::from_micros(us),
            sigma
        }),
    ]
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        (dist(), prop::option::of((0.0f64..=1.0, duration()))).prop_map(|(dist, spike)| {
            Action::Delay {
                dist,
                spike: spike.map(|(p, extra)| Spike { p, extra }),
            }
        }),
        prop::sample::select(vec![libc::EIO, libc::ENOSPC, libc::EINTR, libc::EDQUOT])
            .prop_map(Action::Error),
        (0u64..100_000, 0u64..100_000).prop_map(|(a, b)| Action::Short {
            min: a.min(b),
            max: a.max(b)
        }),
        (1u64..1 << 40, prop::option::of(0u64..1 << 30))
            .prop_map(|(rate, burst)| Action::Throttle { rate, burst }),
        (1u64..100_000, prop::option::of(1u64..1000))
            .prop_map(|(rate, burst)| Action::Iops { rate, burst }),
        prop::option::of(duration()).prop_map(|timeout| Action::Hang { timeout }),
        Just(Action::Crash),
    ]
}

fn rule() -> impl Strategy<Value = Rule> {
    let ops = prop::collection::vec(prop::sample::select(Op::ALL.to_vec()), 1..5)
        .prop_map(OpSet::from_ops);
    let path = prop::option::of(prop::sample::select(vec![
        "**/*.tmp", "logs/**", "a/b", "*.db",
    ]));
    let when = (
        prop::option::of(0.0f64..=1.0),
        prop::option::of(0u64..1000),
        prop::option::of(1u64..1000),
        prop::option::of(0u64..1 << 40),
    )
        .prop_map(|(p, after, every, after_bytes)| Trigger {
            p,
            after,
            every,
            after_bytes,
        });
    (ops, path, action(), when).prop_map(|(ops, path, action, when)| Rule {
        ops,
        path: path.map(|p| PathGlob::new(p).unwrap()),
        action,
        when,
    })
}

proptest! {
    #![proptest_config(common::seeded(256))]
    #[test]
    fn display_then_parse_is_identity(rule in rule()) {
        let text = rule.to_string();
        let parsed = parse_rule(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(parsed, rule, "text: {}", text);
    }

    #[test]
    fn arbitrary_input_never_panics(text in "\\PC{0,60}") {
        let _ = parse_rule(&text);
    }
}

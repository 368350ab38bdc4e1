//! Pure fault-injection logic for slowfs: no FUSE, no I/O.
//!
//! A [`Rule`] says which requests it matches (operations and a path glob), what it
//! does to them (delay, error, short transfer, throttle, hang, crash) and when it
//! fires (probability, after N, every N, past a byte quota). Rules come from built-in
//! [profiles](PROFILES), TOML files and rule strings, all merged into one
//! [`FaultSpec`]. A [`FaultPlan`] holds the live rules, each with its own RNG
//! derived from one run seed, and answers, per request, with a [`Decision`].
//!
//! ```
//! use slowfs_faults::{FaultPlan, Op, parse_rule};
//! use std::time::Duration;
//!
//! let plan = FaultPlan::new(42, [
//!     parse_rule("fsync delay=250ms").unwrap(),
//!     parse_rule("write path=**/*.tmp error=ENOSPC").unwrap(),
//! ]);
//! assert_eq!(plan.decide(Op::Fsync, "db/wal", 0).delay, Duration::from_millis(250));
//! assert_eq!(plan.decide(Op::Write, "out/x.tmp", 4096).error, Some(libc::ENOSPC));
//! assert!(plan.decide(Op::Write, "out/x.json", 4096).is_clean());
//! ```
//!
//! A TOML config holds an optional `seed`, an optional base `profile`, rule strings
//! in `rules = [...]` and/or `[[rule]]` tables whose keys are the rule-string keys:
//!
//! ```toml
//! seed = 7
//! profile = "slow-fsync"
//! rules = ["read,write delay=5ms..20ms"]
//!
//! [[rule]]
//! ops = ["write"]
//! path = "**/*.tmp"
//! error = "ENOSPC"
//! p = 0.1
//! ```
#![deny(missing_docs)]

mod config;
pub mod crash;
mod delay;
pub mod durability;
mod errno;
mod op;
mod parse;
mod plan;
mod profile;
mod rule;
mod rule_index;
pub mod shard;
mod throttle;
pub mod trace;
mod units;

pub use config::{ConfigError, FaultSpec};
pub use delay::{DelayDist, Spike};
pub use errno::{errno_from_name, errno_name, known_errno_names};
pub use op::{Op, OpSet};
pub use parse::{parse_rule, ErrorKind, RuleError};
pub use plan::{Decision, Effects, FaultPlan, FsyncFailure, Hang, RuleReport};
pub use profile::{profile, Profile, PROFILES};
pub use rule::{Action, Corruption, PathGlob, Rule, Trigger};
pub use throttle::TokenBucket;
pub use units::{parse_duration, parse_rate, parse_size, DisplayDuration, DisplaySize};

//! Fault traces: every fault that fired, keyed by what it fired on — the
//! operation, the path, and the request's occurrence number among that
//! operation's requests on that path — so that a run can be replayed even
//! when the program's threads issue their requests in another order.
//!
//! A seed reproduces a run only if requests reach the rules in the same order
//! (each rule draws from one RNG); two threads writing two files interleave
//! differently every run. A trace does not depend on that order: replaying it
//! fires the 7th write to `/a` exactly as recorded, whenever it comes.
//!
//! The file is JSON lines, one fault each, written as it fires (a killed run
//! leaves what fired so far):
//!
//! ```text
//! {"op":"write","path":"/a","occurrence":7,"decision":{"delay":{"secs":0,"nanos":0},"error":5,...}}
//! ```
//!
//! Replaying fires exactly the recorded faults and nothing else: the rules of
//! the replaying run are not drawn from.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::op::Op;
use crate::plan::Decision;

/// One fault that fired, as a trace line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TracedFault {
    /// The operation's rule-string name (`write`, `fsync`, ...).
    pub op: String,
    /// The mount-relative path.
    pub path: String,
    /// Which of `op`'s requests on `path` it was, from 1.
    pub occurrence: u64,
    /// What the rules decided.
    pub decision: Decision,
}

/// Recording or replaying, with the per-path occurrence counters.
#[derive(Debug)]
pub struct FaultTrace {
    counts: Mutex<HashMap<(Op, String), u64>>,
    mode: Mode,
}

#[derive(Debug)]
enum Mode {
    Record(Mutex<BufWriter<File>>),
    Replay(HashMap<(Op, String, u64), Decision>),
}

impl FaultTrace {
    /// Records into a new file at `path` (an existing one is replaced).
    pub fn record(path: &Path) -> io::Result<FaultTrace> {
        let file = File::create(path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot write the fault trace {}: {e}", path.display()),
            )
        })?;
        Ok(FaultTrace {
            counts: Mutex::default(),
            mode: Mode::Record(Mutex::new(BufWriter::new(file))),
        })
    }

    /// Replays the trace at `path`; refuses a file that is not one, naming
    /// the line.
    pub fn replay(path: &Path) -> io::Result<FaultTrace> {
        let file = File::open(path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot read the fault trace {}: {e}", path.display()),
            )
        })?;
        let mut faults = HashMap::new();
        for (n, line) in io::BufReader::new(file).lines().enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            let bad = |why: String| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{} line {}: {why} (expected a line written by --record-faults)",
                        path.display(),
                        n + 1
                    ),
                )
            };
            let fault: TracedFault = serde_json::from_str(&line).map_err(|e| bad(e.to_string()))?;
            let op = Op::from_name(&fault.op)
                .ok_or_else(|| bad(format!("unknown operation '{}'", fault.op)))?;
            faults.insert((op, fault.path, fault.occurrence), fault.decision);
        }
        Ok(FaultTrace {
            counts: Mutex::default(),
            mode: Mode::Replay(faults),
        })
    }

    /// Faults a replaying trace holds (0 when recording).
    pub fn len(&self) -> usize {
        match &self.mode {
            Mode::Replay(faults) => faults.len(),
            Mode::Record(_) => 0,
        }
    }

    /// Whether a replaying trace holds no fault.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether this trace replays (else it records).
    pub fn replaying(&self) -> bool {
        matches!(self.mode, Mode::Replay(_))
    }

    /// Whether a replaying trace holds a fault of `op`: the mount must then
    /// name that operation's paths as a rule for it would make it.
    pub(crate) fn replays_op(&self, op: Op) -> bool {
        match &self.mode {
            Mode::Replay(faults) => faults.keys().any(|(o, _, _)| *o == op),
            Mode::Record(_) => false,
        }
    }

    /// Whether a replaying trace holds a read or write fault on `path`: its
    /// data must then reach the daemon, as a data rule's would have.
    pub(crate) fn replays_data_path(&self, path: &str) -> bool {
        match &self.mode {
            Mode::Replay(faults) => faults
                .keys()
                .any(|(o, p, _)| matches!(o, Op::Read | Op::Write) && p == path),
            Mode::Record(_) => false,
        }
    }

    /// Counts one request of `op` on `path`; its occurrence number, from 1.
    pub(crate) fn count(&self, op: Op, path: &str) -> u64 {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let count = counts.entry((op, path.to_string())).or_default();
        *count += 1;
        *count
    }

    /// The recorded decision for this request, when replaying one.
    pub(crate) fn replayed(&self, op: Op, path: &str, occurrence: u64) -> Option<Decision> {
        match &self.mode {
            Mode::Replay(faults) => faults.get(&(op, path.to_string(), occurrence)).cloned(),
            Mode::Record(_) => None,
        }
    }

    /// Writes one fault that fired (and flushes it: a killed run keeps it).
    pub(crate) fn write(&self, op: Op, path: &str, occurrence: u64, decision: &Decision) {
        let Mode::Record(out) = &self.mode else {
            return;
        };
        let fault = TracedFault {
            op: op.name().to_string(),
            path: path.to_string(),
            occurrence,
            decision: decision.clone(),
        };
        let line = serde_json::to_string(&fault).expect("a fault serializes");
        let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
        // A full disk must not fail the request: the trace then says less.
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_rule, FaultPlan};

    /// Two "threads" (paths) interleaved two ways: the seed alone gives the
    /// faults to different requests; the trace gives them to the same ones.
    #[test]
    fn replay_fires_by_path_and_occurrence_whatever_the_order() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("faults.jsonl");
        let rule = || parse_rule("write error=EIO p=0.3").unwrap();
        let failing = |plan: &FaultPlan, order: &[&str]| {
            let mut seen = HashMap::<&str, u64>::new();
            let mut failed = Vec::new();
            for path in order {
                let n = seen.entry(path).or_default();
                *n += 1;
                if plan.decide(Op::Write, path, 4096).error.is_some() {
                    failed.push((path.to_string(), *n));
                }
            }
            failed.sort();
            failed
        };
        let ab: Vec<&str> = (0..40).map(|i| ["/a", "/b"][i % 2]).collect();
        let aabb: Vec<&str> = (0..40).map(|i| ["/a", "/b"][i / 20]).collect();
        let recording = FaultPlan::new(9, [rule()]).with_trace(FaultTrace::record(&trace).unwrap());
        let recorded = failing(&recording, &ab);
        drop(recording);
        assert!(!recorded.is_empty());
        let seed_alone = failing(&FaultPlan::new(9, [rule()]), &aabb);
        assert_ne!(seed_alone, recorded, "the seed depends on the order");
        let replaying = FaultPlan::new(9, [rule()]).with_trace(FaultTrace::replay(&trace).unwrap());
        assert_eq!(failing(&replaying, &aabb), recorded);
    }

    /// A replayed short count never asks for more than the request moves
    /// (a daemon would read or write past its buffer).
    #[test]
    fn a_replayed_short_count_fits_the_request() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("faults.jsonl");
        let recording = FaultPlan::new(3, [parse_rule("write short=1000..4000").unwrap()])
            .with_trace(FaultTrace::record(&trace).unwrap());
        let recorded = recording.decide(Op::Write, "/a", 4096).effects.short_to;
        assert!(recorded.is_some_and(|s| s > 100), "{recorded:?}");
        drop(recording);
        let replaying = FaultPlan::new(3, []).with_trace(FaultTrace::replay(&trace).unwrap());
        let smaller = replaying.decide(Op::Write, "/a", 100).effects.short_to;
        assert_eq!(smaller, Some(100));
    }

    #[test]
    fn a_bad_trace_names_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let trace = dir.path().join("faults.jsonl");
        std::fs::write(&trace, "\n{\"op\":\"scribble\",\"path\":\"/a\",\"occurrence\":1,\"decision\":{\"delay\":{\"secs\":0,\"nanos\":0},\"hang\":null,\"error\":5,\"crash\":false,\"effects\":{\"short_to\":null,\"fsync_fail\":null,\"corrupt\":null,\"stale\":false,\"lose\":false},\"fired\":[1]}}\n").unwrap();
        let e = FaultTrace::replay(&trace).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("scribble"), "{e}");
        std::fs::write(&trace, "not json\n").unwrap();
        let e = FaultTrace::replay(&trace).unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("--record-faults"), "{e}");
    }
}

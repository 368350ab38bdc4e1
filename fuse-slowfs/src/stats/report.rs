//! The stats of a mount as `slowfs ctl stats` prints them: the report's
//! shape (also its JSON), its table, and the words and units it uses.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::FaultKind;

/// Stats as `slowfs ctl stats --json` prints them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StatsReport {
    /// Seconds since the mount started.
    pub uptime_s: f64,
    /// One row per operation seen.
    pub ops: Vec<OpReport>,
    /// One row per rule in force.
    pub rules: Vec<RuleStats>,
    /// Requests parked right now (delayed, hung, or an NFS lock wait).
    #[serde(default)]
    pub parked: u64,
    /// Of those, requests held by a `hang` rule.
    #[serde(default)]
    pub hung: u64,
    /// Requests whose handler panicked (each answered EIO; the mount served on).
    /// Nonzero is a slowfs bug.
    #[serde(default)]
    pub panics: u64,
    /// Under `--cache nfs`: write(2)s the client gathered into the `write`
    /// requests (WRITE RPCs) above, and their bytes.
    #[serde(default)]
    pub gathered_writes: u64,
    /// See `gathered_writes`.
    #[serde(default)]
    pub gathered_bytes: u64,
}

/// Counters of one operation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OpReport {
    /// Operation name.
    pub op: String,
    /// Requests finished.
    pub count: u64,
    /// Time spent in them, arrival to reply, summed over the requests, in
    /// microseconds. A gathered WRITE that a flush, fsync or getattr sent
    /// first (`--cache nfs`) counts under `write`, not in the request that
    /// carried it. Requests of several callers at once each count, so the
    /// operations' shares can add up to more than the wall time.
    #[serde(default)]
    pub time_us: u64,
    /// `time_us` as a share of the wall time (the mount's uptime): 0.34 is 34%.
    #[serde(default)]
    pub wall_share: f64,
    /// Requests the backing filesystem itself failed: ENOENT of a lookup for a
    /// name that is not there, ENOTSUP/ENODATA of an xattr, ... Not faults:
    /// those are in `injected`.
    #[serde(default, alias = "errors")]
    pub fs_errors: u64,
    /// Requests at least one rule fired on.
    pub faulted: u64,
    /// Requests each kind of fault was injected into (a request can have several).
    #[serde(default)]
    pub injected: InjectedCounts,
    /// Held (delayed or hung) requests whose caller was interrupted: answered
    /// EINTR, neither the backing filesystem's error nor an injected one.
    #[serde(default)]
    pub interrupted: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Median latency, arrival to reply, in microseconds.
    pub p50_us: u64,
    /// 99th percentile latency in microseconds.
    pub p99_us: u64,
    /// Largest latency in microseconds.
    pub max_us: u64,
    /// Latency histogram: requests per power-of-two bucket, empty buckets left
    /// out (for plots: `ctl stats --json | jq '.ops[].histogram'`).
    #[serde(default)]
    pub histogram: Vec<LatencyBucket>,
}

/// Requests of one operation each kind of fault was injected into.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct InjectedCounts {
    /// Held before running: `delay`, `throttle`, `iops`.
    pub delayed: u64,
    /// Held by `hang`.
    pub hung: u64,
    /// Answered an injected errno (`error=`, a failed fsync, a soft timeout).
    pub failed: u64,
    /// Moved fewer bytes than asked (`short=`).
    pub shortened: u64,
    /// Acknowledged and not applied (`lose`).
    pub lost: u64,
    /// Read damaged data (`corrupt=`).
    pub corrupted: u64,
    /// Read the durable content (`stale`).
    pub stale: u64,
    /// Power loss (`crash`).
    pub crashed: u64,
}

impl InjectedCounts {
    /// Each kind with its count, in [`FaultKind::ALL`]'s order.
    pub fn by_kind(&self) -> [(FaultKind, u64); 8] {
        FaultKind::ALL.map(|kind| {
            let n = match kind {
                FaultKind::Delayed => self.delayed,
                FaultKind::Hung => self.hung,
                FaultKind::Failed => self.failed,
                FaultKind::Shortened => self.shortened,
                FaultKind::Lost => self.lost,
                FaultKind::Corrupted => self.corrupted,
                FaultKind::Stale => self.stale,
                FaultKind::Crashed => self.crashed,
            };
            (kind, n)
        })
    }

    /// `812 delayed, 3 failed`, or `-` for none.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .by_kind()
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(kind, n)| format!("{n} {}", kind.name()))
            .collect();
        if parts.is_empty() {
            "-".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// One bucket of a latency histogram.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct LatencyBucket {
    /// The bucket holds latencies from half of this up to (not including) this,
    /// in microseconds: a power of two.
    pub below_us: u64,
    /// Requests whose latency fell in it.
    pub count: u64,
}

/// Counters of one rule.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RuleStats {
    /// Rule id.
    pub id: u64,
    /// The rule string.
    pub rule: String,
    /// Requests it matched.
    pub matched: u64,
    /// Requests it fired on.
    pub fired: u64,
    /// Time of the requests it fired on, arrival to reply, summed, in
    /// microseconds (a request several rules fired on counts for each).
    #[serde(default)]
    pub time_us: u64,
    /// `time_us` as a share of the wall time (the mount's uptime).
    #[serde(default)]
    pub wall_share: f64,
}

impl StatsReport {
    /// Requests of one operation finished so far.
    pub fn count(&self, op: &str) -> u64 {
        self.ops.iter().find(|r| r.op == op).map_or(0, |r| r.count)
    }

    /// The operation that took the most time, if any took some.
    pub fn most_time(&self) -> Option<&OpReport> {
        self.ops
            .iter()
            .filter(|r| r.time_us > 0)
            .max_by_key(|r| r.time_us)
    }

    /// Where the time went, in one line: `most time: close-time flushes
    /// (flush), 34% of the wall time`.
    pub fn most_time_line(&self) -> Option<String> {
        let top = self.most_time()?;
        Some(format!(
            "most time: {} ({}), {} of the wall time",
            describe_op(&top.op),
            top.op,
            percent(top.wall_share)
        ))
    }

    /// A table for people: the operations that took the most time first.
    pub fn render(&self) -> String {
        let mut out = format!("slowfs stats after {:.1}s\n", self.uptime_s);
        let _ = writeln!(
            out,
            "{:<16} {:>9} {:>9} {:>6} {:>10} {:>10} {:>10} {:>12} {:>10}  injected faults",
            "op", "count", "time", "%wall", "p50", "p99", "max", "bytes", "fs-errors",
        );
        let mut rows: Vec<&OpReport> = self.ops.iter().collect();
        rows.sort_by_key(|r| std::cmp::Reverse(r.time_us));
        for r in rows {
            let mut injected = r.injected.describe();
            if r.interrupted > 0 {
                injected.push_str(&format!(" ({} interrupted)", r.interrupted));
            }
            let _ = writeln!(
                out,
                "{:<16} {:>9} {:>9} {:>6} {:>10} {:>10} {:>10} {:>12} {:>10}  {}",
                r.op,
                r.count,
                seconds(r.time_us),
                percent(r.wall_share),
                micros(r.p50_us),
                micros(r.p99_us),
                micros(r.max_us),
                r.bytes,
                r.fs_errors,
                injected
            );
        }
        if self.ops.is_empty() {
            out.push_str("(no requests yet)\n");
        }
        let shares: f64 = self.ops.iter().map(|r| r.wall_share).sum();
        if shares > 1.0 {
            let _ = writeln!(
                out,
                "(time is summed over requests: callers working at once each count, so the shares add up to {})",
                percent(shares)
            );
        }
        if self.gathered_writes > 0 {
            let _ = writeln!(
                out,
                "write(2)s gathered by the NFS client into the writes above: {} ({} bytes)",
                self.gathered_writes, self.gathered_bytes
            );
        }
        if self.parked > 0 {
            let _ = writeln!(out, "parked now: {} ({} hung)", self.parked, self.hung);
        }
        if self.panics > 0 {
            let _ = writeln!(
                out,
                "{} request(s) panicked and were answered EIO (a slowfs bug: see the daemon's log)",
                self.panics
            );
        }
        for r in &self.rules {
            let _ = writeln!(
                out,
                "rule #{} fired {}/{} matched, {} ({} of wall) in the requests it fired on: {}",
                r.id,
                r.fired,
                r.matched,
                seconds(r.time_us),
                percent(r.wall_share),
                r.rule
            );
        }
        if let Some(line) = self.most_time_line() {
            let _ = writeln!(out, "{line}");
        }
        out
    }
}

/// What an operation's requests are, for the one-line answer.
pub fn describe_op(op: &str) -> &'static str {
    match op {
        "flush" => "close-time flushes",
        "fsync" => "fsyncs",
        "fdatasync" => "fdatasyncs",
        "fsyncdir" => "directory fsyncs",
        "lookup" => "name lookups",
        "getattr" => "attribute reads (stat)",
        "setattr" => "attribute changes (chmod, truncate, utimes)",
        "open" => "opens",
        "create" => "file creations",
        "read" => "reads",
        "write" => "writes",
        "release" => "last closes (release)",
        "mkdir" => "directory creations",
        "mknod" => "node creations",
        "rmdir" => "directory removals",
        "unlink" => "unlinks",
        "rename" => "renames",
        "link" => "hard links",
        "symlink" => "symlink creations",
        "readlink" => "symlink reads",
        "opendir" => "directory opens",
        "readdir" => "directory listings",
        "releasedir" => "directory closes",
        "statfs" => "statfs calls",
        "access" => "access checks",
        "fallocate" => "fallocates",
        "lseek" => "lseeks (SEEK_DATA/SEEK_HOLE)",
        "copy_file_range" => "copy_file_ranges",
        "xattr" => "extended attribute calls",
        "lock" => "file locks",
        _ => "requests",
    }
}

/// A share for people: `34%`, `0.4%`.
pub fn percent(share: f64) -> String {
    let pct = share * 100.0;
    if pct >= 10.0 || pct == 0.0 {
        format!("{pct:.0}%")
    } else {
        format!("{pct:.1}%")
    }
}

/// A total time in microseconds for people: `850us`, `12.5ms`, `3.41s`.
pub fn seconds(us: u64) -> String {
    if us >= 1_000_000 {
        format!("{:.2}s", us as f64 / 1e6)
    } else {
        micros(us)
    }
}

/// A latency in microseconds for people: `850us`, `12.5ms`.
pub fn micros(us: u64) -> String {
    if us >= 10_000 {
        format!("{:.1}ms", us as f64 / 1000.0)
    } else {
        format!("{us}us")
    }
}

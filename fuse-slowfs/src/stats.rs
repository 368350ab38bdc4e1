//! Per-operation counters and latency histograms.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use slowfs_faults::{Op, RuleReport};

#[derive(Debug)]
struct OpStats {
    count: AtomicU64,
    errors: AtomicU64,
    faulted: AtomicU64,
    bytes: AtomicU64,
    latency_us: Mutex<Histogram<u64>>,
}

impl Default for OpStats {
    fn default() -> Self {
        OpStats {
            count: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            faulted: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            latency_us: Mutex::new(
                Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds"),
            ),
        }
    }
}

/// What one request came to, for the stats.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestOutcome {
    /// Bytes it moved.
    pub bytes: u64,
    /// Whether it failed.
    pub failed: bool,
}

/// Counters for every operation since the mount started.
#[derive(Debug)]
pub struct Stats {
    started: Instant,
    ops: Vec<OpStats>,
    watch: CallerWatch,
    /// write(2)s gathered by the NFS client model (`--cache nfs`), and bytes.
    gathered: (AtomicU64, AtomicU64),
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            started: Instant::now(),
            ops: Op::ALL.iter().map(|_| OpStats::default()).collect(),
            watch: CallerWatch::default(),
            gathered: Default::default(),
        }
    }
}

/// One request a watched thread waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waited {
    /// The operation.
    pub op: Op,
    /// From its arrival to its reply: how long the caller's syscall was held.
    pub latency: Duration,
    /// Whether a rule fired on it (a delay, a hang, ...).
    pub faulted: bool,
    /// Whether the thread itself was blocked waiting for the answer (seen from
    /// its `/proc/TID/wchan` as the answer went out). A request submitted
    /// asynchronously (Linux AIO or io_uring on a direct-I/O file) carries the
    /// submitting thread's id, but that thread went on with its work.
    pub blocked: bool,
}

/// Whether thread `tid` is asleep in FUSE, waiting for a request's answer.
fn waiting_in_fuse(tid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{tid}/wchan"))
        .is_ok_and(|wchan| wchan.contains("request_wait_answer") || wchan.starts_with("fuse"))
}

/// The requests of a few chosen threads, each with how long it waited: how a
/// test tells that one particular thread (an event loop) waited for storage,
/// exactly, instead of inferring it from timing. Costs nothing unwatched.
#[derive(Debug, Default)]
struct CallerWatch {
    any: std::sync::atomic::AtomicBool,
    waits: Mutex<std::collections::HashMap<u32, Vec<Waited>>>,
}

/// The most requests kept per watched thread.
const WATCH_LIMIT: usize = 100_000;

impl Stats {
    /// Starts keeping the requests of thread `tid` (FUSE's caller id).
    pub fn watch(&self, tid: u32) {
        let mut waits = self.watch.waits.lock().unwrap();
        waits.entry(tid).or_default();
        self.watch.any.store(true, Ordering::SeqCst);
    }

    /// The requests thread `tid` waited for since [`Stats::watch`] (at most
    /// 100,000, the first ones), and stops watching it.
    pub fn unwatch(&self, tid: u32) -> Vec<Waited> {
        let mut waits = self.watch.waits.lock().unwrap();
        let kept = waits.remove(&tid).unwrap_or_default();
        self.watch.any.store(!waits.is_empty(), Ordering::SeqCst);
        kept
    }

    /// Records one finished request of thread `caller`, before its answer goes
    /// out (so that a caller blocked on it is still blocked).
    pub fn record_caller(&self, caller: u32, op: Op, latency: Duration, faulted: bool) {
        if !self.watch.any.load(Ordering::Relaxed) {
            return;
        }
        if !self.watch.waits.lock().unwrap().contains_key(&caller) {
            return;
        }
        // Read outside the lock: /proc is slow next to a request.
        let blocked = waiting_in_fuse(caller);
        if let Some(waits) = self.watch.waits.lock().unwrap().get_mut(&caller) {
            if waits.len() < WATCH_LIMIT {
                waits.push(Waited {
                    op,
                    latency,
                    faulted,
                    blocked,
                });
            }
        }
    }

    /// Records one write(2) of `bytes` gathered into a later WRITE (the
    /// request reached the daemon, but is no RPC: see `fs::write_behind`).
    pub fn gathered(&self, bytes: u64) {
        self.gathered.0.fetch_add(1, Ordering::Relaxed);
        self.gathered.1.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Records one finished request.
    pub fn record(&self, op: Op, latency: Duration, outcome: RequestOutcome, faulted: bool) {
        let stats = &self.ops[op as usize];
        stats.count.fetch_add(1, Ordering::Relaxed);
        stats.bytes.fetch_add(outcome.bytes, Ordering::Relaxed);
        if outcome.failed {
            stats.errors.fetch_add(1, Ordering::Relaxed);
        }
        if faulted {
            stats.faulted.fetch_add(1, Ordering::Relaxed);
        }
        let micros = (latency.as_micros() as u64).clamp(1, 3_600_000_000);
        stats.latency_us.lock().unwrap().saturating_record(micros);
    }

    /// A snapshot of every operation that was seen at least once.
    pub fn report(&self, rules: Vec<RuleReport>) -> StatsReport {
        let ops = Op::ALL
            .iter()
            .zip(&self.ops)
            .filter(|(_, s)| s.count.load(Ordering::Relaxed) > 0)
            .map(|(op, s)| {
                let hist = s.latency_us.lock().unwrap();
                OpReport {
                    op: op.name().to_string(),
                    // From the histogram, under its lock: the buckets then
                    // add up to the count (a request records both, not at once).
                    count: hist.len(),
                    errors: s.errors.load(Ordering::Relaxed),
                    faulted: s.faulted.load(Ordering::Relaxed),
                    bytes: s.bytes.load(Ordering::Relaxed),
                    p50_us: hist.value_at_quantile(0.5),
                    p99_us: hist.value_at_quantile(0.99),
                    max_us: hist.max(),
                    histogram: hist
                        .iter_log(1, 2.0)
                        .filter(|b| b.count_since_last_iteration() > 0)
                        .map(|b| LatencyBucket {
                            // The iterator reports each bucket's largest value, 2^k - 1.
                            below_us: b.value_iterated_to() + 1,
                            count: b.count_since_last_iteration(),
                        })
                        .collect(),
                }
            })
            .collect();
        StatsReport {
            uptime_s: self.started.elapsed().as_secs_f64(),
            ops,
            rules: rules
                .into_iter()
                .map(|r| RuleStats {
                    id: r.id,
                    rule: r.text,
                    matched: r.matched,
                    fired: r.fired,
                })
                .collect(),
            parked: 0,
            hung: 0,
            panics: crate::fs::contain::caught(),
            gathered_writes: self.gathered.0.load(Ordering::Relaxed),
            gathered_bytes: self.gathered.1.load(Ordering::Relaxed),
        }
    }
}

/// Stats as `slowfs ctl stats --json` prints them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StatsReport {
    /// Seconds since the mount started.
    pub uptime_s: f64,
    /// One row per operation seen.
    pub ops: Vec<OpReport>,
    /// One row per rule in force.
    pub rules: Vec<RuleStats>,
    /// Requests parked right now (delayed or hung).
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
    /// Requests that failed (injected or real errors).
    pub errors: u64,
    /// Requests at least one rule fired on.
    pub faulted: u64,
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
}

impl StatsReport {
    /// Requests of one operation finished so far.
    pub fn count(&self, op: &str) -> u64 {
        self.ops.iter().find(|r| r.op == op).map_or(0, |r| r.count)
    }

    /// A table for people.
    pub fn render(&self) -> String {
        let mut out = format!("slowfs stats after {:.1}s\n", self.uptime_s);
        let _ = writeln!(
            out,
            "{:<16} {:>9} {:>7} {:>8} {:>12} {:>10} {:>10} {:>10}",
            "op", "count", "errors", "faulted", "bytes", "p50", "p99", "max"
        );
        for r in &self.ops {
            let _ = writeln!(
                out,
                "{:<16} {:>9} {:>7} {:>8} {:>12} {:>10} {:>10} {:>10}",
                r.op,
                r.count,
                r.errors,
                r.faulted,
                r.bytes,
                micros(r.p50_us),
                micros(r.p99_us),
                micros(r.max_us)
            );
        }
        if self.ops.is_empty() {
            out.push_str("(no requests yet)\n");
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
                "rule #{} fired {}/{} matched: {}",
                r.id, r.fired, r.matched, r.rule
            );
        }
        out
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

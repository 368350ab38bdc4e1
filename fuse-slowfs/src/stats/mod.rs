//! Per-operation counters and latency histograms: counted as requests end
//! ([`Stats`]), reported as `ctl stats` prints them ([`StatsReport`], in
//! `report`).

mod report;

pub use report::*;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use slowfs_faults::{Op, RuleReport};

#[derive(Debug)]
struct OpStats {
    count: AtomicU64,
    /// Failures the backing filesystem answered (ENOENT, ENOTSUP, ...).
    fs_errors: AtomicU64,
    /// Held requests whose caller was interrupted (answered EINTR).
    interrupted: AtomicU64,
    faulted: AtomicU64,
    /// Requests each kind of fault was injected into (`FaultKind as usize`).
    injected: [AtomicU64; FaultKind::ALL.len()],
    bytes: AtomicU64,
    /// Arrival to reply, summed over the requests, in nanoseconds.
    total_ns: AtomicU64,
    latency_us: Mutex<Histogram<u64>>,
}

impl Default for OpStats {
    fn default() -> Self {
        OpStats {
            count: AtomicU64::new(0),
            fs_errors: AtomicU64::new(0),
            interrupted: AtomicU64::new(0),
            faulted: AtomicU64::new(0),
            injected: Default::default(),
            bytes: AtomicU64::new(0),
            total_ns: AtomicU64::new(0),
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

/// A kind of fault a rule injects into a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Held before it ran (`delay`, `throttle`, `iops`).
    Delayed,
    /// Held until released or timed out (`hang`).
    Hung,
    /// Answered with an errno instead of running (`error=`, `fsync error=... drop`,
    /// a soft mount's timeout).
    Failed,
    /// Moved fewer bytes than asked (`short=`).
    Shortened,
    /// Acknowledged, never applied (`lose`).
    Lost,
    /// Read data damaged (`corrupt=`).
    Corrupted,
    /// Read the durable content, not the latest (`stale`).
    Stale,
    /// Power loss at it (`crash`).
    Crashed,
}

impl FaultKind {
    /// Every kind, in the order reports list them.
    pub const ALL: [FaultKind; 8] = [
        FaultKind::Delayed,
        FaultKind::Hung,
        FaultKind::Failed,
        FaultKind::Shortened,
        FaultKind::Lost,
        FaultKind::Corrupted,
        FaultKind::Stale,
        FaultKind::Crashed,
    ];

    /// The kind as reports name it.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Delayed => "delayed",
            FaultKind::Hung => "hung",
            FaultKind::Failed => "failed",
            FaultKind::Shortened => "shortened",
            FaultKind::Lost => "lost",
            FaultKind::Corrupted => "corrupted",
            FaultKind::Stale => "stale",
            FaultKind::Crashed => "crashed",
        }
    }
}

/// What the rules did to one request, for the stats: the kinds of fault and
/// the rules that fired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Injected {
    kinds: u16,
    /// Ids of the rules that fired on it.
    pub rules: Vec<u64>,
    /// Its caller was interrupted while it was held (answered EINTR).
    pub interrupted: bool,
}

impl Injected {
    /// What the fault plan's `decision` injects.
    pub fn of(decision: &slowfs_faults::Decision) -> Injected {
        let mut injected = Injected {
            rules: decision.fired.clone(),
            ..Injected::default()
        };
        let effects = &decision.effects;
        for (kind, yes) in [
            (FaultKind::Delayed, !decision.delay.is_zero()),
            (FaultKind::Hung, decision.hang.is_some()),
            (
                FaultKind::Failed,
                decision.error.is_some() || effects.fsync_fail.is_some(),
            ),
            (FaultKind::Shortened, effects.short_to.is_some()),
            (FaultKind::Lost, effects.lose),
            (FaultKind::Corrupted, effects.corrupt.is_some()),
            (FaultKind::Stale, effects.stale),
            (FaultKind::Crashed, decision.crash),
        ] {
            if yes {
                injected.add(kind);
            }
        }
        injected
    }

    /// Adds a kind (a held request that became an error: a soft timeout).
    pub fn add(&mut self, kind: FaultKind) {
        self.kinds |= 1 << kind as u16;
    }

    /// Whether it has `kind`.
    pub fn has(&self, kind: FaultKind) -> bool {
        self.kinds & (1 << kind as u16) != 0
    }

    /// Whether any rule fired.
    pub fn any(&self) -> bool {
        !self.rules.is_empty()
    }

    /// Whether the request's failure, if it failed, was slowfs's doing (an
    /// injected errno, a crash, an interrupted wait) and not the backing
    /// filesystem's answer.
    fn explains_a_failure(&self) -> bool {
        self.interrupted || self.has(FaultKind::Failed) || self.has(FaultKind::Crashed)
    }
}

/// Counters for every operation since the mount started.
#[derive(Debug)]
pub struct Stats {
    started: Instant,
    ops: Vec<OpStats>,
    /// Per rule id: the time of the requests it fired on, in nanoseconds.
    rule_ns: Mutex<std::collections::HashMap<u64, u64>>,
    watch: CallerWatch,
    /// write(2)s gathered by the NFS client model (`--cache nfs`), and bytes.
    gathered: (AtomicU64, AtomicU64),
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            started: Instant::now(),
            ops: Op::ALL.iter().map(|_| OpStats::default()).collect(),
            rule_ns: Mutex::default(),
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

    /// Records one finished request, and what the rules `injected` into it:
    /// `latency` is what its caller waited, arrival to reply, `own` the part
    /// of it that was this request's (without a gathered WRITE it sent
    /// first, which is counted as a write of its own), for the time totals.
    pub fn record(
        &self,
        op: Op,
        latency: Duration,
        own: Duration,
        outcome: RequestOutcome,
        injected: &Injected,
    ) {
        let stats = &self.ops[op as usize];
        let nanos = u64::try_from(own.as_nanos()).unwrap_or(u64::MAX);
        stats.count.fetch_add(1, Ordering::Relaxed);
        stats.bytes.fetch_add(outcome.bytes, Ordering::Relaxed);
        stats.total_ns.fetch_add(nanos, Ordering::Relaxed);
        if outcome.failed && !injected.explains_a_failure() {
            stats.fs_errors.fetch_add(1, Ordering::Relaxed);
        }
        if injected.interrupted {
            stats.interrupted.fetch_add(1, Ordering::Relaxed);
        }
        if injected.any() {
            stats.faulted.fetch_add(1, Ordering::Relaxed);
            for kind in FaultKind::ALL {
                if injected.has(kind) {
                    stats.injected[kind as usize].fetch_add(1, Ordering::Relaxed);
                }
            }
            let mut rule_ns = self.rule_ns.lock().unwrap();
            for id in &injected.rules {
                *rule_ns.entry(*id).or_default() += nanos;
            }
        }
        let micros = (latency.as_micros() as u64).clamp(1, 3_600_000_000);
        stats.latency_us.lock().unwrap().saturating_record(micros);
    }

    /// A snapshot of every operation that was seen at least once.
    pub fn report(&self, rules: Vec<RuleReport>) -> StatsReport {
        let uptime_s = self.started.elapsed().as_secs_f64();
        let share = |micros: u64| micros as f64 / 1e6 / uptime_s.max(1e-9);
        let ops = Op::ALL
            .iter()
            .zip(&self.ops)
            .filter(|(_, s)| s.count.load(Ordering::Relaxed) > 0)
            .map(|(op, s)| {
                let hist = s.latency_us.lock().unwrap();
                let time_us = s.total_ns.load(Ordering::Relaxed) / 1000;
                let injected = |kind: FaultKind| s.injected[kind as usize].load(Ordering::Relaxed);
                OpReport {
                    op: op.name().to_string(),
                    // From the histogram, under its lock: the buckets then
                    // add up to the count (a request records both, not at once).
                    count: hist.len(),
                    time_us,
                    wall_share: share(time_us),
                    fs_errors: s.fs_errors.load(Ordering::Relaxed),
                    faulted: s.faulted.load(Ordering::Relaxed),
                    injected: InjectedCounts {
                        delayed: injected(FaultKind::Delayed),
                        hung: injected(FaultKind::Hung),
                        failed: injected(FaultKind::Failed),
                        shortened: injected(FaultKind::Shortened),
                        lost: injected(FaultKind::Lost),
                        corrupted: injected(FaultKind::Corrupted),
                        stale: injected(FaultKind::Stale),
                        crashed: injected(FaultKind::Crashed),
                    },
                    interrupted: s.interrupted.load(Ordering::Relaxed),
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
        let rule_ns = self.rule_ns.lock().unwrap();
        StatsReport {
            uptime_s,
            ops,
            rules: rules
                .into_iter()
                .map(|r| {
                    let time_us = rule_ns.get(&r.id).copied().unwrap_or(0) / 1000;
                    RuleStats {
                        id: r.id,
                        rule: r.text,
                        matched: r.matched,
                        fired: r.fired,
                        time_us,
                        wall_share: share(time_us),
                    }
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

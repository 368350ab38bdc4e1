//! The live fault plan: rules with their own seeded RNGs, counters and buckets,
//! asked once per request what to do.

use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::op::Op;
use crate::rule::{Action, Rule};
use crate::rule_index::RuleIndex;
use crate::throttle::TokenBucket;

/// What to do to one request: the combined effect of every rule that fired on it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Decision {
    /// Hold the request this long before doing it (delays and throttle waits add up).
    pub delay: Duration,
    /// Hold the request until released (`ctl release`), or at most a while.
    pub hang: Option<Hang>,
    /// Fail the request with this errno instead of doing it.
    pub error: Option<i32>,
    /// Crash (power loss) at this request.
    pub crash: bool,
    /// What the request does differently when it runs.
    pub effects: Effects,
    /// Ids of the rules that fired.
    pub fired: Vec<u64>,
}

/// How a request that runs is carried out differently: the part of a
/// [`Decision`] the request's own code applies (short counts and storage that lies).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Effects {
    /// Move at most this many bytes.
    pub short_to: Option<u64>,
    /// Fail an fsync with write-back error semantics (`Action::FsyncFail`).
    pub fsync_fail: Option<FsyncFailure>,
    /// Corrupt one sector of the read data, drawn from this seed.
    pub corrupt: Option<(crate::Corruption, u64)>,
    /// Read the durable content instead of the latest.
    pub stale: bool,
    /// Acknowledge the write without applying it.
    pub lose: bool,
}

/// How long a `hang` holds a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Hang {
    /// Until `slowfs ctl MNT release` (or the caller is interrupted).
    UntilReleased,
    /// Until released, or this long at most.
    AtMost(Duration),
}

impl Hang {
    /// The hang of a rule: `hang` or `hang=TIMEOUT`.
    pub fn from_timeout(timeout: Option<Duration>) -> Hang {
        timeout.map_or(Hang::UntilReleased, Hang::AtMost)
    }

    /// Two hangs on one request: the longer wins; one without a timeout outlasts all.
    pub fn longer(self, other: Hang) -> Hang {
        match (self, other) {
            (Hang::AtMost(a), Hang::AtMost(b)) => Hang::AtMost(a.max(b)),
            _ => Hang::UntilReleased,
        }
    }
}

/// An fsync failed the way Linux reports a failed write-back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FsyncFailure {
    /// The errno fsync returns (EIO, ENOSPC, ...).
    pub errno: i32,
    /// Whether the dropped pages are evicted too, so a read shows the old data.
    pub evict: bool,
}

impl Decision {
    /// Whether no rule fired.
    pub fn is_clean(&self) -> bool {
        self.fired.is_empty()
    }

    /// The verdict for the kernel's own write-back of cached pages (mmap
    /// stores, the writeback cache), which is no caller's write(2): the kernel
    /// does not retry a short one and has no caller to hand an error to, so a
    /// short count or an errno would silently drop data nobody was told about.
    /// It keeps what makes storage slow (delays, throttles, hangs; the caller
    /// of fsync, msync or close waits for them), a crash, and `lose` (data loss
    /// the rule asks for by name); short counts and errors do not apply. To
    /// fail a write-back the way Linux reports it, use `fsync error=EIO drop`.
    ///
    /// ```
    /// use slowfs_faults::{FaultPlan, Op, parse_rule};
    /// let rules = ["write short=1..8", "write delay=5ms"].map(|r| parse_rule(r).unwrap());
    /// let plan = FaultPlan::new(1, rules);
    /// let verdict = plan.decide(Op::Write, "f", 4096).for_write_back();
    /// assert_eq!(verdict.effects.short_to, None);
    /// assert_eq!(verdict.delay, std::time::Duration::from_millis(5));
    /// ```
    pub fn for_write_back(mut self) -> Decision {
        self.error = None;
        self.effects.short_to = None;
        self
    }
}

/// A rule as the plan holds it, with its runtime state.
#[derive(Debug)]
struct ActiveRule {
    id: u64,
    rule: Rule,
    state: Mutex<RuleState>,
}

#[derive(Debug)]
struct RuleState {
    rng: ChaCha8Rng,
    matched: u64,
    bytes: u64,
    fired: u64,
    bucket: Option<TokenBucket>,
}

/// A snapshot of one rule for `ctl rules` and stats.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleReport {
    /// Stable id, for `ctl clear ID`.
    pub id: u64,
    /// The rule as a rule string.
    pub text: String,
    /// Requests it matched.
    pub matched: u64,
    /// Requests it fired on.
    pub fired: u64,
}

/// The rules in force, shared by every request-handling thread.
///
/// Locks are held only to read counters and draw numbers, never while a request waits.
#[derive(Debug)]
pub struct FaultPlan {
    seed: u64,
    start: Instant,
    rules: RwLock<Arc<Rules>>,
    /// Held by `add` and `clear` while they build the next version (requests
    /// only take `rules`' read lock, never this one), so that two changes at
    /// once cannot lose one.
    next_id: Mutex<u64>,
    /// Recording the faults that fire, or replaying recorded ones.
    trace: Option<crate::trace::FaultTrace>,
}

/// One version of the rule set, in segments that each have their own index
/// (see `rule_index`), built when the version is made, never inside a request.
///
/// Adding rules makes a segment of them and merges it with the segments
/// before it while those are no larger (as a binary counter carries), up to
/// [`SEGMENT_MAX`] rules: over the plan's life each rule is indexed again
/// O(log n) times, not at every later `set`, and a version shares the
/// segments it did not change with the one before. (One index for the whole
/// set, rebuilt at each `ctl set`, made 10,000 sets quadratic: 42 ms per set
/// at the end.) A request asks each segment: at most `log2(SEGMENT_MAX)` plus
/// one per full segment (13 for 10,000 rules set one by one; one for rules
/// loaded together).
#[derive(Debug, Default)]
struct Rules {
    segments: Vec<Arc<Segment>>,
    len: usize,
    /// Per operation (`Op as usize`), whether any rule names it.
    named: Vec<bool>,
}

/// Rules added one after another, with their index.
#[derive(Debug)]
struct Segment {
    list: Vec<Arc<ActiveRule>>,
    index: RuleIndex,
}

/// The most rules one segment grows to by merging.
const SEGMENT_MAX: usize = 4096;

#[cfg(test)]
thread_local! {
    /// Rules indexed on this thread, for the tests of what adding costs.
    static INDEXED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl Segment {
    fn new(list: Vec<Arc<ActiveRule>>) -> Segment {
        #[cfg(test)]
        INDEXED.with(|n| n.set(n.get() + list.len()));
        let index = RuleIndex::new(list.iter().map(|r| &r.rule));
        Segment { list, index }
    }
}

impl Rules {
    /// These rules, in one segment.
    fn new(list: Vec<Arc<ActiveRule>>) -> Rules {
        if list.is_empty() {
            return Rules::default();
        }
        Rules::of(vec![Arc::new(Segment::new(list))])
    }

    fn of(segments: Vec<Arc<Segment>>) -> Rules {
        let named = Op::ALL
            .iter()
            .map(|&op| segments.iter().any(|s| s.index.names(op)))
            .collect();
        Rules {
            len: segments.iter().map(|s| s.list.len()).sum(),
            segments,
            named,
        }
    }

    /// This version with `added` after its rules: only the segments the new
    /// one merges with are indexed again.
    fn with(&self, added: Vec<Arc<ActiveRule>>) -> Rules {
        let mut segments = self.segments.clone();
        let mut tail = added;
        while let Some(last) = segments.last() {
            if last.list.len() > tail.len() || last.list.len() + tail.len() > SEGMENT_MAX {
                break;
            }
            let mut merged = segments.pop().expect("a last segment").list.clone();
            merged.append(&mut tail);
            tail = merged;
        }
        if !tail.is_empty() {
            segments.push(Arc::new(Segment::new(tail)));
        }
        Rules::of(segments)
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn len(&self) -> usize {
        self.len
    }

    /// Whether any rule names `op`.
    fn names(&self, op: Op) -> bool {
        self.named.get(op as usize).copied().unwrap_or(false)
    }

    /// Every rule, in the order they were added.
    fn iter(&self) -> impl Iterator<Item = &Arc<ActiveRule>> {
        self.segments.iter().flat_map(|s| s.list.iter())
    }

    /// The rules matching `op` on `path`, in the order they were added.
    fn matching(&self, op: Op, path: &str) -> Vec<&Arc<ActiveRule>> {
        let mut found = Vec::new();
        for segment in &self.segments {
            let list = &segment.list;
            found.extend(
                segment
                    .index
                    .matching(op, path, |i| list[i].rule.ops.contains(op))
                    .into_iter()
                    .map(|i| &list[i]),
            );
        }
        found
    }
}

impl FaultPlan {
    /// A plan with these rules; every rule's RNG is derived from `seed` and its id.
    pub fn new(seed: u64, rules: impl IntoIterator<Item = Rule>) -> FaultPlan {
        let plan = FaultPlan {
            seed,
            start: Instant::now(),
            rules: RwLock::new(Arc::new(Rules::default())),
            next_id: Mutex::new(1),
            trace: None,
        };
        plan.add_all(rules);
        plan
    }

    /// The run seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Faults a replaying trace holds (0 without one, or when recording).
    pub fn traced_faults(&self) -> usize {
        self.trace.as_ref().map_or(0, |t| t.len())
    }

    /// Records every fault that fires into `trace`, or (a replaying trace)
    /// fires the recorded faults instead of drawing: see [`crate::trace`].
    pub fn with_trace(mut self, trace: crate::trace::FaultTrace) -> FaultPlan {
        self.trace = Some(trace);
        self
    }

    /// Adds a rule at runtime; returns its id.
    pub fn add(&self, rule: Rule) -> u64 {
        self.add_all([rule])[0]
    }

    /// Adds rules at once (the index is built once for all of them); returns
    /// their ids.
    pub fn add_all(&self, rules: impl IntoIterator<Item = Rule>) -> Vec<u64> {
        let mut next_id = self.next_id.lock().unwrap();
        let mut added = Vec::new();
        let mut ids = Vec::new();
        for rule in rules {
            ids.push(*next_id);
            added.push(self.activate(*next_id, rule));
            *next_id += 1;
        }
        // Built before the swap, outside the lock requests read.
        let next = Arc::new(self.current().with(added));
        *self.rules.write().unwrap() = next;
        ids
    }

    /// A rule with its own RNG stream (seed, id) and counters.
    fn activate(&self, id: u64, rule: Rule) -> Arc<ActiveRule> {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(id);
        let bucket = match rule.action {
            Action::Throttle { rate, burst } => {
                let rate = rate as f64;
                Some(TokenBucket::new(
                    rate,
                    burst.map_or(rate * 0.1, |b| b as f64),
                ))
            }
            Action::Iops { rate, burst } => {
                let rate = rate as f64;
                Some(TokenBucket::new(
                    rate,
                    burst.map_or((rate * 0.1).max(1.0), |b| b as f64),
                ))
            }
            _ => None,
        };
        Arc::new(ActiveRule {
            id,
            rule,
            state: Mutex::new(RuleState {
                rng,
                matched: 0,
                bytes: 0,
                fired: 0,
                bucket,
            }),
        })
    }

    /// Removes one rule by id (`Some`) or every rule (`None`); returns how many went.
    pub fn clear(&self, id: Option<u64>) -> usize {
        let _writer = self.next_id.lock().unwrap();
        let current = self.current();
        let kept: Vec<_> = current
            .iter()
            .filter(|r| id.is_some_and(|id| r.id != id))
            .cloned()
            .collect();
        let removed = current.len() - kept.len();
        if removed == 0 {
            return 0;
        }
        let next = Arc::new(Rules::new(kept));
        *self.rules.write().unwrap() = next;
        removed
    }

    /// The rules in force, in the order they were added.
    pub fn rules(&self) -> Vec<Rule> {
        self.current().iter().map(|r| r.rule.clone()).collect()
    }

    /// The bytes a quota rule (`error=ENOSPC` or `EDQUOT` with `after_bytes=`, as
    /// in the `full-disk` profile) still lets through — the smallest such quota
    /// left — so that `statfs` can report the space an application will really
    /// find. `None` without such a rule.
    pub fn space_left(&self) -> Option<u64> {
        self.current()
            .iter()
            .filter(|r| matches!(r.rule.action, Action::Error(e) if e == libc_enospc() || e == libc_edquot()))
            .filter_map(|r| {
                let quota = r.rule.when.after_bytes?;
                let used = r.state.lock().unwrap().bytes;
                Some(quota.saturating_sub(used))
            })
            .min()
    }

    /// Each rule with its counters.
    pub fn report(&self) -> Vec<RuleReport> {
        self.current()
            .iter()
            .map(|r| {
                let state = r.state.lock().unwrap();
                RuleReport {
                    id: r.id,
                    text: r.rule.to_string(),
                    matched: state.matched,
                    fired: state.fired,
                }
            })
            .collect()
    }

    /// Whether no rule is in force (the fast path: nothing to decide).
    pub fn is_empty(&self) -> bool {
        self.current().is_empty() && !self.trace.as_ref().is_some_and(|t| t.replaying())
    }

    /// Whether any rule in force names `op`.
    pub fn matches_op(&self, op: Op) -> bool {
        self.current().names(op) || self.trace.as_ref().is_some_and(|t| t.replays_op(op))
    }

    /// Whether any rule in force could touch reads or writes of `path`.
    pub fn touches_data_path(&self, path: &str) -> bool {
        let rules = self.current();
        [Op::Read, Op::Write].into_iter().any(|op| {
            rules
                .matching(op, path)
                .iter()
                .any(|r| r.rule.touches_data_path())
        }) || self
            .trace
            .as_ref()
            .is_some_and(|t| t.replays_data_path(path))
    }

    /// Whether any rule in force can crash the mount.
    pub fn has_crash_rule(&self) -> bool {
        self.current()
            .iter()
            .any(|r| matches!(r.rule.action, Action::Crash))
    }

    fn current(&self) -> Arc<Rules> {
        Arc::clone(&self.rules.read().unwrap())
    }

    /// Decides what happens to one request: `op` on mount-relative `path`, asking to
    /// move `bytes` bytes (0 for requests that move none).
    pub fn decide(&self, op: Op, path: &str, bytes: u64) -> Decision {
        let Some(trace) = &self.trace else {
            return self.draw(op, path, bytes);
        };
        let occurrence = trace.count(op, path);
        match trace.replayed(op, path, occurrence) {
            // The request replayed may ask for fewer bytes than the recorded
            // one did (another order, another split): a short count never
            // exceeds what this request moves.
            Some(mut recorded) => {
                if let Some(short) = &mut recorded.effects.short_to {
                    *short = (*short).min(bytes);
                }
                recorded
            }
            None if trace.replaying() => Decision::default(),
            None => {
                let decision = self.draw(op, path, bytes);
                if !decision.is_clean() {
                    trace.write(op, path, occurrence, &decision);
                }
                decision
            }
        }
    }

    /// The rules' answer for one request, drawn from their RNGs.
    fn draw(&self, op: Op, path: &str, bytes: u64) -> Decision {
        let rules = self.current();
        let mut verdict = Decision::default();
        if rules.is_empty() {
            return verdict;
        }
        let now = self.start.elapsed().as_secs_f64();
        for active in rules.matching(op, path) {
            let mut state = active.state.lock().unwrap();
            if !fires(&active.rule, &mut state, bytes) {
                continue;
            }
            state.fired += 1;
            verdict.fired.push(active.id);
            let RuleState { rng, bucket, .. } = &mut *state;
            match &active.rule.action {
                Action::Delay { dist, spike } => {
                    verdict.delay += dist.sample(rng);
                    if let Some(spike) = spike {
                        if rng.gen_bool(spike.p) {
                            verdict.delay += spike.extra;
                        }
                    }
                }
                Action::Error(errno) => {
                    verdict.error.get_or_insert(*errno);
                }
                Action::Short { min, max } => {
                    let moved = rng.gen_range(*min..=*max).min(bytes);
                    let short_to = &mut verdict.effects.short_to;
                    *short_to = Some(short_to.map_or(moved, |s| s.min(moved)));
                }
                Action::Throttle { .. } | Action::Iops { .. } => {
                    let amount = match active.rule.action {
                        Action::Throttle { .. } => bytes as f64,
                        _ => 1.0,
                    };
                    let bucket = bucket.as_mut().expect("bucket made with the rule");
                    verdict.delay += Duration::from_secs_f64(bucket.take(now, amount));
                }
                Action::Hang { timeout } => {
                    let hang = Hang::from_timeout(*timeout);
                    verdict.hang = Some(verdict.hang.map_or(hang, |h| h.longer(hang)));
                }
                Action::Crash => verdict.crash = true,
                Action::FsyncFail { errno, evict } => {
                    verdict.effects.fsync_fail.get_or_insert(FsyncFailure {
                        errno: *errno,
                        evict: *evict,
                    });
                }
                Action::Corrupt(how) => {
                    verdict.effects.corrupt.get_or_insert((*how, rng.gen()));
                }
                Action::Stale => verdict.effects.stale = true,
                Action::Lose => verdict.effects.lose = true,
            }
        }
        verdict
    }
}

fn libc_enospc() -> i32 {
    crate::errno_from_name("ENOSPC").expect("a known errno")
}

fn libc_edquot() -> i32 {
    crate::errno_from_name("EDQUOT").expect("a known errno")
}

/// Counts a matching request and says whether the rule's trigger fires on it.
fn fires(rule: &Rule, state: &mut RuleState, bytes: u64) -> bool {
    state.matched += 1;
    let bytes_before = state.bytes;
    state.bytes += bytes;
    let when = &rule.when;
    if when.after.is_some_and(|after| state.matched <= after) {
        return false;
    }
    if when.every.is_some_and(|every| state.matched % every != 0) {
        return false;
    }
    if when
        .after_bytes
        .is_some_and(|quota| bytes_before + bytes <= quota)
    {
        return false;
    }
    when.p.is_none_or(|p| state.rng.gen_bool(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_rule;

    fn plan(seed: u64, rules: &[&str]) -> FaultPlan {
        FaultPlan::new(seed, rules.iter().map(|r| parse_rule(r).unwrap()))
    }

    /// A rule of each kind the index files differently, for rule `i`.
    fn varied_rule(i: usize) -> String {
        match i % 4 {
            0 => format!("read path=dir{i}/**/*.db delay=1ms"),
            1 => format!("read,write path=**/*.x{} delay=1ms", i % 50),
            2 => "write delay=1ms p=0.5".to_string(),
            _ => format!("getattr path=dir{}/f error=EIO", i % 7),
        }
    }

    #[test]
    fn rules_added_one_by_one_match_as_rules_added_together() {
        let texts: Vec<String> = (0..1500).map(varied_rule).collect();
        let together = FaultPlan::new(3, texts.iter().map(|t| parse_rule(t).unwrap()));
        let one_by_one = FaultPlan::new(3, []);
        for t in &texts {
            one_by_one.add(parse_rule(t).unwrap());
        }
        assert!(one_by_one.current().segments.len() > 1);
        assert_eq!(together.current().segments.len(), 1);
        for (op, path) in [
            (Op::Read, "dir8/a/b.db"),
            (Op::Read, "q/z.x9"),
            (Op::Write, "dir3/f.x9"),
            (Op::Getattr, "dir3/f"),
            (Op::Write, "nothing"),
            (Op::Fsync, "dir8/a/b.db"),
        ] {
            // The same rules fire, in the order they were added (same seed,
            // same ids, so the same draws).
            assert_eq!(
                together.decide(op, path, 10),
                one_by_one.decide(op, path, 10),
                "{op:?} {path}"
            );
            assert_eq!(
                together.current().names(op),
                one_by_one.current().names(op),
                "{op:?}"
            );
        }
        let ids = |p: &FaultPlan| p.report().iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(ids(&together), ids(&one_by_one));
        // Clearing one rule leaves the others, in order, in either plan.
        assert_eq!(one_by_one.clear(Some(1)), 1);
        assert_eq!(one_by_one.report().len(), 1499);
        assert!(one_by_one.decide(Op::Read, "dir0/a.db", 1).fired.is_empty());
        assert_eq!(one_by_one.decide(Op::Read, "dir4/a.db", 1).fired, [5]);
    }

    #[test]
    fn adding_a_rule_indexes_a_logarithmic_share_of_the_others() {
        // What an add costs, counted in rules indexed (not timed): with one
        // index rebuilt at every add, 10,000 adds indexed n(n+1)/2 =
        // 50,005,000 rules (42 ms per `ctl set` at the end).
        let plan = FaultPlan::new(1, []);
        let before = INDEXED.with(|n| n.get());
        let n = 10_000;
        for i in 0..n {
            plan.add(parse_rule(&varied_rule(i)).unwrap());
        }
        let indexed = INDEXED.with(|n| n.get()) - before;
        // Each rule is indexed again each time its segment doubles: at most
        // log2(SEGMENT_MAX) + 1 = 13 times.
        assert!(indexed <= n * 13, "{indexed} rules indexed for {n} adds");
        assert!(indexed >= n, "{indexed}");
        let segments = plan.current().segments.len();
        assert!(segments <= 2 + 12, "{segments} segments");
        // The control: rules loaded together are indexed once each.
        let before = INDEXED.with(|n| n.get());
        let together = FaultPlan::new(1, (0..n).map(|i| parse_rule(&varied_rule(i)).unwrap()));
        assert_eq!(INDEXED.with(|n| n.get()) - before, n);
        assert_eq!(together.report().len(), plan.report().len());
    }

    #[test]
    fn rules_match_ops_and_paths() {
        let plan = plan(1, &["write path=**/*.tmp error=ENOSPC"]);
        assert_eq!(
            plan.decide(Op::Write, "a/b.tmp", 10).error,
            Some(libc::ENOSPC)
        );
        assert!(plan.decide(Op::Write, "a/b.txt", 10).is_clean());
        assert!(plan.decide(Op::Read, "a/b.tmp", 10).is_clean());
    }

    #[test]
    fn after_and_every_count_matching_requests() {
        let plan = plan(1, &["rename crash after=2", "fsync error=EIO every=3"]);
        let crashes: Vec<bool> = (0..4)
            .map(|_| plan.decide(Op::Rename, "x", 0).crash)
            .collect();
        assert_eq!(crashes, [false, false, true, true]);
        let errors: Vec<bool> = (0..6)
            .map(|_| plan.decide(Op::Fsync, "x", 0).error.is_some())
            .collect();
        assert_eq!(errors, [false, false, true, false, false, true]);
    }

    #[test]
    fn a_quota_shows_as_space_left() {
        let plan = plan(1, &["write after_bytes=10KiB error=ENOSPC"]);
        assert_eq!(plan.space_left(), Some(10 << 10));
        plan.decide(Op::Write, "f", 4096);
        assert_eq!(plan.space_left(), Some(6 << 10));
        for _ in 0..3 {
            plan.decide(Op::Write, "f", 4096);
        }
        assert_eq!(plan.space_left(), Some(0));
        assert_eq!(self::plan(1, &["read delay=1ms"]).space_left(), None);
    }

    #[test]
    fn after_bytes_is_a_quota() {
        let plan = plan(1, &["write after_bytes=10KiB error=ENOSPC"]);
        let results: Vec<bool> = (0..4)
            .map(|_| plan.decide(Op::Write, "f", 4096).error.is_some())
            .collect();
        assert_eq!(results, [false, false, true, true]);
    }

    #[test]
    fn same_seed_same_faults_and_rules_draw_independently() {
        let draws = |seed, with_other_rule: bool| {
            let mut rules = vec!["read error=EIO p=0.3"];
            if with_other_rule {
                rules.push("write delay=1ms..9ms");
            }
            let plan = plan(seed, &rules);
            (0..200)
                .map(|i| {
                    if with_other_rule && i % 2 == 0 {
                        plan.decide(Op::Write, "f", 1);
                    }
                    plan.decide(Op::Read, "f", 1).error.is_some()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(draws(42, false), draws(42, false));
        assert_eq!(
            draws(42, false),
            draws(42, true),
            "another rule must not shift draws"
        );
        assert_ne!(draws(42, false), draws(43, false));
        let fired = draws(42, false).iter().filter(|&&f| f).count();
        assert!((30..90).contains(&fired), "p=0.3 of 200 fired {fired}");
    }

    #[test]
    fn short_never_exceeds_the_request() {
        let plan = plan(3, &["read short=1..512"]);
        for _ in 0..1000 {
            let to = plan.decide(Op::Read, "f", 100).effects.short_to.unwrap();
            assert!((1..=100).contains(&to));
        }
    }

    #[test]
    fn effects_combine() {
        let plan = plan(
            1,
            &[
                "read delay=10ms",
                "read delay=5ms",
                "read hang=2s",
                "read error=EIO",
            ],
        );
        let v = plan.decide(Op::Read, "f", 1);
        assert_eq!(v.delay, Duration::from_millis(15));
        assert_eq!(v.hang, Some(Hang::AtMost(Duration::from_secs(2))));
        assert_eq!(v.error, Some(libc::EIO));
        assert_eq!(v.fired, vec![1, 2, 3, 4]);
    }

    #[test]
    fn clear_removes_by_id_or_all() {
        let plan = plan(1, &["read delay=1ms", "write delay=1ms"]);
        assert_eq!(plan.clear(Some(1)), 1);
        assert_eq!(plan.report()[0].id, 2);
        assert_eq!(plan.clear(None), 1);
        assert!(plan.rules().is_empty());
    }
}

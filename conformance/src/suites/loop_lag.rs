//! `loop-lag`: on a current-thread runtime, 16 tasks run a mixed workload while
//! every operation is delayed (default 100 ms, fsync 250 ms); the loop must
//! never wait for a file operation.
//!
//! The verdict is built to hold on a busy machine (CI runners are shared), from
//! two kinds of evidence:
//!
//! * **Attribution (exact).** FUSE tells slowfs which thread issued each
//!   request, and as the answer goes out slowfs looks whether that thread is
//!   asleep waiting for it (`/proc/TID/wchan` in FUSE's `request_wait_answer`).
//!   A request the loop's own thread waited for held the loop for its whole
//!   delay: any such wait longer than the bound is a failure, listed by
//!   operation. Scheduler noise cannot produce one, and a request the loop only
//!   submitted (Linux AIO, io_uring: the request carries the submitter's id,
//!   but the thread went on) does not count. For in-process engines the loop
//!   thread is the runtime's; a driver names its loop thread in its handshake
//!   (`loop_thread`).
//! * **Heartbeat, against a control.** A heartbeat task on the loop records how
//!   late it wakes; a control heartbeat on a thread of its own, with no file
//!   work, measures the machine's own noise in the same window. The loop fails
//!   when its beats late by more than the bound add up to at least
//!   [`EXCESS_DELAYS`] injected delays *more than the control's*: a loop that
//!   waits for file operations does so again and again, by a whole delay each
//!   time, while one scheduler outlier is one beat, and a machine-wide stall
//!   (a CPU quota) shows in the control too. This catches a loop that waits
//!   without issuing the request itself (blocked on a lock or a channel).
//!
//! The bound is half of one injected delay (50 ms by default). The suite
//! cannot pass on no work, nor on faked work: every task must complete at
//! least [`MIN_ROUNDS`] rounds (a read, a write where the engine has positioned
//! I/O, an fsync every second round), else the cell is `inconclusive`; every
//! read must return the file's bytes and every write must land in the backing
//! file, else it fails.

use std::sync::Arc;
use std::time::{Duration, Instant};

use slowfs_harness::lag::{ControlProbe, LagProbe};
use slowfs_harness::{Capability, Engine, EngineFile, OpenOptions};

use super::mount;
use crate::{outcome, Outcome, SuiteConfig, Verdict};

const TASKS: usize = 16;
const FILE: usize = 64 << 10;
/// Every task keeps working at least this long...
const RUN_FOR: Duration = Duration::from_millis(1200);
/// ... and until it has done this many rounds ...
pub const MIN_ROUNDS: u64 = 2;
/// ... but never longer than this (then the run is inconclusive).
const HARD_LIMIT: Duration = Duration::from_secs(20);
/// The heartbeat fails the loop when its stalls beyond the bound exceed the
/// control's by this many injected delays.
pub const EXCESS_DELAYS: f64 = 3.0;

/// What the tasks did.
#[derive(Debug, Default, Clone, Copy)]
struct Work {
    reads: u64,
    writes: u64,
    fsyncs: u64,
    /// Fewest rounds any task completed.
    least_rounds: u64,
}

/// The bytes task `task`'s file starts with: distinct per task and offset, so
/// a read that returns anything else (zeros, another offset) is seen.
fn initial(seed: u64, task: usize) -> Vec<u8> {
    let mut x = seed ^ (task as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (0..FILE)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect()
}

/// Runs the suite.
pub fn run<E: Engine>(engine: Arc<E>, config: &SuiteConfig) -> Outcome {
    let delay = format!("* delay={}ms", config.op_delay_ms);
    let mount = match mount(config, &[&delay, "fsync,fdatasync delay=250ms"]) {
        Ok(m) => m,
        Err(verdict) => return outcome(verdict, 0),
    };
    for task in 0..TASKS {
        let _ = std::fs::write(
            mount.backing_path(&format!("lag-{task}")),
            initial(config.seed, task),
        );
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // The loop's thread: this one (block_on runs the tasks here), or a driver's.
    let loop_thread = engine
        .own_loop_thread()
        .unwrap_or_else(|| nix::unistd::gettid().as_raw() as u32);
    mount.watch_thread(loop_thread);
    let control = ControlProbe::start().expect("starting the control heartbeat");
    let seed = config.seed;
    let result: Result<_, String> = rt.block_on(async {
        let probe = LagProbe::start();
        let start = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        let positioned =
            engine.supports(Capability::ReadAt) && engine.supports(Capability::WriteAt);
        // An out-of-process engine measures its own loop; start its window now.
        let _ = engine.own_loop_lag(true).await;
        for task in 0..TASKS {
            let engine = Arc::clone(&engine);
            let path = mount.path(&format!("lag-{task}"));
            tasks.spawn(task_workload(engine, path, seed, task, start, positioned));
        }
        let mut work = Work {
            least_rounds: u64::MAX,
            ..Work::default()
        };
        let mut models = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            let (done, task, model) = joined.map_err(|e| e.to_string())??;
            work.reads += done.reads;
            work.writes += done.writes;
            work.fsyncs += done.fsyncs;
            work.least_rounds = work.least_rounds.min(done.least_rounds);
            models.push((task, model));
        }
        // One more tick, so a heartbeat starved until now records how late it is.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let local = probe.stop();
        Ok((
            engine.own_loop_lag(false).await.unwrap_or(local),
            work,
            models,
        ))
    });
    let control = control.stop();
    let waits = mount.waits_of(loop_thread);
    let (lag, work, models) = match result {
        Ok(r) => r,
        Err(e) => {
            return outcome(
                Verdict::Fail {
                    reason: format!("workload failed: {e}"),
                    trace: String::new(),
                },
                1,
            )
        }
    };
    for (task, model) in &models {
        let landed = std::fs::read(mount.backing_path(&format!("lag-{task}"))).unwrap_or_default();
        if &landed != model {
            return outcome(
                Verdict::Fail {
                    reason: format!(
                        "task {task}'s writes did not land in the file (the engine reported them written): the engine does not do the I/O it reports"
                    ),
                    trace: String::new(),
                },
                1,
            );
        }
    }
    judge(config, loop_thread, &lag, &control, &waits, work)
}

/// One task's rounds: read (checked against the file's model), write, and
/// every other round fsync, until the run's time is up; what it did and the
/// bytes its file must hold.
async fn task_workload<E: Engine>(
    engine: Arc<E>,
    path: std::path::PathBuf,
    seed: u64,
    task: usize,
    start: Instant,
    positioned: bool,
) -> Result<(Work, usize, Vec<u8>), String> {
    let mut model = initial(seed, task);
    let fail = |what: String| format!("task {task}: {what}");
    let file = engine
        .open(&path, &OpenOptions::read_write_create())
        .await
        .map_err(|e| fail(format!("open: {e}")))?;
    let mut work = Work::default();
    let mut round = 0u64;
    let mut cursor = 0usize;
    while (round < MIN_ROUNDS || start.elapsed() < RUN_FOR) && start.elapsed() < HARD_LIMIT {
        let offset = ((round * 4096) % (60 << 10)) as usize;
        let (at, n, buf) = if positioned {
            let (r, buf) = file.read_at(vec![0; 4096], offset as u64).await;
            (offset, r.map_err(|e| fail(format!("read_at: {e}")))?, buf)
        } else {
            // Engines without positioned I/O (aiofiles): cursor reads.
            let (r, buf) = file.read(vec![0; 4096]).await;
            let n = r.map_err(|e| fail(format!("read: {e}")))?;
            cursor += n;
            (cursor - n, n, buf)
        };
        let expected = &model[at.min(FILE)..(at + 4096).min(FILE)];
        if n > buf.len() || buf[..n] != expected[..n.min(expected.len())] {
            return Err(fail(format!(
                    "a {n}-byte read at {at} returned bytes that are not the file's: the engine does not do the I/O it reports"
                )));
        }
        work.reads += 1;
        if positioned {
            let data = vec![(round as u8) ^ (task as u8); 4096];
            let (w, _) = file.write_at(data.clone(), offset as u64).await;
            let n = w.map_err(|e| fail(format!("write_at: {e}")))?;
            model[offset..offset + n.min(4096)].copy_from_slice(&data[..n.min(4096)]);
            work.writes += 1;
        }
        if round % 2 == 1 {
            file.fsync()
                .await
                .map_err(|e| fail(format!("fsync: {e}")))?;
            work.fsyncs += 1;
        }
        round += 1;
    }
    file.close()
        .await
        .map_err(|e| fail(format!("close: {e}")))?;
    work.least_rounds = round;
    Ok((work, task, model))
}

/// The verdict: the loop thread must not have waited for slowfs itself, nor
/// stalled more than a control heartbeat in the same window (the machine's
/// own noise), and the tasks must have done enough I/O to tell.
fn judge(
    config: &SuiteConfig,
    loop_thread: u32,
    lag: &slowfs_harness::lag::LagReport,
    control: &slowfs_harness::lag::LagReport,
    waits: &[slowfs::stats::Waited],
    work: Work,
) -> Outcome {
    let bound = config.lag_bound();
    let delay = config.op_delay_ms as f64;
    let did = format!(
        "{TASKS} tasks did {} reads, {} writes, {} fsyncs (fewest rounds by one task: {}, {MIN_ROUNDS} needed), every read and write checked against the file; every op delayed {} ms, fsync 250 ms",
        work.reads, work.writes, work.fsyncs, work.least_rounds, config.op_delay_ms
    );
    let held: Vec<&slowfs::stats::Waited> = waits
        .iter()
        .filter(|w| w.blocked && w.latency.as_secs_f64() * 1000.0 > bound)
        .collect();
    let submitted = waits.iter().filter(|w| !w.blocked).count();
    let stalls = lag.stalls_over(bound);
    let noise = control.stalls_over(bound);
    let excess = stalls.total_ms - noise.total_ms;
    let evidence = format!(
        "loop thread {loop_thread}: {} request(s) of its own reached slowfs ({submitted} submitted asynchronously, the thread not waiting); heartbeat: {} beat(s) late by more than {bound:.0} ms, {:.0} ms in all (max {:.1} ms, p99 {:.1} ms); control heartbeat, same window: {} such beat(s), {:.0} ms (max {:.1} ms)",
        waits.len(),
        stalls.beats,
        stalls.total_ms,
        lag.max_ms,
        lag.p99_ms,
        noise.beats,
        noise.total_ms,
        control.max_ms,
    );
    let verdict = if lag.samples < 2 {
        Verdict::Fail {
            reason: format!(
                "the heartbeat ran only {} time(s): the runtime thread never came back to it",
                lag.samples
            ),
            trace: format!("  {did}"),
        }
    } else if !held.is_empty() {
        Verdict::Fail {
            reason: format!(
                "the loop thread itself waited for {} request(s) that slowfs held longer than the bound ({bound:.0} ms): {}",
                held.len(),
                summarize(&held)
            ),
            trace: format!("  {did}\n  {evidence}"),
        }
    } else if excess >= EXCESS_DELAYS * delay {
        Verdict::Fail {
            reason: format!(
                "the loop stalled {:.0} ms more than a control heartbeat in the same window ({} beats late by more than {bound:.0} ms; max {:.1} ms): it waited for file operations",
                excess, stalls.beats, lag.max_ms
            ),
            trace: format!("  {did}\n  {evidence}"),
        }
    } else if work.least_rounds < MIN_ROUNDS {
        Verdict::Inconclusive {
            reason: format!(
                "too little file I/O for a verdict in {} s: {did}",
                HARD_LIMIT.as_secs()
            ),
        }
    } else {
        Verdict::Pass
    };
    let mut outcome = outcome(verdict, 1);
    outcome.work = Some(format!("{did}; {evidence}"));
    outcome.max_lag_ms = Some(lag.max_ms);
    outcome.p99_lag_ms = Some(lag.p99_ms);
    outcome
}

/// `open 3x (longest 101 ms), flush 16x (longest 100 ms)`.
fn summarize(held: &[&slowfs::stats::Waited]) -> String {
    let mut by_op: Vec<(slowfs_faults::Op, usize, Duration)> = Vec::new();
    for w in held {
        match by_op.iter_mut().find(|(op, _, _)| *op == w.op) {
            Some((_, n, longest)) => {
                *n += 1;
                *longest = (*longest).max(w.latency);
            }
            None => by_op.push((w.op, 1, w.latency)),
        }
    }
    by_op
        .iter()
        .map(|(op, n, longest)| {
            format!(
                "{} {n}x (longest {:.0} ms)",
                op.name(),
                longest.as_secs_f64() * 1000.0
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

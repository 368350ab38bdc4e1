//! `loop-lag`: on a current-thread runtime, 16 tasks run a mixed workload while
//! every operation is delayed (default 100 ms, fsync 250 ms); a heartbeat task
//! on the same thread must never be late by a sizeable fraction of one delay.
//!
//! The bound is principled, not tuned: a loop that waits for a file operation is
//! late by the whole delay, so lateness of half the injected delay (by default
//! 50 ms) is a failure, while scheduler noise on a busy machine (tens of ms at a
//! load of 10 on two cores) is not. And the suite cannot pass on no work: every
//! task must complete at least [`MIN_ROUNDS`] rounds (a read, a write where the
//! engine has positioned I/O, and an fsync every second round); less is
//! `inconclusive`, never `pass`. The `blocking` backend, which runs syscalls on
//! the loop thread, fails.

use std::sync::Arc;
use std::time::{Duration, Instant};

use harness::lag::LagProbe;
use harness::{Engine, EngineFile, OpenOptions};

use super::mount;
use crate::{outcome, Outcome, SuiteConfig, Verdict};

const TASKS: usize = 16;
/// Every task keeps working at least this long...
const RUN_FOR: Duration = Duration::from_millis(1200);
/// ... and until it has done this many rounds ...
pub const MIN_ROUNDS: u64 = 2;
/// ... but never longer than this (then the run is inconclusive).
const HARD_LIMIT: Duration = Duration::from_secs(20);

/// What the tasks did.
#[derive(Debug, Default, Clone, Copy)]
struct Work {
    reads: u64,
    writes: u64,
    fsyncs: u64,
    /// Fewest rounds any task completed.
    least_rounds: u64,
}

/// Runs the suite.
pub fn run<E: Engine>(engine: Arc<E>, config: &SuiteConfig) -> Outcome {
    if let Err(unsupported) = super::require(&*engine, &["read", "fsync", "lag"]) {
        return unsupported;
    }
    let delay = format!("* delay={}ms", config.op_delay_ms);
    let mount = match mount(config, &[&delay, "fsync,fdatasync delay=250ms"]) {
        Ok(m) => m,
        Err(outcome) => return outcome,
    };
    for task in 0..TASKS {
        let _ = std::fs::write(
            mount.backing_path(&format!("lag-{task}")),
            vec![3u8; 64 << 10],
        );
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let result: Result<_, String> = rt.block_on(async {
        let probe = LagProbe::start();
        let start = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        let positioned = engine.supports("read_at") && engine.supports("write_at");
        // An out-of-process engine measures its own loop; start its window now.
        let _ = engine.own_loop_lag(true).await;
        for task in 0..TASKS {
            let engine = Arc::clone(&engine);
            let path = mount.path(&format!("lag-{task}"));
            tasks.spawn(async move {
                let file = engine
                    .open(&path, &OpenOptions::read_write_create())
                    .await?;
                let mut work = Work::default();
                let mut round = 0u64;
                while (round < MIN_ROUNDS || start.elapsed() < RUN_FOR)
                    && start.elapsed() < HARD_LIMIT
                {
                    let offset = (round * 4096) % (60 << 10);
                    if positioned {
                        let (r, _) = file.read_at(vec![0; 4096], offset).await;
                        r?;
                        let (w, _) = file.write_at(vec![round as u8; 4096], offset).await;
                        w?;
                        work.writes += 1;
                    } else {
                        // Engines without positioned I/O (aiofiles): cursor reads.
                        let (r, _) = file.read(vec![0; 4096]).await;
                        r?;
                    }
                    work.reads += 1;
                    if round % 2 == 1 {
                        file.fsync().await?;
                        work.fsyncs += 1;
                    }
                    round += 1;
                }
                file.close().await?;
                work.least_rounds = round;
                Ok::<Work, std::io::Error>(work)
            });
        }
        let mut work = Work {
            least_rounds: u64::MAX,
            ..Work::default()
        };
        while let Some(joined) = tasks.join_next().await {
            let done = joined
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
            work.reads += done.reads;
            work.writes += done.writes;
            work.fsyncs += done.fsyncs;
            work.least_rounds = work.least_rounds.min(done.least_rounds);
        }
        // One more tick, so a heartbeat starved until now records how late it is.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let local = probe.stop();
        Ok((engine.own_loop_lag(false).await.unwrap_or(local), work))
    });
    let (lag, work) = match result {
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
    let bound = config.lag_bound();
    let did = format!(
        "{TASKS} tasks did {} reads, {} writes, {} fsyncs (fewest rounds by one task: {}, {MIN_ROUNDS} needed); every op delayed {} ms, fsync 250 ms",
        work.reads, work.writes, work.fsyncs, work.least_rounds, config.op_delay_ms
    );
    let verdict = if lag.samples < 2 {
        Verdict::Fail {
            reason: format!(
                "the heartbeat ran only {} time(s): the runtime thread never came back to it",
                lag.samples
            ),
            trace: format!("  {did}"),
        }
    } else if lag.max_ms > bound {
        Verdict::Fail {
            reason: format!(
                "heartbeat late by up to {:.1} ms (p99 {:.1} ms; bound {bound:.0} ms, half of one injected delay: the loop waited for a file operation)",
                lag.max_ms, lag.p99_ms
            ),
            trace: format!("  {did}"),
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
    outcome.work = Some(did);
    outcome.max_lag_ms = Some(lag.max_ms);
    outcome.p99_lag_ms = Some(lag.p99_ms);
    outcome
}

//! `loop-lag`: on a current-thread runtime, 16 tasks run a mixed workload while
//! every operation is delayed (default 100 ms, fsync 250 ms); a heartbeat task
//! on the same thread must never be late by more than the bound (default 20 ms).
//! An engine that blocks the runtime thread — the `blocking` backend — fails.

use std::sync::Arc;
use std::time::{Duration, Instant};

use harness::lag::LagProbe;
use harness::{Engine, EngineFile, OpenOptions};

use super::mount;
use crate::{outcome, Outcome, SuiteConfig, Verdict};

const TASKS: usize = 16;
const RUN_FOR: Duration = Duration::from_millis(1200);

/// Runs the suite.
pub fn run<E: Engine>(engine: Arc<E>, config: &SuiteConfig) -> Outcome {
    if let Err(unsupported) = super::require(&*engine, &["read", "fsync"]) {
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
        let deadline = Instant::now() + RUN_FOR;
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
                let mut round = 0u64;
                while Instant::now() < deadline {
                    let offset = (round * 4096) % (60 << 10);
                    if positioned {
                        let (r, _) = file.read_at(vec![0; 4096], offset).await;
                        r?;
                        let (w, _) = file.write_at(vec![round as u8; 4096], offset).await;
                        w?;
                    } else {
                        // Engines without positioned I/O (aiofiles): cursor reads.
                        let (r, _) = file.read(vec![0; 4096]).await;
                        r?;
                    }
                    if round % 4 == 3 {
                        file.fsync().await?;
                    }
                    round += 1;
                }
                file.close().await?;
                Ok::<u64, std::io::Error>(round)
            });
        }
        let mut rounds = 0;
        while let Some(joined) = tasks.join_next().await {
            rounds += joined
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
        }
        // One more tick, so a heartbeat starved until now records how late it is.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let local = probe.stop();
        Ok((engine.own_loop_lag(false).await.unwrap_or(local), rounds))
    });
    let (lag, rounds) = match result {
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
    let verdict = if lag.samples < 2 {
        Verdict::Fail {
            reason: format!("the heartbeat ran only {} time(s) in {} ms: the runtime thread never came back to it", lag.samples, RUN_FOR.as_millis()),
            trace: format!("  {TASKS} tasks x (read_at, write_at, fsync every 4th); every op delayed {} ms", config.op_delay_ms),
        }
    } else if lag.max_ms <= config.lag_bound_ms {
        Verdict::Pass
    } else {
        Verdict::Fail {
            reason: format!(
                "heartbeat late by up to {:.1} ms (p99 {:.1} ms, bound {} ms)",
                lag.max_ms, lag.p99_ms, config.lag_bound_ms
            ),
            trace: format!(
                "  {TASKS} tasks x (read_at 4K, write_at 4K, fsync every 4th) for {} ms; every op delayed {} ms, fsync 250 ms; {rounds} rounds done",
                RUN_FOR.as_millis(),
                config.op_delay_ms
            ),
        }
    };
    let mut outcome = outcome(verdict, 1);
    outcome.max_lag_ms = Some(lag.max_ms);
    outcome.p99_lag_ms = Some(lag.p99_ms);
    outcome
}

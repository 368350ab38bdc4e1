//! The loop-lag probe: a heartbeat task that sleeps a fixed tick and records how
//! late each wake-up is. A runtime whose thread is stuck in a syscall wakes late.
//!
//! Besides the distribution, the probe keeps every beat late by more than
//! [`KEEP_LATE_OVER_MS`] (up to [`KEEP_LATE_MAX`] of them): a verdict can then
//! count how much of the window the loop spent stalled, not just its worst beat,
//! and compare it with a control heartbeat's in the same window.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::task::JoinHandle;

/// Beats later than this are kept one by one (ms).
pub const KEEP_LATE_OVER_MS: f64 = 10.0;
/// At most this many late beats are kept.
pub const KEEP_LATE_MAX: usize = 10_000;

/// Lateness of the heartbeat over a window.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LagReport {
    /// Wake-ups recorded.
    pub samples: u64,
    /// Median lateness in milliseconds.
    pub p50_ms: f64,
    /// 99th percentile lateness in milliseconds.
    pub p99_ms: f64,
    /// Worst lateness in milliseconds.
    pub max_ms: f64,
    /// The lateness of every beat later than [`KEEP_LATE_OVER_MS`], where the
    /// probe kept them (a driver may not say).
    pub late_ms: Option<Vec<f64>>,
}

impl LagReport {
    /// A report from the distribution's figures (no late beats kept).
    pub fn new(samples: u64, p50_ms: f64, p99_ms: f64, max_ms: f64) -> LagReport {
        LagReport {
            samples,
            p50_ms,
            p99_ms,
            max_ms,
            late_ms: None,
        }
    }

    /// The beats late by more than `bound_ms`: how many, and their lateness
    /// summed. Without the kept beats, the worst beat alone stands in.
    pub fn stalls_over(&self, bound_ms: f64) -> Stalls {
        match &self.late_ms {
            Some(late) => {
                let over: Vec<f64> = late.iter().copied().filter(|l| *l > bound_ms).collect();
                Stalls {
                    beats: over.len() as u64,
                    total_ms: over.iter().fold(0.0, |sum, l| sum + l),
                }
            }
            None if self.max_ms > bound_ms => Stalls {
                beats: 1,
                total_ms: self.max_ms,
            },
            None => Stalls::default(),
        }
    }
}

/// Beats later than a bound.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Stalls {
    /// How many.
    pub beats: u64,
    /// Their lateness, summed (ms).
    pub total_ms: f64,
}

#[derive(Debug)]
struct Record {
    histogram: Histogram<u64>,
    late_ms: Vec<f64>,
}

/// A running heartbeat. Works on current-thread and multi-thread runtimes.
#[derive(Debug)]
pub struct LagProbe {
    record: Arc<Mutex<Record>>,
    task: JoinHandle<()>,
}

impl LagProbe {
    /// Starts a heartbeat with the default 1 ms tick.
    pub fn start() -> LagProbe {
        Self::with_tick(Duration::from_millis(1))
    }

    /// Starts a heartbeat that sleeps `tick` between wake-ups.
    pub fn with_tick(tick: Duration) -> LagProbe {
        let record = Arc::new(Mutex::new(Record {
            histogram: Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid bounds"),
            late_ms: Vec::new(),
        }));
        let recorder = Arc::clone(&record);
        let task = tokio::spawn(async move {
            loop {
                let start = Instant::now();
                tokio::time::sleep(tick).await;
                let late = start.elapsed().saturating_sub(tick);
                let micros = (late.as_micros() as u64).clamp(1, 600_000_000);
                let mut record = recorder.lock().unwrap();
                record.histogram.saturating_record(micros);
                let ms = micros as f64 / 1000.0;
                if ms > KEEP_LATE_OVER_MS && record.late_ms.len() < KEEP_LATE_MAX {
                    record.late_ms.push(ms);
                }
            }
        });
        LagProbe { record, task }
    }

    /// The report so far.
    pub fn report(&self) -> LagReport {
        let record = self.record.lock().unwrap();
        let h = &record.histogram;
        let ms = |us: u64| us as f64 / 1000.0;
        LagReport {
            samples: h.len(),
            p50_ms: ms(h.value_at_quantile(0.5)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            max_ms: ms(h.max()),
            late_ms: Some(record.late_ms.clone()),
        }
    }

    /// Stops the heartbeat and returns the final report.
    pub fn stop(self) -> LagReport {
        self.task.abort();
        self.report()
    }
}

impl Drop for LagProbe {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A heartbeat on a thread of its own, with its own runtime and no other work:
/// the machine's scheduling noise in the same window as a probe on a busy
/// loop, for telling a loop that waited from a machine that was busy.
#[derive(Debug)]
pub struct ControlProbe {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<LagReport>>,
}

impl ControlProbe {
    /// Starts the control heartbeat (1 ms tick).
    pub fn start() -> std::io::Result<ControlProbe> {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready, started) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("lag-control".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                rt.block_on(async {
                    let probe = LagProbe::start();
                    let _ = ready.send(());
                    let _ = stopped.await;
                    probe.stop()
                })
            })?;
        let _ = started.recv();
        Ok(ControlProbe {
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Stops it; its report.
    pub fn stop(mut self) -> LagReport {
        self.finish()
            .unwrap_or_else(|| LagReport::new(0, 0.0, 0.0, 0.0))
    }

    fn finish(&mut self) -> Option<LagReport> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.thread.take()?.join().ok()
    }
}

impl Drop for ControlProbe {
    fn drop(&mut self) {
        self.finish();
    }
}

//! The loop-lag probe: a heartbeat task that sleeps a fixed tick and records how
//! late each wake-up is. A runtime whose thread is stuck in a syscall wakes late.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::task::JoinHandle;

/// Lateness of the heartbeat over a window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LagReport {
    /// Wake-ups recorded.
    pub samples: u64,
    /// Median lateness in milliseconds.
    pub p50_ms: f64,
    /// 99th percentile lateness in milliseconds.
    pub p99_ms: f64,
    /// Worst lateness in milliseconds.
    pub max_ms: f64,
}

/// A running heartbeat. Works on current-thread and multi-thread runtimes.
#[derive(Debug)]
pub struct LagProbe {
    histogram: Arc<Mutex<Histogram<u64>>>,
    task: JoinHandle<()>,
}

impl LagProbe {
    /// Starts a heartbeat with the default 1 ms tick.
    pub fn start() -> LagProbe {
        Self::with_tick(Duration::from_millis(1))
    }

    /// Starts a heartbeat that sleeps `tick` between wake-ups.
    pub fn with_tick(tick: Duration) -> LagProbe {
        let histogram = Arc::new(Mutex::new(
            Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid bounds"),
        ));
        let recorder = Arc::clone(&histogram);
        let task = tokio::spawn(async move {
            loop {
                let start = Instant::now();
                tokio::time::sleep(tick).await;
                let late = start.elapsed().saturating_sub(tick);
                let micros = (late.as_micros() as u64).clamp(1, 600_000_000);
                recorder.lock().unwrap().saturating_record(micros);
            }
        });
        LagProbe { histogram, task }
    }

    /// The report so far.
    pub fn report(&self) -> LagReport {
        let h = self.histogram.lock().unwrap();
        let ms = |us: u64| us as f64 / 1000.0;
        LagReport {
            samples: h.len(),
            p50_ms: ms(h.value_at_quantile(0.5)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            max_ms: ms(h.max()),
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

//! Holding requests without holding threads.
//!
//! A delayed or hung request is parked as a task on a small tokio runtime: thousands
//! can wait at once on two threads, and when one's time comes its syscall runs on the
//! runtime's blocking pool. No lock is held while a request waits.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio::sync::watch;

/// Parks jobs for a delay and/or until released, then runs them.
#[derive(Debug)]
pub struct Scheduler {
    runtime: Option<Runtime>,
    release: watch::Sender<u64>,
    shutdown: watch::Sender<bool>,
    hung: Arc<AtomicUsize>,
    waiting: Arc<AtomicUsize>,
    /// Parked or running jobs: a job counts until its reply has gone out.
    unfinished: Arc<AtomicUsize>,
}

impl Scheduler {
    /// A scheduler with its own runtime.
    pub fn new() -> std::io::Result<Scheduler> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .max_blocking_threads(64)
            .thread_name("slowfs-sched")
            .enable_time()
            .build()?;
        Ok(Scheduler {
            runtime: Some(runtime),
            release: watch::Sender::new(0),
            shutdown: watch::Sender::new(false),
            hung: Arc::default(),
            waiting: Arc::default(),
            unfinished: Arc::default(),
        })
    }

    /// Runs `job` after `delay`, and, with `hang`, only once released (or after the
    /// hang's timeout). Shutdown cuts every wait short.
    pub fn after(
        &self,
        delay: Duration,
        hang: Option<Option<Duration>>,
        job: impl FnOnce() + Send + 'static,
    ) {
        let Some(runtime) = &self.runtime else {
            return job();
        };
        let mut release = self.release.subscribe();
        let mut shutdown = self.shutdown.subscribe();
        let hung = Arc::clone(&self.hung);
        let waiting = Arc::clone(&self.waiting);
        let unfinished = Arc::clone(&self.unfinished);
        waiting.fetch_add(1, Ordering::SeqCst);
        unfinished.fetch_add(1, Ordering::SeqCst);
        if hang.is_some() {
            hung.fetch_add(1, Ordering::SeqCst);
        }
        runtime.spawn(async move {
            if let Some(timeout) = hang {
                let timeout = async {
                    match timeout {
                        Some(t) => tokio::time::sleep(t).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = release.changed() => {}
                    _ = shutdown.wait_for(|down| *down) => {}
                    _ = timeout => {}
                }
                hung.fetch_sub(1, Ordering::SeqCst);
            }
            if !delay.is_zero() {
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = shutdown.wait_for(|down| *down) => {}
                }
            }
            waiting.fetch_sub(1, Ordering::SeqCst);
            // The job is a syscall plus a reply: run it off the timer threads.
            tokio::task::spawn_blocking(move || {
                job();
                unfinished.fetch_sub(1, Ordering::SeqCst);
            });
        });
    }

    /// Releases every request hung right now; returns how many there were.
    pub fn release(&self) -> usize {
        let hung = self.hung.load(Ordering::SeqCst);
        self.release.send_modify(|generation| *generation += 1);
        hung
    }

    /// Requests hung right now.
    pub fn hung(&self) -> usize {
        self.hung.load(Ordering::SeqCst)
    }

    /// Requests parked right now (delayed or hung).
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// Ends every wait: parked requests run at once. Used before unmounting.
    pub fn shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Ends every wait and waits (at most `limit`) until every parked request has
    /// been answered, so that unmounting right after does not cut off its reply.
    pub fn drain(&self, limit: Duration) {
        self.shutdown();
        let deadline = std::time::Instant::now() + limit;
        while self.unfinished.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.shutdown();
        if let Some(runtime) = self.runtime.take() {
            // Never blocks, so a mount may be dropped inside another async runtime;
            // every parked request was cut short by `shutdown` above.
            runtime.shutdown_background();
        }
    }
}

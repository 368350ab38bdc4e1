//! Interrupts: a parked request whose caller has been signalled ends with EINTR.
//!
//! The kernel sends FUSE_INTERRUPT when the caller of a request the daemon holds
//! gets a signal, but fuser 0.18 does not pass it on (it answers ENOSYS, after
//! which the kernel stops sending it). The signal is visible from outside as long
//! as the caller is blocked in the request, though: a blocked thread cannot take
//! delivery, so the signal stays in `/proc/TID/status` (`SigPnd`, or `ShdPnd` for
//! one sent to the process) unless blocked (`SigBlk`); a fatal signal (SIGKILL, or
//! SIGTERM without a handler) shows as a pending SIGKILL, and a caller that is gone
//! has no status at all. This watcher reads those for every request parked longer
//! than a few milliseconds and answers the interrupted ones at once: the killed
//! process can exit, and one with a handler sees EINTR (or, with SA_RESTART and a
//! handler that returns, a restarted call).
//!
//! The scan rate adapts so that it costs at most a few percent of a core: every
//! 5 ms with few parked requests, down to a few thousand status reads a second
//! with thousands parked.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{Fate, Shared};

/// Requests younger than this are not checked: they end on their own soon.
const MIN_AGE: Duration = Duration::from_millis(2);
/// The fastest scan.
const MIN_INTERVAL: Duration = Duration::from_millis(5);
/// Status reads per second at most (each ~10 µs).
const READS_PER_SECOND: u64 = 4000;

pub(super) struct Watcher {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watcher {
    pub(super) fn start(shared: Arc<Shared>) -> std::io::Result<Watcher> {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("slowfs-intr".into())
                .spawn(move || watch(&shared, &stop))?
        };
        Ok(Watcher {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

fn watch(shared: &Shared, stop: &AtomicBool) {
    // The scan must never delay a timer: it runs at the lowest priority.
    // SAFETY: setpriority on this thread (PRIO_PROCESS with a tid) only lowers it.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19) };
    while !stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        let candidates: Vec<(u64, u32)> = {
            let state = shared.lock();
            state
                .parked
                .iter()
                .filter(|(_, p)| p.caller != 0 && now.duration_since(p.parked_at) >= MIN_AGE)
                // One that ends within the next scan anyway is not worth a read.
                .filter(|(_, p)| p.deadline.is_none_or(|d| d > now + MIN_INTERVAL * 2))
                .map(|(&id, p)| (id, p.caller))
                .collect()
        };
        for &(id, caller) in &candidates {
            if interrupted(caller) {
                shared.make_due(id, Fate::Interrupted);
            }
        }
        let interval = MIN_INTERVAL.max(Duration::from_micros(
            candidates.len() as u64 * 1_000_000 / READS_PER_SECOND,
        ));
        std::thread::park_timeout(interval);
    }
}

/// Whether thread `tid` has an unblocked signal pending, or no longer exists.
pub(crate) fn interrupted(tid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{tid}/status")) else {
        return true; // gone
    };
    let mask = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    if status
        .lines()
        .find_map(|l| l.strip_prefix("State:"))
        .is_some_and(|s| s.trim_start().starts_with('Z') || s.trim_start().starts_with('X'))
    {
        return true;
    }
    let pending = mask("SigPnd:") | mask("ShdPnd:");
    pending & !mask("SigBlk:") != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_thread_is_not_interrupted_and_a_gone_one_is() {
        // SAFETY: plain id query.
        let tid = unsafe { libc::gettid() } as u32;
        assert!(!interrupted(tid));
        assert!(interrupted(u32::MAX - 1));
    }
}

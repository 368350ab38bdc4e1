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
    /// Watches `shared`'s parked requests; with `fatal_only`, only a signal
    /// that kills the caller ends one.
    pub(super) fn start(shared: Arc<Shared>, fatal_only: bool) -> std::io::Result<Watcher> {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("slowfs-intr".into())
                .spawn(move || watch(&shared, &stop, fatal_only))?
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

fn watch(shared: &Shared, stop: &AtomicBool, fatal_only: bool) {
    // The scan must never delay a timer: it runs at the lowest priority.
    // SAFETY: setpriority on this thread (PRIO_PROCESS with a tid) only lowers it.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19) };
    while !stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        let candidates: Vec<(u64, u32, bool)> = {
            let state = shared.lock();
            state
                .parked
                .iter()
                .filter(|(_, p)| p.caller != 0 && now.duration_since(p.parked_at) >= MIN_AGE)
                // One that ends within the next scan anyway is not worth a read.
                .filter(|(_, p)| p.deadline.is_none_or(|d| d > now + MIN_INTERVAL * 2))
                .map(|(&id, p)| (id, p.caller, p.any_signal))
                .collect()
        };
        for &(id, caller, any_signal) in &candidates {
            let ends = if fatal_only && !any_signal {
                killed(caller)
            } else {
                interrupted(caller)
            };
            if ends {
                shared.make_due(id, Fate::Interrupted);
            }
        }
        let interval = MIN_INTERVAL.max(Duration::from_micros(
            candidates.len() as u64 * 1_000_000 / READS_PER_SECOND,
        ));
        std::thread::park_timeout(interval);
    }
}

/// Signals whose default action neither kills nor runs anything: they stop
/// the process (SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU) or are ignored (SIGCHLD,
/// SIGCONT, SIGURG, SIGWINCH). Pending with that default action, they must not
/// end a request: Ctrl-Z then `fg`, or a debugger attaching, resumes the call.
const HARMLESS_BY_DEFAULT: u64 = bit(libc::SIGSTOP)
    | bit(libc::SIGTSTP)
    | bit(libc::SIGTTIN)
    | bit(libc::SIGTTOU)
    | bit(libc::SIGCHLD)
    | bit(libc::SIGCONT)
    | bit(libc::SIGURG)
    | bit(libc::SIGWINCH);

/// Signal `n`'s bit in `/proc/TID/status` masks.
const fn bit(signal: i32) -> u64 {
    1 << (signal - 1)
}

/// Whether thread `tid` has a pending signal that will run a handler or kill it
/// (the cases in which a blocked syscall must end), or no longer exists.
pub(crate) fn interrupted(tid: u32) -> bool {
    status_says(tid, interrupting)
}

/// Whether thread `tid` is being killed (a fatal signal shows as a pending
/// SIGKILL in every thread of the process) or no longer exists.
pub fn killed(tid: u32) -> bool {
    status_says(tid, |status| {
        (mask(status, "SigPnd:") | mask(status, "ShdPnd:")) & bit(libc::SIGKILL) != 0
    })
}

/// `verdict` of thread `tid`'s status; true for a thread that is gone or dying.
fn status_says(tid: u32, verdict: impl Fn(&str) -> bool) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{tid}/status")) else {
        return true; // gone
    };
    if status
        .lines()
        .find_map(|l| l.strip_prefix("State:"))
        .is_some_and(|s| s.trim_start().starts_with('Z') || s.trim_start().starts_with('X'))
    {
        return true;
    }
    verdict(&status)
}

/// From a `/proc/TID/status` text: whether a pending, unblocked signal will run
/// a handler (caught) or take its default action and that action kills.
fn interrupting(status: &str) -> bool {
    let mask = |key: &str| mask(status, key);
    let pending = (mask("SigPnd:") | mask("ShdPnd:")) & !mask("SigBlk:") & !mask("SigIgn:");
    let caught = mask("SigCgt:");
    let fatal = !caught & !HARMLESS_BY_DEFAULT;
    pending & (caught | fatal) != 0
}

/// The signal mask on line `key` of a `/proc/TID/status` text.
fn mask(status: &str, key: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0)
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

    fn status(pending: u64, blocked: u64, ignored: u64, caught: u64) -> String {
        format!(
            "State:\tS (sleeping)\nSigPnd:\t{pending:016x}\nShdPnd:\t0000000000000000\nSigBlk:\t{blocked:016x}\nSigIgn:\t{ignored:016x}\nSigCgt:\t{caught:016x}\n"
        )
    }

    #[test]
    fn only_signals_that_kill_or_run_a_handler_interrupt() {
        let (stop, cont, term, int) = (
            bit(libc::SIGSTOP),
            bit(libc::SIGCONT),
            bit(libc::SIGTERM),
            bit(libc::SIGINT),
        );
        // Ctrl-Z then fg, in a program with no handlers: nothing ends the call.
        assert!(!interrupting(&status(stop | cont, 0, 0, 0)));
        assert!(!interrupting(&status(bit(libc::SIGWINCH), 0, 0, 0)));
        // A handler for SIGCONT runs: the call is interrupted (or restarted).
        assert!(interrupting(&status(cont, 0, 0, cont)));
        // Default SIGTERM kills; an ignored or blocked one does nothing.
        assert!(interrupting(&status(term, 0, 0, 0)));
        assert!(!interrupting(&status(term, 0, term, 0)));
        assert!(!interrupting(&status(int, int, 0, int)));
        assert!(interrupting(&status(int, 0, 0, int)));
    }
}

//! SIGINT/SIGTERM handling for commands that must clean up: the signals are
//! blocked in every thread and waited for with sigwait, so a Ctrl-C always
//! reaches the code that unmounts.

use nix::sys::signal::{signal, SigHandler, SigSet, Signal};

const TERMINATION: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// Blocks SIGINT, SIGTERM and SIGHUP in this thread and every thread started after,
/// for [`SigSet::wait`]. Call before starting any thread.
pub fn block_termination() -> SigSet {
    let mut set = SigSet::empty();
    for sig in TERMINATION {
        // An inherited SIG_IGN (background jobs of a non-interactive shell ignore
        // SIGINT) would discard the signal before sigwait could see it.
        // SAFETY: SIG_DFL installs no handler code.
        let _ = unsafe { signal(sig, SigHandler::SigDfl) };
        set.add(sig);
    }
    let _ = set.thread_block();
    set
}

/// Waits for one of `set`'s signals, or until `ended()` turns true (checked a few
/// times a second): a mount unmounted from outside (`slowfs umount`, `umount -l`)
/// ends its daemon instead of leaving it waiting for a Ctrl-C that never comes.
/// Returns the signal, or `None` when `ended` stopped the wait.
pub fn wait_unless(set: &SigSet, ended: impl Fn() -> bool) -> Option<Signal> {
    let timeout = libc::timespec {
        tv_sec: 0,
        tv_nsec: 50_000_000,
    };
    loop {
        // SAFETY: `set` is an initialised sigset; no siginfo is asked for.
        let signo = unsafe { libc::sigtimedwait(set.as_ref(), std::ptr::null_mut(), &timeout) };
        if let Ok(signal) = Signal::try_from(signo) {
            return Some(signal);
        }
        if ended() {
            return None;
        }
    }
}

/// Waits up to `timeout` for one of `set`'s signals.
pub fn wait_for(set: &SigSet, timeout: std::time::Duration) -> Option<Signal> {
    let timeout = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `set` is an initialised sigset; no siginfo is asked for.
    let signo = unsafe { libc::sigtimedwait(set.as_ref(), std::ptr::null_mut(), &timeout) };
    Signal::try_from(signo).ok()
}

/// The controlling terminal lent to the command's process group while it runs
/// (so that it can read from it and Ctrl-C reaches it, as under a shell), and
/// taken back on drop. Does nothing when standard input is not a terminal.
pub struct Terminal {
    ours: Option<nix::unistd::Pid>,
}

impl Terminal {
    /// Makes `group` the terminal's foreground process group.
    pub fn hand_to(group: nix::unistd::Pid) -> Terminal {
        let stdin = std::io::stdin();
        let Ok(ours) = nix::unistd::tcgetpgrp(&stdin) else {
            return Terminal { ours: None };
        };
        // A background process group that changes the terminal gets SIGTTOU.
        // SAFETY: SIG_IGN installs no handler code.
        let _ = unsafe { signal(Signal::SIGTTOU, SigHandler::SigIgn) };
        if nix::unistd::tcsetpgrp(&stdin, group).is_err() {
            return Terminal { ours: None };
        }
        Terminal { ours: Some(ours) }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if let Some(ours) = self.ours {
            let _ = nix::unistd::tcsetpgrp(std::io::stdin(), ours);
        }
    }
}

/// Unblocks SIGINT, SIGTERM and SIGHUP in the calling thread: for a child about
/// to `exec` (a blocked mask is inherited across exec), from `pre_exec`.
/// Async-signal-safe.
pub fn unblock_termination() {
    // SAFETY: sigemptyset/sigaddset/pthread_sigmask on a local set are
    // async-signal-safe and touch nothing else.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

//! SIGINT/SIGTERM handling: the signals are blocked in every thread and waited for
//! with sigwait, so a Ctrl-C always reaches the code that unmounts.

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

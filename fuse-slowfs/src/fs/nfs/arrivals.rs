//! The order the kernel sent requests in, where the NFS client depends on it.
//!
//! close(2) returns before the daemon has seen the file closed: the kernel
//! queues the RELEASE at the last `fput` and does not wait for its answer
//! (`fuse_file_put`, fs/fuse/file.c). The caller's next request, say the
//! unlink SQLite sends for its journal, is queued after it, but another
//! daemon thread can take it up and reach the silly-rename check before the
//! RELEASE's thread has counted the file closed. The NFS client counts it
//! closed within close(2) (`__fput` -> `nfs_file_release`), so its unlink
//! removes the file. (Counted at the end of the RELEASE's job, 5-8 in 2,000
//! such unlinks here were silly renames, and one whose RELEASE ran during
//! the rename kept its `.nfs` name for good.)
//!
//! The kernel numbers requests as it queues them (`unique`, in steps of
//! `FUSE_REQ_ID_STEP`, 2; odd numbers are interrupts: fs/fuse/dev_i.h), and
//! hands them to the daemon's threads in that order, so every request
//! numbered below the unlink's was read first. Each request counts as
//! arrived as its handler starts (a RELEASE once it has counted its file
//! closed), and [`Arrivals::wait_for_earlier`] waits until all requests
//! numbered below a given one have: microseconds, unless a thread was
//! preempted between reading a request and starting it. A number that
//! never comes (a request the kernel dropped before it was read, an opcode
//! fuser answers itself) is given up on after [`GAP_TIMEOUT`].

use std::collections::BTreeSet;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Request numbers step by this (fs/fuse/dev_i.h `FUSE_REQ_ID_STEP`).
const STEP: u64 = 2;

/// How long a wait lasts when an earlier number does not come.
pub(in crate::fs) const GAP_TIMEOUT: Duration = Duration::from_millis(50);

/// Arrived numbers kept above a missing one before it is given up on: far
/// more than the daemon's threads can hold read and not yet started.
const AHEAD_LIMIT: usize = 4096;

/// Which requests have arrived, in the kernel's numbering.
#[derive(Debug, Default)]
pub(in crate::fs) struct Arrivals {
    floor: Mutex<Floor>,
    arrived: Condvar,
}

#[derive(Debug, Default)]
struct Floor {
    /// The lowest number not arrived yet (`None` until the first request).
    next: Option<u64>,
    /// Numbers arrived above `next`.
    ahead: BTreeSet<u64>,
    /// Threads in [`Arrivals::wait_for_earlier`] (no wake-ups without them).
    waiters: usize,
}

impl Floor {
    fn mark(&mut self, unique: u64) {
        if unique % STEP != 0 {
            return; // an interrupt's (FUSE_INT_REQ_BIT)
        }
        let next = *self.next.get_or_insert(unique);
        if unique < next {
            return;
        }
        self.ahead.insert(unique);
        self.advance(next);
        if self.ahead.len() > AHEAD_LIMIT {
            let lowest = *self.ahead.first().expect("not empty");
            self.advance(lowest);
        }
    }

    /// Moves `next` up from `from` over the numbers arrived.
    fn advance(&mut self, from: u64) {
        let mut next = from;
        while self.ahead.remove(&next) {
            next += STEP;
        }
        while self.ahead.first().is_some_and(|&n| n < next) {
            self.ahead.pop_first();
        }
        self.next = Some(next);
    }

    fn all_below(&self, unique: u64) -> bool {
        self.next.is_none_or(|next| next >= unique)
    }

    /// Gives up on the numbers below `unique` that have not come.
    fn skip_to(&mut self, unique: u64) {
        if !self.all_below(unique) {
            self.advance(unique);
        }
    }
}

impl Arrivals {
    /// The request numbered `unique` has arrived.
    pub(in crate::fs) fn arrived(&self, unique: u64) {
        let mut floor = self.floor.lock().unwrap();
        floor.mark(unique);
        if floor.waiters > 0 {
            self.arrived.notify_all();
        }
    }

    /// Waits until every request numbered below `unique` has arrived, at
    /// most `timeout` (then gives up on those missing): whether they all
    /// had.
    pub(in crate::fs) fn wait_for_earlier(&self, unique: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut floor = self.floor.lock().unwrap();
        floor.waiters += 1;
        let all = loop {
            if floor.all_below(unique) {
                break true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                floor.skip_to(unique);
                // Other waiters may be satisfied by the skip.
                self.arrived.notify_all();
                break false;
            }
            floor = self.arrived.wait_timeout(floor, left).unwrap().0;
        };
        floor.waiters -= 1;
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_ends_when_every_earlier_request_has_arrived() {
        let arrivals = std::sync::Arc::new(Arrivals::default());
        arrivals.arrived(10);
        arrivals.arrived(14);
        // 12 is read, not started yet: a wait for those before 16 waits for it.
        let waiter = {
            let arrivals = arrivals.clone();
            std::thread::spawn(move || arrivals.wait_for_earlier(16, Duration::from_secs(10)))
        };
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished(), "12 has not arrived yet");
        arrivals.arrived(12);
        assert!(waiter.join().unwrap());
        assert!(arrivals.wait_for_earlier(16, Duration::ZERO));
    }

    #[test]
    fn a_number_that_never_comes_is_given_up_on() {
        let arrivals = Arrivals::default();
        arrivals.arrived(10);
        arrivals.arrived(14);
        let started = Instant::now();
        assert!(!arrivals.wait_for_earlier(16, Duration::from_millis(30)));
        assert!(started.elapsed() >= Duration::from_millis(30));
        // Given up on: the next wait does not wait for 12 again.
        arrivals.arrived(16);
        assert!(arrivals.wait_for_earlier(18, Duration::ZERO));
        // Control: a number still missing above it is waited for.
        arrivals.arrived(20);
        assert!(!arrivals.wait_for_earlier(22, Duration::ZERO));
    }

    #[test]
    fn interrupts_odd_numbers_and_late_ones_do_not_count() {
        let arrivals = Arrivals::default();
        arrivals.arrived(10);
        arrivals.arrived(13); // an interrupt's number: never the floor's
        arrivals.arrived(8); // arrived after the first, below it
        assert!(arrivals.wait_for_earlier(12, Duration::ZERO));
        assert!(!arrivals.wait_for_earlier(14, Duration::ZERO));
    }

    #[test]
    fn the_numbers_kept_are_bounded() {
        let arrivals = Arrivals::default();
        arrivals.arrived(2);
        // 4 never comes; thousands after it do.
        for n in 0..(AHEAD_LIMIT as u64 + 10) {
            arrivals.arrived(6 + n * STEP);
        }
        let floor = arrivals.floor.lock().unwrap();
        assert!(floor.ahead.len() <= AHEAD_LIMIT);
        assert!(floor.next.unwrap() > 4, "4 was given up on");
    }
}

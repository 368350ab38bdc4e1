//! Holding requests without holding threads, and letting them go on time.
//!
//! A delayed or hung request is *parked*: an entry in a table and, if it has a
//! deadline, in a timer heap. A small fixed pool of workers serves the heap: one of
//! them at a time (the timekeeper) sleeps until the earliest deadline, with a 1 ns
//! timer slack so the kernel's high-resolution timer wakes it on time, then runs
//! the due job (its syscall and reply) itself — no further thread hop — while the
//! next idle worker takes over the clock. Thousands of requests wait at once on a
//! handful of threads, and no lock is held while anything waits or runs.
//!
//! A parked request ends early when its caller is interrupted: the [`interrupts`]
//! watcher notices a pending signal of the caller (or that it is gone) and the
//! request is answered with EINTR — the daemon-side equivalent of NFS's `intr`
//! ([`Interrupts::AnySignal`]), or, as an NFS mount since Linux 2.6.25, only
//! when the signal is fatal ([`Interrupts::FatalOnly`]). A soft NFS mount also
//! gives a parked request up at its major timeout ([`Fate::GaveUp`]).

use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use slowfs_faults::Hang;

mod interrupts;

pub(crate) use interrupts::interrupted as interrupted_or_gone;
pub use interrupts::killed as killed_or_gone;

/// How a parked request ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Its time came (or it was released): do it.
    Run,
    /// Its caller was interrupted or is gone: answer EINTR without doing it.
    Interrupted,
    /// A soft mount's major timeout came first: answer its errno without doing it.
    GaveUp,
}

/// Which signals of its caller end a parked request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupts {
    /// None (`--no-intr`): the request waits its time out.
    Never,
    /// One that kills the caller or runs a handler (NFS's old `intr`).
    AnySignal,
    /// Only one that kills it (SIGKILL, or a signal whose default action
    /// kills): an NFS mount since Linux 2.6.25.
    FatalOnly,
}

type Job = Box<dyn FnOnce(Fate) + Send>;

/// Workers that run due jobs. Jobs are short (a syscall and a reply) but may block
/// (fsync), so there are a few; none is tied to a waiting request.
const WORKERS: usize = 8;

/// The timekeeper wakes this long before a deadline and spins the rest: waking a
/// sleeping thread takes tens of microseconds on a virtual machine, which would
/// land every delay that much late.
const SPIN: Duration = Duration::from_micros(60);

struct Parked {
    job: Job,
    /// The caller's thread id (0: the kernel's own request, never interrupted).
    caller: u32,
    /// Waiting for a release (and, with a deadline, at most until then).
    hung: bool,
    /// The delay still to serve once a hang ends.
    delay_after_hang: Duration,
    /// When this entry is due; a heap entry with another time is stale.
    deadline: Option<Instant>,
    /// A soft mount's major timeout: if still parked then, it gives up.
    gives_up_at: Option<Instant>,
    /// Ended by any signal that runs a handler, even where only fatal ones
    /// end a request (a blocked lock: `nlmclnt_block` waits interruptibly).
    any_signal: bool,
    parked_at: Instant,
}

#[derive(Default)]
struct State {
    next_id: u64,
    parked: HashMap<u64, Parked>,
    timers: BinaryHeap<std::cmp::Reverse<(Instant, u64)>>,
    due: VecDeque<(u64, Fate)>,
    /// Whether a worker is sleeping until the earliest deadline.
    timekeeper: bool,
    shutdown: bool,
    exit: bool,
}

impl State {
    fn set_deadline(&mut self, id: u64, when: Instant) {
        if let Some(p) = self.parked.get_mut(&id) {
            p.deadline = Some(when);
            self.timers.push(std::cmp::Reverse((when, id)));
        }
    }

    /// A hang ends (released or timed out): the delay, if any, starts now.
    fn unhang(&mut self, id: u64, now: Instant) {
        let Some(p) = self.parked.get_mut(&id) else {
            return;
        };
        p.hung = false;
        p.deadline = None;
        if p.delay_after_hang.is_zero() {
            self.due.push_back((id, Fate::Run));
        } else {
            let when = now + p.delay_after_hang;
            self.set_deadline(id, when);
        }
    }
}

struct Shared {
    state: Mutex<State>,
    /// Idle workers wait here for due jobs.
    work: Condvar,
    /// The timekeeper waits here for the earliest deadline (or an earlier one).
    clock: Condvar,
    hung: AtomicUsize,
    waiting: AtomicUsize,
    /// Parked or running jobs: a job counts until its reply has gone out.
    unfinished: AtomicUsize,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks a parked request due with `fate` (interrupts, releases).
    fn make_due(&self, id: u64, fate: Fate) {
        let mut state = self.lock();
        if state.parked.contains_key(&id) {
            state.due.push_back((id, fate));
            drop(state);
            self.work.notify_one();
            self.clock.notify_one();
        }
    }
}

/// Parks jobs for a delay and/or until released, then runs them.
pub struct Scheduler {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    watcher: Option<interrupts::Watcher>,
    gives_up_after: Option<Duration>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("waiting", &self.waiting())
            .field("hung", &self.hung())
            .finish()
    }
}

impl Scheduler {
    /// A scheduler with its own workers. A parked request ends with EINTR when
    /// its caller gets a signal `interrupts` names (see [`interrupts`]), and
    /// with [`Fate::GaveUp`] once parked `gives_up_after` (a soft mount's
    /// major timeout).
    pub fn new(
        interrupts: Interrupts,
        gives_up_after: Option<Duration>,
    ) -> std::io::Result<Scheduler> {
        let shared = Arc::new(Shared {
            state: Mutex::default(),
            work: Condvar::new(),
            clock: Condvar::new(),
            hung: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            unfinished: AtomicUsize::new(0),
        });
        let workers = (0..WORKERS)
            .map(|i| {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("slowfs-timer-{i}"))
                    .spawn(move || work(&shared))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let watcher = match interrupts {
            Interrupts::Never => None,
            _ => Some(interrupts::Watcher::start(
                Arc::clone(&shared),
                interrupts == Interrupts::FatalOnly,
            )?),
        };
        Ok(Scheduler {
            shared,
            workers,
            watcher,
            gives_up_after,
        })
    }

    /// Runs `job(Fate::Run)` at `deadline` — and, with `hang`, only once released
    /// (or after the hang's timeout), then after `delay_after_hang`. `caller` is the
    /// requesting thread: if it is interrupted first, `job(Fate::Interrupted)` runs
    /// instead. Shutdown runs every parked job at once.
    pub fn park(
        &self,
        deadline: Instant,
        hang: Option<Hang>,
        delay_after_hang: Duration,
        caller: u32,
        job: impl FnOnce(Fate) + Send + 'static,
    ) {
        let shared = &self.shared;
        let mut state = shared.lock();
        if state.shutdown {
            drop(state);
            return job(Fate::Run);
        }
        let id = state.next_id;
        state.next_id += 1;
        let now = Instant::now();
        state.parked.insert(
            id,
            Parked {
                job: Box::new(job),
                caller,
                hung: hang.is_some(),
                delay_after_hang,
                deadline: None,
                gives_up_at: None,
                any_signal: false,
                parked_at: now,
            },
        );
        if let Some(limit) = self.gives_up_after {
            let when = now + limit;
            if let Some(p) = state.parked.get_mut(&id) {
                p.gives_up_at = Some(when);
            }
            state.timers.push(std::cmp::Reverse((when, id)));
        }
        shared.waiting.fetch_add(1, Ordering::SeqCst);
        shared.unfinished.fetch_add(1, Ordering::SeqCst);
        match hang {
            Some(Hang::AtMost(timeout)) => {
                shared.hung.fetch_add(1, Ordering::SeqCst);
                state.set_deadline(id, now + timeout);
            }
            Some(Hang::UntilReleased) => {
                shared.hung.fetch_add(1, Ordering::SeqCst);
            }
            None => state.set_deadline(id, deadline),
        }
        drop(state);
        // The timekeeper may be sleeping towards a later deadline.
        shared.clock.notify_one();
        shared.work.notify_one();
    }

    /// Parks `job` until [`wake`](Self::wake) or `retry_at`, whichever comes
    /// first, and returns what `wake` takes: a wait for something outside
    /// the rules (a blocked lock), which holds no thread. It is never given
    /// up at a soft mount's major timeout, and any signal of `caller` that
    /// runs a handler or kills ends it (`Fate::Interrupted`) where the
    /// scheduler watches signals at all. Shutdown runs it at once.
    pub fn park_until_woken(
        &self,
        retry_at: Instant,
        caller: u32,
        job: impl FnOnce(Fate) + Send + 'static,
    ) -> u64 {
        let shared = &self.shared;
        let mut state = shared.lock();
        let id = state.next_id;
        state.next_id += 1;
        if state.shutdown {
            drop(state);
            job(Fate::Run);
            return id;
        }
        state.parked.insert(
            id,
            Parked {
                job: Box::new(job),
                caller,
                hung: false,
                delay_after_hang: Duration::ZERO,
                deadline: None,
                gives_up_at: None,
                any_signal: true,
                parked_at: Instant::now(),
            },
        );
        state.set_deadline(id, retry_at);
        shared.waiting.fetch_add(1, Ordering::SeqCst);
        shared.unfinished.fetch_add(1, Ordering::SeqCst);
        drop(state);
        shared.clock.notify_one();
        shared.work.notify_one();
        id
    }

    /// Runs the job parked as `id` by [`park_until_woken`](Self::park_until_woken)
    /// now, if it is still parked.
    pub fn wake(&self, id: u64) {
        self.shared.make_due(id, Fate::Run);
    }

    /// Releases every request hung right now; returns how many there were.
    pub fn release(&self) -> usize {
        let mut state = self.shared.lock();
        let now = Instant::now();
        let hung: Vec<u64> = state
            .parked
            .iter()
            .filter(|(_, p)| p.hung)
            .map(|(&id, _)| id)
            .collect();
        for &id in &hung {
            state.unhang(id, now);
            self.shared.hung.fetch_sub(1, Ordering::SeqCst);
        }
        drop(state);
        self.shared.work.notify_all();
        self.shared.clock.notify_all();
        hung.len()
    }

    /// Whether a caller's signals can end its requests at all (not under
    /// `--no-intr`).
    pub fn interruptible(&self) -> bool {
        self.watcher.is_some()
    }

    /// Whether [`shutdown`](Self::shutdown) has run: nothing may wait any more.
    pub fn is_shut_down(&self) -> bool {
        self.shared.lock().shutdown
    }

    /// Requests hung right now.
    pub fn hung(&self) -> usize {
        self.shared.hung.load(Ordering::SeqCst)
    }

    /// Requests parked right now (delayed, hung, or an NFS lock wait).
    pub fn waiting(&self) -> usize {
        self.shared.waiting.load(Ordering::SeqCst)
    }

    /// Ends every wait: parked requests run at once, new ones do not wait. Used
    /// before unmounting.
    pub fn shutdown(&self) {
        let mut state = self.shared.lock();
        state.shutdown = true;
        let ids: Vec<u64> = state.parked.keys().copied().collect();
        for id in ids {
            if state.parked.get(&id).is_some_and(|p| p.hung) {
                self.shared.hung.fetch_sub(1, Ordering::SeqCst);
            }
            if let Some(p) = state.parked.get_mut(&id) {
                p.hung = false;
                p.deadline = None;
                p.gives_up_at = None;
            }
            state.due.push_back((id, Fate::Run));
        }
        drop(state);
        self.shared.work.notify_all();
        self.shared.clock.notify_all();
    }

    /// Ends every wait and waits (at most `limit`) until every parked request has
    /// been answered, so that unmounting right after does not cut off its reply.
    pub fn drain(&self, limit: Duration) {
        self.shutdown();
        let deadline = Instant::now() + limit;
        while self.shared.unfinished.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.shutdown();
        drop(self.watcher.take());
        self.shared.lock().exit = true;
        self.shared.work.notify_all();
        self.shared.clock.notify_all();
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

/// One worker: runs due jobs; when none is due and nobody keeps the clock, keeps
/// it until the earliest deadline.
fn work(shared: &Shared) {
    // Wake-ups from timed waits land within a microsecond or so of the deadline
    // instead of up to the default 50 µs slack later.
    // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    let mut state = shared.lock();
    loop {
        if let Some((id, fate)) = state.due.pop_front() {
            if let Some(parked) = state.parked.remove(&id) {
                drop(state);
                run(shared, parked, fate);
                state = shared.lock();
            }
            continue;
        }
        if state.exit {
            return;
        }
        let now = Instant::now();
        match state.timers.peek().map(|t| t.0) {
            Some((when, id)) if when <= now => {
                state.timers.pop();
                let current = state.parked.get(&id).map(|p| (p.deadline, p.hung));
                let gives_up = state
                    .parked
                    .get(&id)
                    .is_some_and(|p| p.gives_up_at == Some(when));
                match current {
                    Some(_) if gives_up => state.due.push_back((id, Fate::GaveUp)),
                    Some((Some(deadline), true)) if deadline == when => {
                        // A hang's timeout.
                        state.unhang(id, now);
                        shared.hung.fetch_sub(1, Ordering::SeqCst);
                    }
                    Some((Some(deadline), false)) if deadline == when => {
                        state.due.push_back((id, Fate::Run));
                    }
                    _ => {} // stale: the request ended or got another deadline
                }
                // Another worker keeps the clock while this one runs the job.
                if !state.timers.is_empty() && !state.timekeeper {
                    shared.work.notify_one();
                }
            }
            Some((when, _)) if !state.timekeeper => {
                state.timekeeper = true;
                if when - now > SPIN {
                    state = shared
                        .clock
                        .wait_timeout(state, when - now - SPIN)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                } else {
                    // Too close to sleep: waking takes about this long. No lock
                    // is held while spinning.
                    drop(state);
                    while Instant::now() < when {
                        std::hint::spin_loop();
                    }
                    state = shared.lock();
                }
                state.timekeeper = false;
            }
            None if !state.timekeeper => {
                // No deadline at all: wait as the timekeeper for the first one.
                state.timekeeper = true;
                state = shared.clock.wait(state).unwrap_or_else(|e| e.into_inner());
                state.timekeeper = false;
            }
            _ => {
                state = shared.work.wait(state).unwrap_or_else(|e| e.into_inner());
            }
        }
    }
}

fn run(shared: &Shared, parked: Parked, fate: Fate) {
    shared.waiting.fetch_sub(1, Ordering::SeqCst);
    if parked.hung {
        shared.hung.fetch_sub(1, Ordering::SeqCst);
    }
    let job = parked.job;
    crate::fs::contain::contain("parked", move || job(fate));
    shared.unfinished.fetch_sub(1, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn jobs_run_at_their_deadlines_in_order() {
        let scheduler = Scheduler::new(Interrupts::Never, None).unwrap();
        let (tx, rx) = mpsc::channel();
        let start = Instant::now();
        for ms in [30u64, 10, 20] {
            let tx = tx.clone();
            scheduler.park(
                start + Duration::from_millis(ms),
                None,
                Duration::ZERO,
                0,
                move |fate| tx.send((ms, fate, start.elapsed())).unwrap(),
            );
        }
        let order: Vec<_> = (0..3).map(|_| rx.recv().unwrap()).collect();
        assert_eq!(order.iter().map(|o| o.0).collect::<Vec<_>>(), [10, 20, 30]);
        for (ms, fate, at) in order {
            assert_eq!(fate, Fate::Run);
            assert!(at >= Duration::from_millis(ms), "{ms} ms ran at {at:?}");
        }
    }

    #[test]
    fn hangs_wait_for_release_then_serve_their_delay() {
        let scheduler = Scheduler::new(Interrupts::Never, None).unwrap();
        let (tx, rx) = mpsc::channel();
        scheduler.park(
            Instant::now(),
            Some(Hang::UntilReleased),
            Duration::from_millis(5),
            0,
            move |f| tx.send(f).unwrap(),
        );
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err());
        assert_eq!((scheduler.hung(), scheduler.waiting()), (1, 1));
        assert_eq!(scheduler.release(), 1);
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).unwrap(), Fate::Run);
        scheduler.drain(Duration::from_secs(1));
        assert_eq!((scheduler.hung(), scheduler.waiting()), (0, 0));
    }

    #[test]
    fn a_soft_mount_gives_up_at_its_major_timeout() {
        let scheduler = Scheduler::new(Interrupts::Never, Some(Duration::from_millis(30))).unwrap();
        let (tx, rx) = mpsc::channel();
        let start = Instant::now();
        for (hang, delay) in [(Some(Hang::UntilReleased), 0), (None, 10_000), (None, 5)] {
            let tx = tx.clone();
            scheduler.park(
                start + Duration::from_millis(delay),
                hang,
                Duration::ZERO,
                0,
                move |f| tx.send((delay, f, start.elapsed())).unwrap(),
            );
        }
        let mut ends: Vec<_> = (0..3)
            .map(|_| rx.recv_timeout(Duration::from_secs(5)).unwrap())
            .collect();
        ends.sort_by_key(|e| e.0);
        assert_eq!(ends[0].0..=ends[0].0, 0..=0);
        assert_eq!(ends[0].1, Fate::GaveUp, "the hang");
        assert_eq!(ends[1].1, Fate::Run, "the 5 ms delay, within the limit");
        assert_eq!(ends[2].1, Fate::GaveUp, "the 10 s delay");
        assert!(ends[2].2 >= Duration::from_millis(30) && ends[2].2 < Duration::from_secs(5));
        assert_eq!((scheduler.hung(), scheduler.waiting()), (0, 0));
    }

    #[test]
    fn a_wait_runs_when_woken_or_at_its_retry_and_is_never_given_up() {
        // A soft mount's 10 ms timeout must not end a wait for a lock.
        let scheduler = Scheduler::new(Interrupts::Never, Some(Duration::from_millis(10))).unwrap();
        let (tx, rx) = mpsc::channel();
        let start = Instant::now();
        let ids: Vec<u64> = [60_000u64, 50]
            .into_iter()
            .map(|ms| {
                let tx = tx.clone();
                scheduler.park_until_woken(start + Duration::from_millis(ms), 0, move |f| {
                    tx.send((ms, f, start.elapsed())).unwrap()
                })
            })
            .collect();
        assert!(
            rx.recv_timeout(Duration::from_millis(30)).is_err(),
            "nothing before 50 ms"
        );
        let (ms, fate, at) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!((ms, fate), (50, Fate::Run), "its retry, not GaveUp");
        assert!(at >= Duration::from_millis(50));
        scheduler.wake(ids[0]);
        let (ms, fate, _) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(
            (ms, fate),
            (60_000, Fate::Run),
            "woken long before its retry"
        );
        scheduler.wake(ids[0]); // already run: nothing happens
        assert_eq!(scheduler.waiting(), 0);
    }

    #[test]
    fn shutdown_runs_everything_parked_at_once() {
        let scheduler = Scheduler::new(Interrupts::Never, None).unwrap();
        let (tx, rx) = mpsc::channel();
        for hang in [
            None,
            Some(Hang::UntilReleased),
            Some(Hang::AtMost(Duration::from_secs(60))),
        ] {
            let tx = tx.clone();
            scheduler.park(
                Instant::now() + Duration::from_secs(60),
                hang,
                Duration::ZERO,
                0,
                move |f| tx.send(f).unwrap(),
            );
        }
        scheduler.drain(Duration::from_secs(5));
        assert_eq!(rx.try_iter().count(), 3);
        assert_eq!((scheduler.hung(), scheduler.waiting()), (0, 0));
    }
}

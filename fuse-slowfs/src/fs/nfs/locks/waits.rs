//! Blocked F_SETLKW waits that hold no thread.
//!
//! The NLM client does not poll a blocked lock: the server answers
//! `NLM_BLOCKED`, and grants it later with a `GRANTED` callback that wakes
//! the waiter (`nlmclnt_block` / `nlmclnt_grant`, fs/lockd/clntlock.c),
//! re-asking only every 30 s (`NLMCLNT_POLL_TIMEOUT`) in case a callback was
//! lost. Here the callback is this mount dropping a lock on the file (an
//! unlock or a downgrade, or the close that drops an owner's locks): every
//! wait blocked on that file tries again at once. A lock dropped elsewhere
//! (another mount, a local process) sends no callback, so a wait also tries
//! again on a timer that doubles from 10 ms up to a cap that grows with the
//! number of waits (20 ms for a few, half a second for a thousand). Between
//! tries the wait is parked on the scheduler: no thread and no CPU of its
//! own, and the scheduler's watcher (or the wait itself, at a retry) ends it
//! with EINTR when the caller gets a signal that runs a handler (the NLM
//! client waits interruptibly), unless `--no-intr`. At unmount a wait ends
//! with EIO, as after `umount -f` (EINTR with no signal pending would reach
//! the caller as the kernel's internal ERESTARTSYS).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fuser::{Errno, FileHandle, ReplyEmpty};

use crate::fs::serve::Done;
use crate::fs::sys::SysResult;
use crate::fs::Inner;
use crate::scheduler::{Fate, Scheduler};

/// The first retry of a wait no unlock here has woken.
const FIRST_RETRY: Duration = Duration::from_millis(10);
/// The longest time between retries with few waits, and with many: how late
/// a lock dropped on another mount can be noticed.
const RETRY_CAP: (Duration, Duration) = (Duration::from_millis(20), Duration::from_millis(500));
/// How often a wait looks for a signal of its caller itself (the watcher
/// skips requests parked a moment ago, and a woken wait parks anew).
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// One lock request of an owner: its file, its range and type.
pub(in crate::fs) struct LockRequest {
    pub(in crate::fs) ino: u64,
    pub(in crate::fs) fh: FileHandle,
    pub(in crate::fs) owner: u64,
    pub(in crate::fs) lock: libc::flock,
    /// The requesting thread.
    pub(in crate::fs) caller: u32,
}

impl LockRequest {
    /// Takes (or drops) the lock on the owner's description if no other
    /// owner's conflicts: EAGAIN or EACCES if one does. Dropping or
    /// downgrading one wakes the waits blocked on the file.
    pub(in crate::fs) fn try_lock(&self, inner: &Inner) -> SysResult<()> {
        let nfs = inner.nfs().ok_or(Errno::ENOLCK)?;
        loop {
            let fd = nfs.locks.description(inner, self.ino, self.owner)?;
            let mut lock = self.lock;
            super::fcntl_lock(&fd, libc::F_OFD_SETLK, &mut lock)?;
            // A close of the owner's that dropped this description meanwhile
            // took the lock with it: take it on the one the owner has now.
            if nfs.locks.is_current(self.ino, self.owner, &fd) {
                break;
            }
        }
        let typ = i32::from(self.lock.l_type);
        if typ == libc::F_UNLCK || typ == libc::F_RDLCK {
            nfs.locks.blocked.unlocked(&inner.scheduler, self.ino);
        }
        Ok(())
    }

    /// After a successful request: taking a lock revalidates the file's
    /// cached data (a consistency point).
    pub(in crate::fs) fn taken(&self, inner: &Inner) {
        if i32::from(self.lock.l_type) != libc::F_UNLCK {
            inner.revalidate(self.ino, self.fh);
        }
    }
}

/// The waits blocked on each file of a mount.
#[derive(Debug, Default)]
pub(in crate::fs) struct Blocked {
    files: Mutex<HashMap<u64, OnFile>>,
    next_key: AtomicU64,
    /// Waits alive on the mount.
    alive: AtomicUsize,
}

/// The waits on one file; kept from the first wait's start to the last
/// one's end, so that no unlock between them goes uncounted.
#[derive(Debug, Default)]
struct OnFile {
    /// Locks dropped on the file here so far.
    unlocks: u64,
    /// Waits alive on the file.
    waits: usize,
    /// Each wait (by its key): its latest parking, and the scheduler id to
    /// wake (none once woken or ended).
    parked: HashMap<u64, (u64, Option<u64>)>,
}

impl Blocked {
    /// A wait on `ino` starts: its key.
    fn begin(&self, ino: u64) -> u64 {
        self.alive.fetch_add(1, Ordering::Relaxed);
        self.files.lock().unwrap().entry(ino).or_default().waits += 1;
        self.next_key.fetch_add(1, Ordering::Relaxed)
    }

    fn unlocks(&self, ino: u64) -> u64 {
        self.files
            .lock()
            .unwrap()
            .get(&ino)
            .map_or(0, |file| file.unlocks)
    }

    /// The longest time between a wait's retries now.
    fn retry_cap(&self) -> Duration {
        let alive = self.alive.load(Ordering::Relaxed) as u32;
        (Duration::from_micros(500) * alive).clamp(RETRY_CAP.0, RETRY_CAP.1)
    }

    /// Wait `key` on `ino` parked for the `nth` time as `id`; if a lock was
    /// dropped on the file since it last tried (`seen` unlocks), it tries
    /// again now. A registration that comes late (the wait has already run
    /// again, or ended) is ignored.
    fn parked(&self, scheduler: &Scheduler, ino: u64, key: u64, nth: u64, id: u64, seen: u64) {
        let mut files = self.files.lock().unwrap();
        let Some(file) = files.get_mut(&ino) else {
            return;
        };
        match file.parked.get(&key) {
            // The wait ended before this registration came: nothing to wake.
            Some((u64::MAX, _)) => {
                file.parked.remove(&key);
                return;
            }
            Some((latest, _)) if *latest >= nth => return,
            _ => {}
        }
        if file.unlocks == seen {
            file.parked.insert(key, (nth, Some(id)));
            return;
        }
        file.parked.insert(key, (nth, None));
        drop(files);
        scheduler.wake(id);
    }

    /// Wait `key` on `ino` ended, after parking `parks` times.
    fn ended(&self, ino: u64, key: u64, parks: u64) {
        self.alive.fetch_sub(1, Ordering::Relaxed);
        let mut files = self.files.lock().unwrap();
        let Some(file) = files.get_mut(&ino) else {
            return;
        };
        file.waits -= 1;
        let registered = parks == 0 || file.parked.get(&key).is_some_and(|(nth, _)| *nth >= parks);
        if file.waits == 0 {
            files.remove(&ino);
        } else if registered {
            file.parked.remove(&key);
        } else {
            // Its last parking is still to be registered (the job ran
            // first): marked later than any, so that it is ignored.
            file.parked.insert(key, (u64::MAX, None));
        }
    }

    /// A lock on `ino` was dropped here: every wait blocked on it tries again
    /// (the ones still blocked park again).
    pub(in crate::fs) fn unlocked(&self, scheduler: &Scheduler, ino: u64) {
        let woken: Vec<u64> = {
            let mut files = self.files.lock().unwrap();
            let Some(file) = files.get_mut(&ino) else {
                return;
            };
            file.unlocks += 1;
            file.parked
                .values_mut()
                .filter_map(|(_, id)| id.take())
                .collect()
        };
        for id in woken {
            scheduler.wake(id);
        }
    }
}

/// A blocked F_SETLKW, between its tries.
pub(in crate::fs) struct Wait {
    inner: Arc<Inner>,
    request: LockRequest,
    done: Done<ReplyEmpty>,
    key: u64,
    retry: Duration,
    /// Times parked so far.
    parks: u64,
    /// When the wait last looked for a signal itself.
    signal_checked: Instant,
}

impl Wait {
    /// Serves an F_SETLKW: takes the lock now, or waits for it.
    pub(in crate::fs) fn start(inner: Arc<Inner>, request: LockRequest, done: Done<ReplyEmpty>) {
        let Some(nfs) = inner.nfs() else {
            return done.respond(&inner, Err::<(), _>(Errno::ENOLCK), |_, ()| {});
        };
        let key = nfs.locks.blocked.begin(request.ino);
        Wait {
            inner,
            request,
            done,
            key,
            retry: FIRST_RETRY,
            parks: 0,
            signal_checked: Instant::now(),
        }
        .attempt();
    }

    fn blocked(&self) -> &Blocked {
        let nfs = self
            .inner
            .nfs()
            .expect("a lock wait exists only on an NFS client mount");
        &nfs.locks.blocked
    }

    fn attempt(self) {
        let seen = self.blocked().unlocks(self.request.ino);
        match self.request.try_lock(&self.inner) {
            Err(Errno::EAGAIN | Errno::EACCES) => self.park(seen),
            Ok(()) => self.granted(),
            Err(errno) => self.finish(Err(errno)),
        }
    }

    fn park(mut self, seen: u64) {
        let inner = Arc::clone(&self.inner);
        let (ino, key, caller) = (self.request.ino, self.key, self.request.caller);
        self.parks += 1;
        let nth = self.parks;
        let retry_at = Instant::now() + self.retry;
        self.retry = (self.retry * 2).min(self.blocked().retry_cap());
        let id = inner
            .scheduler
            .park_until_woken(retry_at, caller, move |fate| self.resume(fate));
        if let Some(nfs) = inner.nfs() {
            nfs.locks
                .blocked
                .parked(&inner.scheduler, ino, key, nth, id, seen);
        }
    }

    fn resume(mut self, fate: Fate) {
        let scheduler = &self.inner.scheduler;
        if scheduler.is_shut_down() {
            return self.finish(Err(Errno::EIO));
        }
        let caller = self.request.caller;
        let signalled = fate == Fate::Interrupted
            || if !scheduler.interruptible() {
                // --no-intr: only the caller's death ends a wait.
                crate::scheduler::killed_or_gone(caller)
            } else if self.signal_checked.elapsed() >= SIGNAL_CHECK {
                self.signal_checked = Instant::now();
                crate::scheduler::interrupted_or_gone(caller)
            } else {
                false
            };
        if signalled {
            self.finish(Err(Errno::EINTR));
        } else {
            self.attempt();
        }
    }

    /// The lock is taken: revalidate the file's cache, then answer. Off the
    /// scheduler's workers after a wait (the invalidation may wait for pages
    /// a held READ has locked); inline at the first try, on the request's own.
    fn granted(self) {
        if self.parks == 0 {
            self.request.taken(&self.inner);
            return self.finish(Ok(()));
        }
        let wait = Arc::new(Mutex::new(Some(self)));
        let answer = |wait: &Mutex<Option<Wait>>| {
            if let Some(wait) = wait.lock().unwrap().take() {
                wait.request.taken(&wait.inner);
                wait.finish(Ok(()));
            }
        };
        let on_thread = Arc::clone(&wait);
        let spawned = std::thread::Builder::new()
            .name("slowfs-lock-granted".into())
            .spawn(move || answer(&on_thread));
        if let Err(e) = spawned {
            tracing::warn!("no thread for a granted lock's revalidation, doing it here: {e}");
            answer(&wait);
        }
    }

    fn finish(self, result: SysResult<()>) {
        self.blocked().ended(self.request.ino, self.key, self.parks);
        self.done.respond(&self.inner, result, |r, ()| r.ok());
    }
}

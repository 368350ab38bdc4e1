//! Blocked F_SETLKW waits that hold no thread.
//!
//! The NLM client does not poll a blocked lock: the server answers
//! `NLM_BLOCKED`, and grants it later with a `GRANTED` callback that wakes
//! the waiter (`nlmclnt_block` / `nlmclnt_grant`, fs/lockd/clntlock.c),
//! re-asking only every 30 s (`NLMCLNT_POLL_TIMEOUT`) in case a callback was
//! lost. Here the callback is this mount dropping a lock on the file (an
//! unlock, or the close that drops an owner's locks): every wait blocked on
//! that file tries again at once. A lock dropped elsewhere (another mount, a
//! local process) sends no callback, so a wait also tries again on a timer
//! that doubles from 10 ms to half a second. Between tries the wait is
//! parked on the scheduler: no thread and no CPU, however many there are,
//! and the scheduler's watcher ends it with EINTR when the caller gets a
//! signal that runs a handler (the NLM client waits interruptibly), unless
//! `--no-intr`.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fuser::{Errno, FileHandle, ReplyEmpty};

use crate::fs::serve::Done;
use crate::fs::sys::SysResult;
use crate::fs::Inner;
use crate::scheduler::{Fate, Scheduler};

/// The first retry of a wait no unlock here has woken.
const FIRST_RETRY: Duration = Duration::from_millis(10);
/// The longest time between retries: how late a lock dropped on another
/// mount can be noticed.
const MAX_RETRY: Duration = Duration::from_millis(500);

/// One lock request of an owner: its file, its description, its range.
pub(in crate::fs) struct LockRequest {
    pub(in crate::fs) ino: u64,
    pub(in crate::fs) fh: FileHandle,
    pub(in crate::fs) fd: Arc<OwnedFd>,
    pub(in crate::fs) lock: libc::flock,
    /// The requesting thread.
    pub(in crate::fs) caller: u32,
}

impl LockRequest {
    /// Takes (or drops) the lock if no other owner's conflicts: EAGAIN or
    /// EACCES if one does. Taking a lock revalidates the file's cache; dropping
    /// one wakes the waits blocked on the file.
    pub(in crate::fs) fn try_lock(&self, inner: &Inner) -> SysResult<()> {
        let mut lock = self.lock;
        super::fcntl_lock(&self.fd, libc::F_OFD_SETLK, &mut lock)?;
        if i32::from(self.lock.l_type) == libc::F_UNLCK {
            if let Some(nfs) = inner.nfs() {
                nfs.locks.blocked.unlocked(&inner.scheduler, self.ino);
            }
        } else {
            inner.revalidate(self.ino, self.fh);
        }
        Ok(())
    }
}

/// The waits blocked on each file of a mount.
#[derive(Debug, Default)]
pub(in crate::fs) struct Blocked {
    files: Mutex<HashMap<u64, OnFile>>,
    next_key: AtomicU64,
}

#[derive(Debug, Default)]
struct OnFile {
    /// Locks dropped on the file here so far.
    unlocks: u64,
    /// Each parked wait (by its key) and its scheduler id.
    parked: HashMap<u64, u64>,
}

impl Blocked {
    fn unlocks(&self, ino: u64) -> u64 {
        self.files
            .lock()
            .unwrap()
            .get(&ino)
            .map_or(0, |file| file.unlocks)
    }

    /// Wait `key` on `ino` is parked as `id`; if a lock was dropped on the
    /// file since it last tried (`seen` unlocks), it tries again now.
    fn parked(&self, scheduler: &Scheduler, ino: u64, key: u64, id: u64, seen: u64) {
        let mut files = self.files.lock().unwrap();
        let file = files.entry(ino).or_default();
        if file.unlocks == seen {
            file.parked.insert(key, id);
            return;
        }
        drop(files);
        scheduler.wake(id);
    }

    /// Wait `key` on `ino` ended.
    fn ended(&self, ino: u64, key: u64) {
        let mut files = self.files.lock().unwrap();
        if let Some(file) = files.get_mut(&ino) {
            file.parked.remove(&key);
            if file.parked.is_empty() {
                files.remove(&ino);
            }
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
            file.parked.drain().map(|(_, id)| id).collect()
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
}

impl Wait {
    /// Serves an F_SETLKW: takes the lock now, or waits for it.
    pub(in crate::fs) fn start(inner: Arc<Inner>, request: LockRequest, done: Done<ReplyEmpty>) {
        let Some(nfs) = inner.nfs() else {
            return done.respond(&inner, Err::<(), _>(Errno::ENOLCK), |_, ()| {});
        };
        let key = nfs.locks.blocked.next_key.fetch_add(1, Ordering::Relaxed);
        Wait {
            inner,
            request,
            done,
            key,
            retry: FIRST_RETRY,
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
            result => self.finish(result),
        }
    }

    fn park(mut self, seen: u64) {
        let inner = Arc::clone(&self.inner);
        let (ino, key, caller) = (self.request.ino, self.key, self.request.caller);
        let retry_at = Instant::now() + self.retry;
        self.retry = (self.retry * 2).min(MAX_RETRY);
        let id = inner
            .scheduler
            .park_until_woken(retry_at, caller, move |fate| self.resume(fate));
        if !inner.scheduler.is_shut_down() {
            if let Some(nfs) = inner.nfs() {
                nfs.locks
                    .blocked
                    .parked(&inner.scheduler, ino, key, id, seen);
            }
        }
    }

    fn resume(self, fate: Fate) {
        let scheduler = &self.inner.scheduler;
        // Without a watcher (--no-intr) only the caller's death ends a wait.
        let ended = fate == Fate::Interrupted
            || scheduler.is_shut_down()
            || (!scheduler.interruptible()
                && crate::scheduler::killed_or_gone(self.request.caller));
        if ended {
            self.finish(Err(Errno::EINTR));
        } else {
            self.attempt();
        }
    }

    fn finish(self, result: SysResult<()>) {
        self.blocked().ended(self.request.ino, self.key);
        self.done.respond(&self.inner, result, |r, ()| r.ok());
    }
}

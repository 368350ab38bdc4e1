//! fcntl and flock(2) locks under `--cache nfs`: the server's, shared by every
//! mount of the backing directory, as NFS clients share the server's lock
//! manager (NLM for v3, LOCK/LOCKT for v4; nfs(5) `lock`, `local_lock=`). A
//! mechanism the mount keeps local (`nolock`, `local_lock=`) is not offered
//! (FUSE_POSIX_LOCKS, FUSE_FLOCK_LOCKS), and the kernel keeps those locks to
//! the mount: two clients' locks then never conflict.
//!
//! A lock owner gets its own open file description of the backing file per
//! inode, and its locks are Linux open-file-description locks on it: they
//! conflict with every other owner's, in this daemon, in another mount's
//! daemon and in local processes, and closing the description drops them all.
//! For fcntl locks the owner is a process's file table, whose last close of
//! the file drops them (POSIX; FUSE says so with a FLUSH). For flock(2) it is
//! the open file description itself, and the kernel sends the lock as a
//! whole-file range, as the Linux NFS client sends a flock to the server as a
//! whole-file byte-range lock (`nfs_flock`, fs/nfs/file.c), so flocks and
//! fcntl locks conflict across clients (flock(2), "NFS details"); the
//! description's release drops it (FUSE_RELEASE_FLOCK_UNLOCK).
//!
//! As the NFS client does (nfs(5), "File locking"), taking a lock revalidates
//! the file's cached data: a lock is a cache consistency point.

mod waits;

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

use fuser::{Errno, FileHandle, INodeNo, LockOwner, ReplyEmpty, ReplyLock, Request};
use slowfs_faults::Op;

use crate::fs::sys::{self, SysResult};
use crate::fs::{Inner, SlowFs};

/// FUSE's "to the end of the file" (the kernel's OFFSET_MAX).
const TO_END: u64 = i64::MAX as u64;

/// Each lock owner's open file description, per inode, and the F_SETLKWs
/// blocked on each inode.
#[derive(Debug, Default)]
pub(in crate::fs) struct Locks {
    owners: Mutex<HashMap<(u64, u64), Arc<OwnedFd>>>,
    blocked: waits::Blocked,
}

impl Locks {
    /// The description `owner`'s locks on `ino` live on, opened on first use.
    fn description(&self, inner: &Inner, ino: u64, owner: u64) -> SysResult<Arc<OwnedFd>> {
        if let Some(fd) = self.owners.lock().unwrap().get(&(ino, owner)) {
            return Ok(Arc::clone(fd));
        }
        let inode = inner.inodes.get(INodeNo(ino))?;
        // Read-write where allowed; the kernel has already checked that the
        // caller's own handle permits the lock's type.
        let fd = inner.with_fds(|| {
            sys::reopen(inode.raw(), libc::O_RDWR)
                .or_else(|_| sys::reopen(inode.raw(), libc::O_RDONLY))
        })?;
        let fd = Arc::new(fd);
        let mut owners = self.owners.lock().unwrap();
        Ok(Arc::clone(owners.entry((ino, owner)).or_insert(fd)))
    }

    /// Whether `fd` is still the description `owner`'s locks on `ino` live
    /// on (a close of the owner's drops it, and with it what it holds).
    fn is_current(&self, ino: u64, owner: u64, fd: &Arc<OwnedFd>) -> bool {
        self.owners
            .lock()
            .unwrap()
            .get(&(ino, owner))
            .is_some_and(|current| Arc::ptr_eq(current, fd))
    }

    /// `owner` closed a handle of `ino`: its locks on the file go, and the
    /// waits blocked on the file try again.
    fn closed(&self, inner: &Inner, ino: u64, owner: u64) {
        let fd = self.owners.lock().unwrap().remove(&(ino, owner));
        if let Some(fd) = fd {
            // Unlocked outright: a lock request still in flight may hold
            // the description a moment longer than the table does.
            let mut all = flock(0, TO_END, libc::F_UNLCK);
            let _ = fcntl_lock(&fd, libc::F_OFD_SETLK, &mut all);
            drop(fd);
            self.blocked.unlocked(&inner.scheduler, ino);
        }
    }
}

/// Drops an owner's locks on a file when it goes: made when a close of the
/// file by that owner arrives, and dropped whether or not the close's request
/// runs.
pub(in crate::fs) struct UnlockOnDrop {
    inner: Arc<Inner>,
    ino: u64,
    owner: u64,
}

impl UnlockOnDrop {
    pub(in crate::fs) fn new(inner: &Arc<Inner>, ino: u64, owner: u64) -> UnlockOnDrop {
        UnlockOnDrop {
            inner: Arc::clone(inner),
            ino,
            owner,
        }
    }
}

impl Drop for UnlockOnDrop {
    fn drop(&mut self) {
        if let Some(nfs) = self.inner.nfs() {
            nfs.locks.closed(&self.inner, self.ino, self.owner);
        }
    }
}

impl Inner {
    /// The description `owner`'s locks on `ino` live on. Locks reach the
    /// daemon only on an NFS client mount with `lock` (elsewhere the kernel
    /// keeps them): ENOLCK otherwise.
    fn lock_description(&self, ino: u64, owner: u64) -> SysResult<Arc<OwnedFd>> {
        let nfs = self.nfs().ok_or(Errno::ENOLCK)?;
        nfs.locks.description(self, ino, owner)
    }
}

/// A lock request's range and type, as `struct flock` for the OFD calls.
pub(super) fn flock(start: u64, end: u64, typ: i32) -> libc::flock {
    // SAFETY: flock is plain old data; zero is a valid value for every field.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = typ as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock.l_start = start as libc::off_t;
    lock.l_len = if end >= TO_END {
        0
    } else {
        (end - start + 1) as libc::off_t
    };
    lock
}

pub(super) fn fcntl_lock(fd: &OwnedFd, cmd: i32, lock: &mut libc::flock) -> SysResult<()> {
    // SAFETY: `lock` is a valid flock for the duration of the call.
    sys::check(unsafe { libc::fcntl(fd.as_raw_fd(), cmd, lock as *mut libc::flock) })
}

#[allow(clippy::too_many_arguments)] // the request's fields, as fuser passes them
pub(in crate::fs) fn getlk(
    fs: &SlowFs,
    req: &Request,
    ino: INodeNo,
    owner: LockOwner,
    start: u64,
    end: u64,
    typ: i32,
    reply: ReplyLock,
) {
    fs.inner
        .serve_on(req, Op::Lock, ino, reply, move |inner, done, _, _| {
            let result = inner.lock_description(ino.0, owner.0).and_then(|fd| {
                let mut lock = flock(start, end, typ);
                fcntl_lock(&fd, libc::F_OFD_GETLK, &mut lock)?;
                Ok(lock)
            });
            done.respond(inner, result, |r, lock| {
                let start = lock.l_start as u64;
                let end = if lock.l_len == 0 {
                    TO_END
                } else {
                    start + lock.l_len as u64 - 1
                };
                // An OFD lock has no process (l_pid -1); nor has an NFS one here.
                r.locked(start, end, i32::from(lock.l_type), 0);
            })
        });
}

#[allow(clippy::too_many_arguments)] // the request's fields, as fuser passes them
pub(in crate::fs) fn setlk(
    fs: &SlowFs,
    req: &Request,
    ino: INodeNo,
    fh: FileHandle,
    owner: LockOwner,
    start: u64,
    end: u64,
    typ: i32,
    sleep: bool,
    reply: ReplyEmpty,
) {
    let caller = req.pid();
    fs.inner
        .serve_on(req, Op::Lock, ino, reply, move |inner, done, _, _| {
            let request = waits::LockRequest {
                ino: ino.0,
                fh,
                owner: owner.0,
                lock: flock(start, end, typ),
                caller,
            };
            if sleep {
                // F_SETLKW: a blocked wait holds no thread (see waits.rs).
                waits::Wait::start(Arc::clone(inner), request, done);
            } else {
                let result = request.try_lock(inner);
                if result.is_ok() {
                    request.taken(inner);
                }
                done.respond(inner, result, |r, ()| r.ok());
            }
        });
}

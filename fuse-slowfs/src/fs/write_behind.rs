//! Under `--cache nfs`: the NFS client's write-behind. A write(2) lands in the
//! client's page cache and returns; the client sends the dirty data later, in
//! WRITEs of at most `wsize`, when a full one has gathered, when the file is
//! closed or fsynced (close-to-open), when its attributes are asked for
//! (`nfs_getattr` writes back first, so that mtime and size are the server's),
//! and when a lock is released (nfs(5), "Data and metadata coherence"). A
//! WRITE that fails is not reported to the write(2) that made the data: the
//! error comes back at close or fsync (the deferred ENOSPC/EDQUOT/EIO that
//! surprises programs on NFS).
//!
//! FUSE without its write-back cache sends each write(2) to the daemon; the
//! daemon is the client here: it gathers contiguous writes per file and
//! answers them at once, and a request that must see the data first (the
//! write that does not fit, flush, fsync, release, getattr, setattr, read,
//! lseek, fallocate, copy_file_range, lock) carries the gathered data as one
//! WRITE, which the rules see and `ctl stats` counts as a `write`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fuser::Errno;
use slowfs_faults::Op;

use super::handles::Handle;
use super::sys::{self, SysResult};
use super::{Carry, Inner};
use crate::scheduler::Fate;
use crate::stats::RequestOutcome;

/// Data written to one file and not yet sent.
#[derive(Debug)]
pub(super) struct Pending {
    /// The handle it was written through (its fd writes it).
    pub(super) handle: Arc<Handle>,
    pub(super) offset: u64,
    pub(super) data: Vec<u8>,
}

impl Pending {
    /// Sends it: writes it to the backing file.
    pub(super) fn write(&self) -> SysResult<()> {
        let mut done = 0;
        while done < self.data.len() {
            let n = sys::pwrite(
                self.handle.raw(),
                &self.data[done..],
                self.offset + done as u64,
            )?;
            if n == 0 {
                return Err(Errno::EIO);
            }
            done += n;
        }
        Ok(())
    }
}

/// Gathered writes per inode, and WRITE errors not yet reported.
#[derive(Debug, Default)]
pub(super) struct WriteBehind {
    pending: Mutex<HashMap<u64, Pending>>,
    /// How many inodes have pending data (the fast path: none).
    count: AtomicUsize,
    errors: Mutex<HashMap<u64, Errno>>,
}

impl WriteBehind {
    /// A write(2) of `data` at `offset` through `handle`: gathered. Returns
    /// what was gathered before and must be sent first (it was not contiguous,
    /// or a WRITE of `wsize` is full).
    pub(super) fn gather(
        &self,
        ino: u64,
        handle: &Arc<Handle>,
        offset: u64,
        data: &[u8],
        wsize: usize,
    ) -> Option<Pending> {
        let mut pending = self.pending.lock().unwrap();
        if let Some(p) = pending.get_mut(&ino) {
            let contiguous = p.offset + p.data.len() as u64 == offset;
            if contiguous && p.data.len() + data.len() <= wsize {
                p.data.extend_from_slice(data);
                return None;
            }
        }
        let fresh = Pending {
            handle: Arc::clone(handle),
            offset,
            data: data.to_vec(),
        };
        let previous = pending.insert(ino, fresh);
        if previous.is_none() {
            self.count.fetch_add(1, Ordering::SeqCst);
        }
        previous
    }

    /// Takes what `ino` has gathered, to send.
    pub(super) fn take(&self, ino: u64) -> Option<Pending> {
        if self.count.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let taken = self.pending.lock().unwrap().remove(&ino);
        if taken.is_some() {
            self.count.fetch_sub(1, Ordering::SeqCst);
        }
        taken
    }

    /// Everything gathered (at unmount: sent without rules, nothing lost).
    pub(super) fn take_all(&self) -> Vec<Pending> {
        let mut pending = self.pending.lock().unwrap();
        self.count.store(0, Ordering::SeqCst);
        pending.drain().map(|(_, p)| p).collect()
    }

    /// A WRITE of `ino` failed: its close or fsync reports it.
    pub(super) fn failed(&self, ino: u64, errno: Errno) {
        self.errors.lock().unwrap().entry(ino).or_insert(errno);
    }

    /// The first WRITE error of `ino` since the last report, if any.
    pub(super) fn take_error(&self, ino: u64) -> SysResult<()> {
        match self.errors.lock().unwrap().remove(&ino) {
            Some(errno) => Err(errno),
            None => Ok(()),
        }
    }
}

/// Gathered data a request sends, with what the rules decided for its WRITE.
pub(super) struct CarriedWrite {
    ino: u64,
    pending: Pending,
    pub(super) decision: slowfs_faults::Decision,
}

impl Inner {
    /// Whether writes are gathered here, and into WRITEs of how many bytes
    /// (not under `sync`).
    pub(super) fn write_behind_size(&self) -> Option<usize> {
        self.nfs_client()
            .filter(|nfs| !nfs.sync)
            .map(|nfs| nfs.wsize as usize)
    }

    /// The NFS client's settings where this mount behaves as one in what it
    /// does to names and data (silly renames, gathered writes): under
    /// `--cache nfs`, unless a log or crash model records the tree, which
    /// must see each name and write as the caller made it.
    pub(super) fn nfs_client(&self) -> Option<&crate::client_cache::NfsCache> {
        let (nfs, _) = self.nfs.as_ref()?;
        (self.recorder.is_none() && self.crash.is_none()).then_some(nfs)
    }

    /// What `carry` sends, taken now, with the rules' decision for it.
    pub(super) fn carried_write(&self, carry: Carry) -> Option<CarriedWrite> {
        let (ino, pending) = match carry {
            Carry::Nothing => return None,
            Carry::Gathered(ino) => (ino, self.write_behind.take(ino)?),
            Carry::Overflow(ino, pending) => (ino, pending),
        };
        let path = self.path_for(Op::Write, ino);
        let decision = self
            .plan
            .decide(Op::Write, &path, pending.data.len() as u64);
        Some(CarriedWrite {
            ino,
            pending,
            decision,
        })
    }

    /// Sends a carried WRITE as `fate` says, and counts it. Its error is kept
    /// for the file's next close or fsync. Returns the WRITE's time (its
    /// delay and its write), which the request that carried it waited for
    /// too: the stats count it under `write`, not twice.
    pub(super) fn send_carried(&self, rpc: CarriedWrite, fate: Fate) -> Duration {
        let started = Instant::now();
        let CarriedWrite {
            ino,
            pending,
            decision,
        } = rpc;
        let result = match (fate, decision.error) {
            // A soft mount gave up: the data is lost, as on NFS.
            (Fate::GaveUp, _) => Err(self.soft_timeout_errno()),
            (Fate::Run, Some(errno)) => Err(Errno::from_i32(errno)),
            // Run, or its caller was killed: the dirty pages are still
            // written back, as the kernel writes them back for a dead process.
            _ => pending.write(),
        };
        match result {
            Ok(()) => self.wrote_here(ino, pending.handle.raw()),
            Err(errno) => self.write_behind.failed(ino, errno),
        }
        let outcome = RequestOutcome {
            bytes: if result.is_ok() {
                pending.data.len() as u64
            } else {
                0
            },
            failed: result.is_err(),
        };
        let mut injected = crate::stats::Injected::of(&decision);
        if fate == Fate::GaveUp {
            injected.add(crate::stats::FaultKind::Failed);
        }
        let took = decision.delay + started.elapsed();
        self.stats.record(Op::Write, took, took, outcome, &injected);
        took
    }

    /// At unmount: everything gathered is written, without rules.
    pub(super) fn send_all_gathered(&self) {
        for pending in self.write_behind.take_all() {
            if let Err(errno) = pending.write() {
                tracing::warn!("a gathered write could not be written at unmount: {errno:?}");
            }
        }
    }
}

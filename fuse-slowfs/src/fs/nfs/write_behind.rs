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
//! lseek, fallocate, copy_file_range, lock, rename, link) carries the
//! gathered data as one or more WRITEs, which the rules see and `ctl stats`
//! counts as `write`s. A WRITE goes through the same fault and data path as
//! a direct write ([`Inner::write_data`]). Its error is kept per file as an
//! error sequence (errseq) that each open file description reports once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use fuser::Errno;
use slowfs_faults::Op;

use crate::fs::handles::Handle;
use crate::fs::sys::SysResult;
use crate::fs::{Carry, Inner};
use crate::scheduler::Fate;
use crate::stats::RequestOutcome;

/// Data written to one file and not yet sent.
#[derive(Debug)]
pub(in crate::fs) struct Pending {
    /// The inode it was written to.
    pub(in crate::fs) ino: u64,
    /// The handle it was written through (its fd writes it).
    pub(in crate::fs) handle: Arc<Handle>,
    pub(in crate::fs) offset: u64,
    /// Shared with [`InFlight`] once it leaves the gathered table.
    pub(in crate::fs) data: Arc<Vec<u8>>,
    /// Set once it left the gathered table to be sent: it stays readable
    /// until this goes (after its WRITE, or when it is given up).
    flight: Option<FlightGuard>,
    /// When the range was first written (the inode's `dirtied_when`).
    since: Instant,
}

/// Gathered data taken to be sent and not written yet, per inode: the
/// client's dirty pages under write-back, which every local reader still sees
/// (one page cache per client). Without it a READ that arrives while another
/// request carries the data (parked by a delay, `--profile nfs` gives every
/// request one) read the old bytes from the backing file, and the kernel kept
/// them in its page cache after the WRITE had landed.
/// The condition variable is notified as each range lands.
type InFlight = Arc<(Mutex<HashMap<u64, Vec<(u64, u64, Arc<Vec<u8>>)>>>, Condvar)>;

/// Removes one range from [`InFlight`] when the data it stands for is written
/// or dropped.
#[derive(Debug)]
struct FlightGuard {
    table: InFlight,
    ino: u64,
    id: u64,
}

impl Drop for FlightGuard {
    fn drop(&mut self) {
        let (table, landed) = &*self.table;
        let mut table = table.lock().unwrap();
        if let Some(ranges) = table.get_mut(&self.ino) {
            ranges.retain(|(id, _, _)| *id != self.id);
            if ranges.is_empty() {
                table.remove(&self.ino);
            }
        }
        landed.notify_all();
    }
}

/// Gathered writes per inode, and WRITE errors not yet reported.
#[derive(Debug, Default)]
pub(in crate::fs) struct WriteBehind {
    pending: Mutex<HashMap<u64, Pending>>,
    /// How many inodes have pending data (the fast path: none).
    count: AtomicUsize,
    /// Per inode: how many WRITEs failed (the errseq counter) and the
    /// latest one's errno. Each open file description keeps the count it
    /// has reported up to ([`Handle::wb_seen`]).
    errors: Mutex<HashMap<u64, (u64, Errno)>>,
    /// Inodes with WRITEs sent since their last COMMIT (fsync or close).
    uncommitted: Mutex<std::collections::HashSet<u64>>,
    /// Data taken to be sent, until it is written.
    in_flight: InFlight,
    /// Bytes gathered in the table (the dirty pages the VM's limits count).
    gathered_bytes: AtomicU64,
    /// Numbers the ranges in flight (their order: later ones win).
    next_flight: AtomicU64,
}

impl WriteBehind {
    /// Whether a close of `ino` has anything to send or wait for: gathered
    /// data, data in flight, or WRITEs to commit (`nfs_wb_all` sends nothing
    /// otherwise).
    pub(in crate::fs) fn dirty(&self, ino: u64) -> bool {
        (self.count.load(Ordering::SeqCst) > 0 && self.pending.lock().unwrap().contains_key(&ino))
            || self.in_flight.0.lock().unwrap().contains_key(&ino)
            || self.uncommitted.lock().unwrap().contains(&ino)
    }

    /// Waits until no data of `ino` is in flight (another request's or the
    /// flusher's WRITE, parked by a delay or a hang): an fsync, a close or a
    /// truncate must come after it, as `nfs_wb_all` and `nfs_setattr` wait
    /// for write-back (`filemap_write_and_wait`). Holds no lock while it
    /// waits but the table's, which the condition variable releases.
    pub(in crate::fs) fn wait_landed(&self, ino: u64) {
        let (table, landed) = &*self.in_flight;
        let mut table = table.lock().unwrap();
        while table.contains_key(&ino) {
            table = landed.wait(table).unwrap();
        }
    }

    /// `ino`'s WRITEs are committed (an fsync or a close sent them).
    pub(in crate::fs) fn committed(&self, ino: u64) {
        self.uncommitted.lock().unwrap().remove(&ino);
    }

    /// A write(2) of `data` at `offset` through `handle`: gathered. Returns
    /// what was gathered before and must be sent first (it was not contiguous,
    /// or a WRITE of `wsize` is full).
    pub(in crate::fs) fn gather(
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
                // Not shared while gathered: no copy.
                Arc::make_mut(&mut p.data).extend_from_slice(data);
                self.gathered_bytes
                    .fetch_add(data.len() as u64, Ordering::SeqCst);
                return None;
            }
        }
        let fresh = Pending {
            ino,
            handle: Arc::clone(handle),
            offset,
            data: Arc::new(data.to_vec()),
            flight: None,
            since: Instant::now(),
        };
        self.gathered_bytes
            .fetch_add(data.len() as u64, Ordering::SeqCst);
        let previous = pending.insert(ino, fresh);
        if previous.is_none() {
            self.count.fetch_add(1, Ordering::SeqCst);
        }
        // Registered before the table's lock goes: no reader misses it.
        previous.map(|p| self.leave(p))
    }

    /// `p` leaves the gathered table to be sent: in flight until written.
    fn leave(&self, mut p: Pending) -> Pending {
        self.gathered_bytes
            .fetch_sub(p.data.len() as u64, Ordering::SeqCst);
        let id = self.next_flight.fetch_add(1, Ordering::SeqCst);
        self.in_flight
            .0
            .lock()
            .unwrap()
            .entry(p.ino)
            .or_default()
            .push((id, p.offset, Arc::clone(&p.data)));
        p.flight = Some(FlightGuard {
            table: Arc::clone(&self.in_flight),
            ino: p.ino,
            id,
        });
        p
    }

    /// Takes what `ino` has gathered, to send.
    pub(in crate::fs) fn take(&self, ino: u64) -> Option<Pending> {
        if self.count.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let mut pending = self.pending.lock().unwrap();
        let taken = pending.remove(&ino);
        if taken.is_some() {
            self.count.fetch_sub(1, Ordering::SeqCst);
        }
        taken.map(|p| self.leave(p))
    }

    /// Bytes gathered and not taken yet.
    pub(in crate::fs) fn gathered_bytes(&self) -> u64 {
        self.gathered_bytes.load(Ordering::SeqCst)
    }

    /// What the flusher writes back now (`wb_writeback`): ranges older than
    /// the expiry, then the oldest others while more than the background
    /// threshold stays gathered.
    pub(in crate::fs) fn to_write_back(
        &self,
        limits: &super::write_back::DirtyLimits,
        now: Instant,
    ) -> Vec<Pending> {
        if self.count.load(Ordering::SeqCst) == 0 {
            return Vec::new();
        }
        let mut pending = self.pending.lock().unwrap();
        let mut by_age: Vec<(Instant, u64, usize)> = pending
            .iter()
            .map(|(ino, p)| (p.since, *ino, p.data.len()))
            .collect();
        by_age.sort();
        let mut left = self.gathered_bytes();
        let mut chosen = Vec::new();
        for (since, ino, len) in by_age {
            let expired = now.duration_since(since) >= limits.expire;
            if !expired && left <= limits.background {
                break;
            }
            left = left.saturating_sub(len as u64);
            chosen.push(ino);
        }
        let mut taken = Vec::new();
        for ino in chosen {
            if let Some(p) = pending.remove(&ino) {
                self.count.fetch_sub(1, Ordering::SeqCst);
                taken.push(self.leave(p));
            }
        }
        taken
    }

    /// Everything gathered (at unmount: sent without rules, nothing lost).
    pub(in crate::fs) fn take_all(&self) -> Vec<Pending> {
        let mut pending = self.pending.lock().unwrap();
        self.count.store(0, Ordering::SeqCst);
        pending.drain().map(|(_, p)| self.leave(p)).collect()
    }

    /// What a READ of `ino` at `offset` returns, `read` from the backing file
    /// (at most `want` bytes): with the data this client wrote and has not
    /// written back laid over it, in flight first (oldest first), then what
    /// is gathered, as the client's page cache holds its dirty pages and
    /// every local reader sees them. Bytes past the backing file's end that
    /// such data reaches are zeros up to it, as a file extended by a write.
    pub(in crate::fs) fn overlay(&self, ino: u64, offset: u64, want: usize, read: &mut Vec<u8>) {
        let end = offset + want as u64;
        let lay = |read: &mut Vec<u8>, at: u64, data: &[u8]| {
            let (from, to) = (at.max(offset), (at + data.len() as u64).min(end));
            if from >= to {
                return;
            }
            let (into, len) = ((from - offset) as usize, (to - from) as usize);
            if read.len() < into + len {
                read.resize(into + len, 0);
            }
            let src = (from - at) as usize;
            read[into..into + len].copy_from_slice(&data[src..src + len]);
        };
        // The gathered table's lock first (as `take` holds it while it moves
        // data in flight), so that nothing moves between the two looks.
        let pending = self.pending.lock().unwrap();
        if let Some(flying) = self.in_flight.0.lock().unwrap().get(&ino) {
            let mut flying: Vec<_> = flying.iter().collect();
            flying.sort_by_key(|(id, _, _)| *id);
            for (_, at, data) in flying {
                lay(read, *at, data);
            }
        }
        if let Some(p) = pending.get(&ino) {
            lay(read, p.offset, &p.data);
        }
    }

    /// The furthest byte of `ino` this client has written and not written
    /// back (gathered or in flight): the size it knows at least.
    pub(in crate::fs) fn extent(&self, ino: u64) -> u64 {
        let pending = self.pending.lock().unwrap();
        let gathered = pending
            .get(&ino)
            .map_or(0, |p| p.offset + p.data.len() as u64);
        let flying = self.in_flight.0.lock().unwrap().get(&ino).map_or(0, |r| {
            r.iter()
                .map(|(_, at, d)| at + d.len() as u64)
                .max()
                .unwrap_or(0)
        });
        flying.max(gathered)
    }

    /// A WRITE of `ino` failed: the file's error sequence moves on (the
    /// mapping's errseq_t, set by `nfs_writeback_result` through
    /// `mapping_set_error`).
    pub(in crate::fs) fn failed(&self, ino: u64, errno: Errno) {
        let mut errors = self.errors.lock().unwrap();
        let e = errors.entry(ino).or_insert((0, errno));
        *e = (e.0 + 1, errno);
    }

    /// Where `ino`'s error sequence is now (`filemap_sample_wb_err`).
    pub(in crate::fs) fn sample(&self, ino: u64) -> u64 {
        self.errors.lock().unwrap().get(&ino).map_or(0, |e| e.0)
    }

    /// The latest WRITE error of `ino` if one happened after `since`
    /// (`filemap_check_wb_err`): what a close reports of its own flush.
    pub(in crate::fs) fn since(&self, ino: u64, since: u64) -> SysResult<()> {
        match self.errors.lock().unwrap().get(&ino) {
            Some(&(seq, errno)) if seq != since => Err(errno),
            _ => Ok(()),
        }
    }

    /// The latest WRITE error of `ino` that the open file description whose
    /// mark is `seen` has not reported yet, which it now has
    /// (`file_check_and_advance_wb_err`, as `nfs_file_fsync` reports it).
    pub(in crate::fs) fn check_and_advance(&self, ino: u64, seen: &AtomicU64) -> SysResult<()> {
        let errors = self.errors.lock().unwrap();
        match errors.get(&ino) {
            Some(&(seq, errno)) if seq != seen.swap(seq, Ordering::SeqCst) => Err(errno),
            _ => Ok(()),
        }
    }

    /// Inode `ino` is forgotten: its error sequence goes too.
    pub(in crate::fs) fn forget(&self, ino: u64) {
        if let Ok(mut errors) = self.errors.lock() {
            errors.remove(&ino);
        }
        self.committed(ino);
    }
}

/// Most WRITEs one gathered range goes out in: a `short` rule that lets each
/// move a byte would otherwise resend a 1 MiB range a million times; past
/// this many the rest goes in one more WRITE, which the rules do not see.
const MAX_RESENDS: usize = 1024;

/// Gathered data a request sends, with what the rules decided for each WRITE
/// it goes out in: the first, and one more for the rest each time a `short`
/// rule lets a WRITE move less than it carried (the Linux client resends
/// from where the server left off: `nfs_writeback_result`, fs/nfs/write.c).
/// All are decided when the request arrives, in order, so that their delays
/// and hangs hold the request that sends them.
pub(in crate::fs) struct CarriedWrite {
    ino: u64,
    pending: Pending,
    rpcs: Vec<slowfs_faults::Decision>,
}

impl CarriedWrite {
    /// Every WRITE's delays together, and the longest hang.
    pub(in crate::fs) fn wait(&self) -> (std::time::Duration, Option<slowfs_faults::Hang>) {
        let delay = self.rpcs.iter().map(|d| d.delay).sum();
        let hang = self
            .rpcs
            .iter()
            .filter_map(|d| d.hang)
            .reduce(slowfs_faults::Hang::longer);
        (delay, hang)
    }
}

impl Inner {
    /// Whether writes are gathered here, and into WRITEs of how many bytes
    /// (not under `sync`).
    pub(in crate::fs) fn write_behind_size(&self) -> Option<usize> {
        self.nfs_client()
            .filter(|nfs| !nfs.sync)
            .map(|nfs| nfs.wsize as usize)
    }

    /// What `carry` sends, taken now, with the rules' decision for each
    /// WRITE it goes out in.
    pub(in crate::fs) fn carried_writes(&self, carry: Carry) -> Vec<CarriedWrite> {
        let Some(nfs) = self.nfs() else {
            return vec![];
        };
        let gathered = &nfs.write_behind;
        let taken = match carry {
            Carry::Nothing => vec![],
            Carry::Gathered(ino) => vec![(ino, gathered.take(ino))],
            Carry::Both(a, b) if a == b => vec![(a, gathered.take(a))],
            Carry::Both(a, b) => vec![(a, gathered.take(a)), (b, gathered.take(b))],
            Carry::Overflow(ino, pending) => vec![(ino, Some(pending))],
        };
        taken
            .into_iter()
            .filter_map(|(ino, pending)| Some(self.decide_writes(ino, pending?)))
            .collect()
    }

    /// The rules' decisions for the WRITEs `pending` goes out in.
    pub(in crate::fs) fn decide_writes(&self, ino: u64, pending: Pending) -> CarriedWrite {
        let path = self.path_for(Op::Write, ino);
        let mut rpcs = Vec::new();
        let mut left = pending.data.len() as u64;
        while left > 0 && rpcs.len() < MAX_RESENDS {
            let decision = self.plan.decide(Op::Write, &path, left);
            let moved = decision.effects.short_to.map_or(left, |s| s.min(left));
            // A WRITE that fails, or moves nothing, ends the range.
            let ends = decision.crash || decision.error.is_some() || moved == 0;
            rpcs.push(decision);
            if ends {
                break;
            }
            left -= moved;
        }
        CarriedWrite { ino, pending, rpcs }
    }

    /// Sends a carried WRITE (and its resends) as `fate` and the rules say,
    /// through the same data path as a caller's write ([`Inner::write_data`]),
    /// and counts each. An error is kept for the file's next close or fsync.
    /// Returns the WRITEs' time (their delays and writes), which the request
    /// that carried them waited for too: the stats count it under `write`,
    /// not twice.
    pub(in crate::fs) fn send_carried(&self, rpc: CarriedWrite, fate: Fate) -> Duration {
        let CarriedWrite { ino, pending, rpcs } = rpc;
        let mut total = Duration::ZERO;
        debug_assert_eq!(ino, pending.ino);
        let data = &pending.data[..];
        let mut at = 0usize;
        let mut result = Ok(());
        for decision in &rpcs {
            let started = Instant::now();
            let sent = self.send_one(&pending, &data[at..], at as u64, decision, fate);
            let outcome = RequestOutcome {
                bytes: *sent.as_ref().unwrap_or(&0) as u64,
                failed: sent.is_err(),
            };
            let mut injected = crate::stats::Injected::of(decision);
            if fate == Fate::GaveUp {
                injected.add(crate::stats::FaultKind::Failed);
            }
            let took = decision.delay + started.elapsed();
            total += took;
            self.stats.record(Op::Write, took, took, outcome, &injected);
            match sent {
                Ok(n) => {
                    at += n;
                    if let Some(nfs) = self.nfs() {
                        nfs.write_behind.uncommitted.lock().unwrap().insert(ino);
                    }
                }
                Err(errno) => {
                    result = Err(errno);
                    break;
                }
            }
        }
        if result.is_ok() && at < data.len() {
            // Past MAX_RESENDS: the rest in one WRITE the rules do not see.
            let clean = slowfs_faults::Decision::default();
            result = self
                .send_one(&pending, &data[at..], at as u64, &clean, fate)
                .map(|_| ());
        }
        if let (Err(errno), Some(nfs)) = (result, self.nfs()) {
            nfs.write_behind.failed(ino, errno);
        }
        total
    }

    /// One WRITE of `data`, at `skip` bytes into `pending`'s range: the bytes
    /// it moved.
    fn send_one(
        &self,
        pending: &Pending,
        data: &[u8],
        skip: u64,
        decision: &slowfs_faults::Decision,
        fate: Fate,
    ) -> SysResult<usize> {
        match (fate, decision.error) {
            // A soft mount gave up: the data is lost, as on NFS.
            (Fate::GaveUp, _) => return Err(self.soft_timeout_errno()),
            (Fate::Run, Some(errno)) => return Err(Errno::from_i32(errno)),
            // Run, or its caller was killed: the dirty pages are still
            // written back, as the kernel writes them back for a dead process.
            _ => {}
        }
        if decision.crash {
            self.crash_now();
            return Err(Errno::EIO);
        }
        let len = decision
            .effects
            .short_to
            .map_or(data.len(), |s| (s as usize).min(data.len()));
        if len == 0 {
            // "NFS: Server wrote zero bytes": the client fails the range
            // with EIO (nfs_writeback_result).
            return Err(Errno::EIO);
        }
        let h = &pending.handle;
        // A file another client removed: NFS3ERR_STALE for the WRITE.
        self.check_not_stale(h.raw())?;
        let (n, _) = self.write_data(
            &decision.effects,
            pending.ino,
            h,
            pending.offset + skip,
            &data[..len],
            None,
        )?;
        if n == 0 {
            return Err(Errno::EIO);
        }
        Ok(n)
    }

    /// At unmount: everything gathered is written, without rules.
    pub(in crate::fs) fn send_all_gathered(&self) {
        let Some(nfs) = self.nfs() else { return };
        let clean = slowfs_faults::Decision::default();
        for pending in nfs.write_behind.take_all() {
            let mut at = 0;
            while at < pending.data.len() {
                match self.send_one(&pending, &pending.data[at..], at as u64, &clean, Fate::Run) {
                    Ok(n) => at += n,
                    Err(errno) => {
                        tracing::warn!(
                            "a gathered write could not be written at unmount: {errno:?}"
                        );
                        break;
                    }
                }
            }
        }
    }
}

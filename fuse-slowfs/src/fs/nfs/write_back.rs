//! Under `--cache nfs`: the VM's write-back of gathered data, which sends
//! the Linux NFS client's WRITEs besides close, fsync and locks. The client's
//! dirty pages are the VM's, so three of its limits apply (mm/page-writeback.c,
//! fs/fs-writeback.c; Documentation/admin-guide/sysctl/vm.rst):
//! - above the background threshold (`dirty_background_bytes`, else
//!   `dirty_background_ratio`, 10 % of dirtyable memory) the flusher writes
//!   back, oldest first (`balance_dirty_pages` -> `wb_start_background_writeback`);
//! - data dirty for longer than `dirty_expire_centisecs` (30 s) is written by
//!   the flusher, which wakes every `dirty_writeback_centisecs` (5 s)
//!   (`wb_check_old_data_flush`, `wb_writeback`: `dirtied_before`);
//! - above the hard limit (`dirty_bytes`, else `dirty_ratio`, 20 %) a writer
//!   waits for write-back (`balance_dirty_pages`); here the write(2) that
//!   crosses it sends its own file's gathered data before it returns.
//!
//! So the daemon holds at most about the hard limit of gathered data (plus a
//! `wsize` per writer), and data a program leaves unclosed reaches the
//! backing file within the expiry, as on Linux. The limits are the host's
//! sysctls, as the client would find them (dirtyable memory is taken as
//! MemAvailable), unless `--cache nfs:` sets `dirty_bytes=`,
//! `dirty_background_bytes=`, `dirty_expire_centisecs=` or
//! `dirty_writeback_centisecs=`. The flusher's WRITEs go through the rules
//! like any other (a delay or hang parks them on the scheduler as the
//! kernel's own requests); their errors are reported at the next close or
//! fsync.

use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::client_cache::NfsCache;
use crate::fs::Inner;
use crate::scheduler::Fate;

/// The write-back limits in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DirtyLimits {
    /// Gathered bytes above which the flusher writes back.
    pub(crate) background: u64,
    /// Gathered bytes above which a writer sends its own data first.
    pub(crate) limit: u64,
    /// Age after which gathered data is written back.
    pub(crate) expire: Duration,
    /// How often the flusher looks for expired data.
    pub(crate) interval: Duration,
}

/// A `/proc/sys/vm` value, if readable.
fn sysctl(name: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/sys/vm/{name}"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// MemAvailable, in bytes (the VM's dirtyable memory, near enough).
fn available_memory() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

impl DirtyLimits {
    /// The limits for `nfs`: its options, else the host's sysctls, else the
    /// kernel's defaults against 1 GiB.
    pub(crate) fn of(nfs: &NfsCache) -> DirtyLimits {
        let memory = available_memory().unwrap_or(1 << 30);
        let bytes_or_ratio = |option: Option<u64>, bytes: &str, ratio: &str, default: u64| {
            option
                .or_else(|| sysctl(bytes).filter(|b| *b > 0))
                .unwrap_or_else(|| memory / 100 * sysctl(ratio).unwrap_or(default))
        };
        let limit = bytes_or_ratio(nfs.dirty.bytes, "dirty_bytes", "dirty_ratio", 20).max(1);
        let background = bytes_or_ratio(
            nfs.dirty.background_bytes,
            "dirty_background_bytes",
            "dirty_background_ratio",
            10,
        )
        // The kernel keeps the background threshold below the limit
        // (domain_dirty_limits: half of it at most when it is not).
        .min(limit / 2)
        .max(1);
        let centisecs = |option: Option<u64>, name: &str, default: u64| {
            Duration::from_millis(10 * option.or_else(|| sysctl(name)).unwrap_or(default))
        };
        DirtyLimits {
            background,
            limit,
            expire: centisecs(nfs.dirty.expire_centisecs, "dirty_expire_centisecs", 3000),
            interval: centisecs(
                nfs.dirty.writeback_centisecs,
                "dirty_writeback_centisecs",
                500,
            )
            .max(Duration::from_millis(10)),
        }
    }
}

/// The flusher's wake-up: set when gathered data crossed the background
/// threshold.
#[derive(Debug, Default)]
pub(in crate::fs) struct Flusher {
    kicked: Mutex<bool>,
    wake: Condvar,
}

impl Flusher {
    /// Wakes the flusher before its interval is up.
    pub(in crate::fs) fn kick(&self) {
        *self.kicked.lock().unwrap() = true;
        self.wake.notify_one();
    }

    /// Waits for a kick or `interval`, whichever comes first.
    fn wait(&self, interval: Duration) {
        let kicked = self.kicked.lock().unwrap();
        let (mut kicked, _) = self
            .wake
            .wait_timeout_while(kicked, interval, |k| !*k)
            .unwrap();
        *kicked = false;
    }
}

/// Starts the flusher of `inner` (under `--cache nfs` with write-behind): a
/// thread that ends when the mount goes.
pub(in crate::fs) fn start(inner: &Arc<Inner>) {
    let Some(limits) = inner.mode.nfs().and_then(|nfs| nfs.dirty_limits) else {
        return;
    };
    let weak: Weak<Inner> = Arc::downgrade(inner);
    let spawned = std::thread::Builder::new()
        .name("slowfs-flusher".into())
        .spawn(move || loop {
            let Some(inner) = weak.upgrade() else { return };
            if inner.scheduler.is_shut_down() {
                return;
            }
            let Some(nfs) = inner.nfs() else { return };
            let batch = nfs.write_behind.to_write_back(&limits, Instant::now());
            let flusher = Arc::clone(&nfs.flusher);
            for pending in batch {
                inner.write_back(pending);
            }
            // Not holding the mount while asleep: it may go meanwhile.
            drop(inner);
            flusher.wait(limits.interval);
        });
    if let Err(e) = spawned {
        tracing::warn!("no write-back thread (gathered data waits for close or fsync): {e}");
    }
}

impl Inner {
    /// Sends `pending` as the flusher's WRITEs: decided by the rules, parked
    /// on the scheduler for a delay or hang as the kernel's own request
    /// (caller 0: never interrupted).
    fn write_back(self: &Arc<Self>, pending: super::write_behind::Pending) {
        let rpc = self.decide_writes(pending.ino, pending);
        let (delay, hang) = rpc.wait();
        if delay.is_zero() && hang.is_none() {
            self.send_carried(rpc, Fate::Run);
        } else {
            let inner = Arc::clone(self);
            self.scheduler
                .park(Instant::now() + delay, hang, delay, 0, move |fate| {
                    inner.send_carried(rpc, fate);
                });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_win_over_the_host_and_background_stays_below_the_limit() {
        let mut nfs = NfsCache::default();
        nfs.dirty.bytes = Some(16 << 20);
        nfs.dirty.background_bytes = Some(64 << 20);
        nfs.dirty.expire_centisecs = Some(200);
        nfs.dirty.writeback_centisecs = Some(50);
        let l = DirtyLimits::of(&nfs);
        assert_eq!(l.limit, 16 << 20);
        assert_eq!(l.background, 8 << 20, "at most half the limit");
        assert_eq!(l.expire, Duration::from_secs(2));
        assert_eq!(l.interval, Duration::from_millis(500));
        // The host's: some limit, the background below it.
        let host = DirtyLimits::of(&NfsCache::default());
        assert!(host.background < host.limit);
    }
}

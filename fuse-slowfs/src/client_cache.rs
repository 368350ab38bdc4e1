//! How the kernel caches a mount's data and attributes: `--cache every-call`
//! (every read and write of a file a data rule touches reaches the daemon, so
//! each call pays its fault) or `--cache nfs` (the Linux NFS client's caching,
//! so rules apply per request the kernel sends, which on NFS is an RPC).
//!
//! Under `nfs`, as nfs(5) describes the client:
//! - reads go through the page cache with the VM's read-ahead (128 KiB, as
//!   the Linux client since 5.4, commit c128e575514c "NFS: Optimise the
//!   default readahead size"; a FUSE mount's default), in READs of at most
//!   `rsize`;
//!   writes are gathered and sent in requests of at most `wsize` at close,
//!   fsync, a lock or a full request (`async`, the default; `sync` sends each
//!   write(2) before it returns; see `fs::write_behind`);
//! - attributes are cached for an adaptive time between `acregmin` and
//!   `acregmax` (directories `acdirmin`..`acdirmax`): it starts at the minimum,
//!   doubles each time a revalidation finds nothing changed and falls back to
//!   the minimum when something did (`actimeo=N` sets all four, `noac` none);
//! - close-to-open (`cto`, the default): every open asks for fresh attributes,
//!   and drops the cached pages when the file changed since this client last
//!   saw it, so a reader that opens after a writer closed sees its data;
//! - `lookupcache=all|positive|none`: which lookup results are cached;
//! - `hard` (the default) or `soft`/`softerr` with `timeo=` and `retrans=`: a
//!   request the server does not answer (a `hang` rule, a long delay) waits
//!   for it, or fails with EIO (ETIMEDOUT under `softerr`) at the major
//!   timeout; either way only SIGKILL ends the wait early (nfs(5): `intr` is
//!   ignored since 2.6.25);
//! - `lock` (the default) or `nolock`, and `local_lock=none|flock|posix|all`:
//!   fcntl and flock(2) locks are the server's, shared with every client, or
//!   each client's own (see [`LocalLock`]).

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The cache policy of a mount (`--cache`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CachePolicy {
    /// Files a data rule touches bypass the page cache: every call pays.
    #[default]
    EveryCall,
    /// The NFS client's caching.
    Nfs(NfsCache),
}

/// Which lookup results the client caches (nfs(5) `lookupcache=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookupCache {
    /// Names found and names not found.
    All,
    /// Only names found.
    Positive,
    /// Nothing: every lookup is sent.
    None,
}

/// The NFS client's cache settings, nfs(5)'s options and defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NfsCache {
    /// Regular files' attribute cache time, at least and at most.
    pub acregmin: Duration,
    /// See `acregmin`.
    pub acregmax: Duration,
    /// Directories' attribute (and lookup) cache time, at least and at most.
    pub acdirmin: Duration,
    /// See `acdirmin`.
    pub acdirmax: Duration,
    /// Which lookup results are cached.
    pub lookupcache: LookupCache,
    /// Largest READ, in bytes.
    pub rsize: u32,
    /// Largest WRITE, in bytes.
    pub wsize: u32,
    /// Close-to-open consistency.
    pub cto: bool,
    /// What a request the server does not answer does (`hard`, `soft`).
    pub recovery: Recovery,
    /// The first retransmission timeout (`timeo=`, in tenths of a second).
    pub timeo: Duration,
    /// Retransmissions before a major timeout (`retrans=`).
    pub retrans: u32,
    /// Which lock mechanisms stay in this client (`local_lock=`, `nolock`).
    pub local_lock: LocalLock,
    /// Writes are sent before write(2) returns (`sync`, and `noac`), not
    /// gathered until close, fsync or a lock (`async`, the default).
    pub sync: bool,
    /// The VM's write-back limits, where set (else the host's sysctls).
    pub dirty: DirtyOptions,
    /// Listings come with each entry's attributes and handle (READDIRPLUS,
    /// `rdirplus`, the default), so `ls -l` and `cp -r` send no LOOKUP per
    /// entry; `nordirplus`: plain READDIR.
    pub rdirplus: bool,
}

/// The VM's write-back sysctls that drive the client's WRITEs besides close
/// and fsync (`/proc/sys/vm/dirty_*`, as options named after them; see
/// `fs::write_back`). `None`: the host's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DirtyOptions {
    /// `dirty_bytes=`: gathered bytes above which a writer waits.
    pub bytes: Option<u64>,
    /// `dirty_background_bytes=`: gathered bytes above which the flusher
    /// writes back.
    pub background_bytes: Option<u64>,
    /// `dirty_expire_centisecs=`: age after which gathered data is written.
    pub expire_centisecs: Option<u64>,
    /// `dirty_writeback_centisecs=`: how often the flusher looks.
    pub writeback_centisecs: Option<u64>,
}

/// Which of the two lock mechanisms stay in the client instead of going to
/// the server's lock manager (nfs(5) `local_lock=`). Linux keeps them apart as
/// `NFS_MOUNT_LOCAL_FLOCK` and `NFS_MOUNT_LOCAL_FCNTL` (fs/nfs/fs_context.c):
/// `nfs_lock` and `nfs_flock` (fs/nfs/file.c) pass `is_local` to `do_setlk`,
/// which takes the lock locally or sends it; flock(2) goes to the server as a
/// whole-file byte-range lock ("We're simulating flock() locks using posix
/// locks on the server"), so it conflicts with other clients' flocks and
/// fcntl locks. `nolock` makes both local, `lock` neither, and either
/// overrides `local_lock=` wherever it stands (`nfs_try_mount_request`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalLock {
    /// Both go to the server (the default).
    None,
    /// flock(2) stays local; fcntl locks go to the server.
    Flock,
    /// fcntl locks stay local; flock(2) goes to the server.
    Posix,
    /// Both stay local (what `nolock` sets).
    All,
}

impl LocalLock {
    /// Whether flock(2) locks stay in this client.
    pub fn flock(self) -> bool {
        matches!(self, LocalLock::Flock | LocalLock::All)
    }

    /// Whether fcntl (POSIX) locks stay in this client.
    pub fn posix(self) -> bool {
        matches!(self, LocalLock::Posix | LocalLock::All)
    }

    fn name(self) -> &'static str {
        match self {
            LocalLock::None => "none",
            LocalLock::Flock => "flock",
            LocalLock::Posix => "posix",
            LocalLock::All => "all",
        }
    }
}

/// What the client does when the server stops answering (nfs(5) `hard`,
/// `soft`, `softerr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// Retry for ever: the caller waits until the server answers.
    Hard,
    /// Give up at the major timeout with this errno (EIO for `soft`,
    /// ETIMEDOUT for `softerr`).
    Soft(i32),
}

impl Recovery {
    /// The errno a request that was given up answers (EIO on a hard mount,
    /// which never gives up but for a dying mount).
    pub fn gave_up_errno(self) -> i32 {
        match self {
            Recovery::Soft(errno) => errno,
            Recovery::Hard => libc::EIO,
        }
    }
}

impl Default for NfsCache {
    /// nfs(5)'s defaults; rsize and wsize at the Linux client's 1 MiB maximum,
    /// which is what it negotiates with a Linux server.
    fn default() -> NfsCache {
        NfsCache {
            acregmin: Duration::from_secs(3),
            acregmax: Duration::from_secs(60),
            acdirmin: Duration::from_secs(30),
            acdirmax: Duration::from_secs(60),
            lookupcache: LookupCache::All,
            rsize: 1 << 20,
            wsize: 1 << 20,
            cto: true,
            recovery: Recovery::Hard,
            // nfs(5): over TCP, 600 tenths of a second and 2 retransmissions.
            timeo: Duration::from_secs(60),
            retrans: 2,
            local_lock: LocalLock::None,
            sync: false,
            dirty: DirtyOptions::default(),
            rdirplus: true,
        }
    }
}

/// The options `--cache nfs:OPTIONS` takes, for error messages.
const NFS_OPTIONS: &str = "ac, noac, actimeo=N, acregmin=N, acregmax=N, acdirmin=N, \
                           acdirmax=N (seconds), lookupcache=all|positive|none, \
                           rsize=BYTES, wsize=BYTES, cto, nocto, hard, soft, softerr, \
                           timeo=DECISECONDS, retrans=N, lock, nolock, \
                           local_lock=none|flock|posix|all, sync, async, rdirplus, nordirplus, \
                           dirty_bytes=BYTES, dirty_background_bytes=BYTES, \
                           dirty_expire_centisecs=N, dirty_writeback_centisecs=N";

impl NfsCache {
    /// Applies one nfs(5) option.
    fn apply(&mut self, option: &str) -> Result<(), String> {
        let seconds = |v: &str| {
            v.parse::<u64>()
                .ok()
                .filter(|s| *s <= 3600)
                .map(Duration::from_secs)
                .ok_or_else(|| format!("{option}: expected whole seconds from 0 to 3600"))
        };
        let size = |v: &str| {
            // nfs(5): a multiple of 1024 up to 1 MiB (rounded down); FUSE's
            // smallest request size is one page.
            let n: u32 = slowfs_faults::parse_size(v)
                .ok()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| format!("{option}: expected a size like 65536 or 64KiB"))?;
            let n = n.min(1 << 20) / 4096 * 4096;
            if n == 0 {
                return Err(format!("{option}: at least 4096 bytes (one page)"));
            }
            Ok(n)
        };
        match option.split_once('=') {
            None => match option {
                "ac" => {}
                // nfs(5): noac also makes writes synchronous.
                "noac" => {
                    self.set_all_timeouts(Duration::ZERO);
                    self.sync = true;
                }
                "sync" => self.sync = true,
                "async" => self.sync = false,
                "rdirplus" => self.rdirplus = true,
                "nordirplus" => self.rdirplus = false,
                "cto" => self.cto = true,
                "nocto" => self.cto = false,
                "hard" => self.recovery = Recovery::Hard,
                "soft" => self.recovery = Recovery::Soft(libc::EIO),
                "softerr" => self.recovery = Recovery::Soft(libc::ETIMEDOUT),
                "lock" => self.local_lock = LocalLock::None,
                "nolock" => self.local_lock = LocalLock::All,
                // nfs(5): deprecated and ignored since 2.6.25 (only SIGKILL
                // interrupts a request); accepted as the client accepts it.
                "intr" | "nointr" => {}
                _ => return Err(unknown(option)),
            },
            Some((key, value)) => match key {
                "actimeo" => self.set_all_timeouts(seconds(value)?),
                "acregmin" => self.acregmin = seconds(value)?,
                "acregmax" => self.acregmax = seconds(value)?,
                "acdirmin" => self.acdirmin = seconds(value)?,
                "acdirmax" => self.acdirmax = seconds(value)?,
                "lookupcache" => {
                    self.lookupcache = match value {
                        "all" => LookupCache::All,
                        "positive" | "pos" => LookupCache::Positive,
                        "none" => LookupCache::None,
                        _ => {
                            return Err(format!(
                                "{option}: expected lookupcache=all, positive or none"
                            ))
                        }
                    }
                }
                "local_lock" => {
                    self.local_lock = match value {
                        "none" => LocalLock::None,
                        "flock" => LocalLock::Flock,
                        "posix" => LocalLock::Posix,
                        "all" => LocalLock::All,
                        _ => {
                            return Err(format!(
                                "{option}: expected local_lock=none, flock, posix or all"
                            ))
                        }
                    }
                }
                "timeo" => {
                    self.timeo = value
                        .parse::<u64>()
                        .ok()
                        .filter(|t| (1..=6000).contains(t))
                        .map(|t| Duration::from_millis(t * 100))
                        .ok_or_else(|| {
                            format!("{option}: expected tenths of a second from 1 to 6000")
                        })?
                }
                "retrans" => {
                    self.retrans = value
                        .parse::<u32>()
                        .ok()
                        .filter(|r| *r <= 100)
                        .ok_or_else(|| format!("{option}: expected a count from 0 to 100"))?
                }
                "dirty_bytes" | "dirty_background_bytes" => {
                    let n = slowfs_faults::parse_size(value)
                        .ok()
                        .filter(|n| *n >= 4096)
                        .ok_or_else(|| format!("{option}: expected a size of 4KiB or more"))?;
                    if key == "dirty_bytes" {
                        self.dirty.bytes = Some(n);
                    } else {
                        self.dirty.background_bytes = Some(n);
                    }
                }
                "dirty_expire_centisecs" | "dirty_writeback_centisecs" => {
                    let n = value
                        .parse::<u64>()
                        .ok()
                        .filter(|n| (1..=360_000).contains(n))
                        .ok_or_else(|| {
                            format!("{option}: expected hundredths of a second from 1 to 360000")
                        })?;
                    if key == "dirty_expire_centisecs" {
                        self.dirty.expire_centisecs = Some(n);
                    } else {
                        self.dirty.writeback_centisecs = Some(n);
                    }
                }
                "rsize" => self.rsize = size(value)?,
                "wsize" => self.wsize = size(value)?,
                _ => return Err(unknown(option)),
            },
        }
        Ok(())
    }

    /// How long a soft mount waits for an answer before it gives up (`None`
    /// on a hard mount): the major timeout over TCP, `timeo` × (1 +
    /// `retrans`), at most 600 s. Linux: `nfs_init_timeout_values`
    /// (fs/nfs/client.c) sets `to_increment = to_initval` (linear backoff) and
    /// caps `to_maxval` at `NFS_MAX_TCP_TIMEOUT` (600 s);
    /// `xprt_calc_majortimeo` (net/sunrpc/xprt.c) puts the major timeout at
    /// `to_initval + to_increment * to_retries` from the request's start, and
    /// `xprt_request_timeout` wakes the request at it even when the next
    /// retransmission would come later. So 180 s by default (timeo=600,
    /// retrans=2), 1.0 s for `timeo=5,retrans=1`.
    pub fn gives_up_after(&self) -> Option<Duration> {
        const MAX: Duration = Duration::from_secs(600);
        match self.recovery {
            Recovery::Hard => None,
            Recovery::Soft(_) => Some((self.timeo.min(MAX) * (self.retrans + 1)).min(MAX)),
        }
    }

    fn set_all_timeouts(&mut self, t: Duration) {
        self.acregmin = t;
        self.acregmax = t;
        self.acdirmin = t;
        self.acdirmax = t;
    }

    /// The range of attribute cache times for a directory or a file.
    fn window(&self, dir: bool) -> (Duration, Duration) {
        let (min, max) = if dir {
            (self.acdirmin, self.acdirmax)
        } else {
            (self.acregmin, self.acregmax)
        };
        (min, max.max(min))
    }
}

fn unknown(option: &str) -> String {
    format!("unknown NFS cache option '{option}' (known: {NFS_OPTIONS})")
}

impl FromStr for CachePolicy {
    type Err = String;

    /// `every-call`, `nfs` or `nfs:OPT,OPT...` (nfs(5) option syntax).
    fn from_str(text: &str) -> Result<CachePolicy, String> {
        let (name, options) = match text.split_once(':') {
            Some((name, options)) => (name, Some(options)),
            None => (text, None),
        };
        match (name, options) {
            ("every-call", None) => Ok(CachePolicy::EveryCall),
            ("nfs", options) => {
                let mut nfs = NfsCache::default();
                let mut lock_status = None;
                for option in options.unwrap_or("").split(',').filter(|o| !o.is_empty()) {
                    let option = option.trim();
                    nfs.apply(option)?;
                    if matches!(option, "lock" | "nolock") {
                        lock_status = Some(nfs.local_lock);
                    }
                }
                // `lock` and `nolock` override `local_lock=` wherever they
                // stand (nfs_try_mount_request, fs/nfs/super.c).
                if let Some(local_lock) = lock_status {
                    nfs.local_lock = local_lock;
                }
                Ok(CachePolicy::Nfs(nfs))
            }
            ("every-call", Some(_)) => Err("every-call takes no options".into()),
            _ => Err(format!(
                "unknown cache policy '{text}' (expected every-call, nfs, or nfs:OPTIONS with \
                 OPTIONS from: {NFS_OPTIONS}; e.g. nfs:actimeo=1,lookupcache=positive)"
            )),
        }
    }
}

impl fmt::Display for CachePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CachePolicy::EveryCall => write!(f, "every-call"),
            CachePolicy::Nfs(n) => {
                write!(
                f,
                "nfs:acregmin={},acregmax={},acdirmin={},acdirmax={},lookupcache={},rsize={},wsize={},{},{},timeo={},retrans={},local_lock={},{}",
                n.acregmin.as_secs(),
                n.acregmax.as_secs(),
                n.acdirmin.as_secs(),
                n.acdirmax.as_secs(),
                match n.lookupcache {
                    LookupCache::All => "all",
                    LookupCache::Positive => "positive",
                    LookupCache::None => "none",
                },
                n.rsize,
                n.wsize,
                if n.cto { "cto" } else { "nocto" },
                match n.recovery {
                    Recovery::Hard => "hard",
                    Recovery::Soft(libc::ETIMEDOUT) => "softerr",
                    Recovery::Soft(_) => "soft",
                },
                n.timeo.as_millis() / 100,
                n.retrans,
                n.local_lock.name(),
                if n.sync { "sync" } else { "async" },
            )?;
                if !n.rdirplus {
                    write!(f, ",nordirplus")?;
                }
                for (name, value) in [
                    ("dirty_bytes", n.dirty.bytes),
                    ("dirty_background_bytes", n.dirty.background_bytes),
                    ("dirty_expire_centisecs", n.dirty.expire_centisecs),
                    ("dirty_writeback_centisecs", n.dirty.writeback_centisecs),
                ] {
                    if let Some(value) = value {
                        write!(f, ",{name}={value}")?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// What a file looked like when the client last saw it: a change in any of
/// these is a change on the server (the NFS client compares change attribute,
/// mtime and size the same way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    /// Modification time, ns.
    pub mtime: i128,
    /// Change time, ns.
    pub ctime: i128,
    /// Size.
    pub size: u64,
}

impl Version {
    /// The version of a stat.
    pub fn of(st: &libc::stat) -> Version {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Version {
            mtime: ns(st.st_mtime, st.st_mtime_nsec),
            ctime: ns(st.st_ctime, st.st_ctime_nsec),
            size: st.st_size as u64,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Seen {
    version: Version,
    /// The attribute cache time (`attrtimeo`).
    timeout: Duration,
    /// When it was last set (`attrtimeo_timestamp`).
    since: Instant,
}

impl Seen {
    /// A file's version just learnt: its attribute time starts at the minimum.
    fn fresh(nfs: &NfsCache, version: Version) -> Seen {
        Seen {
            version,
            timeout: nfs.window(false).0,
            since: Instant::now(),
        }
    }
}

/// Per inode: the version this client last saw and its current attribute
/// cache time. The lock is held only to look up and update (never across a
/// syscall or a wait).
#[derive(Debug, Default)]
pub struct ClientView {
    seen: Mutex<HashMap<u64, Seen>>,
}

impl ClientView {
    /// Attributes of `ino` at `version` are sent to the kernel: how long it
    /// may cache them. The first time and after a change, the minimum; a
    /// revalidation that finds nothing changed doubles it (up to the
    /// maximum) only once the current time has run out since it was set:
    /// replies within it leave it as it is (`nfs_update_inode`,
    /// fs/nfs/inode.c: `attrtimeo <<= 1` only when `now` is outside
    /// `[attrtimeo_timestamp, attrtimeo_timestamp + attrtimeo)`).
    pub fn attributes(&self, nfs: &NfsCache, ino: u64, dir: bool, version: Version) -> Duration {
        let (min, max) = nfs.window(dir);
        let now = Instant::now();
        let mut seen = self.seen.lock().unwrap();
        let next = match seen.get(&ino) {
            Some(s) if s.version == version && now >= s.since + s.timeout => Seen {
                version,
                timeout: (s.timeout * 2).clamp(min, max),
                since: now,
            },
            Some(s) if s.version == version => Seen {
                timeout: s.timeout.clamp(min, max),
                ..*s
            },
            _ => Seen {
                version,
                timeout: min,
                since: now,
            },
        };
        seen.insert(ino, next);
        next.timeout
    }

    /// This client changed `ino` itself (a write it sent): the new version is
    /// what it knows, as the NFS client learns it from the reply.
    pub fn changed_here(&self, nfs: &NfsCache, ino: u64, version: Version) {
        self.seen
            .lock()
            .unwrap()
            .insert(ino, Seen::fresh(nfs, version));
    }

    /// An open of `ino`, now at `version`: whether the pages this client has
    /// cached are still the file's (it saw this version last). Records it.
    pub fn still_current(&self, nfs: &NfsCache, ino: u64, version: Version) -> bool {
        let mut seen = self.seen.lock().unwrap();
        let current = seen.get(&ino).is_some_and(|s| s.version == version);
        if !current {
            seen.insert(ino, Seen::fresh(nfs, version));
        }
        current
    }

    /// The kernel forgot `ino`.
    pub fn forget(&self, ino: u64) {
        self.seen.lock().unwrap().remove(&ino);
    }

    /// The current attribute cache time of directory `ino` (for the names in
    /// it), or the minimum if the client has not seen it.
    pub fn directory_timeout(&self, nfs: &NfsCache, ino: u64) -> Duration {
        let (min, _) = nfs.window(true);
        self.seen
            .lock()
            .unwrap()
            .get(&ino)
            .map_or(min, |s| s.timeout.max(min))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nfs(text: &str) -> NfsCache {
        match text.parse::<CachePolicy>().unwrap() {
            CachePolicy::Nfs(n) => n,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn options_are_nfs5s() {
        assert_eq!(nfs("nfs"), NfsCache::default());
        let n = nfs("nfs:actimeo=7,lookupcache=pos,rsize=65536,wsize=32KiB,nocto");
        assert_eq!(n.acregmin, Duration::from_secs(7));
        assert_eq!(n.acdirmax, Duration::from_secs(7));
        assert_eq!(n.lookupcache, LookupCache::Positive);
        assert_eq!((n.rsize, n.wsize), (65536, 32768));
        assert!(!n.cto);
        let n = nfs("nfs:noac");
        assert_eq!(n.acregmax, Duration::ZERO);
        assert!(n.sync, "nfs(5): noac makes writes synchronous");
        assert!(nfs("nfs:sync").sync && !nfs("nfs").sync);
        // Rounded down to whole pages, capped at 1 MiB.
        assert_eq!(nfs("nfs:rsize=10000,wsize=8MiB").rsize, 8192);
        assert_eq!(nfs("nfs:wsize=8MiB").wsize, 1 << 20);
        let n = nfs("nfs:soft,timeo=10,retrans=3,nolock");
        assert_eq!(n.recovery, Recovery::Soft(libc::EIO));
        assert_eq!(n.local_lock, LocalLock::All);
        // 1 s x (1 + 3): xprt_calc_majortimeo with linear backoff.
        assert_eq!(n.gives_up_after(), Some(Duration::from_secs(4)));
        // The defaults: 60 s x (1 + 2); hard never gives up.
        assert_eq!(
            nfs("nfs:soft").gives_up_after(),
            Some(Duration::from_secs(180))
        );
        assert_eq!(nfs("nfs").gives_up_after(), None);
        assert_eq!(
            nfs("nfs:soft,timeo=5,retrans=1").gives_up_after(),
            Some(Duration::from_secs(1))
        );
        // At most 600 s (NFS_MAX_TCP_TIMEOUT caps to_maxval).
        assert_eq!(
            nfs("nfs:softerr,timeo=6000,retrans=1").gives_up_after(),
            Some(Duration::from_secs(600))
        );
        assert_eq!(
            "every-call".parse::<CachePolicy>(),
            Ok(CachePolicy::EveryCall)
        );
    }

    #[test]
    fn local_lock_keeps_flock_posix_both_or_neither_local() {
        assert_eq!(nfs("nfs").local_lock, LocalLock::None);
        let n = nfs("nfs:local_lock=flock");
        assert!(n.local_lock.flock() && !n.local_lock.posix());
        let n = nfs("nfs:local_lock=posix");
        assert!(!n.local_lock.flock() && n.local_lock.posix());
        // lock/nolock win over local_lock= wherever they stand.
        assert_eq!(nfs("nfs:nolock,local_lock=none").local_lock, LocalLock::All);
        assert_eq!(nfs("nfs:lock,local_lock=all").local_lock, LocalLock::None);
    }

    #[test]
    fn the_attribute_time_doubles_only_after_it_ran_out() {
        let n = nfs("nfs:acregmin=1,acregmax=60");
        let view = ClientView::default();
        let v = Version {
            mtime: 1,
            ctime: 1,
            size: 1,
        };
        // Five replies within the first second: still the minimum.
        for _ in 0..5 {
            assert_eq!(view.attributes(&n, 7, false, v), Duration::from_secs(1));
        }
        // One after it ran out: doubled, once.
        std::thread::sleep(Duration::from_millis(1050));
        assert_eq!(view.attributes(&n, 7, false, v), Duration::from_secs(2));
        assert_eq!(view.attributes(&n, 7, false, v), Duration::from_secs(2));
        // A change: back to the minimum.
        let changed = Version { size: 2, ..v };
        assert_eq!(
            view.attributes(&n, 7, false, changed),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn bad_options_name_the_known_ones() {
        for (text, says) in [
            ("nfs:actime=3", "known: ac, noac"),
            ("nfs:acregmin=x", "whole seconds"),
            ("nfs:lookupcache=some", "all, positive or none"),
            ("nfs:rsize=100", "at least 4096"),
            ("nfs:timeo=0", "tenths of a second"),
            ("nfs:local_lock=fcntl", "none, flock, posix or all"),
            ("nfs:retrans=-1", "count from 0"),
            ("nsf", "expected every-call, nfs"),
            ("every-call:x", "no options"),
        ] {
            let err = text.parse::<CachePolicy>().unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn the_display_parses_back() {
        for text in [
            "nfs:acregmin=1,acdirmax=9,lookupcache=none,nocto",
            "nfs:softerr,timeo=15,retrans=4,nolock,sync",
            "nfs:soft",
            "nfs:local_lock=flock",
            "nfs:local_lock=posix",
            "nfs:dirty_bytes=16MiB,dirty_expire_centisecs=200",
        ] {
            let policy: CachePolicy = text.parse().unwrap();
            assert_eq!(policy.to_string().parse::<CachePolicy>(), Ok(policy));
        }
    }

    #[test]
    fn attribute_timeouts_hold_within_their_time_and_reset_on_change() {
        let n = NfsCache::default();
        let view = ClientView::default();
        let v1 = Version {
            mtime: 1,
            ctime: 1,
            size: 1,
        };
        let v2 = Version { size: 2, ..v1 };
        let secs = |s| Duration::from_secs(s);
        assert_eq!(view.attributes(&n, 5, false, v1), secs(3));
        // Replies within the 3 s do not lengthen it (growth after it ran
        // out: the_attribute_time_doubles_only_after_it_ran_out).
        for _ in 0..8 {
            assert_eq!(view.attributes(&n, 5, false, v1), secs(3));
        }
        assert_eq!(view.attributes(&n, 5, false, v2), secs(3));
        assert_eq!(view.attributes(&n, 6, true, v1), secs(30));
        assert!(view.still_current(&n, 5, v2));
        assert!(!view.still_current(&n, 5, v1));
        assert!(view.still_current(&n, 5, v1), "recorded at the open");
    }
}

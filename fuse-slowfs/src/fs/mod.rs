//! The filesystem: a passthrough over a backing directory that asks the fault plan
//! about every request before doing it.

mod attributes;
mod changes;
pub(crate) mod contain;
mod crash;
mod directories;
mod entries;
mod files;
mod filesystem;
mod handle;
mod handles;
mod inodes;
mod lies;
mod locks;
mod names;
mod open_files;
mod passthrough;
mod recorder;
mod sys;
mod write_back;
mod write_behind;
mod xattrs;

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fuser::{Errno, FileAttr, FileType, INodeNo};
use slowfs_faults::{FaultPlan, Op};

use crate::mount_options::Atime;
use crate::scheduler::{Fate, Scheduler};
use crate::stats::{RequestOutcome, Stats};
pub use crash::DurabilityReport;
use handles::Handles;
use inodes::Inodes;

/// Shared state of a mounted slowfs: reachable from FUSE handlers, parked jobs and
/// the control socket.
#[derive(Debug)]
pub struct Inner {
    inodes: Inodes,
    handles: Handles,
    /// fcntl locks, under `--cache nfs:lock`.
    locks: locks::Locks,
    /// Open files and silly renames, under `--cache nfs`.
    open_files: open_files::OpenFiles,
    /// Gathered writes, under `--cache nfs`.
    write_behind: write_behind::WriteBehind,
    /// Names the kernel caches as missing, under `--cache nfs`.
    negative_names: names::NegativeNames,
    /// The VM's write-back limits on gathered data (under `--cache nfs`
    /// with write-behind), and the flusher's wake-up.
    dirty_limits: Option<write_back::DirtyLimits>,
    flusher: Arc<write_back::Flusher>,
    /// The live fault rules.
    pub plan: Arc<FaultPlan>,
    /// Counters.
    pub stats: Stats,
    /// Where delayed and hung requests wait.
    pub scheduler: Scheduler,
    /// The FUSE settings to negotiate.
    tuning: crate::Tuning,
    /// Whether the writeback cache may be used at all (not while recording: the
    /// log must see writes in program order).
    writeback_allowed: bool,
    /// Whether the kernel granted it.
    writeback: std::sync::atomic::AtomicBool,
    /// The operation log, on a recording mount.
    recorder: Option<recorder::Recorder>,
    /// With the strict crash model: the durable tree the log starts from.
    crash: Option<crash::CrashState>,
    /// Whether to ask the kernel for FUSE passthrough (`--passthrough auto`).
    passthrough_wanted: bool,
    /// Whether the kernel granted it.
    passthrough: std::sync::atomic::AtomicBool,
    /// Whether the kernel leaves the caller's umask to the daemon (FUSE_DONT_MASK),
    /// so that a default ACL can take its place.
    dont_mask: std::sync::atomic::AtomicBool,
    /// For telling the kernel that cached attributes are stale.
    notifier: std::sync::OnceLock<fuser::Notifier>,
    /// Files open for writing in kernel passthrough, whose times the daemon
    /// does not see change (an mmap store, a write): their attributes are not
    /// cached, so that stat shows the new mtime and ctime at once.
    passthrough_writers: PassthroughWriters,
    /// `-o noatime` where the backing mount could not be cloned with it: the
    /// daemon's own opens (not kernel passthrough's) ask for O_NOATIME.
    no_atime: bool,
    /// `-o strictatime`: every read must reach the backing file, so no page
    /// cache is kept across opens (a read from it would not move the atime).
    strict_atime: bool,
    /// `--cache nfs` (without a log or crash model): the NFS client's
    /// settings, and what it has seen of each file. Every NFS behaviour asks
    /// this (or [`Inner::nfs_client`]), set once at mount.
    nfs: Option<(
        crate::client_cache::NfsCache,
        crate::client_cache::ClientView,
    )>,
}

/// Handles open for writing in passthrough, by inode.
#[derive(Debug, Default)]
struct PassthroughWriters {
    /// How many, for the fast path (none: nothing to look up).
    count: std::sync::atomic::AtomicUsize,
    /// Handle -> inode.
    handles: std::sync::Mutex<std::collections::HashMap<u64, u64>>,
}

impl PassthroughWriters {
    fn opened(&self, fh: u64, ino: u64) {
        self.handles.lock().unwrap().insert(fh, ino);
        self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Forgets handle `fh`; its inode if it was a writer.
    fn closed(&self, fh: u64) -> Option<u64> {
        if self.count.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            return None;
        }
        let ino = self.handles.lock().unwrap().remove(&fh)?;
        self.count.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        Some(ino)
    }

    fn writing(&self, ino: u64) -> bool {
        self.count.load(std::sync::atomic::Ordering::Relaxed) > 0
            && self.handles.lock().unwrap().values().any(|i| *i == ino)
    }
}

/// What a mount asks of its filesystem besides rules and tuning.
#[derive(Debug, Clone, Copy, Default)]
pub struct FsMode {
    /// The operation log and the crash model (either turns passthrough and
    /// the write-back cache off).
    pub durability: crate::Durability,
    /// Serve files no data rule touches by kernel passthrough.
    pub passthrough: bool,
    /// A caller's fatal or handled signal ends its delayed request.
    pub interruptible: bool,
    /// `-o noatime|relatime|strictatime`: how reads move access times.
    pub atime: Atime,
    /// `-o nodiratime`.
    pub nodiratime: bool,
    /// How the kernel caches data and attributes (`--cache`).
    pub cache: crate::CachePolicy,
}

/// The scheduler of a mount in `mode`: an NFS mount is interrupted only by a
/// fatal signal and, if soft, gives a request up at its major timeout.
fn new_scheduler(mode: FsMode) -> std::io::Result<Scheduler> {
    use crate::scheduler::Interrupts;
    match mode.cache {
        _ if !mode.interruptible => Scheduler::new(Interrupts::Never, None),
        crate::CachePolicy::Nfs(nfs) => Scheduler::new(Interrupts::FatalOnly, nfs.gives_up_after()),
        crate::CachePolicy::EveryCall => Scheduler::new(Interrupts::AnySignal, None),
    }
}

/// The backing directory reached through a private clone of its mount with
/// the mount's access-time policy, when that differs from the kernel's
/// default (relatime); `None` when it does not, or the clone is not allowed
/// (no CAP_SYS_ADMIN: `-o noatime` then falls back to O_NOATIME on the
/// daemon's own opens, and strictatime is not kept).
fn atime_root(backing: &Path, mode: FsMode) -> Option<OwnedFd> {
    let bits = match mode.atime {
        Atime::Relatime if !mode.nodiratime => return None,
        Atime::Relatime => 0x00,
        Atime::Noatime => 0x10,
        Atime::Strictatime => 0x20,
    };
    match sys::atime_clone(backing, bits, mode.nodiratime) {
        Ok(clone) => Some(clone),
        Err(e) => {
            tracing::warn!(
                "cannot keep {:?} on the backing files' access times ({e:?}): the backing mount's policy applies",
                mode.atime
            );
            None
        }
    }
}

/// A time as nanoseconds since the epoch (negative before it).
fn nanos(t: SystemTime) -> i128 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

/// The `fuser::Filesystem` handed to the session.
#[derive(Debug)]
pub struct SlowFs {
    inner: Arc<Inner>,
}

impl SlowFs {
    /// A filesystem over `backing`, faulted by `plan`.
    pub fn new(
        backing: &Path,
        plan: Arc<FaultPlan>,
        tuning: crate::Tuning,
        mode: FsMode,
    ) -> std::io::Result<SlowFs> {
        let root: OwnedFd = std::fs::File::open(backing)
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "cannot open the backing directory {}: {e}",
                        backing.display()
                    ),
                )
            })?
            .into();
        let st = sys::stat_fd(sys::raw(&root)).map_err(errno_to_io)?;
        if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
            return Err(std::io::Error::other(format!(
                "backing path {} is not a directory",
                backing.display()
            )));
        }
        // strictatime is kept only through the clone: without it the backing
        // mount's policy applies, and dropping the page cache would buy nothing.
        let (root, no_atime, strict_atime) = match atime_root(backing, mode) {
            Some(clone) => (clone, false, mode.atime == Atime::Strictatime),
            None => (root, mode.atime == Atime::Noatime, false),
        };
        let root =
            sys::reopen(sys::raw(&root), libc::O_PATH | libc::O_DIRECTORY).map_err(errno_to_io)?;
        let capacity = match tuning.fd_cache {
            0 => crate::limits::fd_cache_capacity(),
            n => {
                crate::limits::raise_nofile();
                n
            }
        };
        let inodes = Inodes::new(
            root,
            (st.st_dev, st.st_ino),
            capacity,
            tuning.file_handles,
            !mode.durability.crashes(),
        );
        tracing::debug!(
            "inodes are reopened by {}",
            if inodes.uses_file_handles() {
                "file handle"
            } else {
                "name"
            }
        );
        // Whether this mount is an NFS client, decided once: `--cache nfs`
        // unless a log records the tree (it must see each write and name as
        // the caller made it; the crash model records too).
        let nfs_client = match mode.cache {
            crate::CachePolicy::Nfs(nfs) if !mode.durability.records() => Some(nfs),
            _ => None,
        };
        let inner = Arc::new(Inner {
            inodes,
            handles: Handles::default(),
            locks: Default::default(),
            open_files: Default::default(),
            write_behind: Default::default(),
            negative_names: Default::default(),
            dirty_limits: nfs_client
                .filter(|nfs| !nfs.sync)
                .map(|nfs| write_back::DirtyLimits::of(&nfs)),
            flusher: Default::default(),
            plan,
            stats: Stats::default(),
            scheduler: new_scheduler(mode)?,
            tuning,
            writeback_allowed: !mode.durability.records(),
            writeback: Default::default(),
            recorder: mode.durability.records().then(recorder::Recorder::default),
            // Under `--cache nfs` every request is an RPC the rules see.
            passthrough_wanted: mode.passthrough
                && !mode.durability.records()
                && mode.cache == crate::CachePolicy::EveryCall,
            passthrough: Default::default(),
            dont_mask: Default::default(),
            notifier: Default::default(),
            passthrough_writers: Default::default(),
            no_atime,
            strict_atime,
            nfs: nfs_client.map(|nfs| (nfs, Default::default())),
            crash: if mode.durability.crashes() {
                Some(crash::CrashState::new(backing)?)
            } else {
                None
            },
        });
        // The VM's flusher, under --cache nfs with write-behind.
        write_back::start(&inner);
        Ok(SlowFs { inner })
    }

    /// The shared state, for the control socket and the mount handle.
    pub fn inner(&self) -> Arc<Inner> {
        Arc::clone(&self.inner)
    }
}

impl Inner {
    /// Whether the kernel caches writes (FUSE writeback cache).
    fn writeback(&self) -> bool {
        self.writeback.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether this mount is an NFS client (`--cache nfs`).
    pub fn is_nfs_client(&self) -> bool {
        self.nfs.is_some()
    }

    /// The operations recorded so far (empty unless recording).
    pub fn recorded(&self) -> Vec<slowfs_faults::durability::LogOp> {
        self.recorder.as_ref().map(|r| r.ops()).unwrap_or_default()
    }

    /// The mask a create of this request must apply: the caller's umask when the
    /// kernel left it to us, else none (the kernel already applied it).
    fn create_mask(&self, umask: u32) -> u32 {
        if self.dont_mask.load(std::sync::atomic::Ordering::Relaxed) {
            umask
        } else {
            0
        }
    }

    /// Runs `open` with `flags`, plus O_NOATIME under `-o noatime`; once more
    /// without it where the daemon may not ask for it (EPERM: a file it does
    /// not own, without CAP_FOWNER).
    fn without_atime<T>(
        &self,
        flags: i32,
        mut open: impl FnMut(i32) -> sys::SysResult<T>,
    ) -> sys::SysResult<T> {
        if !self.no_atime {
            return open(flags);
        }
        match open(flags | libc::O_NOATIME) {
            Err(Errno::EPERM) => open(flags),
            result => result,
        }
    }

    /// Gives the mount a way to invalidate the kernel's caches.
    pub fn set_notifier(&self, notifier: fuser::Notifier) {
        if self.nfs.is_some() {
            self.negative_names.start(notifier.clone());
        }
        let _ = self.notifier.set(notifier);
    }

    /// Tells the kernel that inode `ino`'s cached attributes are stale (the daemon
    /// changed its mode behind the kernel's back: set-ID bits dropped, an ACL set).
    fn attributes_changed(&self, ino: u64) {
        if let Some(notifier) = self.notifier.get() {
            let _ = notifier.inval_inode(INodeNo(ino), -1, 0);
        }
    }

    /// Runs `open`, and once more after closing half the cached inode fds if it
    /// failed for want of fds: the cache must never cost a caller an open.
    fn with_fds<T>(&self, mut open: impl FnMut() -> sys::SysResult<T>) -> sys::SysResult<T> {
        match open() {
            Err(Errno::EMFILE | Errno::ENFILE) => {
                self.inodes.relieve();
                open()
            }
            result => result,
        }
    }

    /// Records a sync(2)/syncfs(2) seen from the workload's side (the kernel does
    /// not forward them to a FUSE daemon).
    pub fn record_sync(&self) {
        self.changed(changes::Change::SyncedAll);
    }

    /// The node id the durability log uses for an inode: its backing inode number.
    fn node(&self, ino: u64) -> Option<u64> {
        self.inodes.key(ino).map(|key| key.1)
    }

    /// Open file handles right now (for leak checks).
    pub fn open_handles(&self) -> usize {
        self.handles.len()
    }

    /// Inodes the kernel holds right now.
    pub fn known_inodes(&self) -> usize {
        self.inodes.len()
    }

    /// Mount-relative path of an inode, computed only when a rule could care.
    fn path_of(&self, ino: u64) -> String {
        if self.plan.is_empty() {
            String::new()
        } else {
            self.inodes.path(ino)
        }
    }

    /// Mount-relative path of `name` in `parent`, computed only when a rule could care.
    fn child_path(&self, parent: u64, name: &OsStr) -> String {
        if self.plan.is_empty() {
            String::new()
        } else {
            self.inodes.child_path(parent, name)
        }
    }

    /// The path for a request whose only use of it is the plan's decision:
    /// computed only when a rule names `op` (a data rule must not make every
    /// stat walk the inode table).
    fn path_for(&self, op: Op, ino: u64) -> String {
        if self.plan.matches_op(op) {
            self.inodes.path(ino)
        } else {
            String::new()
        }
    }

    /// [`path_for`](Self::path_for) of `name` in `parent`.
    fn child_path_for(&self, op: Op, parent: u64, name: &OsStr) -> String {
        if self.plan.matches_op(op) {
            self.inodes.child_path(parent, name)
        } else {
            String::new()
        }
    }

    /// How long the kernel may cache the attributes `attr` of inode `ino`:
    /// under `--cache nfs` the client's adaptive time; else as [`Inner::ttl`],
    /// and not at all while it is open for writing in passthrough.
    fn attr_ttl(&self, ino: u64, attr: &FileAttr) -> Duration {
        if let Some((nfs, view)) = &self.nfs {
            let version = crate::client_cache::Version {
                mtime: nanos(attr.mtime),
                ctime: nanos(attr.ctime),
                size: attr.size,
            };
            let dir = attr.kind == FileType::Directory;
            if dir {
                // A revalidation of the directory: names cached as missing
                // at another version of it go (see names.rs).
                self.negative_names.revalidated(ino, version, None);
            }
            return view.attributes(nfs, ino, dir, version);
        }
        if self.passthrough_writers.writing(ino) {
            Duration::ZERO
        } else {
            self.ttl()
        }
    }

    /// A passthrough handle `fh` of inode `ino` was opened; `write` if for writing.
    /// A writer drops the attributes the kernel cached before the open (a stat
    /// then an mmap store must not show the old mtime, xfstests 080).
    fn opened_passthrough(&self, fh: u64, ino: u64, write: bool) {
        if write {
            self.passthrough_writers.opened(fh, ino);
            self.attributes_changed(ino);
        }
    }

    /// A passthrough handle `fh` of inode `ino` came with a create. Counted as
    /// a writer like an open, but nothing to drop: the create's reply carries
    /// the attributes, which the kernel takes over any it had for the inode
    /// (a notice per create was a sixth write to /dev/fuse for nothing).
    fn created_passthrough(&self, fh: u64, ino: u64, write: bool) {
        if write {
            self.passthrough_writers.opened(fh, ino);
        }
    }

    /// Handle `fh` was released. A passthrough writer's last stores (through a
    /// mapping, which keeps the file open until munmap) changed the times; an
    /// empty file had none (the attributes of a file created and closed stay
    /// cached, as natively).
    fn released(&self, fh: u64) {
        let Some(ino) = self.passthrough_writers.closed(fh) else {
            return;
        };
        let empty = self
            .inodes
            .get(INodeNo(ino))
            .is_ok_and(|node| sys::stat_fd(node.raw()).is_ok_and(|st| st.st_size == 0));
        if !empty {
            self.attributes_changed(ino);
        }
    }

    /// How long the kernel may cache the names in directory `parent`: under
    /// `--cache nfs` as long as the directory's attributes (none with
    /// `lookupcache=none`), else [`Inner::ttl`].
    fn entry_ttl(&self, parent: u64) -> Duration {
        match &self.nfs {
            Some((nfs, _)) if nfs.lookupcache == crate::client_cache::LookupCache::None => {
                Duration::ZERO
            }
            Some((nfs, view)) => view.directory_timeout(nfs, parent),
            None => self.ttl(),
        }
    }

    /// How long the kernel may remember that a name in `parent` does not
    /// exist: under `--cache nfs` only with `lookupcache=all`; else at most a
    /// second (no invalidation names them when a rule is added).
    fn negative_ttl(&self, parent: u64) -> Duration {
        match &self.nfs {
            Some((nfs, _)) if nfs.lookupcache != crate::client_cache::LookupCache::All => {
                Duration::ZERO
            }
            Some(_) => self.entry_ttl(parent),
            None => self.entry_ttl(parent).min(Duration::from_secs(1)),
        }
    }

    /// What a soft NFS mount answers at its major timeout (EIO, or ETIMEDOUT
    /// under `softerr`).
    fn soft_timeout_errno(&self) -> Errno {
        Errno::from_i32(
            self.nfs
                .as_ref()
                .map_or(libc::EIO, |(nfs, _)| nfs.recovery.gave_up_errno()),
        )
    }

    /// How long the kernel may cache names and attributes: not at all while a rule
    /// wants to see lookups or getattrs, else `--tune attr-timeout` (60 s), so
    /// that a stat costs what it costs natively.
    fn ttl(&self) -> Duration {
        // After a crash the tree changes under the kernel's caches: never cache.
        if self.crash.is_some() || self.wants_metadata_requests() {
            Duration::ZERO
        } else {
            Duration::from_secs(self.tuning.attr_timeout.into())
        }
    }

    /// Whether a rule (or a replayed trace) wants to see lookups or getattrs.
    fn wants_metadata_requests(&self) -> bool {
        self.plan.matches_op(Op::Lookup) || self.plan.matches_op(Op::Getattr)
    }

    /// Adds a rule at runtime. One that wants to see lookups or getattrs when
    /// none did first makes the kernel forget the names and attributes it
    /// cached, so the rule acts on the very next stat.
    pub fn add_rule(&self, rule: slowfs_faults::Rule) -> u64 {
        let cached = !self.wants_metadata_requests() && self.crash.is_none();
        let id = self.plan.add(rule);
        if cached && self.wants_metadata_requests() && self.nfs.is_none() {
            self.forget_cached_metadata();
        }
        id
    }

    /// Invalidates every name and attribute the kernel may have cached: each
    /// inode it holds, under the name it was last seen by (another hard link's
    /// name, if cached, is not named; its attributes are). Negative entries
    /// are not tracked: the kernel keeps them a second at most ([`negative_ttl`]).
    ///
    /// On a thread of its own, waited for up to a second: the kernel takes a
    /// directory's lock to drop a name in it, so a request held in that
    /// directory (a `create hang`) would hold up the caller; the
    /// invalidation then finishes when the request does.
    ///
    /// [`negative_ttl`]: Self::negative_ttl
    fn forget_cached_metadata(&self) {
        let Some(notifier) = self.notifier.get().cloned() else {
            return;
        };
        let known = self.inodes.known();
        let (done, finished) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("slowfs-invalidate".into())
            .spawn(move || {
                for (ino, parent, name) in known {
                    let _ = notifier.inval_entry(INodeNo(parent), &name);
                    let _ = notifier.inval_inode(INodeNo(ino), -1, 0);
                }
                let _ = notifier.inval_inode(INodeNo::ROOT, -1, 0);
                let _ = done.send(());
            });
        if spawned.is_ok() {
            let _ = finished.recv_timeout(Duration::from_secs(1));
        }
    }

    /// [`serve`](Self::serve) for the common request: `op` on inode `ino`,
    /// moving no data.
    fn serve_on<R: AnyReply>(
        self: &Arc<Self>,
        req: &fuser::Request,
        op: Op,
        ino: fuser::INodeNo,
        reply: R,
        job: impl FnOnce(&Arc<Inner>, Done<R>, slowfs_faults::Effects, &[u8]) + Send + 'static,
    ) {
        let path = self.path_for(op, ino.0);
        let ask = Ask::new(req, op, &path).carrying(Carry::Gathered(ino.0));
        self.serve(ask, &[], reply, job)
    }

    /// Serves one request: asks the plan, then runs `job` now or parks it. `data` is
    /// a write's payload (empty otherwise); it is copied only if the request must wait.
    fn serve<R: AnyReply>(
        self: &Arc<Self>,
        Ask {
            caller,
            op,
            path,
            bytes,
            write_back,
            carry,
            local,
        }: Ask,
        data: &[u8],
        reply: R,
        job: impl FnOnce(&Arc<Inner>, Done<R>, slowfs_faults::Effects, &[u8]) + Send + 'static,
    ) {
        let arrived = Instant::now();
        let own_decision = !matches!(carry, Carry::Overflow(..)) && !local;
        let mut verdict = if own_decision {
            self.plan.decide(op, path, bytes)
        } else {
            slowfs_faults::Decision::default()
        };
        if write_back {
            verdict = verdict.for_write_back();
        }
        let rpcs = self.carried_writes(carry);
        for rpc in &rpcs {
            // The request waits for the WRITEs it sends (their delays,
            // throttles and hangs), as a close or fsync waits for write-back.
            let (delay, hang) = rpc.wait();
            verdict.delay += delay;
            verdict.hang = match (verdict.hang, hang) {
                (Some(a), Some(b)) => Some(a.longer(b)),
                (a, b) => a.or(b),
            };
        }
        let done = Done {
            reply,
            op,
            caller,
            arrived,
            injected: crate::stats::Injected::of(&verdict),
            carried: Duration::ZERO,
        };
        if verdict.crash {
            // Power loss at this request: it never happens, and nothing after it sees
            // anything but the durable state.
            self.crash_now();
            return done.respond(self, Err::<(), _>(Errno::EIO), |_, ()| {});
        }
        let error = verdict.error.map(Errno::from_i32);
        let effects = verdict.effects;
        let panic_here = contain::test_panic_path() == Some(path);
        let finish = move |inner: &Arc<Inner>, data: &[u8], fate: Fate| {
            if panic_here {
                panic!("SLOWFS_TEST_PANIC_PATH: a forced panic in a {op:?} request");
            }
            let mut done = done;
            for rpc in rpcs {
                done.carried += inner.send_carried(rpc, fate);
            }
            let fate = if own_decision { fate } else { Fate::Run };
            match (fate, error) {
                (Fate::Interrupted, _) => {
                    done.injected.interrupted = true;
                    done.respond(inner, Err::<(), _>(Errno::EINTR), |_, ()| {})
                }
                (Fate::GaveUp, _) => {
                    // A soft mount's timeout: the hang became an error.
                    done.injected.add(crate::stats::FaultKind::Failed);
                    let errno = inner.soft_timeout_errno();
                    done.respond(inner, Err::<(), _>(errno), |_, ()| {})
                }
                (Fate::Run, Some(errno)) => done.respond(inner, Err::<(), _>(errno), |_, ()| {}),
                (Fate::Run, None) => job(inner, done, effects, data),
            }
        };
        if verdict.delay.is_zero() && verdict.hang.is_none() {
            finish(self, data, Fate::Run);
        } else {
            let inner = Arc::clone(self);
            let data = data.to_vec();
            // A delay counts from the request's arrival, not from now.
            self.scheduler.park(
                arrived + verdict.delay,
                verdict.hang,
                verdict.delay,
                caller,
                move |fate| finish(&inner, &data, fate),
            );
        }
    }
}

/// What a request asks the fault plan about.
pub(crate) struct Ask<'a> {
    /// The requesting thread (FUSE's `pid`): its interruption ends a parked request.
    caller: u32,
    op: Op,
    /// Mount-relative path, for path globs.
    path: &'a str,
    /// Bytes the request moves, for throttles and quotas.
    bytes: u64,
    /// The kernel's own write-back of cached pages, not a caller's write.
    write_back: bool,
    /// Under `--cache nfs`: gathered writes this request sends first.
    carry: Carry,
    /// Under `--cache nfs`: the client answers it without an RPC of its own
    /// (only what it carries is sent), so its op's rules do not apply.
    local: bool,
}

/// Gathered writes a request sends as a WRITE before it runs (see
/// [`write_behind`]).
enum Carry {
    /// None.
    Nothing,
    /// Whatever inode `ino` has gathered, taken when the request arrives.
    Gathered(u64),
    /// Whatever either inode has gathered (copy_file_range: its source and
    /// its destination).
    Both(u64, u64),
    /// This, of inode `ino`, taken by a write(2) that did not fit: the WRITE
    /// is all the rules see of that request, and its caller is answered that
    /// its data was taken (an error comes back at close or fsync).
    Overflow(u64, write_behind::Pending),
}

impl<'a> Ask<'a> {
    /// `req` asks to do `op` on `path`, moving no data.
    pub(crate) fn new(req: &fuser::Request, op: Op, path: &'a str) -> Ask<'a> {
        Ask {
            caller: req.pid(),
            op,
            path,
            bytes: 0,
            write_back: false,
            carry: Carry::Nothing,
            local: false,
        }
    }

    /// The same request, answered by the NFS client without an RPC of its
    /// own when `local`.
    fn local(self, local: bool) -> Ask<'a> {
        Ask { local, ..self }
    }

    /// The same request, sending `carry` first.
    fn carrying(self, carry: Carry) -> Ask<'a> {
        Ask { carry, ..self }
    }

    /// The same request, moving `bytes`.
    pub(crate) fn moving(self, bytes: u64) -> Ask<'a> {
        Ask { bytes, ..self }
    }

    /// The same request, marked as the kernel's write-back when it is one
    /// (see [`slowfs_faults::Decision::for_write_back`]).
    pub(crate) fn write_back(self, write_back: bool) -> Ask<'a> {
        Ask { write_back, ..self }
    }
}

/// A request's reply, still to be sent, with what the stats need to know about it.
/// Stats are recorded before the reply goes out, so that a caller whose syscall has
/// returned always finds its request counted.
pub(crate) struct Done<R> {
    reply: R,
    op: Op,
    /// The requesting thread.
    caller: u32,
    arrived: Instant,
    /// What the rules did to it.
    injected: crate::stats::Injected,
    /// The time of the gathered WRITE it sent first (counted as a write's).
    carried: Duration,
}

impl<R: AnyReply> Done<R> {
    /// Records the request and hands back the reply to send.
    pub(crate) fn record(self, inner: &Inner, outcome: RequestOutcome) -> R {
        let latency = self.arrived.elapsed();
        let own = latency.saturating_sub(self.carried);
        inner
            .stats
            .record(self.op, latency, own, outcome, &self.injected);
        inner
            .stats
            .record_caller(self.caller, self.op, latency, self.injected.any());
        self.reply
    }

    /// Replies with `send` on success, or with the errno.
    pub(crate) fn respond<T>(
        self,
        inner: &Inner,
        result: Result<T, Errno>,
        send: impl FnOnce(R, T),
    ) {
        self.respond_moved(inner, result, |_| 0, send);
    }

    /// As [`Done::respond`], counting the bytes `moved` says the value carries.
    pub(crate) fn respond_moved<T>(
        self,
        inner: &Inner,
        result: Result<T, Errno>,
        moved: impl FnOnce(&T) -> u64,
        send: impl FnOnce(R, T),
    ) {
        match result {
            Ok(value) => {
                let bytes = moved(&value);
                send(
                    self.record(
                        inner,
                        RequestOutcome {
                            bytes,
                            failed: false,
                        },
                    ),
                    value,
                );
            }
            Err(errno) => self
                .record(
                    inner,
                    RequestOutcome {
                        bytes: 0,
                        failed: true,
                    },
                )
                .error(errno),
        }
    }
}

/// Any FUSE reply, as far as failing it goes.
pub(crate) trait AnyReply: Send + 'static {
    fn error(self, errno: Errno);
}

macro_rules! any_reply {
    ($($t:ty),*) => {$(
        impl AnyReply for $t {
            fn error(self, errno: Errno) {
                <$t>::error(self, errno)
            }
        }
    )*};
}

any_reply!(
    fuser::ReplyEmpty,
    fuser::ReplyLock,
    fuser::ReplyData,
    fuser::ReplyEntry,
    fuser::ReplyAttr,
    fuser::ReplyOpen,
    fuser::ReplyWrite,
    fuser::ReplyStatfs,
    fuser::ReplyCreate,
    fuser::ReplyDirectory,
    fuser::ReplyXattr,
    fuser::ReplyLseek
);

fn errno_to_io(errno: Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(errno.code())
}

fn file_type(mode: u32) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFSOCK => FileType::Socket,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        _ => FileType::RegularFile,
    }
}

fn time(secs: i64, nanos: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nanos as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + Duration::from_nanos(nanos as u64)
    }
}

/// FUSE attributes of a backing file, under FUSE inode number `ino`.
fn attr(ino: u64, st: &libc::stat) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size: st.st_size as u64,
        blocks: st.st_blocks as u64,
        atime: time(st.st_atime, st.st_atime_nsec),
        mtime: time(st.st_mtime, st.st_mtime_nsec),
        ctime: time(st.st_ctime, st.st_ctime_nsec),
        crtime: UNIX_EPOCH,
        kind: file_type(st.st_mode),
        perm: (st.st_mode & 0o7777) as u16,
        nlink: st.st_nlink as u32,
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: st.st_rdev as u32,
        blksize: st.st_blksize as u32,
        flags: 0,
    }
}

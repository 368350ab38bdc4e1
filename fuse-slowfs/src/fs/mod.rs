//! The filesystem: a passthrough over a backing directory that asks the fault plan
//! about every request before doing it.

mod attributes;
mod changes;
pub(crate) mod contain;
mod controls;
mod crash;
mod directories;
mod entries;
mod files;
mod filesystem;
mod handle;
mod handles;
mod inodes;
mod kernel_cache;
mod lies;
mod mode;
mod nfs;
mod passthrough;
mod recorder;
mod serve;
mod sys;
mod xattrs;

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{Errno, FileAttr, FileType, INodeNo};
use slowfs_faults::{FaultPlan, Op};

use crate::mount_options::Atime;
use crate::scheduler::Scheduler;
use crate::stats::Stats;
pub use controls::Controls;
pub use crash::DurabilityReport;
use handles::Handles;
use inodes::Inodes;
use passthrough::PassthroughWriters;
use serve::{Ask, Carry};

/// Shared state of a mounted slowfs: reachable from FUSE handlers, parked jobs and
/// the control socket (which sees it through [`Controls`]).
#[derive(Debug)]
pub struct Inner {
    /// What this mount is (plain, NFS client, recording, crash model),
    /// decided once at mount.
    mode: mode::Mode,
    /// What it was started with.
    options: mode::Options,
    /// What the kernel granted at INIT.
    negotiated: mode::Negotiated,
    inodes: Inodes,
    handles: Handles,
    /// The live fault rules.
    pub plan: Arc<FaultPlan>,
    /// Counters.
    pub stats: Stats,
    /// Where delayed and hung requests wait.
    pub scheduler: Scheduler,
    /// For telling the kernel that cached attributes are stale.
    notifier: std::sync::OnceLock<fuser::Notifier>,
    /// Files open for writing in kernel passthrough, whose times the daemon
    /// does not see change (an mmap store, a write): their attributes are not
    /// cached, so that stat shows the new mtime and ctime at once.
    passthrough_writers: PassthroughWriters,
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
        let inner = Arc::new(Inner {
            mode: mode::Mode::resolve(backing, mode)?,
            options: mode::Options {
                tuning,
                // Under `--cache nfs` every request is an RPC the rules see.
                passthrough_wanted: mode.passthrough
                    && !mode.durability.records()
                    && mode.cache == crate::CachePolicy::EveryCall,
                writeback_allowed: !mode.durability.records(),
                no_atime,
                strict_atime,
            },
            negotiated: Default::default(),
            inodes,
            handles: Handles::default(),
            plan,
            stats: Stats::default(),
            scheduler: new_scheduler(mode)?,
            notifier: Default::default(),
            passthrough_writers: Default::default(),
        });
        // The VM's flusher, under --cache nfs with write-behind.
        nfs::write_back::start(&inner);
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
        self.negotiated.writeback()
    }

    /// Whether this mount is an NFS client (`--cache nfs`).
    pub fn is_nfs_client(&self) -> bool {
        matches!(self.mode, mode::Mode::NfsClient(_))
    }

    /// Whether this mount has the strict crash model.
    pub fn has_crash_model(&self) -> bool {
        matches!(self.mode, mode::Mode::Crash(..))
    }

    /// The operations recorded so far (empty unless recording).
    pub fn recorded(&self) -> Vec<slowfs_faults::durability::LogOp> {
        self.mode.recorder().map(|r| r.ops()).unwrap_or_default()
    }

    /// The mask a create of this request must apply: the caller's umask when the
    /// kernel left it to us, else none (the kernel already applied it).
    fn create_mask(&self, umask: u32) -> u32 {
        if self.negotiated.dont_mask() {
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
        if !self.options.no_atime {
            return open(flags);
        }
        match open(flags | libc::O_NOATIME) {
            Err(Errno::EPERM) => open(flags),
            result => result,
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
}

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

//! Mounting and unmounting: [`Mount`] is an RAII guard that unmounts on drop (also
//! while unwinding from a panic), cutting short every delay and hang first so that
//! unmounting never waits on a fault.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fuser::{Config, SessionACL};
use slowfs_faults::trace::FaultTrace;
use slowfs_faults::{FaultPlan, FaultSpec};

use crate::control::{default_socket, ControlServer, Served};
use crate::fs::{FsMode, Inner, SlowFs};
pub use crate::mount_table::{slowfs_mount_entries, slowfs_mounts, MountEntry};
use crate::stats::StatsReport;

pub use crate::mount_table::SUBTYPE;
use crate::unmount::mounted_here;
pub use crate::unmount::{abort_connection, abort_connection_minor, force_unmount, unmount};

/// Where a mount's control socket goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlSocket {
    /// No control socket (explore's recording mounts).
    None,
    /// The per-mountpoint default that `slowfs ctl MNT` finds.
    Default,
    /// This path (`--ctl-socket`).
    At(PathBuf),
}

/// How to mount.
#[derive(Debug, Clone)]
pub struct MountConfig {
    /// The directory whose contents the mount shows.
    pub backing: PathBuf,
    /// Where to mount.
    pub mountpoint: PathBuf,
    /// The fault rules (and seed, if fixed).
    pub spec: FaultSpec,
    /// The seed used when `spec` fixes none.
    pub default_seed: u64,
    /// Mount options (`-o ro,noatime,...`; `allow_other` lets other users in,
    /// with `default_permissions`: the kernel enforces modes).
    pub options: crate::mount_options::MountOptions,
    /// Where the control socket goes (`slowfs ctl`), if anywhere.
    pub control: ControlSocket,
    /// FUSE settings: worker threads, request sizes, writeback cache.
    pub tuning: crate::Tuning,
    /// What the mount keeps about durability: nothing, the operation log
    /// ([`Mount::recorded`]), or the log and the crash model ([`Mount::crash`]).
    pub durability: Durability,
    /// Kernel passthrough for files no data rule touches when opened (`auto`), or
    /// every request through the daemon (`never`). Passthrough excludes the
    /// writeback cache, and the crash model and recording turn it off.
    pub passthrough: bool,
    /// Record the faults that fire into a file, or replay such a file.
    pub fault_trace: Option<FaultTraceFile>,
    /// A parked (delayed or hung) request ends with EINTR as soon as its caller is
    /// interrupted or killed, like an NFS mount with `intr`; off (`--no-intr`): it
    /// waits out its fault whatever happens to the caller.
    pub interruptible: bool,
    /// How the kernel caches data and attributes (`--cache`): every call of a
    /// file a data rule touches reaches the daemon, or the NFS client's caching
    /// (which brings the write-back cache, `wsize` writes and no passthrough).
    pub cache: crate::CachePolicy,
}

/// A fault trace (`slowfs_faults::trace`) to write or to replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultTraceFile {
    /// Write every fault that fires here.
    Record(PathBuf),
    /// Fire the faults recorded here instead of drawing.
    Replay(PathBuf),
}

/// What a mount keeps about durability. Each step keeps what the one before
/// it does, and costs more: recording turns passthrough and the write-back
/// cache off, so that every mutation reaches the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Nothing is recorded; plain runs pay nothing (`--crash-model none`).
    #[default]
    Off,
    /// Every mutating operation is logged (what `explore` records its
    /// workload with); an `fsync ... drop` rule drops from that log.
    Record,
    /// The log plus strict POSIX crashes (`--crash-model strict`): a crash
    /// (a `crash` rule, [`Mount::crash`]) keeps only fsynced data and fsynced
    /// directory entries.
    StrictCrash,
}

impl Durability {
    /// Whether every mutating operation is logged.
    pub fn records(self) -> bool {
        self != Durability::Off
    }

    /// Whether a crash can be simulated.
    pub fn crashes(self) -> bool {
        self == Durability::StrictCrash
    }
}

/// Parses `--crash-model`: `none` or `strict`.
impl std::str::FromStr for Durability {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(Durability::Off),
            "strict" => Ok(Durability::StrictCrash),
            other => Err(format!(
                "unknown crash model '{other}' (expected none or strict)"
            )),
        }
    }
}

impl MountConfig {
    /// Defaults: no rules, [`Tuning::default`](crate::Tuning), default control socket.
    pub fn new(backing: impl Into<PathBuf>, mountpoint: impl Into<PathBuf>) -> MountConfig {
        MountConfig {
            backing: backing.into(),
            mountpoint: mountpoint.into(),
            spec: FaultSpec::default(),
            default_seed: rand::random(),
            options: Default::default(),
            control: ControlSocket::Default,
            tuning: crate::Tuning::default(),
            durability: Durability::Off,
            fault_trace: None,
            passthrough: true,
            interruptible: true,
            cache: crate::CachePolicy::EveryCall,
        }
    }
}

/// A mounted slowfs. Dropping it unmounts.
#[derive(Debug)]
pub struct Mount {
    inner: Arc<Inner>,
    mountpoint: PathBuf,
    connection: Option<u64>,
    control: Option<ControlServer>,
    session: Option<fuser::BackgroundSession>,
    fault_trace: Option<FaultTraceFile>,
    /// The process that unmounts if this one dies first.
    guard: Option<crate::guard::UnmountGuard>,
}

/// The slowfs mounted at `mountpoint`, unless it goes away within 2 s: a mount
/// that races an unmount of the same mountpoint (`umount M & mount M`,
/// xfstests generic/604) waits for it, as the kernel makes a mount wait for
/// an unmount in progress, instead of failing.
fn slowfs_staying_at(mountpoint: &Path) -> Option<crate::mount_table::MountEntry> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let live = crate::mount_table::slowfs_at(mountpoint)?;
        if Instant::now() >= deadline {
            return Some(live);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Mount {
    /// Mounts and returns once the kernel has accepted the mount.
    pub fn start(config: MountConfig) -> io::Result<Mount> {
        check_dir(&config.backing, "backing directory")?;
        check_dir(&config.mountpoint, "mountpoint")?;
        if let Some(rule) = config
            .spec
            .rules
            .iter()
            .find(|r| {
                // A recording mount has the log a write-back failure drops from.
                r.action.needs_crash_model()
                    && !(config.durability.records()
                        && matches!(r.action, slowfs_faults::Action::FsyncFail { .. }))
            })
            .filter(|_| !config.durability.crashes())
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "rule \"{rule}\" works on what is durable, which needs a crash model (add --crash-model strict)"
                ),
            ));
        }
        let mountpoint = config.mountpoint.canonicalize()?;
        if let Some(live) = slowfs_staying_at(&mountpoint) {
            let by = live
                .user_id
                .map(|u| format!(" (mounted by uid {u})"))
                .unwrap_or_default();
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} already has a slowfs mounted on it{by}; unmount it first \
                     (`slowfs umount {}`) or choose another mountpoint",
                    mountpoint.display(),
                    mountpoint.display()
                ),
            ));
        }
        refuse_nesting(&config.backing.canonicalize()?, &mountpoint)?;
        // The control socket is claimed before mounting, so a refusal touches nothing.
        crate::control::sweep_stale_sockets();
        let socket = match config.control.clone() {
            ControlSocket::At(socket) => Some(socket),
            ControlSocket::Default => Some(default_socket(&mountpoint)?),
            ControlSocket::None => None,
        };
        if let Some(socket) = &socket {
            ControlServer::prepare_dir(socket)?;
            crate::control::claim_socket(socket)?;
        }
        let seed = config.spec.seed.unwrap_or(config.default_seed);
        let mut plan = FaultPlan::new(seed, config.spec.rules.iter().cloned());
        plan = match &config.fault_trace {
            Some(FaultTraceFile::Record(file)) => plan.with_trace(FaultTrace::record(file)?),
            Some(FaultTraceFile::Replay(file)) => plan.with_trace(FaultTrace::replay(file)?),
            None => plan,
        };
        let plan = Arc::new(plan);
        let mut tuning = config.tuning;
        if let crate::CachePolicy::Nfs(nfs) = config.cache {
            // Writes in requests of at most wsize. Not FUSE's write-back cache:
            // under it the kernel keeps its own size and times of a file and
            // ignores the server's, so one client would never see another's
            // file grow (fuse_change_attributes); the NFS client does.
            tuning.writeback_cache = false;
            tuning.max_write = nfs.wsize;
        }
        let fs = SlowFs::new(
            &config.backing,
            plan,
            tuning,
            FsMode {
                durability: config.durability,
                // Kernel passthrough needs CAP_SYS_ADMIN: without root, the daemon serves.
                passthrough: config.passthrough && as_root(),
                interruptible: config.interruptible,
                atime: config.options.atime,
                nodiratime: config.options.nodiratime,
                cache: config.cache,
            },
        )?;
        let inner = fs.inner();

        let mut fuse_config = Config::default();
        if config.options.allow_other {
            fuse_config.acl = SessionACL::All;
        }
        fuse_config.n_threads = Some(config.tuning.threads.max(1));
        fuse_config.clone_fd = config.tuning.clone_fd;
        // The mount shows its backing directory as its source, as bind mounts
        // and sshfs do (`findmnt --source DIR`, `df`).
        let source = config.backing.canonicalize()?;
        // The NFS client's READs are at most rsize.
        let max_read = match config.cache {
            crate::CachePolicy::Nfs(nfs) => Some(nfs.rsize),
            crate::CachePolicy::EveryCall => None,
        };
        let fd = if as_root() {
            crate::fusermount::mount_as_root(&mountpoint, &source, &config.options, max_read)
        } else {
            // Without root, the setuid helper mounts, whatever /dev/fuse's mode.
            let mut helper_options = config.options.fusermount();
            helper_options.push(format!(
                "fsname={}",
                crate::fusermount::escape_option(&source.to_string_lossy())
            ));
            helper_options.push(format!("subtype={SUBTYPE}"));
            if let Some(max_read) = max_read {
                helper_options.push(format!("max_read={max_read}"));
            }
            crate::fusermount::mount(&mountpoint, &helper_options)
        };
        let session = fd
            .and_then(|fd| {
                let acl = fuse_config.acl;
                fuser::Session::from_fd(fs, fd, acl, fuse_config)
            })
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "cannot mount slowfs at {}: {e} (needs /dev/fuse, and root or the setuid \
                         fusermount3 from Debian's fuse3 package)",
                        mountpoint.display()
                    ),
                )
            })?;
        inner.set_notifier(session.notifier());
        let session = session.spawn()?;
        let connection = std::fs::metadata(&mountpoint).ok().map(|m| m.dev());
        // Unmounts if this process dies without doing it (SIGKILL).
        let guard = connection.and_then(|dev| {
            crate::guard::UnmountGuard::spawn(&mountpoint, dev)
                .inspect_err(|e| {
                    tracing::warn!("no unmount guard for {}: {e}", mountpoint.display())
                })
                .ok()
        });
        let mut mount = Mount {
            guard,
            inner: Arc::clone(&inner),
            mountpoint: mountpoint.clone(),
            connection,
            control: None,
            session: Some(session),
            fault_trace: config.fault_trace.clone(),
        };
        if let Some(socket) = socket {
            let served = Served {
                inner,
                mountpoint: mountpoint.clone(),
                connection,
            };
            mount.control = Some(ControlServer::start(socket, served)?);
        }
        Ok(mount)
    }

    /// Where it is mounted.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// The control socket, if one was started.
    pub fn control_socket(&self) -> Option<&Path> {
        self.control.as_ref().map(ControlServer::path)
    }

    /// The live rules: clear them at runtime, and add them with
    /// [`Mount::add_rule`] (a rule on lookups or getattrs added here directly
    /// may miss names and attributes the kernel cached).
    pub fn plan(&self) -> &FaultPlan {
        &self.inner.plan
    }

    /// Adds a rule at runtime (see [`Inner::add_rule`]); its id.
    pub fn add_rule(&self, rule: slowfs_faults::Rule) -> u64 {
        self.inner.add_rule(rule)
    }

    /// The run seed.
    pub fn seed(&self) -> u64 {
        self.inner.plan.seed()
    }

    /// The fault trace this mount records or replays, if any.
    pub fn fault_trace(&self) -> Option<&FaultTraceFile> {
        self.fault_trace.as_ref()
    }

    /// Counters so far.
    pub fn stats(&self) -> StatsReport {
        self.inner.stats.report(self.inner.plan.report())
    }

    /// Starts keeping the requests thread `tid` issues (see [`Mount::waits_of`]).
    pub fn watch_thread(&self, tid: u32) {
        self.inner.stats.watch(tid)
    }

    /// The requests thread `tid` waited for since [`Mount::watch_thread`], each
    /// with how long it was held; stops watching it.
    pub fn waits_of(&self, tid: u32) -> Vec<crate::stats::Waited> {
        self.inner.stats.unwatch(tid)
    }

    /// Power loss now (strict crash model): the tree becomes its durable state and
    /// every handle opened before fails with EIO. Returns false without a crash model.
    pub fn crash(&self) -> bool {
        self.inner.crash_now()
    }

    /// What a crash now would lose (strict crash model only).
    pub fn durability(&self) -> Option<crate::fs::DurabilityReport> {
        self.inner.durability_report()
    }

    /// Releases every hung request; returns how many there were.
    pub fn release(&self) -> usize {
        self.inner.scheduler.release()
    }

    /// A handle that ends every wait (parked requests run at once, new ones do
    /// not wait), for use from another thread, e.g. on a termination signal.
    pub fn releaser(&self) -> impl Fn() + Send + Sync + 'static {
        let inner = Arc::clone(&self.inner);
        move || inner.scheduler.shutdown()
    }

    /// Requests parked right now (delayed or hung).
    pub fn waiting(&self) -> usize {
        self.inner.scheduler.waiting()
    }

    /// A handle that records a sync(2) on a recording mount (see
    /// [`crate::sync_watch`]), for the thread that sees it.
    pub fn sync_recorder(&self) -> impl Fn() + Send + Sync + 'static {
        let inner = Arc::clone(&self.inner);
        move || inner.record_sync()
    }

    /// The mutating operations served so far (on a mount with `record` set).
    pub fn recorded(&self) -> Vec<slowfs_faults::durability::LogOp> {
        self.inner.recorded()
    }

    /// File handles open in kernel passthrough right now.
    pub fn passthrough_handles(&self) -> usize {
        self.inner.passthrough_handles()
    }

    /// Open file and directory handles right now.
    pub fn open_handles(&self) -> usize {
        self.inner.open_handles()
    }

    /// Whether the session has ended: the filesystem was unmounted from outside
    /// (or the connection aborted), so no request will come any more.
    pub fn ended(&self) -> bool {
        self.session.as_ref().is_none_or(|s| s.guard.is_finished())
    }

    /// Unmounts now, reporting errors (dropping does the same, silently).
    pub fn unmount(mut self) -> io::Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> io::Result<()> {
        // A session that has ended was unmounted from outside: whatever is at the
        // mountpoint now is someone else's mount (its FUSE device number may
        // even be the one ours had), never to be unmounted from here.
        let ended = self.ended();
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        self.control.take();
        // Parked requests answer at once, so nothing waits on a fault while we unmount.
        self.inner
            .scheduler
            .drain(std::time::Duration::from_secs(2));
        // Only our own mount: once unmounted from outside, the mountpoint may already
        // carry a new mount, which a blind unmount by path would take down.
        let result = if !ended && mounted_here(&self.mountpoint, self.connection) {
            unmount(&self.mountpoint, self.connection)
        } else {
            Ok(())
        };
        let _ = session.join();
        if let Some(mut guard) = self.guard.take() {
            guard.release();
        }
        result
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::warn!("unmounting {}: {e}", self.mountpoint.display());
        }
    }
}

/// A mountpoint inside the backing directory (or the same directory) makes the
/// filesystem serve itself: a lookup of the mountpoint through the backing
/// directory enters the mount again, and every worker ends up waiting on
/// another. A backing directory inside the mountpoint is hidden by the mount.
///
/// Compared by what the directories are (filesystem and path inside it, from
/// the mount table), not by how they are spelled: a bind mount of the backing
/// directory elsewhere is the backing directory.
fn refuse_nesting(backing: &Path, mountpoint: &Path) -> io::Result<()> {
    let spelled = (backing.to_path_buf(), mountpoint.to_path_buf());
    let real = match (
        crate::mount_table::location(backing),
        crate::mount_table::location(mountpoint),
    ) {
        (Some((dev_b, b)), Some((dev_m, m))) if dev_b == dev_m => Some((b, m)),
        _ => None,
    };
    let nested = |(backing, mountpoint): &(PathBuf, PathBuf)| {
        if backing == mountpoint {
            Some("is the backing directory itself")
        } else if mountpoint.starts_with(backing) {
            Some("is inside the backing directory (the mount would serve itself: every access to it would recurse)")
        } else if backing.starts_with(mountpoint) {
            Some("contains the backing directory (the mount would hide it)")
        } else {
            None
        }
    };
    let Some(problem) = nested(&spelled).or_else(|| real.as_ref().and_then(nested)) else {
        return Ok(());
    };
    let alias = match (&real, nested(&spelled)) {
        (Some((b, m)), None) => format!(
            "; through a bind mount, they are {} and {} of one filesystem",
            b.display(),
            m.display()
        ),
        _ => String::new(),
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "mountpoint {} {problem} ({}{alias}); choose a mountpoint outside the backing directory and apart from it",
            mountpoint.display(),
            backing.display()
        ),
    ))
}

fn check_dir(path: &Path, what: &str) -> io::Result<()> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} {} is not a directory", path.display()),
        )),
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => Err(io::Error::new(
            e.kind(),
            format!(
                "{what} {} is a dead FUSE mount (its daemon exited); clean it up with \
                 `slowfs umount {}`",
                path.display(),
                path.display()
            ),
        )),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("{what} {}: {e} (create it first)", path.display()),
        )),
    }
}

/// Whether this process runs as root (mounts itself; else through fusermount3).
fn as_root() -> bool {
    nix::unistd::geteuid().is_root()
}

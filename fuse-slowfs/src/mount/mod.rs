//! Mounting and unmounting: [`Mount`] is an RAII guard that unmounts on drop (also
//! while unwinding from a panic), cutting short every delay and hang first so that
//! unmounting never waits on a fault.
//!
//! The plumbing lives here too: `config` (what a mount is asked for),
//! `fusermount` (the setuid helper, or mounting as root), `guard` (the process
//! that unmounts if this one dies), `unmount` (unmounting and aborting a
//! connection), [`table`] (the mount table), [`holders`] (what keeps a mount
//! busy) and `fd_passing` (receiving a file descriptor over a socket).

mod config;
pub(crate) mod fd_passing;
mod fusermount;
mod guard;
pub mod holders;
pub mod table;
pub(crate) mod unmount;

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fuser::{Config, SessionACL};
use slowfs_faults::trace::FaultTrace;
use slowfs_faults::FaultPlan;

use crate::control::{default_socket, ControlServer, Served};
use crate::fs::{Controls, FsMode, Inner, SlowFs};
use crate::stats::StatsReport;

pub use config::{ControlSocket, Durability, FaultTraceFile, MountConfig};
pub use table::{slowfs_mount_entries, slowfs_mounts, MountEntry, SUBTYPE};
use unmount::mounted_here;
pub use unmount::{abort_connection, abort_connection_minor, force_unmount, unmount};

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
    guard: Option<guard::UnmountGuard>,
}

/// The slowfs mounted at `mountpoint`, unless it goes away within 2 s: a mount
/// that races an unmount of the same mountpoint (`umount M & mount M`,
/// xfstests generic/604) waits for it, as the kernel makes a mount wait for
/// an unmount in progress, instead of failing.
fn slowfs_staying_at(mountpoint: &Path) -> Option<table::MountEntry> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let live = table::slowfs_at(mountpoint)?;
        if Instant::now() >= deadline {
            return Some(live);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Mount {
    /// Mounts and returns once the kernel has accepted the mount.
    pub fn start(config: MountConfig) -> io::Result<Mount> {
        let mountpoint = check_config(&config)?;
        // The control socket is claimed before mounting, so a refusal touches nothing.
        let socket = claim_control_socket(&config, &mountpoint)?;
        let fs = new_filesystem(&config)?;
        let inner = fs.inner();
        let session = open_session(&config, &mountpoint, fs)?;
        inner.set_notifier(session.notifier());
        let session = session.spawn()?;
        let connection = std::fs::metadata(&mountpoint).ok().map(|m| m.dev());
        // Unmounts if this process dies without doing it (SIGKILL).
        let guard = connection.and_then(|dev| {
            guard::UnmountGuard::spawn(&mountpoint, dev)
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
                controls: Controls::of(inner),
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

    /// Requests parked right now (delayed, hung, or an NFS lock wait).
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

/// Refuses what cannot be mounted (a missing directory, a rule that needs a
/// crash model without one, a mountpoint taken or nested in the backing
/// directory); the canonical mountpoint.
fn check_config(config: &MountConfig) -> io::Result<PathBuf> {
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
    Ok(mountpoint)
}

/// The control socket `config` asks for, claimed (stale ones swept first).
fn claim_control_socket(config: &MountConfig, mountpoint: &Path) -> io::Result<Option<PathBuf>> {
    crate::control::sweep_stale_sockets();
    let socket = match config.control.clone() {
        ControlSocket::At(socket) => Some(socket),
        ControlSocket::Default => Some(default_socket(mountpoint)?),
        ControlSocket::None => None,
    };
    if let Some(socket) = &socket {
        ControlServer::prepare_dir(socket)?;
        crate::control::claim_socket(socket)?;
    }
    Ok(socket)
}

/// The filesystem `config` asks for: its fault plan (recording or replaying
/// a trace), its tuning (as the NFS client's under `--cache nfs`), its mode.
fn new_filesystem(config: &MountConfig) -> io::Result<SlowFs> {
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
    SlowFs::new(
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
    )
}

/// Mounts at `mountpoint` (as root, or through the setuid helper) and opens
/// the FUSE session that serves `fs` there.
fn open_session(
    config: &MountConfig,
    mountpoint: &Path,
    fs: SlowFs,
) -> io::Result<fuser::Session<SlowFs>> {
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
        fusermount::mount_as_root(mountpoint, &source, &config.options, max_read)
    } else {
        // Without root, the setuid helper mounts, whatever /dev/fuse's mode.
        let mut helper_options = config.options.fusermount();
        helper_options.push(format!(
            "fsname={}",
            fusermount::escape_option(&source.to_string_lossy())
        ));
        helper_options.push(format!("subtype={SUBTYPE}"));
        if let Some(max_read) = max_read {
            helper_options.push(format!("max_read={max_read}"));
        }
        fusermount::mount(mountpoint, &helper_options)
    };
    fd.and_then(|fd| {
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
    })
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
    let real = match (table::location(backing), table::location(mountpoint)) {
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

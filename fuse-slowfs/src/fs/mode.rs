//! What a mount is, decided once: its [`Mode`] (a plain mount, the NFS
//! client, a recording, the crash model), the [`Options`] it was started
//! with, and what the kernel granted at INIT ([`Negotiated`]), kept apart as
//! virtiofsd keeps its `cfg` apart from the atomics INIT sets.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use fuser::InitFlags;

use super::nfs::NfsClient;
use super::{crash, recorder, FsMode};

/// What kind of mount this is, resolved once at mount from its [`FsMode`]:
/// the request path matches on it instead of asking the options again.
#[derive(Debug)]
pub(super) enum Mode {
    /// A plain mount: files no data rule touches keep their pages in the
    /// kernel's page cache across opens, or are served by kernel passthrough
    /// where the kernel granted it.
    PageCache,
    /// `--cache nfs` (without a log): the Linux NFS client's caching,
    /// gathered writes and silly renames.
    NfsClient(Box<NfsClient>),
    /// Every mutating operation logged in the order it was served (what
    /// `explore` records its workload with); no passthrough, no write-back cache.
    Recording(recorder::Recorder),
    /// The log and the strict crash model: nothing is cached, a crash makes
    /// the tree its durable state.
    Crash(recorder::Recorder, crash::CrashState),
}

impl Mode {
    /// The mode of a mount over `backing` asked for `mode`: a log records
    /// the tree when durability is kept (it must see each write and name as
    /// the caller made it, so `--cache nfs` gives way to it), else the NFS
    /// client under `--cache nfs`.
    pub(super) fn resolve(backing: &Path, mode: FsMode) -> std::io::Result<Mode> {
        Ok(match mode.cache {
            _ if mode.durability.crashes() => {
                Mode::Crash(Default::default(), crash::CrashState::new(backing)?)
            }
            _ if mode.durability.records() => Mode::Recording(Default::default()),
            crate::CachePolicy::Nfs(settings) => {
                Mode::NfsClient(Box::new(NfsClient::new(settings)))
            }
            crate::CachePolicy::EveryCall => Mode::PageCache,
        })
    }

    /// The NFS client, on an NFS client mount.
    pub(super) fn nfs(&self) -> Option<&NfsClient> {
        match self {
            Mode::NfsClient(nfs) => Some(nfs),
            _ => None,
        }
    }

    /// The operation log, on a recording mount (with or without crashes).
    pub(super) fn recorder(&self) -> Option<&recorder::Recorder> {
        match self {
            Mode::Recording(log) | Mode::Crash(log, _) => Some(log),
            _ => None,
        }
    }

    /// The crash model, under `--crash-model strict`.
    pub(super) fn crash(&self) -> Option<&crash::CrashState> {
        match self {
            Mode::Crash(_, crash) => Some(crash),
            _ => None,
        }
    }
}

/// What the mount asked for that stays fixed while it runs.
#[derive(Debug)]
pub(super) struct Options {
    /// The FUSE settings to negotiate.
    pub(super) tuning: crate::Tuning,
    /// Whether to ask the kernel for FUSE passthrough (`--passthrough auto`,
    /// on a plain mount).
    pub(super) passthrough_wanted: bool,
    /// Whether the writeback cache may be used at all (not while recording:
    /// the log must see writes in program order).
    pub(super) writeback_allowed: bool,
    /// `-o noatime` where the backing mount could not be cloned with it: the
    /// daemon's own opens (not kernel passthrough's) ask for O_NOATIME.
    pub(super) no_atime: bool,
    /// `-o strictatime`: every read must reach the backing file, so no page
    /// cache is kept across opens (a read from it would not move the atime).
    pub(super) strict_atime: bool,
}

/// What the kernel granted at INIT, set once there.
#[derive(Debug, Default)]
pub(super) struct Negotiated {
    /// The writeback cache (FUSE_WRITEBACK_CACHE).
    writeback: AtomicBool,
    /// Kernel passthrough (FUSE_PASSTHROUGH).
    passthrough: AtomicBool,
    /// The kernel leaves the caller's umask to the daemon (FUSE_DONT_MASK),
    /// so that a default ACL can take its place.
    dont_mask: AtomicBool,
}

impl Negotiated {
    /// Keeps what the kernel granted of what was asked for.
    pub(super) fn granted(&self, flags: InitFlags) {
        self.writeback.store(
            flags.contains(InitFlags::FUSE_WRITEBACK_CACHE),
            Ordering::Relaxed,
        );
        self.passthrough.store(
            flags.contains(InitFlags::FUSE_PASSTHROUGH),
            Ordering::Relaxed,
        );
        self.dont_mask
            .store(flags.contains(InitFlags::FUSE_DONT_MASK), Ordering::Relaxed);
    }

    /// Whether the kernel caches writes (FUSE writeback cache).
    pub(super) fn writeback(&self) -> bool {
        self.writeback.load(Ordering::Relaxed)
    }

    /// Whether opens may go into kernel passthrough.
    pub(super) fn passthrough(&self) -> bool {
        self.passthrough.load(Ordering::Relaxed)
    }

    /// Whether creates apply the caller's umask here.
    pub(super) fn dont_mask(&self) -> bool {
        self.dont_mask.load(Ordering::Relaxed)
    }
}

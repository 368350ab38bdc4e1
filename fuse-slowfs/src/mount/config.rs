//! What a mount is asked for: [`MountConfig`] and the choices in it.

use std::path::PathBuf;

use slowfs_faults::FaultSpec;

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
    /// ([`Mount::recorded`](super::Mount::recorded)), or the log and the crash model ([`Mount::crash`](super::Mount::crash)).
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
    /// (a `crash` rule, [`Mount::crash`](super::Mount::crash)) keeps only fsynced data and fsynced
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

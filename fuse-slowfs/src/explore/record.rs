//! Recording a workload: run it once on a recording mount and take the log of
//! every mutating operation it made, over the backing directory's state
//! before it ran (the initial, durable state). sync(2)/syncfs(2) are seen on
//! the workload's side (FUSE does not forward them: see [`crate::sync_watch`]).

use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, Ordering};

use serde::{Deserialize, Serialize};
use slowfs_faults::durability::Log;

use crate::tree_io::scan;
use crate::{ControlSocket, Mount, MountConfig};

/// How long a workload's leftovers (a child still exiting, a loop device
/// detaching) may take to let go of the mount after it exits.
const HOLD_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// One recorded run of a workload.
#[derive(Debug)]
pub struct Recorded {
    /// Its operations over the initial state.
    pub log: Log,
    /// How it exited.
    pub status: ExitStatus,
}

/// Runs `workload` (a command and its arguments, with `SLOWFS_MOUNT` set to the
/// mount) once on a recording mount over `backing`, with `rule` in force if
/// given. `pid` holds the workload's process id while it runs (for passing it
/// signals).
pub fn record(
    workload: &[OsString],
    backing: &Path,
    rule: Option<&str>,
    pid: &AtomicI32,
) -> io::Result<Recorded> {
    let initial = scan(backing).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("reading the initial state of {}: {e}", backing.display()),
        )
    })?;
    record_over(workload, backing, initial, rule, pid)
}

/// [`record`] over a given initial state of `backing` (its node ids are the
/// backing files' inode numbers): `--fs` gives its image's data none, since
/// its states are made from the image on disk.
pub fn record_over(
    workload: &[OsString],
    backing: &Path,
    initial: slowfs_faults::durability::Tree,
    rule: Option<&str>,
    pid: &AtomicI32,
) -> io::Result<Recorded> {
    if workload.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no workload command given",
        ));
    }
    // Mounted on a directory inside it: a sweep (see `scratch`) must never
    // look into a live mount to find the owner's lock.
    let scratch = super::scratch::Scratch::new("slowfs-mnt-")?;
    let mountpoint = scratch.path().join("mnt");
    std::fs::create_dir(&mountpoint)?;
    let mut config = MountConfig::new(backing, &mountpoint);
    config.durability = crate::Durability::Record;
    config.control = ControlSocket::None;
    if let Some(rule) = rule {
        config
            .spec
            .add_rule("--fsync-fails", rule)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    }
    let mount = Mount::start(config)?;
    let status = run_workload(workload, &mount, pid);
    pid.store(0, Ordering::SeqCst);
    // Taken only once nothing holds the mount: a loop device or a process
    // still using it may write more, and the log would not be the run's.
    let held = crate::mount::holders::wait_released(mount.mountpoint(), HOLD_GRACE);
    if !held.is_empty() {
        let detached = crate::mount::holders::release_loop_devices(&held);
        drop(mount);
        let list = held
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n  ");
        let note = if detached > 0 {
            " (explore has detached the loop devices)"
        } else {
            ""
        };
        return Err(io::Error::new(
            io::ErrorKind::ResourceBusy,
            format!(
                "the workload exited but left the recording mount in use, so its \
                 log is not complete and no state can be judged:\n  {list}\n\
                 Release it before the workload exits{note}"
            ),
        ));
    }
    let ops = mount.recorded();
    mount.unmount()?;
    let status = status.map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot start the workload {:?}: {e}", workload[0]),
        )
    })?;
    let log = Log::from_recorded(initial, ops, super::BLOCK_SIZE);
    Ok(Recorded { log, status })
}

/// Runs the workload with sync(2)/syncfs(2) reported to the recorder; its exit
/// status.
fn run_workload(workload: &[OsString], mount: &Mount, pid: &AtomicI32) -> io::Result<ExitStatus> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    let filter = crate::sync_watch::SyncFilter::new();
    let theirs_fd = std::os::fd::AsRawFd::as_raw_fd(&theirs);
    let mut command = std::process::Command::new(&workload[0]);
    command
        .args(&workload[1..])
        .env("SLOWFS_MOUNT", mount.mountpoint());
    // SAFETY: `install` makes only async-signal-safe syscalls and does not
    // allocate; sigprocmask and prctl are async-signal-safe too.
    unsafe {
        command.pre_exec(move || {
            nix::sys::signal::SigSet::all()
                .thread_unblock()
                .map_err(io::Error::from)?;
            // Killed with explore (this thread waits for it until it exits), so
            // a SIGKILLed explore leaves no workload writing into a mount
            // nobody serves.
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(io::Error::from)?;
            filter.install(theirs_fd)
        });
    }
    let mut child = command.spawn()?;
    pid.store(child.id() as i32, Ordering::SeqCst);
    drop(theirs);
    if let Err(e) = crate::sync_watch::watch(ours, mount.sync_recorder()) {
        tracing::warn!("sync(2) will not be seen: {e}");
    }
    // Each sync is recorded before it runs, so once the workload has exited every
    // one of its syncs is in the log.
    child.wait()
}

/// How a run checked its states: what `--replay` needs to check one again
/// exactly as the run did.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CheckSettings {
    /// The checker command.
    pub check: String,
    /// A persistent checker (states on stdin).
    pub persistent: bool,
    /// Paths left out of every state.
    pub ignore: Vec<String>,
    /// Longest one check may take, in ms.
    pub timeout_ms: u64,
}

/// A recorded log with the settings its states were checked with: the file
/// `--replay` reads.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedRun {
    /// The checker's settings.
    pub settings: CheckSettings,
    /// The log.
    pub log: Log,
    /// With `--fs`: the filesystem and its base image.
    #[serde(default)]
    pub image: Option<SavedImage>,
}

/// What an `--fs` run's states are made from, besides the log.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedImage {
    /// How the filesystem was made and mounted.
    pub setup: crate::explore::FsSetup,
    /// The base image (the filesystem as mkfs left it), kept beside the run.
    pub base: PathBuf,
    /// A hash of the base image, to tell it was not changed since.
    pub base_hash: String,
    /// The image's node in the log.
    pub node: slowfs_faults::durability::NodeId,
}

impl SavedRun {
    /// Writes the run into `dir` (a new file); its path.
    pub fn save(&self, dir: &Path) -> io::Result<PathBuf> {
        let file = tempfile::Builder::new()
            .prefix("slowfs-explore-")
            .suffix(".json")
            .tempfile_in(dir)
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("saving the run in {}: {e}", dir.display()),
                )
            })?;
        serde_json::to_writer(file.as_file(), self).map_err(io::Error::other)?;
        let (_, path) = file.keep().map_err(|e| e.error)?;
        Ok(path)
    }

    /// Reads a saved run.
    pub fn load(path: &Path) -> io::Result<SavedRun> {
        let file = std::fs::File::open(path)
            .map_err(|e| io::Error::new(e.kind(), format!("opening {}: {e}", path.display())))?;
        serde_json::from_reader(std::io::BufReader::new(file)).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is not a saved slowfs explore run: {e}", path.display()),
            )
        })
    }
}

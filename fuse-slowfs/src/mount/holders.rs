//! What keeps a mount busy: loop devices backed by a file in it, filesystems
//! mounted inside it, and processes with a file, directory or mapping in it.
//! Explore asks this when a workload has exited, because a recording mount
//! still in use then would be detached lazily and its log taken as complete.

use super::table as mount_table;
use std::fmt;
use std::path::{Path, PathBuf};

/// One thing holding a mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// A loop device attached to a file in the mount.
    LoopDevice {
        /// `/dev/loopN`.
        device: PathBuf,
        /// Its backing file.
        backing: PathBuf,
    },
    /// A filesystem mounted on a directory in the mount.
    Mount(PathBuf),
    /// A process using a path in the mount.
    Process {
        /// Its pid.
        pid: i32,
        /// Its command name.
        name: String,
        /// The path it uses (a file it has open, its working directory, ...).
        path: PathBuf,
    },
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Holder::LoopDevice { device, backing } => write!(
                f,
                "loop device {} is attached to {} (detach it: losetup -d {})",
                device.display(),
                backing.display(),
                device.display()
            ),
            Holder::Mount(target) => write!(
                f,
                "a filesystem is mounted on {} (unmount it: umount {})",
                target.display(),
                target.display()
            ),
            Holder::Process { pid, name, path } => write!(
                f,
                "process {pid} ({name}) uses {} (let it exit, or kill it)",
                path.display()
            ),
        }
    }
}

/// Everything holding `mountpoint` now (this process excepted).
pub fn holders(mountpoint: &Path) -> Vec<Holder> {
    let mut found = loop_devices_in(mountpoint);
    found.extend(mounts_in(mountpoint).into_iter().map(Holder::Mount));
    found.extend(processes_in(mountpoint));
    found
}

/// The holders of `mountpoint` that remain after waiting up to `grace` for
/// them to go (none, usually).
pub fn wait_released(mountpoint: &Path, grace: std::time::Duration) -> Vec<Holder> {
    let deadline = std::time::Instant::now() + grace;
    loop {
        let held = holders(mountpoint);
        if held.is_empty() || std::time::Instant::now() >= deadline {
            return held;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

mod ioctl {
    //! The loop driver's LOOP_CLR_FD (`linux/loop.h`).
    nix::ioctl_none!(
        /// Detaches a loop device from its backing file.
        loop_clr_fd,
        0x4C,
        0x01
    );
}
use ioctl::loop_clr_fd;

/// Detaches the loop devices among `held`, lazily unmounting what is mounted
/// from them first; a device still open somewhere is detached by the kernel
/// when it is closed (autoclear). Best effort: what cannot be done is logged.
/// How many loop devices there were.
pub fn release_loop_devices(held: &[Holder]) -> usize {
    let mut devices = 0;
    for holder in held {
        let Holder::LoopDevice { device, .. } = holder else {
            continue;
        };
        devices += 1;
        for target in mounts_of(device) {
            if let Err(e) = nix::mount::umount2(&target, nix::mount::MntFlags::MNT_DETACH) {
                tracing::warn!(
                    "unmounting {} (from {}): {e}",
                    target.display(),
                    device.display()
                );
            }
        }
        let detached = std::fs::File::open(device).and_then(|dev| {
            // SAFETY: LOOP_CLR_FD takes no argument; the fd is a loop device.
            unsafe { loop_clr_fd(std::os::fd::AsRawFd::as_raw_fd(&dev)) }
                .map(drop)
                .map_err(std::io::Error::from)
        });
        if let Err(e) = detached {
            tracing::warn!("detaching {}: {e}", device.display());
        }
    }
    devices
}

/// Where `device` is mounted.
fn mounts_of(device: &Path) -> Vec<PathBuf> {
    mount_table::mounts()
        .into_iter()
        .filter(|m| m.source == device)
        .map(|m| m.mountpoint)
        .collect()
}

/// Loop devices whose backing file is in `mountpoint`.
pub fn loop_devices_in(mountpoint: &Path) -> Vec<Holder> {
    let Ok(entries) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("loop") {
            continue;
        }
        let Ok(backing) = std::fs::read_to_string(entry.path().join("loop/backing_file")) else {
            continue; // not attached
        };
        let backing = PathBuf::from(backing.trim_end().trim_end_matches(" (deleted)"));
        if backing.starts_with(mountpoint) {
            found.push(Holder::LoopDevice {
                device: Path::new("/dev").join(&name),
                backing,
            });
        }
    }
    found.sort_by_key(ToString::to_string);
    found
}

/// Mount points strictly inside `mountpoint`.
fn mounts_in(mountpoint: &Path) -> Vec<PathBuf> {
    mount_table::mounts()
        .into_iter()
        .map(|m| m.mountpoint)
        .filter(|target| target != mountpoint && target.starts_with(mountpoint))
        .collect()
}

/// Processes (other than this one) with their working directory, root, an
/// open file or a mapping in `mountpoint`: the first such path of each.
fn processes_in(mountpoint: &Path) -> Vec<Holder> {
    let me = std::process::id() as i32;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let proc_dir = entry.path();
        if let Some(path) = path_used_in(&proc_dir, mountpoint) {
            let name = std::fs::read_to_string(proc_dir.join("comm"))
                .map(|s| s.trim_end().to_string())
                .unwrap_or_default();
            found.push(Holder::Process { pid, name, path });
        }
    }
    found
}

fn path_used_in(proc_dir: &Path, mountpoint: &Path) -> Option<PathBuf> {
    let inside = |link: PathBuf| -> Option<PathBuf> {
        std::fs::read_link(link)
            .ok()
            .filter(|target| target.starts_with(mountpoint))
    };
    if let Some(path) = inside(proc_dir.join("cwd")).or_else(|| inside(proc_dir.join("root"))) {
        return Some(path);
    }
    if let Ok(fds) = std::fs::read_dir(proc_dir.join("fd")) {
        for fd in fds.flatten() {
            if let Some(path) = inside(fd.path()) {
                return Some(path);
            }
        }
    }
    let maps = std::fs::read_to_string(proc_dir.join("maps")).ok()?;
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .map(PathBuf::from)
        .find(|path| path.starts_with(mountpoint))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_with_its_working_directory_inside_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .current_dir(dir.path())
            .spawn()
            .unwrap();
        let found = holders(dir.path());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            found
                .iter()
                .any(|h| matches!(h, Holder::Process { pid, .. } if *pid == child.id() as i32)),
            "{found:?}"
        );
    }
}

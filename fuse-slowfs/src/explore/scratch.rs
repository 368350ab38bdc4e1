//! Explore's scratch directories, and the ones a killed run left behind.
//!
//! A run's images and states live in temporary directories (an `--fs` run's
//! base image alone is 15-300 MiB). A run that ends, fails or is stopped by a
//! signal it hears removes them; a SIGKILLed one cannot. So each directory
//! holds an `owner.lock` that its run keeps `flock`ed while it lives (the
//! kernel drops the lock when the process dies, whatever killed it), and each
//! run first sweeps the directories whose lock nobody holds. A lock, unlike
//! a pid, cannot be inherited by an unrelated process that reused the pid.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};

/// The prefixes of the scratch directories explore makes (all under the
/// temporary directory, `TMPDIR` or /tmp).
pub const PREFIXES: [&str; 5] = [
    "slowfs-fs-",
    "slowfs-mnt-",
    "slowfs-states-",
    "slowfs-state-",
    "slowfs-explore-",
];

const LOCK: &str = "owner.lock";

/// A temporary directory this run owns: removed on drop, and marked as
/// owned (its lock held) until then.
pub struct Scratch {
    // Dropped after the directory: a sweep never sees it unlocked with
    // content in it.
    dir: tempfile::TempDir,
    _owner: Flock<File>,
}

impl Scratch {
    /// A new directory named `prefix` and random letters, in the
    /// temporary directory.
    pub fn new(prefix: &str) -> io::Result<Scratch> {
        Scratch::new_in(&std::env::temp_dir(), prefix)
    }

    /// The same, in `root`.
    pub fn new_in(root: &Path, prefix: &str) -> io::Result<Scratch> {
        let dir = tempfile::Builder::new().prefix(prefix).tempdir_in(root)?;
        // Locked under another name, then renamed: a sweep never finds the
        // lock file unlocked while its run lives.
        let unnamed = dir.path().join(".owner.lock.new");
        let owner = Flock::lock(File::create(&unnamed)?, FlockArg::LockExclusiveNonblock)
            .map_err(|(_, e)| io::Error::from(e))?;
        std::fs::rename(&unnamed, dir.path().join(LOCK))?;
        Ok(Scratch { dir, _owner: owner })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// What a sweep did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Directories removed, and the bytes they held.
    pub removed: usize,
    pub bytes: u64,
    /// Directories of dead runs left alone: something is still mounted in
    /// them or a loop device still reads a file in them.
    pub in_use: Vec<PathBuf>,
}

/// Removes the scratch directories under `root` whose owner has died.
/// Directories without a lock (made by a slowfs before the lock existed, or
/// another program's) and those of live runs are left alone.
pub fn sweep(root: &Path) -> Swept {
    let mut swept = Swept::default();
    let Ok(entries) = std::fs::read_dir(root) else {
        return swept;
    };
    let busy = Busy::now();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !PREFIXES.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let dir = entry.path();
        // Opened read-only: the sweep must not create a lock where none was.
        let Ok(file) = File::open(dir.join(LOCK)) else {
            continue;
        };
        let Ok(_dead_owners) = Flock::lock(file, FlockArg::LockExclusiveNonblock) else {
            continue; // its run is alive
        };
        if busy.holds(&dir) {
            swept.in_use.push(dir);
            continue;
        }
        let bytes = disk_usage(&dir);
        if std::fs::remove_dir_all(&dir).is_ok() {
            swept.removed += 1;
            swept.bytes += bytes;
        }
    }
    swept
}

/// Mount points and loop devices' backing files, read once per sweep.
struct Busy {
    paths: Vec<PathBuf>,
}

impl Busy {
    fn now() -> Busy {
        let mut paths = Vec::new();
        if let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") {
            // Field 5 is the mount point (spaces escaped as \040).
            for line in mounts.lines() {
                if let Some(point) = line.split(' ').nth(4) {
                    paths.push(PathBuf::from(point.replace("\\040", " ")));
                }
            }
        }
        if let Ok(devices) = std::fs::read_dir("/sys/block") {
            for device in devices.flatten() {
                let file = device.path().join("loop/backing_file");
                if let Ok(backing) = std::fs::read_to_string(file) {
                    paths.push(PathBuf::from(backing.trim_end()));
                }
            }
        }
        Busy { paths }
    }

    fn holds(&self, dir: &Path) -> bool {
        self.paths.iter().any(|p| p.starts_with(dir))
    }
}

fn disk_usage(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    walk(dir)
        .iter()
        .filter_map(|p| std::fs::symlink_metadata(p).ok())
        .map(|m| m.blocks() * 512)
        .sum()
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path.clone());
            }
            out.push(path);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory as a SIGKILLed run leaves it: the lock file, no holder.
    fn dead_run(root: &Path, prefix: &str) -> PathBuf {
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(root)
            .unwrap()
            .keep();
        File::create(dir.join(LOCK)).unwrap();
        std::fs::write(dir.join("base.img"), vec![1u8; 64 * 1024]).unwrap();
        dir
    }

    #[test]
    fn a_dead_runs_directory_is_removed_and_a_live_ones_kept() {
        let root = tempfile::tempdir().unwrap();
        let dead = dead_run(root.path(), "slowfs-fs-");
        let live = {
            let dir = tempfile::Builder::new()
                .prefix("slowfs-states-")
                .tempdir_in(root.path())
                .unwrap();
            let file = File::create(dir.path().join(LOCK)).unwrap();
            let held = Flock::lock(file, FlockArg::LockExclusiveNonblock).unwrap();
            (dir, held)
        };
        let unlocked_old = root.path().join("slowfs-mnt-old");
        std::fs::create_dir(&unlocked_old).unwrap();
        let other = dead_run(root.path(), "someone-else-");

        let swept = sweep(root.path());

        assert_eq!(swept.removed, 1, "{swept:?}");
        assert!(swept.bytes >= 64 * 1024, "{swept:?}");
        assert!(!dead.exists());
        assert!(live.0.path().exists(), "a live run's directory was removed");
        assert!(
            unlocked_old.exists(),
            "a directory without a lock was removed"
        );
        assert!(other.exists(), "another program's directory was removed");
    }

    #[test]
    fn a_scratch_directory_is_locked_while_held_and_gone_after() {
        let root = tempfile::tempdir().unwrap();
        let scratch = Scratch::new_in(root.path(), "slowfs-states-").unwrap();
        let path = scratch.path().to_path_buf();
        assert_eq!(sweep(root.path()), Swept::default());
        assert!(path.exists(), "the sweep removed a live run's directory");
        drop(scratch);
        assert!(!path.exists());
    }
}

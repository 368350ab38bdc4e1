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
    /// Directories of dead runs left alone: a loop device still reads a
    /// file in them.
    pub in_use: Vec<PathBuf>,
    /// Directories of dead runs that could not be removed, and why.
    pub failed: Vec<(PathBuf, String)>,
}

/// Removes the scratch directories under `root` whose owner has died.
/// Directories without a lock (made by a slowfs before the lock existed, or
/// another program's), those of live runs and mount points are left alone.
pub fn sweep(root: &Path) -> Swept {
    let mut swept = Swept::default();
    // The kernel names mount points and loop devices' files by real paths.
    let Ok(root) = root.canonicalize() else {
        return swept;
    };
    let Ok(entries) = std::fs::read_dir(&root) else {
        return swept;
    };
    // The mount table once (its escapes decoded); loop devices are looked
    // up only for the dead runs' directories.
    let mount_points: Vec<PathBuf> = crate::mount::table::mounts()
        .into_iter()
        .map(|m| m.mountpoint)
        .collect();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !PREFIXES.iter().any(|p| name.starts_with(p))
            || !entry.file_type().is_ok_and(|t| t.is_dir())
        {
            continue;
        }
        let dir = entry.path();
        // Before anything inside is opened: a lookup in a live mount (`slowfs
        // run`'s, with faults) could hang or change what it injects.
        if mount_points.iter().any(|p| p.starts_with(&dir)) {
            continue;
        }
        // Opened read-only: the sweep must not create a lock where none was.
        let Ok(file) = File::open(dir.join(LOCK)) else {
            continue;
        };
        let Ok(_dead_owners) = Flock::lock(file, FlockArg::LockExclusiveNonblock) else {
            continue; // its run is alive
        };
        if !crate::mount::holders::loop_devices_in(&dir).is_empty() {
            swept.in_use.push(dir);
            continue;
        }
        let bytes = disk_usage(&dir);
        match remove_lock_last(&dir) {
            Ok(()) => {
                swept.removed += 1;
                swept.bytes += bytes;
            }
            Err(e) => swept.failed.push((dir, e.to_string())),
        }
    }
    swept
}

/// Removes `dir`, its lock last: a removal that fails halfway leaves a
/// directory the next sweep still knows as a dead run's.
fn remove_lock_last(dir: &Path) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name() == LOCK {
            continue;
        }
        if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(entry.path())?;
        } else {
            std::fs::remove_file(entry.path())?;
        }
    }
    std::fs::remove_file(dir.join(LOCK))?;
    std::fs::remove_dir(dir)
}

/// The bytes `dir` takes on the disk (its files' blocks; links not followed).
fn disk_usage(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(meta) if meta.is_dir() => meta.blocks() * 512 + disk_usage(&entry.path()),
            Ok(meta) => meta.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
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

    /// A live mount named like a scratch directory (`slowfs run` mounts on
    /// `slowfs-mnt-*`) is never looked into, even with an unheld lock file
    /// in it. A real tmpfs mount (the tests run as root), unmounted on drop.
    #[test]
    fn a_mount_point_is_left_alone() {
        struct Unmount(PathBuf);
        impl Drop for Unmount {
            fn drop(&mut self) {
                let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
            }
        }
        let root = tempfile::tempdir().unwrap();
        let point = root.path().canonicalize().unwrap().join("slowfs-mnt-live");
        std::fs::create_dir(&point).unwrap();
        nix::mount::mount(
            Some("tmpfs"),
            &point,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        )
        .expect("mounting a tmpfs (the tests run as root)");
        let _unmount = Unmount(point.clone());
        File::create(point.join(LOCK)).unwrap();
        std::fs::write(point.join("user-data"), b"keep me").unwrap();

        assert_eq!(sweep(root.path()), Swept::default());
        assert!(point.join("user-data").exists());
    }

    /// TMPDIR through a symlink: the kernel's paths are real paths, and
    /// the sweep compares them with the directory's real path.
    #[test]
    fn a_sweep_through_a_symlinked_root_removes_the_dead_runs_directory() {
        let real = tempfile::tempdir().unwrap();
        let dead = dead_run(real.path(), "slowfs-fs-");
        let links = tempfile::tempdir().unwrap();
        let root = links.path().join("tmp");
        std::os::unix::fs::symlink(real.path(), &root).unwrap();
        assert_eq!(sweep(&root).removed, 1);
        assert!(!dead.exists());
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

//! A real slowfs mount over a temporary backing directory, for tests.
#![allow(dead_code)]

pub mod daemon;

use std::path::{Path, PathBuf};

use slowfs::{Mount, MountConfig};

/// A mounted slowfs; unmounts (and checks it is gone) on drop, also on panic.
pub struct TestMount {
    pub mount: Option<Mount>,
    pub backing: tempfile::TempDir,
    mountpoint: tempfile::TempDir,
}

impl TestMount {
    /// Mounts with the strict crash model.
    pub fn strict(rules: &[&str]) -> TestMount {
        Self::with(rules, |c| c.crash_model = slowfs::CrashModel::Strict)
    }

    /// Mounts with these rule strings and a fixed seed.
    pub fn new(rules: &[&str]) -> TestMount {
        Self::with(rules, |_| {})
    }

    /// Mounts after letting `tweak` adjust the config.
    pub fn with(rules: &[&str], tweak: impl FnOnce(&mut MountConfig)) -> TestMount {
        Self::in_dir(&std::env::temp_dir(), rules, tweak)
    }

    /// Mounts with the temporary directories under `base` (which other users must be
    /// able to traverse when a test switches user: /tmp is 0700 on some machines).
    pub fn in_dir(base: &Path, rules: &[&str], tweak: impl FnOnce(&mut MountConfig)) -> TestMount {
        assert!(
            Path::new("/dev/fuse").exists(),
            "/dev/fuse is missing: these tests need FUSE (modprobe fuse; in a container, \
             pass --device /dev/fuse)"
        );
        let backing = tempfile::tempdir_in(base).unwrap();
        let mountpoint = tempfile::tempdir_in(base).unwrap();
        let mut config = MountConfig::new(backing.path(), mountpoint.path());
        for rule in rules {
            config.spec.add_rule("test", rule).unwrap();
        }
        config.spec.seed = Some(7);
        config.control = Some(Some(mountpoint.path().with_extension("sock")));
        tweak(&mut config);
        let mount = Mount::start(config).unwrap_or_else(|e| panic!("mount failed: {e}"));
        TestMount {
            mount: Some(mount),
            backing,
            mountpoint,
        }
    }

    pub fn mount(&self) -> &Mount {
        self.mount.as_ref().unwrap()
    }

    /// A path inside the mount.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.mount().mountpoint().join(rel)
    }

    /// The same path in the backing directory.
    pub fn backing(&self, rel: &str) -> PathBuf {
        self.backing.path().join(rel)
    }
}

impl Drop for TestMount {
    fn drop(&mut self) {
        let mountpoint = self.mount().mountpoint().to_path_buf();
        drop(self.mount.take());
        let still = slowfs::mount::slowfs_mounts().contains(&mountpoint);
        if still && !std::thread::panicking() {
            panic!("{} is still mounted after drop", mountpoint.display());
        }
        let _ = &self.mountpoint;
    }
}

/// A command's stdout and stderr, together, for assertion messages.
/// fsync of a directory: its entries become durable.
pub fn sync_dir(path: &Path) {
    std::fs::File::open(path).unwrap().sync_all().unwrap();
}

pub fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

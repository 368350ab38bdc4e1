//! The mount fixture, for every test of this project and for library users'
//! tests: a real slowfs mounted in-process over a temporary backing directory,
//! with a handle to change rules, release hangs, crash and read stats at
//! runtime. It unmounts on drop, also when a test panics, and checks that the
//! mount is gone.
//!
//! ```no_run
//! let m = slowfs::fixture::SlowMount::with_rules(7, &["read delay=10ms"])?;
//! std::fs::write(m.backing_path("f"), b"data")?;
//! assert_eq!(std::fs::read(m.path("f"))?, b"data");
//! # Ok::<(), std::io::Error>(())
//! ```

use std::io;
use std::path::{Path, PathBuf};

use slowfs_faults::durability::{Log, Tree};
use slowfs_faults::{parse_rule, FaultSpec};

use crate::{ControlSocket, Mount, MountConfig, StatsReport};

/// A fault spec from rule strings and a seed.
fn spec(seed: u64, rules: &[&str]) -> io::Result<FaultSpec> {
    let mut spec = FaultSpec {
        seed: Some(seed),
        ..FaultSpec::default()
    };
    for rule in rules {
        spec.add_rule("fixture", rule)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    }
    Ok(spec)
}

/// A mounted slowfs over a fresh temporary directory.
#[derive(Debug)]
pub struct SlowMount {
    mount: Option<Mount>,
    /// On a recording mount: the backing tree before any operation.
    initial: Option<Tree>,
    backing: tempfile::TempDir,
    _mountpoint: tempfile::TempDir,
}

impl SlowMount {
    /// Mounts with these rules and seed. Fails (never skips) without /dev/fuse.
    pub fn start(spec: FaultSpec) -> io::Result<SlowMount> {
        Self::start_with(spec, crate::Durability::Off)
    }

    /// Mounts with these rules and seed, recording the faults that fire into a
    /// trace file or replaying one (`slowfs run --record-faults/--replay-faults`).
    pub fn traced(spec: FaultSpec, trace: crate::FaultTraceFile) -> io::Result<SlowMount> {
        Self::mount_in(&std::env::temp_dir(), spec, |c| c.fault_trace = Some(trace))
    }

    /// Mounts a recording slowfs with no rules: every mutating operation is logged
    /// for the durability model ([`SlowMount::log`]).
    pub fn recording(seed: u64) -> io::Result<SlowMount> {
        Self::start_with(
            FaultSpec {
                seed: Some(seed),
                ..FaultSpec::default()
            },
            crate::Durability::Record,
        )
    }

    /// Mounts with the strict crash model: [`SlowMount::crash`] (or a `crash`
    /// rule) leaves only what was made durable.
    pub fn strict(seed: u64, rules: &[&str]) -> io::Result<SlowMount> {
        let spec = spec(seed, rules)?;
        Self::mount_in(&std::env::temp_dir(), spec, |c| {
            c.durability = crate::Durability::StrictCrash
        })
    }

    fn start_with(spec: FaultSpec, durability: crate::Durability) -> io::Result<SlowMount> {
        Self::mount_in(&std::env::temp_dir(), spec, |c| c.durability = durability)
    }

    /// Mounts with `rules` (seed 7) after letting `tweak` adjust the whole
    /// configuration (passthrough, options, tuning, a control socket...).
    pub fn configured(
        rules: &[&str],
        tweak: impl FnOnce(&mut MountConfig),
    ) -> io::Result<SlowMount> {
        Self::mount_in(&std::env::temp_dir(), spec(7, rules)?, tweak)
    }

    /// As [`SlowMount::configured`], with the temporary directories under
    /// `base` (which other users must be able to traverse when a test switches
    /// user: /tmp is 0700 on some machines).
    pub fn in_dir(
        base: &Path,
        rules: &[&str],
        tweak: impl FnOnce(&mut MountConfig),
    ) -> io::Result<SlowMount> {
        Self::mount_in(base, spec(7, rules)?, tweak)
    }

    fn mount_in(
        base: &Path,
        spec: FaultSpec,
        tweak: impl FnOnce(&mut MountConfig),
    ) -> io::Result<SlowMount> {
        if !Path::new("/dev/fuse").exists() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "/dev/fuse is missing: slowfs needs FUSE (modprobe fuse, or pass the device into the container)",
            ));
        }
        let backing = tempfile::Builder::new()
            .prefix("slowfs-backing-")
            .tempdir_in(base)?;
        let mountpoint = tempfile::Builder::new()
            .prefix("slowfs-mnt-")
            .tempdir_in(base)?;
        let mut config = MountConfig::new(backing.path(), mountpoint.path());
        config.spec = spec;
        // A control socket of its own, beside the mountpoint (removed with it).
        config.control = ControlSocket::At(mountpoint.path().with_extension("sock"));
        tweak(&mut config);
        let initial = if config.durability.records() {
            Some(crate::tree_io::scan(backing.path())?)
        } else {
            None
        };
        Ok(SlowMount {
            mount: Some(Mount::start(config)?),
            initial,
            backing,
            _mountpoint: mountpoint,
        })
    }

    /// Mounts with rule strings and a fixed seed.
    pub fn with_rules(seed: u64, rules: &[&str]) -> io::Result<SlowMount> {
        let spec = spec(seed, rules)?;
        Self::start(spec)
    }

    /// The mount itself (stats, control socket, durability, ...).
    pub fn mount(&self) -> &Mount {
        self.mount.as_ref().expect("mounted until drop")
    }

    /// A path inside the mount.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.mount().mountpoint().join(rel)
    }

    /// The same path in the backing directory (bypassing the mount).
    pub fn backing_path(&self, rel: &str) -> PathBuf {
        self.backing.path().join(rel)
    }

    /// Adds a rule; returns its id.
    pub fn set(&self, rule: &str) -> io::Result<u64> {
        let rule = parse_rule(rule)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        Ok(self.mount().add_rule(rule))
    }

    /// Removes one rule or all.
    pub fn clear(&self, id: Option<u64>) -> usize {
        self.mount().plan().clear(id)
    }

    /// Releases every hung request; returns how many.
    pub fn release(&self) -> usize {
        self.mount().release()
    }

    /// Requests parked right now (delayed, hung, or an NFS lock wait).
    pub fn waiting(&self) -> usize {
        self.mount().waiting()
    }

    /// Counters so far.
    pub fn stats(&self) -> StatsReport {
        self.mount().stats()
    }

    /// Starts keeping the requests thread `tid` issues (see [`SlowMount::waits_of`]).
    pub fn watch_thread(&self, tid: u32) {
        self.mount().watch_thread(tid)
    }

    /// The requests thread `tid` waited for since [`SlowMount::watch_thread`],
    /// each with how long it was held; stops watching it.
    pub fn waits_of(&self, tid: u32) -> Vec<crate::stats::Waited> {
        self.mount().waits_of(tid)
    }

    /// What the mount has recorded, over the initial tree: the input of the
    /// durability model. Empty on a mount that does not record.
    pub fn log(&self) -> Log {
        Log::from_recorded(
            self.initial.clone().unwrap_or_else(|| Tree::empty(0)),
            self.mount().recorded(),
            crate::explore::BLOCK_SIZE,
        )
    }

    /// Power loss now (strict crash model): the tree becomes its durable state
    /// and handles opened before fail with EIO. False without the crash model.
    pub fn crash(&self) -> bool {
        self.mount().crash()
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.mount().seed()
    }
}

impl Drop for SlowMount {
    fn drop(&mut self) {
        let Some(mount) = self.mount.take() else {
            return;
        };
        let mountpoint = mount.mountpoint().to_path_buf();
        drop(mount);
        let still = crate::mount::table::slowfs_mounts().contains(&mountpoint);
        if still && !std::thread::panicking() {
            panic!("{} is still mounted after drop", mountpoint.display());
        }
    }
}

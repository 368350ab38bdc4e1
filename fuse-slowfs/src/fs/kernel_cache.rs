//! What the kernel may cache, and for how long: names, attributes (their
//! TTLs, the NFS client's among them) and pages (the open flags); and telling
//! it when what it cached went stale.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType, FopenFlags, INodeNo};
use slowfs_faults::Op;

use super::mode::Mode;
use super::Inner;

impl Inner {
    /// Gives the mount a way to invalidate the kernel's caches.
    pub fn set_notifier(&self, notifier: fuser::Notifier) {
        if let Mode::NfsClient(nfs) = &self.mode {
            nfs.negative_names.start(notifier.clone());
        }
        let _ = self.notifier.set(notifier);
    }

    /// Tells the kernel that inode `ino`'s cached attributes are stale (the daemon
    /// changed its mode behind the kernel's back: set-ID bits dropped, an ACL set).
    pub(super) fn attributes_changed(&self, ino: u64) {
        if let Some(notifier) = self.notifier.get() {
            let _ = notifier.inval_inode(INodeNo(ino), -1, 0);
        }
    }

    /// How long the kernel may cache the attributes `attr` of inode `ino`:
    /// under `--cache nfs` the client's adaptive time; else as [`Inner::ttl`],
    /// and not at all while it is open for writing in passthrough.
    pub(super) fn attr_ttl(&self, ino: u64, attr: &FileAttr) -> Duration {
        if let Mode::NfsClient(nfs) = &self.mode {
            let version = crate::client_cache::Version {
                mtime: nanos(attr.mtime),
                ctime: nanos(attr.ctime),
                size: attr.size,
            };
            let dir = attr.kind == FileType::Directory;
            if dir {
                // A revalidation of the directory: names cached as missing
                // at another version of it go (see nfs/names.rs).
                nfs.negative_names.revalidated(ino, version, None);
            }
            return nfs.view.attributes(&nfs.settings, ino, dir, version);
        }
        if self.passthrough_writers.writing(ino) {
            Duration::ZERO
        } else {
            self.ttl()
        }
    }

    /// How long the kernel may cache the names in directory `parent`: under
    /// `--cache nfs` as long as the directory's attributes (none with
    /// `lookupcache=none`), else [`Inner::ttl`].
    pub(super) fn entry_ttl(&self, parent: u64) -> Duration {
        match &self.mode {
            Mode::NfsClient(nfs)
                if nfs.settings.lookupcache == crate::client_cache::LookupCache::None =>
            {
                Duration::ZERO
            }
            Mode::NfsClient(nfs) => nfs.view.directory_timeout(&nfs.settings, parent),
            Mode::PageCache | Mode::Recording(_) | Mode::Crash(..) => self.ttl(),
        }
    }

    /// How long the kernel may remember that a name in `parent` does not
    /// exist: under `--cache nfs` only with `lookupcache=all`; else at most a
    /// second (no invalidation names them when a rule is added).
    pub(super) fn negative_ttl(&self, parent: u64) -> Duration {
        match &self.mode {
            Mode::NfsClient(nfs)
                if nfs.settings.lookupcache != crate::client_cache::LookupCache::All =>
            {
                Duration::ZERO
            }
            Mode::NfsClient(_) => self.entry_ttl(parent),
            Mode::PageCache | Mode::Recording(_) | Mode::Crash(..) => {
                self.entry_ttl(parent).min(Duration::from_secs(1))
            }
        }
    }

    /// How long the kernel may cache names and attributes: not at all while a rule
    /// wants to see lookups or getattrs, else `--tune attr-timeout` (60 s), so
    /// that a stat costs what it costs natively.
    pub(super) fn ttl(&self) -> Duration {
        match self.mode {
            // After a crash the tree changes under the kernel's caches: never cache.
            Mode::Crash(..) => Duration::ZERO,
            _ if self.wants_metadata_requests() => Duration::ZERO,
            _ => Duration::from_secs(self.options.tuning.attr_timeout.into()),
        }
    }

    /// Whether a rule (or a replayed trace) wants to see lookups or getattrs.
    pub(super) fn wants_metadata_requests(&self) -> bool {
        self.plan.matches_op(Op::Lookup) || self.plan.matches_op(Op::Getattr)
    }

    /// Adds a rule at runtime. One that wants to see lookups or getattrs when
    /// none did first makes the kernel forget the names and attributes it
    /// cached, so the rule acts on the very next stat.
    pub fn add_rule(&self, rule: slowfs_faults::Rule) -> u64 {
        match self.mode {
            // Nothing cached under the crash model; the NFS client's caches
            // time out as a real client's do.
            Mode::Crash(..) | Mode::NfsClient(_) => self.plan.add(rule),
            Mode::PageCache | Mode::Recording(_) => {
                let cached = !self.wants_metadata_requests();
                let id = self.plan.add(rule);
                if cached && self.wants_metadata_requests() {
                    self.forget_cached_metadata();
                }
                id
            }
        }
    }

    /// Invalidates every name and attribute the kernel may have cached: each
    /// inode it holds, under the name it was last seen by (another hard link's
    /// name, if cached, is not named; its attributes are). Negative entries
    /// are not tracked: the kernel keeps them a second at most ([`negative_ttl`]).
    ///
    /// On a thread of its own, waited for up to a second: the kernel takes a
    /// directory's lock to drop a name in it, so a request held in that
    /// directory (a `create hang`) would hold up the caller; the
    /// invalidation then finishes when the request does.
    ///
    /// [`negative_ttl`]: Self::negative_ttl
    pub(super) fn forget_cached_metadata(&self) {
        let Some(notifier) = self.notifier.get().cloned() else {
            return;
        };
        let known = self.inodes.known();
        let (done, finished) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("slowfs-invalidate".into())
            .spawn(move || {
                for (ino, parent, name) in known {
                    let _ = notifier.inval_entry(INodeNo(parent), &name);
                    let _ = notifier.inval_inode(INodeNo(ino), -1, 0);
                }
                let _ = notifier.inval_inode(INodeNo::ROOT, -1, 0);
                let _ = done.send(());
            });
        if spawned.is_ok() {
            let _ = finished.recv_timeout(Duration::from_secs(1));
        }
    }

    /// Whether reads and writes of this file must bypass the page cache, so that
    /// every one reaches the rules and short counts reach the caller.
    pub(super) fn open_flags(&self, path: &str) -> FopenFlags {
        match self.mode {
            // Under the crash model every byte must reach the log and come back from
            // the (possibly crashed) backing tree, so nothing is cached.
            Mode::Crash(..) => {
                return FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
            }
            // The NFS client caches whatever rules say: they apply to the
            // requests it sends (see close_to_open).
            Mode::NfsClient(_) => return FopenFlags::empty(),
            Mode::PageCache | Mode::Recording(_) => {}
        }
        if self.plan.touches_data_path(path) {
            FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
        } else if self.options.strict_atime {
            // Each open starts with an empty page cache, so its reads reach the
            // backing file and move its atime (xfstests 003).
            FopenFlags::empty()
        } else {
            // Cached pages survive reopening; FUSE_AUTO_INVAL_DATA drops them when the
            // backing file's size or mtime changes behind the mount's back.
            FopenFlags::FOPEN_KEEP_CACHE
        }
    }
}

/// A time as nanoseconds since the epoch (negative before it).
fn nanos(t: SystemTime) -> i128 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

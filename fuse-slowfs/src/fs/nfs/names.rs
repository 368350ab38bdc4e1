//! The NFS client's negative name cache, under `--cache nfs` with
//! `lookupcache=all`: a name looked up and not found is cached as missing
//! (FUSE's negative entry), stamped with its directory's version at the
//! lookup, as Linux stamps the dentry with the directory's change attribute
//! (`nfs_set_verifier`, fs/nfs/dir.c). A later revalidation of the directory
//! (an open of it, its attributes sent) that finds another version drops
//! those entries, so the next path walk asks the server again, as
//! `nfs_neg_need_reval` -> `nfs_check_verifier` does: a negative entry does
//! not outlive a directory revalidation that shows the name.
//!
//! The kernel is told from a thread of its own: a FUSE_NOTIFY_INVAL_ENTRY
//! takes the directory's inode lock, which a request the kernel is waiting on
//! may hold (a readdir or a lookup in that directory), so a worker must never
//! send one itself.

use std::collections::HashMap;
use std::ffi::OsString;
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

use fuser::INodeNo;

use crate::client_cache::Version;

/// Names remembered per directory, at most; past it the directory's record
/// is dropped (its entries then last their time, the directory's attribute
/// window, as before this record existed).
const MOST_PER_DIRECTORY: usize = 4096;

/// Directories with remembered names, at most (the same fallback).
const MOST_DIRECTORIES: usize = 4096;

/// One batch for the invalidating thread: names in `parent` to drop, then
/// `then` (a reply that must go after them).
struct Invalidation {
    parent: u64,
    names: Vec<OsString>,
    then: Option<Box<dyn FnOnce() + Send>>,
}

/// The negative entries the kernel holds, by directory, each with the
/// directory's version when it was looked up.
#[derive(Debug, Default)]
pub(in crate::fs) struct NegativeNames {
    dirs: Mutex<HashMap<u64, HashMap<OsString, Version>>>,
    kernel: OnceLock<Mutex<mpsc::Sender<Invalidation>>>,
}

impl std::fmt::Debug for Invalidation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Invalidation({}, {} names)",
            self.parent,
            self.names.len()
        )
    }
}

impl NegativeNames {
    /// Starts the thread that tells the kernel (once, when the mount has a
    /// notifier). It ends when this record goes (its sender dropped).
    pub(in crate::fs) fn start(&self, notifier: fuser::Notifier) {
        let (send, receive) = mpsc::channel::<Invalidation>();
        if self.kernel.set(Mutex::new(send)).is_err() {
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("slowfs-names".into())
            .spawn(move || {
                for batch in receive {
                    for name in &batch.names {
                        // ENOENT (the kernel no longer has it) is harmless.
                        let _ = notifier.inval_entry(INodeNo(batch.parent), name);
                    }
                    if let Some(then) = batch.then {
                        then();
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("no thread to drop stale negative entries: {e}");
        }
    }

    /// `name` in `parent` (now at `version`) was not found and the kernel
    /// caches that.
    pub(in crate::fs) fn missing(&self, parent: u64, name: &std::ffi::OsStr, version: Version) {
        let mut dirs = self.dirs.lock().unwrap();
        if !dirs.contains_key(&parent) && dirs.len() >= MOST_DIRECTORIES {
            return;
        }
        let names = dirs.entry(parent).or_default();
        if names.len() >= MOST_PER_DIRECTORY {
            dirs.remove(&parent);
            return;
        }
        names.insert(name.to_os_string(), version);
    }

    /// `name` in `parent` exists now as far as the kernel knows (found by a
    /// lookup, made by a create, renamed to): no longer a negative entry, and
    /// never dropped for one (the kernel's positive entry stays, as an open
    /// file's or a working directory's must).
    pub(in crate::fs) fn found(&self, parent: u64, name: &std::ffi::OsStr) {
        let mut dirs = self.dirs.lock().unwrap();
        if dirs.is_empty() {
            return;
        }
        if let Some(names) = dirs.get_mut(&parent) {
            names.remove(name);
            if names.is_empty() {
                dirs.remove(&parent);
            }
        }
    }

    /// Directory `parent` was revalidated and is at `version`: the negative
    /// entries looked up at another version are dropped in the kernel, then
    /// `then` runs (at once when there are none, or no thread to send them).
    pub(in crate::fs) fn revalidated(
        &self,
        parent: u64,
        version: Version,
        then: Option<Box<dyn FnOnce() + Send>>,
    ) {
        let stale: Vec<OsString> = {
            let mut dirs = self.dirs.lock().unwrap();
            match dirs.get_mut(&parent) {
                Some(names) => {
                    let stale = names
                        .iter()
                        .filter(|(_, seen)| **seen != version)
                        .map(|(name, _)| name.clone())
                        .collect();
                    names.retain(|_, seen| *seen == version);
                    if names.is_empty() {
                        dirs.remove(&parent);
                    }
                    stale
                }
                None => Vec::new(),
            }
        };
        let batch = Invalidation {
            parent,
            names: stale,
            then,
        };
        if batch.names.is_empty() {
            if let Some(then) = batch.then {
                then();
            }
            return;
        }
        let unsent = match self.kernel.get() {
            Some(kernel) => kernel.lock().unwrap().send(batch).err().map(|e| e.0),
            None => Some(batch),
        };
        if let Some(then) = unsent.and_then(|b| b.then) {
            then();
        }
    }

    /// The kernel forgot directory `ino`: so are its names.
    pub(in crate::fs) fn forget(&self, ino: u64) {
        self.dirs.lock().unwrap().remove(&ino);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    fn version(size: u64) -> Version {
        Version {
            mtime: 1,
            ctime: 1,
            size,
        }
    }

    #[test]
    fn only_names_seen_at_another_version_go() {
        let names = NegativeNames::default();
        names.missing(1, "a".as_ref(), version(1));
        names.missing(1, "b".as_ref(), version(2));
        // No thread (no mount): the reply still runs.
        let ran = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&ran);
        names.revalidated(
            1,
            version(2),
            Some(Box::new(move || flag.store(true, Ordering::SeqCst))),
        );
        assert!(ran.load(Ordering::SeqCst));
        let dirs = names.dirs.lock().unwrap();
        let left: Vec<_> = dirs[&1].keys().cloned().collect();
        assert_eq!(left, vec![OsString::from("b")], "a was stale, b current");
    }
}

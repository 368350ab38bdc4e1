//! The inode table: every inode the kernel knows, with lookup counts, how to reach
//! its backing file again, and the name it was last seen under (to match rules'
//! path globs).
//!
//! The daemon does not hold an fd per inode: a build tree or a photo library has
//! more files than any open-file limit. Each inode keeps a *file handle*
//! (`name_to_handle_at`, as virtiofsd's `--inode-file-handles` does) and its
//! `O_PATH` fd lives in a bounded LRU cache ([`FdCache`]); a miss reopens it with
//! `open_by_handle_at`, or — where handles are not available (no
//! CAP_DAC_READ_SEARCH, a filesystem without export support) — by walking from
//! the parent's fd to the name it was last seen under, checking that the same
//! backing inode is found. An inode whose name goes away through the mount while
//! the kernel still holds it (an open, unlinked file) is *pinned*: its fd is kept
//! until the kernel forgets it, since no name leads to it any more.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::num::NonZeroUsize;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};

use fuser::{Errno, INodeNo};

use super::handle::FileId;
use super::sys::{self, SysResult};

/// The root directory's inode number, as FUSE fixes it.
pub const ROOT: u64 = 1;

/// Inode numbers of our own making start here, above any backing inode number a
/// local filesystem hands out, so the two never collide.
const OWN_NUMBERS: u64 = 1 << 62;

/// One inode the kernel holds a reference to.
#[derive(Debug)]
pub struct Inode {
    /// Backing (device, inode), to give hard links one FUSE inode.
    pub key: (u64, u64),
    /// How to reopen the backing file without a path, when the filesystem allows.
    id: Option<FileId>,
    /// The fd kept for an inode no name leads to any more (unlinked while known).
    pinned: Mutex<Option<Arc<OwnedFd>>>,
    /// The kernel-passthrough backing id its passthrough opens share, while any is open.
    pub backing: Mutex<std::sync::Weak<fuser::BackingId>>,
}

/// An inode together with an open `O_PATH` fd of its backing file, for the length
/// of one request. Dropping it returns nothing to the cache: the cache holds its
/// own reference, and an evicted fd closes when the last request using it ends.
#[derive(Debug)]
pub struct Node {
    inode: Arc<Inode>,
    fd: Arc<OwnedFd>,
}

impl Node {
    /// The raw `O_PATH` fd.
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl std::ops::Deref for Node {
    type Target = Inode;
    fn deref(&self) -> &Inode {
        &self.inode
    }
}

#[derive(Debug)]
struct Entry {
    inode: Arc<Inode>,
    lookups: u64,
    /// Where the inode was last seen: parent inode and name.
    parent: u64,
    name: OsString,
}

#[derive(Debug, Default)]
struct Table {
    entries: HashMap<u64, Entry>,
    by_key: HashMap<(u64, u64), u64>,
    /// (parent, name) → inode last seen there: renames and unlinks find the inode
    /// they move without scanning the table.
    by_name: HashMap<(u64, OsString), u64>,
    next: u64,
    /// The backing root's (device, inode).
    root_key: (u64, u64),
    /// Whether a backing file on the root's device shows its own inode number, so
    /// that `st_ino` matches `d_ino` from readdir (off under the crash model, where
    /// a crash recreates files and their numbers must not meet the kernel's old ones).
    stable: bool,
}

impl Table {
    /// The FUSE inode number for a new backing file.
    fn number_for(&mut self, key: (u64, u64)) -> u64 {
        let own = key.0 == self.root_key.0 && key.1 > ROOT && key.1 < OWN_NUMBERS;
        if self.stable && own && !self.entries.contains_key(&key.1) {
            return key.1;
        }
        self.next += 1;
        self.next
    }
}

impl Table {
    fn set_location(&mut self, ino: u64, parent: u64, name: OsString) {
        let Some(entry) = self.entries.get_mut(&ino) else {
            return;
        };
        let old = (entry.parent, std::mem::take(&mut entry.name));
        if self.by_name.get(&old) == Some(&ino) {
            self.by_name.remove(&old);
        }
        entry.parent = parent;
        entry.name = name.clone();
        self.by_name.insert((parent, name), ino);
    }
}

/// The open `O_PATH` fds of recently used inodes, at most `capacity` of them.
#[derive(Debug)]
struct FdCache {
    fds: lru::LruCache<u64, Arc<OwnedFd>>,
}

/// Inode table shared by every request thread. Locks are held only for map
/// updates, never across a syscall.
#[derive(Debug)]
pub struct Inodes {
    table: Mutex<Table>,
    cache: Mutex<FdCache>,
    /// The root's fd: always open, and the mount fd for `open_by_handle_at`.
    root: Arc<OwnedFd>,
    /// The backing mount, for deciding whether a file handle may be used.
    mount_id: Option<i32>,
}

impl Inodes {
    /// A table holding the root directory, caching at most `capacity` fds.
    /// With `file_handles` false, evicted inodes are always reopened by name.
    /// With `stable_numbers`, files show their backing inode numbers.
    pub fn new(
        root: OwnedFd,
        key: (u64, u64),
        capacity: usize,
        file_handles: bool,
        stable_numbers: bool,
    ) -> Inodes {
        let root = Arc::new(root);
        let mount_id = file_handles
            .then(|| FileId::usable_mount(root.as_raw_fd()))
            .flatten();
        let mut table = Table {
            next: OWN_NUMBERS,
            root_key: key,
            stable: stable_numbers,
            ..Table::default()
        };
        table.by_key.insert(key, ROOT);
        table.entries.insert(
            ROOT,
            Entry {
                inode: Arc::new(Inode {
                    key,
                    id: None,
                    pinned: Mutex::new(Some(Arc::clone(&root))),
                    backing: Mutex::default(),
                }),
                lookups: 1,
                parent: ROOT,
                name: OsString::new(),
            },
        );
        let capacity = NonZeroUsize::new(capacity.max(16)).expect("at least 16");
        Inodes {
            table: Mutex::new(table),
            cache: Mutex::new(FdCache {
                fds: lru::LruCache::new(capacity),
            }),
            root,
            mount_id,
        }
    }

    /// Whether inodes are reopened by file handle (else by name).
    pub fn uses_file_handles(&self) -> bool {
        self.mount_id.is_some()
    }

    /// The inode for a FUSE inode number, with an open fd of its backing file.
    pub fn get(&self, ino: INodeNo) -> Result<Node, Errno> {
        self.node(ino.0, 0)
    }

    /// The backing (device, inode) of a FUSE inode, without opening anything.
    pub fn key(&self, ino: u64) -> Option<(u64, u64)> {
        let table = self.table.lock().unwrap();
        table.entries.get(&ino).map(|e| e.inode.key)
    }

    fn node(&self, ino: u64, depth: usize) -> Result<Node, Errno> {
        let inode = {
            let table = self.table.lock().unwrap();
            Arc::clone(&table.entries.get(&ino).ok_or(Errno::ESTALE)?.inode)
        };
        let pinned = inode.pinned.lock().unwrap().clone();
        if let Some(fd) = pinned {
            return Ok(Node { inode, fd });
        }
        if let Some(fd) = self.cache.lock().unwrap().fds.get(&ino).cloned() {
            return Ok(Node { inode, fd });
        }
        let fd = match self.reopen(ino, &inode, depth) {
            Err(Errno::EMFILE | Errno::ENFILE) => {
                self.relieve();
                self.reopen(ino, &inode, depth)
            }
            opened => opened,
        };
        let fd = Arc::new(fd?);
        self.cache.lock().unwrap().fds.put(ino, Arc::clone(&fd));
        Ok(Node { inode, fd })
    }

    /// Opens an evicted inode's backing file again: by handle, else by name.
    fn reopen(&self, ino: u64, inode: &Inode, depth: usize) -> SysResult<OwnedFd> {
        if let Some(id) = &inode.id {
            match id.open(self.root.as_raw_fd()) {
                Ok(fd) => return Ok(fd),
                // A handle can go stale (the file was deleted behind the mount);
                // the name may still lead to a file of the same identity.
                Err(errno) => tracing::debug!("open_by_handle_at: {errno:?}; trying its name"),
            }
        }
        // Only now is the name needed: the last one it was seen under.
        let (parent, name) = {
            let table = self.table.lock().unwrap();
            let entry = table.entries.get(&ino).ok_or(Errno::ESTALE)?;
            (entry.parent, entry.name.clone())
        };
        if depth > 4096 || name.is_empty() {
            return Err(Errno::ESTALE);
        }
        let dir = self.node(parent, depth + 1)?;
        let fd = sys::openat(
            dir.raw(),
            &sys::component(&name)?,
            libc::O_PATH | libc::O_NOFOLLOW,
            0,
        )?;
        let st = sys::stat_fd(sys::raw(&fd))?;
        if (st.st_dev, st.st_ino) != inode.key {
            // Replaced behind the mount's back: this is not our file any more.
            return Err(Errno::ESTALE);
        }
        Ok(fd)
    }

    /// Records a successful lookup of `name` in `parent`, whose `O_PATH` fd is `fd`:
    /// reuses the inode of the same backing file or adds one. Returns the FUSE
    /// inode number.
    pub fn remember(&self, parent: u64, name: OsString, fd: OwnedFd, key: (u64, u64)) -> u64 {
        let known = {
            let mut table = self.table.lock().unwrap();
            match table.by_key.get(&key).copied() {
                Some(ino) => {
                    table.entries.get_mut(&ino).expect("indexes agree").lookups += 1;
                    table.set_location(ino, parent, name.clone());
                    Some(ino)
                }
                None => None,
            }
        };
        if let Some(ino) = known {
            self.cache.lock().unwrap().fds.put(ino, Arc::new(fd));
            return ino;
        }
        // The handle is taken outside the lock: it is a syscall.
        let id = self
            .mount_id
            .and_then(|mount| FileId::of(sys::raw(&fd), mount));
        let mut table = self.table.lock().unwrap();
        if let Some(&ino) = table.by_key.get(&key) {
            // Another thread added it meanwhile.
            table.entries.get_mut(&ino).expect("indexes agree").lookups += 1;
            table.set_location(ino, parent, name);
            return ino;
        }
        let ino = table.number_for(key);
        table.by_key.insert(key, ino);
        table.entries.insert(
            ino,
            Entry {
                inode: Arc::new(Inode {
                    key,
                    id,
                    pinned: Mutex::default(),
                    backing: Mutex::default(),
                }),
                lookups: 1,
                parent,
                name: OsString::new(),
            },
        );
        table.set_location(ino, parent, name);
        drop(table);
        self.cache.lock().unwrap().fds.put(ino, Arc::new(fd));
        ino
    }

    /// Drops `n` kernel references; forgets the inode when none remain, and
    /// says whether it did.
    pub fn forget(&self, ino: u64, n: u64) -> bool {
        if ino == ROOT {
            return false;
        }
        let mut table = self.table.lock().unwrap();
        let Some(entry) = table.entries.get_mut(&ino) else {
            return false;
        };
        entry.lookups = entry.lookups.saturating_sub(n);
        if entry.lookups == 0 {
            let entry = table.entries.remove(&ino).expect("just seen");
            table.by_key.remove(&entry.inode.key);
            let location = (entry.parent, entry.name);
            if table.by_name.get(&location) == Some(&ino) {
                table.by_name.remove(&location);
            }
            drop(table);
            self.cache.lock().unwrap().fds.pop(&ino);
            return true;
        }
        false
    }

    /// Every inode the kernel holds but the root, with the parent and name it
    /// was last seen under: what an invalidation of its caches names.
    pub fn known(&self) -> Vec<(u64, u64, OsString)> {
        let table = self.table.lock().unwrap();
        table
            .entries
            .iter()
            .filter(|(ino, _)| **ino != ROOT)
            .map(|(ino, entry)| (*ino, entry.parent, entry.name.clone()))
            .collect()
    }

    /// The inode last seen as `name` in `parent`, if the kernel holds it.
    pub fn at(&self, parent: u64, name: &OsStr) -> Option<u64> {
        let table = self.table.lock().unwrap();
        table.by_name.get(&(parent, name.to_os_string())).copied()
    }

    /// Keeps `node`'s fd open for as long as the kernel holds the inode: called when
    /// its last known name has gone away (unlink, rename over it), so that reopening
    /// by name would no longer find it. The node was taken before the name went.
    pub fn pin(&self, node: &Node) {
        *node.inode.pinned.lock().unwrap() = Some(Arc::clone(&node.fd));
    }

    /// Notes that the entry `parent/name` now lives at `new_parent/new_name`
    /// (rename). With `exchange`, the entry that was there moves the other way.
    pub fn renamed(&self, from: (u64, &OsString), to: (u64, &OsString), exchange: bool) {
        let mut table = self.table.lock().unwrap();
        let moved = table.by_name.get(&(from.0, from.1.clone())).copied();
        let displaced = table.by_name.get(&(to.0, to.1.clone())).copied();
        if let Some(ino) = moved {
            table.set_location(ino, to.0, to.1.clone());
        }
        if let (true, Some(ino)) = (exchange, displaced) {
            table.set_location(ino, from.0, from.1.clone());
        }
    }

    /// The directory and name an inode was last seen under: how to reach a symlink
    /// itself, which calls on its `O_PATH` fd cannot (utimensat).
    pub fn location(&self, ino: u64) -> Option<(Node, OsString)> {
        let (parent, name) = {
            let table = self.table.lock().unwrap();
            let entry = table.entries.get(&ino)?;
            (entry.parent, entry.name.clone())
        };
        if ino == ROOT {
            return None;
        }
        Some((self.get(INodeNo(parent)).ok()?, name))
    }

    /// The mount-relative path an inode was last seen at (`dir/file`, root is `""`).
    pub fn path(&self, ino: u64) -> String {
        let table = self.table.lock().unwrap();
        let mut parts = Vec::new();
        let mut current = ino;
        // Bounded walk: a corrupted chain must not loop forever.
        for _ in 0..4096 {
            if current == ROOT {
                break;
            }
            let Some(entry) = table.entries.get(&current) else {
                break;
            };
            parts.push(entry.name.to_string_lossy().into_owned());
            current = entry.parent;
        }
        parts.reverse();
        parts.join("/")
    }

    /// The path `name` would have inside directory `parent`.
    pub fn child_path(&self, parent: u64, name: &std::ffi::OsStr) -> String {
        let dir = self.path(parent);
        let name = name.to_string_lossy();
        if dir.is_empty() {
            name.into_owned()
        } else {
            format!("{dir}/{name}")
        }
    }

    /// Forgets every inode but the root (after a crash replaced the tree): the
    /// kernel's old inode numbers get ESTALE, fresh lookups get new inodes.
    pub fn reset_to_root(&self) {
        let mut table = self.table.lock().unwrap();
        table.entries.retain(|&ino, _| ino == ROOT);
        let root_key = table.entries[&ROOT].inode.key;
        table.by_key.retain(|key, _| *key == root_key);
        table.by_name.clear();
        drop(table);
        self.cache.lock().unwrap().fds.clear();
    }

    /// Closes the older half of the cached fds: called when an open fails with
    /// EMFILE/ENFILE, so that the caller's open can be retried.
    pub fn relieve(&self) {
        let mut cache = self.cache.lock().unwrap();
        let keep = cache.fds.len() / 2;
        while cache.fds.len() > keep {
            cache.fds.pop_lru();
        }
    }

    /// The inode number a directory entry shows for backing inode `backing` (readdir's
    /// `d_ino`): the number `stat` will show, as far as it can be told without a lookup.
    pub fn entry_number(&self, backing: u64) -> u64 {
        let table = self.table.lock().unwrap();
        if backing == table.root_key.1 {
            ROOT
        } else {
            backing
        }
    }
}

//! The inode table: one `O_PATH` fd per inode the kernel knows, with lookup counts,
//! and the name it was last seen under (to match rules' path globs).

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};

use fuser::{Errno, INodeNo};

/// The root directory's inode number, as FUSE fixes it.
pub const ROOT: u64 = 1;

/// One inode the kernel holds a reference to.
#[derive(Debug)]
pub struct Inode {
    /// `O_PATH` fd of the backing file: every operation goes through it, so the
    /// inode stays reachable even after renames or unlinks in the backing tree.
    pub fd: OwnedFd,
    /// Backing (device, inode), to give hard links one FUSE inode.
    pub key: (u64, u64),
    /// The kernel-passthrough backing id its passthrough opens share, while any is open.
    pub backing: Mutex<std::sync::Weak<fuser::BackingId>>,
}

impl Inode {
    /// The raw `O_PATH` fd.
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
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
    next: u64,
}

/// Inode table shared by every request thread. The lock is held only for map updates.
#[derive(Debug)]
pub struct Inodes {
    table: Mutex<Table>,
}

impl Inodes {
    /// A table holding the root directory.
    pub fn new(root: OwnedFd, key: (u64, u64)) -> Inodes {
        let mut table = Table {
            next: ROOT + 1,
            ..Table::default()
        };
        table.by_key.insert(key, ROOT);
        table.entries.insert(
            ROOT,
            Entry {
                inode: Arc::new(Inode {
                    fd: root,
                    key,
                    backing: Mutex::default(),
                }),
                lookups: 1,
                parent: ROOT,
                name: OsString::new(),
            },
        );
        Inodes {
            table: Mutex::new(table),
        }
    }

    /// The inode for a FUSE inode number.
    pub fn get(&self, ino: INodeNo) -> Result<Arc<Inode>, Errno> {
        let table = self.table.lock().unwrap();
        table
            .entries
            .get(&ino.0)
            .map(|e| Arc::clone(&e.inode))
            .ok_or(Errno::ESTALE)
    }

    /// Records a successful lookup of `name` in `parent`: reuses the inode of the same
    /// backing file (dropping the new fd) or adds one. Returns the FUSE inode number.
    pub fn remember(&self, parent: u64, name: OsString, fd: OwnedFd, key: (u64, u64)) -> u64 {
        let mut table = self.table.lock().unwrap();
        if let Some(&ino) = table.by_key.get(&key) {
            let entry = table
                .entries
                .get_mut(&ino)
                .expect("by_key and entries agree");
            entry.lookups += 1;
            entry.parent = parent;
            entry.name = name;
            return ino;
        }
        let ino = table.next;
        table.next += 1;
        table.by_key.insert(key, ino);
        table.entries.insert(
            ino,
            Entry {
                inode: Arc::new(Inode {
                    fd,
                    key,
                    backing: Mutex::default(),
                }),
                lookups: 1,
                parent,
                name,
            },
        );
        ino
    }

    /// Drops `n` kernel references; forgets the inode when none remain.
    pub fn forget(&self, ino: u64, n: u64) {
        if ino == ROOT {
            return;
        }
        let mut table = self.table.lock().unwrap();
        let Some(entry) = table.entries.get_mut(&ino) else {
            return;
        };
        entry.lookups = entry.lookups.saturating_sub(n);
        if entry.lookups == 0 {
            let key = entry.inode.key;
            table.entries.remove(&ino);
            table.by_key.remove(&key);
        }
    }

    /// Notes that the entry `parent/name` now lives at `new_parent/new_name`
    /// (rename). With `exchange`, the entry that was there moves the other way.
    pub fn renamed(&self, from: (u64, &OsString), to: (u64, &OsString), exchange: bool) {
        let mut table = self.table.lock().unwrap();
        let find = |table: &Table, (parent, name): (u64, &OsString)| {
            table
                .entries
                .iter()
                .find(|(_, e)| e.parent == parent && &e.name == name)
                .map(|(&ino, _)| ino)
        };
        let moved = find(&table, from);
        let displaced = if exchange { find(&table, to) } else { None };
        for (ino, (parent, name)) in [(moved, to), (displaced, from)] {
            if let Some(entry) = ino.and_then(|ino| table.entries.get_mut(&ino)) {
                entry.parent = parent;
                entry.name = name.clone();
            }
        }
    }

    /// The directory and name an inode was last seen under: how to reach a symlink
    /// itself, which calls on its `O_PATH` fd cannot (utimensat).
    pub fn location(&self, ino: u64) -> Option<(Arc<Inode>, OsString)> {
        let table = self.table.lock().unwrap();
        let entry = table.entries.get(&ino)?;
        let parent = table.entries.get(&entry.parent)?;
        (ino != ROOT).then(|| (Arc::clone(&parent.inode), entry.name.clone()))
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
    }

    /// How many inodes the kernel currently holds.
    pub fn len(&self) -> usize {
        self.table.lock().unwrap().entries.len()
    }
}

//! Under `--cache nfs`: what the NFS client does about files that are open
//! while their name goes away.
//!
//! - **Silly rename.** An NFS server keeps no open state (v3), so the client
//!   that unlinks a file it still has open renames it to `.nfsXXXX` in the
//!   same directory instead, and removes that name at the last close; a
//!   rename over an open file does the same to the file renamed over
//!   (Linux `nfs_sillyrename`; nfs(5) does not say it, the NFS FAQ does, and
//!   RFC 1813 section 4.4 explains why: "a file that is open and then
//!   removed ... will be inaccessible"). Here: the daemon renames the backing
//!   file and unlinks it when the mount's last handle of it closes.
//! - **ESTALE.** A file another client removed (or replaced by a rename) is
//!   gone on the server, and a request on a handle of it fails with ESTALE
//!   (RFC 1813, NFS3ERR_STALE). Here: a handle whose backing file has no
//!   name left (`st_nlink` 0) answers ESTALE. Pages the kernel has cached
//!   are still served, as the NFS client serves them.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use fuser::{Errno, INodeNo};

use super::arrivals;
use crate::fs::sys::{self, SysResult};
use crate::fs::Inner;

/// Handles open per inode, and the silly names of those unlinked while open.
#[derive(Debug, Default)]
pub(in crate::fs) struct OpenFiles {
    state: Mutex<State>,
    /// The `XXXX` counter of silly names.
    counter: AtomicU32,
}

#[derive(Debug, Default)]
struct State {
    open: HashMap<u64, usize>,
    /// Inode -> its silly names (one per hard link unlinked), while open.
    silly: HashMap<u64, Vec<Silly>>,
}

/// A file this client renamed to a `.nfs` name: where, and which file (the
/// backing file's device and inode numbers), so that the last close removes
/// that file and never another one found under the name.
#[derive(Debug, Clone)]
struct Silly {
    parent: u64,
    name: OsString,
    file: (u64, u64),
}

impl OpenFiles {
    pub(in crate::fs) fn opened(&self, ino: u64) {
        *self.state.lock().unwrap().open.entry(ino).or_default() += 1;
    }

    /// A handle of `ino` closed: the silly names to remove if it was the last.
    fn closed(&self, ino: u64) -> Vec<Silly> {
        let mut state = self.state.lock().unwrap();
        let Some(count) = state.open.get_mut(&ino) else {
            return Vec::new();
        };
        *count -= 1;
        if *count > 0 {
            return Vec::new();
        }
        state.open.remove(&ino);
        state.silly.remove(&ino).unwrap_or_default()
    }

    fn is_open(&self, ino: u64) -> bool {
        self.state.lock().unwrap().open.contains_key(&ino)
    }

    /// A silly rename of `ino` is done: its name is held until the last
    /// close, or, if that close came while the rename ran (it found no name
    /// to remove), handed back for the caller to remove now.
    fn renamed(&self, ino: u64, silly: Silly) -> Option<Silly> {
        let mut state = self.state.lock().unwrap();
        if !state.open.contains_key(&ino) {
            return Some(silly);
        }
        state.silly.entry(ino).or_default().push(silly);
        None
    }

    /// Whether `parent/name` is a silly name this client holds (its file is
    /// open: the entry goes at the last close).
    fn is_silly(&self, parent: u64, name: &OsStr) -> bool {
        self.state
            .lock()
            .unwrap()
            .silly
            .values()
            .flatten()
            .any(|s| s.parent == parent && s.name == name)
    }
}

/// The silly names of a file whose last handle closed, removed when this is
/// dropped: at the end of the RELEASE's job, or when a rule fails it.
pub(in crate::fs) struct SillyDelete {
    inner: Arc<Inner>,
    names: Vec<Silly>,
}

impl Drop for SillyDelete {
    fn drop(&mut self) {
        for silly in self.names.drain(..) {
            self.inner.remove_silly(silly);
        }
    }
}

impl Inner {
    /// A handle of `ino` was opened (counted only where silly renames happen).
    pub(in crate::fs) fn file_opened(&self, ino: u64) {
        if let Some(nfs) = self.nfs() {
            nfs.open_files.opened(ino);
        }
    }

    /// A handle of `ino` closed: at the last one, its silly names go when
    /// the returned guard is dropped (after what the RELEASE sends: Linux
    /// writes a file back before its silly delete).
    ///
    /// Called as the RELEASE arrives, before anything it waits for: the
    /// kernel sends RELEASE after close(2) has returned, so the caller's
    /// next request (an unlink) may already be on another daemon thread, and
    /// must find the file closed, as the NFS client's own count is dropped
    /// within close(2) (`__fput` -> `nfs_file_release`).
    pub(in crate::fs) fn file_closed(self: &Arc<Self>, ino: u64) -> SillyDelete {
        let names = self
            .nfs()
            .map(|nfs| nfs.open_files.closed(ino))
            .unwrap_or_default();
        SillyDelete {
            inner: Arc::clone(self),
            names,
        }
    }

    /// Removes a silly name at its file's last close.
    fn remove_silly(&self, Silly { parent, name, file }: Silly) {
        let removed = (|| {
            let dir = self.inodes.get(INodeNo(parent))?;
            let cname = sys::component(&name)?;
            // Only the file this client renamed there: another client
            // may have moved it and put another file under the name.
            let st = sys::stat_at(dir.raw(), &cname, libc::AT_SYMLINK_NOFOLLOW)?;
            if (st.st_dev, st.st_ino) != file {
                tracing::warn!("silly-renamed {name:?} is another file now: left alone");
                return Ok(());
            }
            if let Some(node) = self.inodes.at(parent, &name) {
                self.inodes.pin(&self.inodes.get(INodeNo(node))?);
            }
            sys::unlink_at(dir.raw(), &cname, 0)
        })();
        match removed {
            Ok(()) | Err(Errno::ENOENT) => {}
            Err(errno) => tracing::warn!("cannot remove silly-renamed {name:?}: {errno:?}"),
        }
    }

    /// Under `--cache nfs`: EBUSY for an unlink of, or a rename from or over,
    /// a silly name this client holds while its file is open (Linux:
    /// `nfs_sillyrename` answers -EBUSY for a dentry already
    /// DCACHE_NFSFS_RENAMED; fs/nfs/unlink.c). The name stays until the last
    /// close, which removes it.
    pub(in crate::fs) fn check_not_silly(&self, parent: u64, name: &OsStr) -> SysResult<()> {
        if self
            .nfs()
            .is_some_and(|nfs| nfs.open_files.is_silly(parent, name))
        {
            return Err(Errno::EBUSY);
        }
        Ok(())
    }

    /// Before `parent/name` is unlinked or renamed over by request number
    /// `unique`: if this client has the file open, it is renamed to a
    /// `.nfsXXXX` name instead and `true` returned (the unlink is done; a
    /// rename can go ahead).
    pub(in crate::fs) fn silly_rename(
        &self,
        unique: u64,
        parent: u64,
        dir: &crate::fs::inodes::Node,
        name: &OsStr,
    ) -> SysResult<bool> {
        let Some(nfs) = self.nfs() else {
            return Ok(false);
        };
        self.check_not_silly(parent, name)?;
        let Some(ino) = self.inodes.at(parent, name) else {
            return Ok(false);
        };
        if !nfs.open_files.is_open(ino) {
            return Ok(false);
        }
        // A RELEASE sent before this request may still be on another
        // thread (see nfs/arrivals.rs): wait for it, then look again.
        if !nfs.arrivals.wait_for_earlier(unique, arrivals::GAP_TIMEOUT) {
            tracing::debug!("silly rename of {name:?}: gave up on an earlier request");
        }
        if !nfs.open_files.is_open(ino) {
            return Ok(false);
        }
        let cname = sys::component(name)?;
        let st = sys::stat_at(dir.raw(), &cname, libc::AT_SYMLINK_NOFOLLOW)?;
        let fileid = st.st_ino;
        let silly = loop {
            // Linux's form: ".nfs" + 16 hex digits of the file id + 8 of a counter.
            let n = nfs.open_files.counter.fetch_add(1, Ordering::Relaxed);
            let silly = OsString::from(format!(".nfs{fileid:016x}{n:08x}"));
            match sys::rename_at(
                dir.raw(),
                &cname,
                dir.raw(),
                &sys::component(&silly)?,
                libc::RENAME_NOREPLACE,
            ) {
                Err(Errno::EEXIST) => continue,
                other => break other.map(|()| silly)?,
            }
        };
        self.inodes
            .renamed((parent, &name.to_os_string()), (parent, &silly), false);
        let silly = Silly {
            parent,
            name: silly,
            file: (st.st_dev, st.st_ino),
        };
        // The last close may have come while the file was being renamed.
        if let Some(closed) = nfs.open_files.renamed(ino, silly) {
            self.remove_silly(closed);
        }
        Ok(true)
    }

    /// Under `--cache nfs`, ESTALE for a handle whose file has no name left
    /// (another client removed it: this one's own unlinks are silly renames).
    pub(in crate::fs) fn check_not_stale(&self, fd: std::os::fd::RawFd) -> SysResult<()> {
        if self.nfs().is_some() && sys::stat_fd(fd)?.st_nlink == 0 {
            return Err(Errno::ESTALE);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn silly(name: &str) -> Silly {
        Silly {
            parent: 1,
            name: name.into(),
            file: (7, 42),
        }
    }

    fn names(names: &[Silly]) -> Vec<&OsStr> {
        names.iter().map(|s| s.name.as_os_str()).collect()
    }

    #[test]
    fn a_silly_name_goes_at_the_last_close() {
        let files = OpenFiles::default();
        files.opened(5);
        files.opened(5);
        assert!(
            files.renamed(5, silly(".nfs1")).is_none(),
            "held while open"
        );
        assert!(files.is_silly(1, OsStr::new(".nfs1")));
        assert!(files.closed(5).is_empty(), "one handle is still open");
        assert_eq!(names(&files.closed(5)), [".nfs1"]);
        assert!(!files.is_silly(1, OsStr::new(".nfs1")));
    }

    #[test]
    fn a_close_during_the_rename_hands_the_name_back() {
        let files = OpenFiles::default();
        files.opened(5);
        // The last close comes while the rename runs: nothing to remove yet.
        assert!(files.closed(5).is_empty());
        let back = files.renamed(5, silly(".nfs1"));
        assert_eq!(back.map(|s| s.name), Some(".nfs1".into()));
        assert!(!files.is_silly(1, OsStr::new(".nfs1")), "nothing kept");
    }

    #[test]
    fn each_hard_link_unlinked_while_open_keeps_its_own_name() {
        let files = OpenFiles::default();
        files.opened(5);
        assert!(files.renamed(5, silly(".nfs1")).is_none());
        assert!(files.renamed(5, silly(".nfs2")).is_none());
        assert_eq!(names(&files.closed(5)), [".nfs1", ".nfs2"]);
    }
}

//! Open file and directory handles.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use fuser::{Errno, FileHandle};

/// A directory listing taken at `opendir`/rewind time, served by offset.
#[derive(Debug, Default)]
pub struct Listing {
    /// (backing inode, file type, name) of every entry, `.` and `..` included.
    pub entries: Vec<(u64, fuser::FileType, std::ffi::OsString)>,
    /// Whether `entries` has been read.
    pub filled: bool,
}

/// One open file or directory.
#[derive(Debug)]
pub struct Handle {
    /// The backing fd, opened with the caller's access mode.
    pub fd: OwnedFd,
    /// For directories: the listing being read.
    pub listing: Mutex<Listing>,
    /// Opened before a crash: every operation on it fails with EIO.
    pub stale: std::sync::atomic::AtomicBool,
    /// A write-back error of the file that this open file description has not
    /// reported yet (errseq): its next fsync fails once.
    pub unreported_write_back_error: std::sync::atomic::AtomicBool,
    /// Under `--cache nfs`: the count of the file's failed WRITEs this open
    /// file description has reported (errseq: sampled at open, advanced by
    /// fsync).
    pub wb_seen: AtomicU64,
    /// For a file opened in kernel passthrough: its backing id (shared per inode).
    pub backing: Option<Arc<fuser::BackingId>>,
    /// Opened with FOPEN_DIRECT_IO: its reads and writes are the caller's own,
    /// so a short count reaches the caller. On any other handle they fill or
    /// flush the page cache, where the kernel takes a short read for the end
    /// of the file.
    pub direct_io: bool,
}

impl Handle {
    /// The bytes a read or write of `len` moves under a rule's short count:
    /// shortened only where the caller sees the count (a direct-I/O handle).
    pub fn shortened(&self, len: usize, short_to: Option<u64>) -> usize {
        match short_to {
            Some(short) if self.direct_io => (short as usize).min(len),
            _ => len,
        }
    }
}

impl Handle {
    /// The raw backing fd.
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Whether it was opened for writing (its backing fd's access mode).
    pub fn writable(&self) -> bool {
        // SAFETY: F_GETFL on an fd we own.
        let flags = unsafe { libc::fcntl(self.raw(), libc::F_GETFL) };
        flags >= 0 && flags & libc::O_ACCMODE != libc::O_RDONLY
    }
}

/// Open handles by FUSE file handle number.
#[derive(Debug, Default)]
pub struct Handles {
    map: Mutex<HashMap<u64, Arc<Handle>>>,
    next: AtomicU64,
}

impl Handles {
    /// Registers an open fd; returns its handle number.
    pub fn insert(
        &self,
        fd: OwnedFd,
        backing: Option<Arc<fuser::BackingId>>,
        direct_io: bool,
    ) -> FileHandle {
        let fh = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let handle = Arc::new(Handle {
            fd,
            listing: Mutex::default(),
            stale: Default::default(),
            unreported_write_back_error: Default::default(),
            wb_seen: Default::default(),
            backing,
            direct_io,
        });
        self.map.lock().unwrap().insert(fh, handle);
        FileHandle(fh)
    }

    /// The handle for a number the kernel gave back.
    pub fn get(&self, fh: FileHandle) -> Result<Arc<Handle>, Errno> {
        let handle = self
            .map
            .lock()
            .unwrap()
            .get(&fh.0)
            .cloned()
            .ok_or(Errno::EBADF)?;
        if handle.stale.load(Ordering::SeqCst) {
            return Err(Errno::EIO);
        }
        Ok(handle)
    }

    /// Marks every open handle stale (a crash happened).
    pub fn stale_all(&self) {
        for handle in self.map.lock().unwrap().values() {
            handle.stale.store(true, Ordering::SeqCst);
        }
    }

    /// A write-back error hit the file `(dev, ino)`: every other handle open on
    /// it reports the error at its next fsync.
    pub fn flag_write_back_error(&self, except: u64, file: (u64, u64)) {
        for (fh, handle) in self.map.lock().unwrap().iter() {
            if *fh == except {
                continue;
            }
            let Ok(st) = super::sys::stat_fd(handle.raw()) else {
                continue;
            };
            if (st.st_dev, st.st_ino) == file {
                handle
                    .unreported_write_back_error
                    .store(true, Ordering::SeqCst);
            }
        }
    }

    /// Removes a handle; its fd closes when the last in-flight request using it ends.
    pub fn remove(&self, fh: FileHandle) -> Option<Arc<Handle>> {
        self.map.lock().unwrap().remove(&fh.0)
    }

    /// How many handles are open in kernel passthrough.
    pub fn passthrough(&self) -> usize {
        self.map
            .lock()
            .unwrap()
            .values()
            .filter(|h| h.backing.is_some())
            .count()
    }

    /// How many handles are open.
    pub fn len(&self) -> usize {
        self.map.lock().unwrap().len()
    }
}

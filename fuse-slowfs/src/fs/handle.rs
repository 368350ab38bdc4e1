//! Kernel file handles (`name_to_handle_at` / `open_by_handle_at`): a few bytes
//! that name a backing inode for as long as it exists, so the daemon can close its
//! fd and open it again later without a path.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use fuser::Errno;

use super::sys::{cvt, SysResult};

/// The kernel's upper bound on a handle's size (`MAX_HANDLE_SZ`).
const MAX_HANDLE_SZ: usize = 128;

/// An encoded `struct file_handle`: header (`handle_bytes`, `handle_type`) and the
/// opaque bytes, in `u32` words so the header is aligned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileId {
    words: Box<[u32]>,
}

impl FileId {
    /// The handle of the file `fd` refers to, if it lives on mount `mount` (a handle
    /// is only good with an fd of its own mount).
    pub fn of(fd: RawFd, mount: i32) -> Option<FileId> {
        let (id, mount_id) = Self::name(fd).ok()?;
        (mount_id == mount).then_some(id)
    }

    fn name(fd: RawFd) -> SysResult<(FileId, i32)> {
        let mut words = vec![0u32; 2 + MAX_HANDLE_SZ / 4];
        words[0] = MAX_HANDLE_SZ as u32;
        let mut mount_id = 0;
        // SAFETY: `words` is a file_handle header followed by MAX_HANDLE_SZ bytes,
        // as handle_bytes says; the kernel writes at most that much.
        cvt(unsafe {
            libc::name_to_handle_at(
                fd,
                c"".as_ptr(),
                words.as_mut_ptr().cast(),
                &mut mount_id,
                libc::AT_EMPTY_PATH,
            )
        })?;
        let len = 2 + (words[0] as usize).div_ceil(4);
        words.truncate(len);
        Ok((
            FileId {
                words: words.into_boxed_slice(),
            },
            mount_id,
        ))
    }

    /// Opens the file `O_PATH`, through any fd of the same mount.
    pub fn open(&self, mount_fd: RawFd) -> SysResult<OwnedFd> {
        let mut words = self.words.to_vec();
        // SAFETY: `words` holds a handle the kernel produced, header included.
        let fd = cvt(unsafe {
            libc::open_by_handle_at(
                mount_fd,
                words.as_mut_ptr().cast(),
                libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        })?;
        // SAFETY: a fresh fd that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// The mount id of `root` if handles work there: the filesystem can encode
    /// them and this process may open them (CAP_DAC_READ_SEARCH). `None` means
    /// inodes are reopened by name.
    pub fn usable_mount(root: RawFd) -> Option<i32> {
        let (id, mount) = match Self::name(root) {
            Ok(named) => named,
            Err(errno) => {
                tracing::info!("file handles unavailable ({errno:?}): inodes are reopened by name");
                return None;
            }
        };
        match id.open(root) {
            Ok(_) => Some(mount),
            Err(errno) => {
                let why = if errno == Errno::EPERM {
                    "no CAP_DAC_READ_SEARCH"
                } else {
                    "open_by_handle_at failed"
                };
                tracing::info!(
                    "file handles unusable ({why}, {errno:?}): inodes are reopened by name"
                );
                None
            }
        }
    }
}

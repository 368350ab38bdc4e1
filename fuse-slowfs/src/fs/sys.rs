//! Thin wrappers over the `*at` syscalls the filesystem uses, returning FUSE errnos.
//!
//! Every name passed here is a single path component from the kernel, resolved
//! relative to a directory fd with `O_NOFOLLOW`/`AT_SYMLINK_NOFOLLOW`: nothing can
//! walk out of the backing directory through `..` or a symlink.

use std::ffi::{CStr, CString, OsStr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

use fuser::Errno;

/// Result of a syscall wrapper.
pub type SysResult<T> = Result<T, Errno>;

fn last_errno() -> Errno {
    Errno::from_i32(
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO),
    )
}

/// Turns a `-1 and errno` return into an `Err`.
pub fn cvt<T: Copy + PartialOrd + Default>(ret: T) -> SysResult<T> {
    if ret < T::default() {
        Err(last_errno())
    } else {
        Ok(ret)
    }
}

/// A single path component as a C string; rejects `.`, `..`, `/` and NUL.
pub fn component(name: &OsStr) -> SysResult<CString> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
        return Err(Errno::EINVAL);
    }
    CString::new(bytes).map_err(|_| Errno::EINVAL)
}

const EMPTY: &CStr = c"";

/// `/proc/self/fd/N`: the way to reach a file through an `O_PATH` fd for calls that
/// do not take one directly.
pub fn proc_path(fd: RawFd) -> CString {
    CString::new(format!("/proc/self/fd/{fd}")).expect("no NUL in a number")
}

fn owned(fd: RawFd) -> OwnedFd {
    // SAFETY: `fd` was just returned by a successful open call and is ours alone.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// `openat(dir, name, flags, mode)`.
pub fn openat(dir: RawFd, name: &CStr, flags: i32, mode: u32) -> SysResult<OwnedFd> {
    // SAFETY: valid C string; the returned fd is checked before use.
    let fd = cvt(unsafe { libc::openat(dir, name.as_ptr(), flags | libc::O_CLOEXEC, mode) })?;
    Ok(owned(fd))
}

/// Reopens the file behind an `O_PATH` fd with real access flags.
pub fn reopen(fd: RawFd, flags: i32) -> SysResult<OwnedFd> {
    let flags = flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY | libc::O_NOFOLLOW);
    openat(libc::AT_FDCWD, &proc_path(fd), flags, 0)
}

/// `fstatat(fd, "", AT_EMPTY_PATH)`: the attributes of the file an fd refers to.
pub fn stat_fd(fd: RawFd) -> SysResult<libc::stat> {
    stat_at(fd, EMPTY, libc::AT_EMPTY_PATH)
}

/// Whether a file mode carries set-ID bits a write by some caller must drop:
/// set-user-ID, or set-group-ID (dropped with group-execute always, without it
/// for a caller outside the file's group).
pub fn is_privileged(mode: u32) -> bool {
    mode & (libc::S_ISUID | libc::S_ISGID) != 0
}

/// Who asked: FUSE's caller ids, for decisions the kernel would take with
/// the caller's credentials.
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    /// Thread id (its /proc entry holds the groups).
    pub pid: u32,
    /// Effective user id.
    pub uid: u32,
    /// Effective group id.
    pub gid: u32,
}

impl Caller {
    /// The request's caller.
    pub fn of(req: &fuser::Request) -> Caller {
        Caller {
            pid: req.pid(),
            uid: req.uid(),
            gid: req.gid(),
        }
    }

    /// Whether the caller is in group `gid` (its own or a supplementary one;
    /// root counts as in every group, as CAP_FSETID does).
    pub fn in_group(&self, gid: u32) -> bool {
        if self.uid == 0 || self.gid == gid {
            return true;
        }
        std::fs::read_to_string(format!("/proc/{}/status", self.pid)).is_ok_and(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Groups:"))
                .is_some_and(|groups| groups.split_whitespace().any(|g| g.parse() == Ok(gid)))
        })
    }
}

/// Drops set-ID bits from the file behind `fd` as the kernel does when a caller
/// without CAP_FSETID writes, allocates or truncates it (`setattr_should_drop_sgid`):
/// set-user-ID always; set-group-ID when group-execute is set, or when the
/// caller is not in the file's group. The mount negotiates
/// FUSE_HANDLE_KILLPRIV_V2, which makes this the daemon's job; the daemon itself
/// holds CAP_FSETID, so the backing filesystem would not do it for its writes.
pub fn drop_privileges(fd: RawFd, caller: Caller) -> SysResult<bool> {
    let st = stat_fd(fd)?;
    let mode = st.st_mode;
    if !is_privileged(mode) || caller.uid == 0 {
        return Ok(false);
    }
    let mut kept = mode & 0o7777 & !libc::S_ISUID;
    if mode & libc::S_IXGRP != 0 || !caller.in_group(st.st_gid) {
        kept &= !libc::S_ISGID;
    }
    if kept == mode & 0o7777 {
        return Ok(false);
    }
    // SAFETY: valid C string for a path through /proc to an fd we own.
    check(unsafe { libc::chmod(proc_path(fd).as_ptr(), kept) })?;
    Ok(true)
}

/// Drops set-group-ID from the file behind `fd` when `caller` is not in its
/// group (and not root): what a mode change by such a caller does.
pub fn drop_group_id_unless_in_group(fd: RawFd, caller: Caller) -> SysResult<()> {
    let st = stat_fd(fd)?;
    if st.st_mode & libc::S_ISGID != 0 && !caller.in_group(st.st_gid) {
        let kept = st.st_mode & 0o7777 & !libc::S_ISGID;
        // SAFETY: valid C string for a path through /proc to an fd we own.
        check(unsafe { libc::chmod(proc_path(fd).as_ptr(), kept) })?;
    }
    Ok(())
}

/// Runs `create` with the file-creation mask `umask` in force for this thread
/// alone. Each thread that creates gets its own filesystem context once
/// (`unshare(CLONE_FS)`, as virtiofsd does), so the mask of one request never leaks
/// into another's; the backing filesystem then applies either the mask or the
/// parent's default ACL, exactly as for a local caller.
pub fn with_umask<T>(umask: u32, create: impl FnOnce() -> SysResult<T>) -> SysResult<T> {
    thread_local! {
        static OWN_FS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if !OWN_FS.get() {
        // SAFETY: unshare(CLONE_FS) only detaches this thread's cwd/root/umask.
        check(unsafe { libc::unshare(libc::CLONE_FS) })?;
        OWN_FS.set(true);
    }
    // SAFETY: sets this thread's own mask (unshared above).
    unsafe { libc::umask(umask & 0o777) };
    create()
}

/// `fstatat(dir, name, flags | AT_SYMLINK_NOFOLLOW)`.
pub fn stat_at(dir: RawFd, name: &CStr, flags: i32) -> SysResult<libc::stat> {
    // SAFETY: zeroed stat is a valid out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    cvt(unsafe {
        libc::fstatat(
            dir,
            name.as_ptr(),
            &mut st,
            flags | libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    Ok(st)
}

/// `pread` into a fresh buffer of `len` bytes, truncated to what was read.
pub fn pread(fd: RawFd, len: usize, offset: u64) -> SysResult<Vec<u8>> {
    let mut buf = vec![0u8; len];
    // SAFETY: buf is valid for len bytes.
    let n = cvt(unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), len, offset as i64) })?;
    buf.truncate(n as usize);
    Ok(buf)
}

/// `pwrite` of all of `data` (one call; the count it returns is the count written).
pub fn pwrite(fd: RawFd, data: &[u8], offset: u64) -> SysResult<usize> {
    // SAFETY: data is valid for its length.
    let n = cvt(unsafe { libc::pwrite(fd, data.as_ptr().cast(), data.len(), offset as i64) })?;
    Ok(n as usize)
}

/// Where a `pwrite` of `n` bytes at `offset` really landed: at the end of the file
/// when the fd is in append mode (Linux ignores the offset then).
pub fn written_at(fd: RawFd, offset: u64, n: usize) -> u64 {
    // SAFETY: plain fcntl on a valid fd.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags >= 0 && flags & libc::O_APPEND != 0 {
        if let Ok(st) = stat_fd(fd) {
            return (st.st_size as u64).saturating_sub(n as u64);
        }
    }
    offset
}

/// `copy_file_range(2)` of up to `len` bytes from `src` at `offset_in` to
/// `dst` at `offset_out`; how many were copied.
pub fn copy_file_range(
    src: RawFd,
    offset_in: u64,
    dst: RawFd,
    offset_out: u64,
    len: usize,
) -> SysResult<usize> {
    let (mut off_in, mut off_out) = (offset_in as i64, offset_out as i64);
    // SAFETY: plain syscall with valid offset pointers.
    let n = cvt(unsafe { libc::copy_file_range(src, &mut off_in, dst, &mut off_out, len, 0) })?;
    Ok(n as usize)
}

/// close(dup(fd)): what close(2) would do on the backing file (NFS-style
/// backing filesystems report write-back errors here), without closing `fd`.
pub fn flush(fd: RawFd) -> SysResult<()> {
    // SAFETY: dup of a valid fd; the copy is closed at once.
    let copy = cvt(unsafe { libc::dup(fd) })?;
    check(unsafe { libc::close(copy) })
}

/// `readlinkat(fd, "")` on an `O_PATH` fd of a symlink.
pub fn readlink_fd(fd: RawFd) -> SysResult<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: buf is valid for its length.
    let n =
        cvt(unsafe { libc::readlinkat(fd, EMPTY.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) })?;
    buf.truncate(n as usize);
    Ok(buf)
}

/// Runs a libc call that returns `c_int`, mapping failure to the errno.
pub fn check(ret: libc::c_int) -> SysResult<()> {
    cvt(ret).map(drop)
}

/// Sets the owner of `name` in `dir` (or of `dir` itself when `name` is empty), never
/// following symlinks. `u32::MAX` leaves a field unchanged.
pub fn chown_at(dir: RawFd, name: &CStr, uid: u32, gid: u32) -> SysResult<()> {
    let flags = libc::AT_SYMLINK_NOFOLLOW
        | if name.is_empty() {
            libc::AT_EMPTY_PATH
        } else {
            0
        };
    // SAFETY: plain syscall with a valid C string.
    check(unsafe { libc::fchownat(dir, name.as_ptr(), uid, gid, flags) })
}

/// Raw fd of anything that has one, for brevity at call sites.
pub fn raw(fd: &impl AsRawFd) -> RawFd {
    fd.as_raw_fd()
}

/// `mknodat(dir, name, mode, rdev)`.
pub fn mknod_at(dir: RawFd, name: &CStr, mode: u32, rdev: u64) -> SysResult<()> {
    // SAFETY: plain syscall with a valid C string.
    check(unsafe { libc::mknodat(dir, name.as_ptr(), mode, rdev) })
}

/// `mkdirat(dir, name, mode)`.
pub fn mkdir_at(dir: RawFd, name: &CStr, mode: u32) -> SysResult<()> {
    // SAFETY: plain syscall with a valid C string.
    check(unsafe { libc::mkdirat(dir, name.as_ptr(), mode) })
}

/// `symlinkat(target, dir, name)`.
pub fn symlink_at(target: &CStr, dir: RawFd, name: &CStr) -> SysResult<()> {
    // SAFETY: plain syscall with valid C strings.
    check(unsafe { libc::symlinkat(target.as_ptr(), dir, name.as_ptr()) })
}

/// `renameat2(from_dir, from, to_dir, to, flags)` (RENAME_NOREPLACE, RENAME_EXCHANGE, ...).
pub fn rename_at(
    from_dir: RawFd,
    from: &CStr,
    to_dir: RawFd,
    to: &CStr,
    flags: u32,
) -> SysResult<()> {
    // SAFETY: plain syscall with valid C strings.
    check(unsafe { libc::renameat2(from_dir, from.as_ptr(), to_dir, to.as_ptr(), flags) })
}

/// `linkat(fd, "", dir, name, AT_EMPTY_PATH)`: a new name for the file behind `fd`.
pub fn link_fd_at(fd: RawFd, dir: RawFd, name: &CStr) -> SysResult<()> {
    // SAFETY: plain syscall with valid C strings.
    check(unsafe { libc::linkat(fd, EMPTY.as_ptr(), dir, name.as_ptr(), libc::AT_EMPTY_PATH) })
}

/// `unlinkat(dir, name, flags)` (AT_REMOVEDIR for a directory).
pub fn unlink_at(dir: RawFd, name: &CStr, flags: i32) -> SysResult<()> {
    // SAFETY: plain syscall with a valid C string.
    check(unsafe { libc::unlinkat(dir, name.as_ptr(), flags) })
}

/// `fallocate(fd, mode, offset, length)`.
pub fn fallocate(fd: RawFd, mode: i32, offset: u64, length: u64) -> SysResult<()> {
    // SAFETY: plain syscall on an fd.
    check(unsafe { libc::fallocate(fd, mode, offset as i64, length as i64) })
}

/// `lseek(fd, offset, whence)`: the new offset.
pub fn lseek(fd: RawFd, offset: i64, whence: i32) -> SysResult<i64> {
    // SAFETY: plain syscall on an fd.
    cvt(unsafe { libc::lseek(fd, offset, whence) })
}

/// `fsync(fd)`, or `fdatasync(fd)` when `data_only`.
pub fn sync(fd: RawFd, data_only: bool) -> SysResult<()> {
    // SAFETY: plain syscalls on an fd.
    check(unsafe {
        if data_only {
            libc::fdatasync(fd)
        } else {
            libc::fsync(fd)
        }
    })
}

/// `struct mount_attr` of mount_setattr(2).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// The access-time bits of `MOUNT_ATTR_*` (`MOUNT_ATTR__ATIME`).
const MOUNT_ATTR_ATIME_MASK: u64 = 0x70;

/// A detached clone of the mount tree at `dir` (open_tree(2) with
/// `OPEN_TREE_CLONE`, submounts included) whose mounts get the `MOUNT_ATTR_*`
/// access-time bits `atime` (plus `MOUNT_ATTR_NODIRATIME` if asked). Files
/// opened through it keep that policy wherever they are read, kernel
/// passthrough included: the kernel reads a backing file at the path the
/// daemon opened it by. Needs CAP_SYS_ADMIN.
pub fn atime_clone(dir: &std::path::Path, atime: u64, nodiratime: bool) -> SysResult<OwnedFd> {
    let path = CString::new(dir.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)?;
    let flags = 0x1 /* OPEN_TREE_CLONE */ | libc::O_CLOEXEC as u32 | libc::AT_RECURSIVE as u32;
    // SAFETY: a valid C path; the returned fd is checked before use.
    let fd =
        cvt(unsafe { libc::syscall(libc::SYS_open_tree, libc::AT_FDCWD, path.as_ptr(), flags) })?;
    let tree = owned(fd as RawFd);
    let nodiratime_bit = 0x80; // MOUNT_ATTR_NODIRATIME
    let attr = MountAttr {
        attr_set: atime | if nodiratime { nodiratime_bit } else { 0 },
        attr_clr: MOUNT_ATTR_ATIME_MASK | nodiratime_bit,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: `tree` is an open mount fd, the path is empty (AT_EMPTY_PATH) and
    // `attr` a properly sized mount_attr that outlives the call.
    cvt(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            EMPTY.as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })?;
    Ok(tree)
}

/// Where an attribute change finds its file.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// An open fd of it.
    Fd(RawFd),
    /// A path to it (a `/proc/self/fd` one), followed.
    Path(&'a CStr),
    /// Its entry `name` in directory `dir`, the entry itself (for times: a
    /// symlink's own).
    At(RawFd, &'a CStr),
}

/// chmod(2) through `target`.
pub fn chmod(target: Target<'_>, mode: u32) -> SysResult<()> {
    // SAFETY: plain syscalls on valid fds and C strings.
    check(unsafe {
        match target {
            Target::Fd(fd) => libc::fchmod(fd, mode),
            Target::Path(path) => libc::chmod(path.as_ptr(), mode),
            Target::At(dir, name) => libc::fchmodat(dir, name.as_ptr(), mode, 0),
        }
    })
}

/// truncate(2) through `target` (`At` is not a truncatable target: EINVAL).
pub fn truncate(target: Target<'_>, len: u64) -> SysResult<()> {
    // SAFETY: plain syscalls on valid fds and C strings.
    check(unsafe {
        match target {
            Target::Fd(fd) => libc::ftruncate(fd, len as libc::off_t),
            Target::Path(path) => libc::truncate(path.as_ptr(), len as libc::off_t),
            Target::At(..) => return Err(Errno::EINVAL),
        }
    })
}

/// Sets access and modification times (`times`, as utimensat(2) takes them).
pub fn set_times(target: Target<'_>, times: &[libc::timespec; 2]) -> SysResult<()> {
    // SAFETY: times is a valid two-element array; C strings are valid.
    check(unsafe {
        match target {
            Target::Fd(fd) => libc::futimens(fd, times.as_ptr()),
            Target::Path(path) => libc::utimensat(libc::AT_FDCWD, path.as_ptr(), times.as_ptr(), 0),
            Target::At(dir, name) => libc::utimensat(
                dir,
                name.as_ptr(),
                times.as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            ),
        }
    })
}

/// fstatvfs(2).
pub fn statvfs(fd: RawFd) -> SysResult<libc::statvfs> {
    // SAFETY: zeroed statvfs is a valid out-parameter.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    check(unsafe { libc::fstatvfs(fd, &mut st) }).map(|()| st)
}

/// access(2) of `path` with the daemon's credentials.
pub fn access(path: &CStr, mask: i32) -> SysResult<()> {
    // SAFETY: valid C string.
    check(unsafe { libc::faccessat(libc::AT_FDCWD, path.as_ptr(), mask, 0) })
}

/// The daemon's effective user and group ids.
pub fn daemon_ids() -> (u32, u32) {
    // SAFETY: plain id queries.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// An all-zero stat (the attributes of a negative entry).
pub fn no_stat() -> libc::stat {
    // SAFETY: a stat is plain old data; all zeroes is valid.
    unsafe { std::mem::zeroed() }
}

/// Every entry of directory `fd`, from the start, `.` and `..` included:
/// (inode number, `d_type`, name). Reads through a duplicate of `fd`.
pub fn read_dir(fd: RawFd) -> SysResult<Vec<(u64, u8, std::ffi::OsString)>> {
    // SAFETY: rewinding and duplicating an fd we own.
    cvt(unsafe { libc::lseek(fd, 0, libc::SEEK_SET) })?;
    let copy = cvt(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) })?;
    // SAFETY: the duplicate is ours; fdopendir takes it over and closedir closes it.
    let dir = unsafe { libc::fdopendir(copy) };
    if dir.is_null() {
        unsafe { libc::close(copy) };
        return Err(Errno::EIO);
    }
    let mut entries = Vec::new();
    loop {
        // SAFETY: dir is a valid DIR*; the entry is copied before the next call.
        let entry = unsafe { libc::readdir64(dir) };
        if entry.is_null() {
            break;
        }
        let entry = unsafe { &*entry };
        let name = unsafe { CStr::from_ptr(entry.d_name.as_ptr()) };
        entries.push((
            entry.d_ino,
            entry.d_type,
            OsStr::from_bytes(name.to_bytes()).to_os_string(),
        ));
    }
    unsafe { libc::closedir(dir) };
    Ok(entries)
}

/// setxattr(2) on `path`.
pub fn set_xattr(path: &CStr, name: &CStr, value: &[u8], flags: i32) -> SysResult<()> {
    // SAFETY: valid C strings and a buffer of the given length.
    check(unsafe {
        libc::setxattr(
            path.as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            flags,
        )
    })
}

/// getxattr(2) of `path` into `buf` (empty: asks the size); the value's size.
pub fn get_xattr(path: &CStr, name: &CStr, buf: &mut [u8]) -> SysResult<usize> {
    // SAFETY: valid C strings; buffer valid for its length.
    let n = cvt(unsafe {
        libc::getxattr(
            path.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    })?;
    Ok(n as usize)
}

/// listxattr(2) of `path` into `buf` (empty: asks the size); the list's size.
pub fn list_xattrs(path: &CStr, buf: &mut [u8]) -> SysResult<usize> {
    // SAFETY: valid C string; buffer valid for its length.
    let n = cvt(unsafe { libc::listxattr(path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) })?;
    Ok(n as usize)
}

/// removexattr(2) on `path`.
pub fn remove_xattr(path: &CStr, name: &CStr) -> SysResult<()> {
    // SAFETY: valid C strings.
    check(unsafe { libc::removexattr(path.as_ptr(), name.as_ptr()) })
}

/// The backing-syscall layer on a plain temporary directory, no FUSE: what the
/// handlers rely on (results, errnos, confinement to single components).
#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> (tempfile::TempDir, OwnedFd) {
        let tmp = tempfile::tempdir().unwrap();
        let fd = openat(
            libc::AT_FDCWD,
            &CString::new(tmp.path().as_os_str().as_bytes()).unwrap(),
            libc::O_PATH | libc::O_DIRECTORY,
            0,
        )
        .unwrap();
        (tmp, fd)
    }

    #[test]
    fn components_refuse_what_could_walk_out() {
        for bad in ["", ".", "..", "a/b", "/"] {
            assert_eq!(component(OsStr::new(bad)), Err(Errno::EINVAL), "{bad:?}");
        }
        assert_eq!(
            component(OsStr::new("a b ü")).unwrap().as_bytes(),
            "a b ü".as_bytes()
        );
    }

    #[test]
    fn entries_are_made_renamed_linked_and_removed_by_name() {
        let (tmp, d) = dir();
        let d = raw(&d);
        mkdir_at(d, c"sub", 0o755).unwrap();
        assert_eq!(mkdir_at(d, c"sub", 0o755), Err(Errno::EEXIST));
        mknod_at(d, c"fifo", libc::S_IFIFO | 0o600, 0).unwrap();
        symlink_at(c"sub", d, c"link").unwrap();
        let file = openat(d, c"f", libc::O_CREAT | libc::O_RDWR, 0o600).unwrap();
        assert_eq!(pwrite(raw(&file), b"data", 2).unwrap(), 4);
        assert_eq!(pread(raw(&file), 10, 0).unwrap(), b"\0\0data");
        assert_eq!(stat_fd(raw(&file)).unwrap().st_size, 6);
        link_fd_at(raw(&file), d, c"f2").unwrap();
        assert_eq!(stat_at(d, c"f2", 0).unwrap().st_nlink, 2);
        assert_eq!(
            rename_at(d, c"f", d, c"f2", libc::RENAME_NOREPLACE),
            Err(Errno::EEXIST)
        );
        rename_at(d, c"f", d, c"g", 0).unwrap();
        let link = openat(d, c"link", libc::O_PATH | libc::O_NOFOLLOW, 0).unwrap();
        assert_eq!(readlink_fd(raw(&link)).unwrap(), b"sub");
        assert_eq!(unlink_at(d, c"sub", 0), Err(Errno::EISDIR));
        unlink_at(d, c"sub", libc::AT_REMOVEDIR).unwrap();
        assert_eq!(stat_at(d, c"sub", 0).map(|_| ()), Err(Errno::ENOENT));
        let names: Vec<String> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 4, "fifo, link, f2, g: {names:?}");
    }

    #[test]
    fn holes_and_data_are_found_and_syncs_succeed() {
        let (_tmp, d) = dir();
        let file = openat(raw(&d), c"sparse", libc::O_CREAT | libc::O_RDWR, 0o600).unwrap();
        let fd = raw(&file);
        fallocate(fd, 0, 1 << 20, 4096).unwrap();
        pwrite(fd, b"x", 1 << 21).unwrap();
        assert_eq!(lseek(fd, 0, libc::SEEK_HOLE).unwrap(), 0);
        assert_eq!(lseek(fd, (1 << 21) + 1, libc::SEEK_DATA), Err(Errno::ENXIO));
        sync(fd, true).unwrap();
        sync(fd, false).unwrap();
        assert_eq!(sync(-1, false), Err(Errno::EBADF));
    }

    #[test]
    fn attributes_change_through_each_target() {
        let (tmp, d) = dir();
        let d = raw(&d);
        let file = tmp.path().join("f");
        std::fs::write(&file, b"hello world").unwrap();
        let name = c"f";
        let fd = openat(d, name, libc::O_RDWR, 0).unwrap();
        chmod(Target::Fd(raw(&fd)), 0o600).unwrap();
        assert_eq!(stat_fd(raw(&fd)).unwrap().st_mode & 0o7777, 0o600);
        chmod(Target::At(d, name), 0o640).unwrap();
        assert_eq!(stat_fd(raw(&fd)).unwrap().st_mode & 0o7777, 0o640);
        truncate(Target::Path(&proc_path(raw(&fd))), 5).unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"hello");
        assert_eq!(truncate(Target::At(d, name), 1), Err(Errno::EINVAL));
        let at = |sec| libc::timespec {
            tv_sec: sec,
            tv_nsec: 0,
        };
        set_times(Target::Fd(raw(&fd)), &[at(1_000), at(2_000)]).unwrap();
        assert_eq!(stat_fd(raw(&fd)).unwrap().st_mtime, 2_000);
        // A symlink's own times, not its target's.
        symlink_at(c"f", d, c"l").unwrap();
        set_times(Target::At(d, c"l"), &[at(3_000), at(4_000)]).unwrap();
        assert_eq!(stat_at(d, c"l", 0).unwrap().st_mtime, 4_000);
        assert_eq!(stat_fd(raw(&fd)).unwrap().st_mtime, 2_000);
    }

    #[test]
    fn directories_list_every_entry_with_its_type() {
        let (_tmp, d) = dir();
        let d = raw(&d);
        mkdir_at(d, c"sub", 0o755).unwrap();
        drop(openat(d, c"file", libc::O_CREAT | libc::O_WRONLY, 0o644).unwrap());
        let listed = openat(d, c".", libc::O_RDONLY | libc::O_DIRECTORY, 0).unwrap();
        let mut entries: Vec<_> = read_dir(raw(&listed))
            .unwrap()
            .into_iter()
            .map(|(_, t, name)| (name.into_string().unwrap(), t))
            .collect();
        entries.sort();
        let names: Vec<_> = entries.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, [".", "..", "file", "sub"]);
        assert_eq!(entries[2].1, libc::DT_REG);
        assert_eq!(entries[3].1, libc::DT_DIR);
        // From the start again: a second listing of the same fd sees it all.
        assert_eq!(read_dir(raw(&listed)).unwrap().len(), 4);
    }

    #[test]
    fn data_copies_and_flushes_without_closing() {
        let (_tmp, d) = dir();
        let d = raw(&d);
        let src = openat(d, c"src", libc::O_CREAT | libc::O_RDWR, 0o644).unwrap();
        let dst = openat(d, c"dst", libc::O_CREAT | libc::O_RDWR, 0o644).unwrap();
        pwrite(raw(&src), b"0123456789", 0).unwrap();
        let n = copy_file_range(raw(&src), 2, raw(&dst), 1, 4).unwrap();
        assert_eq!(n, 4);
        assert_eq!(pread(raw(&dst), 10, 0).unwrap(), b"\x002345");
        flush(raw(&dst)).unwrap();
        assert_eq!(pread(raw(&dst), 1, 1).unwrap(), b"2", "still open");
        assert!(statvfs(raw(&dst)).unwrap().f_bsize > 0);
    }

    #[test]
    fn extended_attributes_round_trip_and_report_sizes() {
        let (_tmp, d) = dir();
        let fd = openat(raw(&d), c"x", libc::O_CREAT | libc::O_RDWR, 0o644).unwrap();
        let path = proc_path(raw(&fd));
        match set_xattr(&path, c"user.k", b"value", 0) {
            // A backing filesystem without user xattrs cannot show the rest.
            Err(Errno::EOPNOTSUPP) => panic!("the temp dir's filesystem has no user xattrs"),
            other => other.unwrap(),
        }
        assert_eq!(get_xattr(&path, c"user.k", &mut []).unwrap(), 5);
        let mut buf = [0u8; 16];
        let n = get_xattr(&path, c"user.k", &mut buf).unwrap();
        assert_eq!(&buf[..n], b"value");
        let n = list_xattrs(&path, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"user.k\0");
        remove_xattr(&path, c"user.k").unwrap();
        assert_eq!(get_xattr(&path, c"user.k", &mut buf), Err(Errno::ENODATA));
    }
}

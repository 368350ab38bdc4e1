//! Attributes: getattr, setattr (mode, owner, size, times), access and statfs.

use std::time::SystemTime;

use fuser::{
    AccessFlags, Errno, FileHandle, INodeNo, ReplyAttr, ReplyEmpty, ReplyStatfs, Request, TimeOrNow,
};
use slowfs_faults::Op;

use super::changes::Change;
use super::sys::{self, Caller, SysResult, Target};
use super::{attr, Ask, Carry, Inner, SlowFs};

pub(super) fn getattr(
    fs: &SlowFs,
    req: &Request,
    ino: INodeNo,
    fh: Option<FileHandle>,
    reply: ReplyAttr,
) {
    fs.inner
        .serve_on(req, Op::Getattr, ino, reply, move |inner, done, _, _| {
            let result = match fh.map(|fh| inner.handles.get(fh)) {
                Some(Ok(handle)) => sys::stat_fd(handle.raw()),
                _ => inner.inodes.get(ino).and_then(|i| sys::stat_fd(i.raw())),
            }
            .and_then(|st| inner.check_still_named(st))
            .map(|st| inner.own_size(ino.0, st));
            done.respond(inner, result, |r, st| {
                let a = attr(ino.0, &st);
                r.attr(&inner.attr_ttl(ino.0, &a), &a);
            })
        });
}

/// setattr: the times the kernel sends beside these (ctime, crtime, ...) are
/// not settable on Linux and are ignored.
pub(super) fn setattr(
    fs: &SlowFs,
    req: &Request,
    ino: INodeNo,
    change: AttrChange,
    fh: Option<FileHandle>,
    reply: ReplyAttr,
) {
    let inner = &fs.inner;
    let path = inner.path_of(ino.0);
    let caller = Caller::of(req);
    inner.serve(
        Ask::new(req, Op::Setattr, &path).carrying(Carry::Gathered(ino.0)),
        &[],
        reply,
        move |inner, done, _, _| {
            let truncated = change.size;
            if truncated.is_some() {
                // A WRITE still in flight must not land after the truncate.
                if let Some(nfs) = inner.nfs() {
                    nfs.write_behind.wait_landed(ino.0);
                }
            }
            let mut result = inner.set_attributes(ino, fh, change);
            if let (Ok(_), Some(_)) = (&result, truncated) {
                // A truncate by a caller without CAP_FSETID drops set-ID bits.
                result = inner.inodes.get(ino).and_then(|inode| {
                    sys::drop_privileges(inode.raw(), caller)?;
                    sys::stat_fd(inode.raw())
                });
            }
            if let (Ok(_), Some(len)) = (&result, truncated) {
                inner.changed(Change::Resized { ino: ino.0, len });
            }
            // A passthrough writer's attributes are not cached (see attr_ttl).
            done.respond(inner, result, |r, st| {
                let a = attr(ino.0, &st);
                r.attr(&inner.attr_ttl(ino.0, &a), &a);
            })
        },
    );
}

pub(super) fn statfs(fs: &SlowFs, req: &Request, ino: INodeNo, reply: ReplyStatfs) {
    fs.inner
        .serve_on(req, Op::Statfs, ino, reply, move |inner, done, _, _| {
            let result = inner.inodes.get(ino).and_then(|i| sys::statvfs(i.raw()));
            // A quota rule (full-disk) shows in df: free space is what the rule
            // still lets through, when that is less than the backing's.
            let left = inner.plan.space_left();
            done.respond(inner, result, |r, st| {
                let (bfree, bavail) = match left {
                    Some(bytes) => {
                        let blocks = bytes / (st.f_frsize.max(1));
                        (st.f_bfree.min(blocks), st.f_bavail.min(blocks))
                    }
                    None => (st.f_bfree, st.f_bavail),
                };
                r.statfs(
                    st.f_blocks,
                    bfree,
                    bavail,
                    st.f_files,
                    st.f_ffree,
                    st.f_bsize as u32,
                    st.f_namemax as u32,
                    st.f_frsize as u32,
                );
            })
        });
}

pub(super) fn access(
    fs: &SlowFs,
    req: &Request,
    ino: INodeNo,
    mask: AccessFlags,
    reply: ReplyEmpty,
) {
    fs.inner
        .serve_on(req, Op::Access, ino, reply, move |inner, done, _, _| {
            let result = inner
                .inodes
                .get(ino)
                .and_then(|i| sys::access(&sys::proc_path(i.raw()), mask.bits()));
            done.respond(inner, result, |r, ()| {
                r.ok();
            })
        });
}

fn time_spec(time: Option<TimeOrNow>) -> libc::timespec {
    match time {
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        Some(TimeOrNow::Now) => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        Some(TimeOrNow::SpecificTime(t)) => match t.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(since) => libc::timespec {
                tv_sec: since.as_secs() as i64,
                tv_nsec: since.subsec_nanos() as i64,
            },
            // Before 1970. fuser 0.18 turns the kernel's (secs < 0, nsec) into
            // EPOCH - (|secs| + nsec) (`system_time_from_time`, a TODO there), so the
            // kernel's pair is read back as (-whole seconds, fraction).
            Err(before) => {
                let before = before.duration();
                libc::timespec {
                    tv_sec: -(before.as_secs() as i64),
                    tv_nsec: before.subsec_nanos() as i64,
                }
            }
        },
    }
}

/// What a setattr request asks to change.
pub(super) struct AttrChange {
    pub(super) mode: Option<u32>,
    pub(super) uid: Option<u32>,
    pub(super) gid: Option<u32>,
    pub(super) size: Option<u64>,
    pub(super) atime: Option<TimeOrNow>,
    pub(super) mtime: Option<TimeOrNow>,
}

impl AttrChange {
    /// A setattr that changes nothing the kernel names: what `chown(f, -1,
    /// -1)` sends (its change time is not sent without the writeback cache).
    /// On ext4 it drops the set-ID bits of a regular file, and the kernel
    /// leaves that to a filesystem that handles kill-priv, as slowfs does: it
    /// is passed on to the backing file as that chown.
    fn is_ownership_touch(&self) -> bool {
        self.mode.is_none()
            && self.uid.is_none()
            && self.gid.is_none()
            && self.size.is_none()
            && self.atime.is_none()
            && self.mtime.is_none()
    }
}

impl Inner {
    /// Applies a setattr: through the open handle when the kernel names one, else
    /// through the inode (by `/proc/self/fd`, or by name for a symlink's own times).
    fn set_attributes(
        &self,
        ino: INodeNo,
        fh: Option<FileHandle>,
        change: AttrChange,
    ) -> SysResult<libc::stat> {
        let inode = self.inodes.get(ino)?;
        let handle = fh.and_then(|fh| self.handles.get(fh).ok());
        let proc_path = sys::proc_path(inode.raw());
        let is_symlink = sys::stat_fd(inode.raw())?.st_mode & libc::S_IFMT == libc::S_IFLNK;
        let target = match &handle {
            Some(h) => Target::Fd(h.raw()),
            None => Target::Path(&proc_path),
        };
        if let Some(mode) = change.mode {
            sys::chmod(target, mode & 0o7777)?;
        }
        if change.uid.is_some() || change.gid.is_some() || change.is_ownership_touch() {
            let (uid, gid) = (
                change.uid.unwrap_or(u32::MAX),
                change.gid.unwrap_or(u32::MAX),
            );
            sys::chown_at(inode.raw(), c"", uid, gid)?;
        }
        if let Some(size) = change.size {
            sys::truncate(target, size)?;
        }
        if change.atime.is_some() || change.mtime.is_some() {
            let times = [time_spec(change.atime), time_spec(change.mtime)];
            let by_name = if is_symlink && handle.is_none() {
                let (dir, name) = self.inodes.location(ino.0).ok_or(Errno::ESTALE)?;
                Some((dir, sys::component(&name)?))
            } else {
                None
            };
            let target = match &by_name {
                Some((dir, name)) => Target::At(dir.raw(), name),
                None => target,
            };
            sys::set_times(target, &times)?;
        }
        sys::stat_fd(inode.raw())
    }
}

impl Inner {
    /// Under `--cache nfs`, ESTALE for a GETATTR of a file with no name left:
    /// another client removed it (this one's own unlinks of open files are
    /// silly renames), and the server answers NFS3ERR_STALE for its handle.
    /// The kernel then looks the name up again (vfs_statx retries an ESTALE
    /// with LOOKUP_REVAL), so a stat says ENOENT once the file's attribute
    /// time is out, as on Linux (`__nfs_revalidate_inode` marks the inode
    /// stale, fs/nfs/inode.c); an fstat of a file still open says ESTALE.
    fn check_still_named(&self, st: libc::stat) -> SysResult<libc::stat> {
        if self.is_nfs_client() && st.st_nlink == 0 {
            return Err(Errno::ESTALE);
        }
        Ok(st)
    }

    /// Under `--cache nfs`, the size of `ino` as this client knows it: at
    /// least as far as the data it wrote and has not written back yet (the
    /// NFS client trusts its own size while it has dirty pages; a GETATTR
    /// that another request's WRITE has not reached yet must not shrink it).
    fn own_size(&self, ino: u64, mut st: libc::stat) -> libc::stat {
        let Some(nfs) = self.nfs() else { return st };
        if st.st_mode & libc::S_IFMT == libc::S_IFREG {
            let extent = nfs.write_behind.extent(ino) as i64;
            st.st_size = st.st_size.max(extent);
        }
        st
    }
}

//! `fuser::Filesystem` for slowfs: each handler names its operation, the path the
//! rules see and the bytes it moves, and hands the syscall to `Inner::serve`.

use std::ffi::{CStr, CString, OsStr};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use fuser::{
    AccessFlags, BsdFileFlags, CopyFileRangeFlags, Errno, FileHandle, Filesystem, FopenFlags,
    Generation, INodeNo, InitFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr,
    ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyLseek, ReplyOpen,
    ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use slowfs_faults::durability::{LogOp, NodeKind};
use slowfs_faults::{FsyncFailure, Op};

use super::inodes::Node;
use super::sys::{self, check, cvt, Caller, SysResult};
use super::{attr, file_type, lies, Ask, Inner, SlowFs};
use crate::stats::Outcome;

const GENERATION: Generation = Generation(0);

impl Inner {
    /// Looks `name` up in `parent` and registers the inode: the reply of lookup,
    /// mkdir, mknod, symlink and link.
    fn entry(&self, parent: u64, dir: &Node, name: &OsStr) -> SysResult<fuser::FileAttr> {
        let cname = sys::component(name)?;
        let fd =
            self.with_fds(|| sys::openat(dir.raw(), &cname, libc::O_PATH | libc::O_NOFOLLOW, 0))?;
        let st = sys::stat_fd(sys::raw(&fd))?;
        let ino = self
            .inodes
            .remember(parent, name.to_os_string(), fd, (st.st_dev, st.st_ino));
        Ok(attr(ino, &st))
    }

    /// Gives a new node in `dir` to the caller and the exact mode asked for: the
    /// daemon creates as itself, so ownership and masked mode bits are fixed up here.
    fn adopt(
        &self,
        dir: &Node,
        name: &CStr,
        caller: Caller,
        mode: u32,
        kind: u32,
    ) -> SysResult<()> {
        let parent = sys::stat_fd(dir.raw())?;
        let inherit_gid = parent.st_mode & libc::S_ISGID != 0;
        // SAFETY: plain id queries.
        let (euid, egid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let gid = if inherit_gid { u32::MAX } else { caller.gid };
        if caller.uid != euid || (gid != u32::MAX && gid != egid) {
            sys::chown_at(dir.raw(), name, caller.uid, gid)?;
        }
        if kind == libc::S_IFLNK {
            return Ok(());
        }
        // The chown cleared the set-ID bits asked for: put them back on the
        // permission bits the umask or default ACL left.
        let special = libc::S_ISUID | libc::S_ISGID | libc::S_ISVTX;
        if mode & special != 0 {
            let now = sys::stat_at(dir.raw(), name, 0)?.st_mode;
            let mut mode = (now & 0o777) | (mode & special);
            if kind == libc::S_IFDIR && inherit_gid {
                mode |= libc::S_ISGID;
            }
            // SAFETY: plain syscall with a valid C string.
            check(unsafe { libc::fchmodat(dir.raw(), name.as_ptr(), mode, 0) })?;
        }
        Ok(())
    }

    /// Logs a node created under `parent/name` (on a recording mount).
    fn record_created(&self, parent: u64, name: &OsStr, attr: &fuser::FileAttr, kind: NodeKind) {
        self.record(|| {
            Some(LogOp::Create {
                dir: self.node(parent)?,
                name: name.to_string_lossy().into_owned(),
                node: self.node(attr.ino.0)?,
                kind,
            })
        });
    }

    /// Whether reads and writes of this file must bypass the page cache, so that
    /// every one reaches the rules and short counts reach the caller.
    fn open_flags(&self, path: &str) -> FopenFlags {
        // Under the crash model every byte must reach the log and come back from
        // the (possibly crashed) backing tree, so nothing is cached.
        if self.crash.is_some() || self.plan.touches_data_path(path) {
            FopenFlags::FOPEN_DIRECT_IO | FopenFlags::FOPEN_PARALLEL_DIRECT_WRITES
        } else {
            // Cached pages survive reopening; FUSE_AUTO_INVAL_DATA drops them when the
            // backing file's size or mtime changes behind the mount's back.
            FopenFlags::FOPEN_KEEP_CACHE
        }
    }
}

/// Flags for the backing open: the caller's, minus those that only make sense to
/// the kernel's side (O_DIRECT would demand aligned daemon buffers). With the
/// writeback cache the kernel may read to fill a page of a write-only file, and it
/// places appends itself, so the backing fd is read-write and never O_APPEND.
fn backing_flags(flags: i32, writeback: bool) -> i32 {
    let flags = flags & !(libc::O_DIRECT | libc::O_NOCTTY);
    if !writeback {
        return flags;
    }
    let flags = flags & !libc::O_APPEND;
    if flags & libc::O_ACCMODE == libc::O_WRONLY {
        (flags & !libc::O_ACCMODE) | libc::O_RDWR
    } else {
        flags
    }
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

impl Filesystem for SlowFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let tuning = self.inner.tuning;
        let _ = config.set_max_write(tuning.max_write);
        let _ = config.set_max_readahead(tuning.max_write);
        let _ = config.set_max_background(tuning.max_background);
        let _ = config.set_congestion_threshold((tuning.max_background / 4 * 3).max(1));
        let mut wanted = InitFlags::FUSE_PARALLEL_DIROPS
            | InitFlags::FUSE_ATOMIC_O_TRUNC
            | InitFlags::FUSE_ASYNC_DIO
            | InitFlags::FUSE_AUTO_INVAL_DATA
            | InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP
            // The caller's umask comes with each create and the backing filesystem
            // applies it, or, where the parent has a default ACL, the ACL instead.
            | InitFlags::FUSE_DONT_MASK;
        if tuning.kill_priv_v2 {
            // The daemon drops set-user/group-ID itself (see sys::drop_privileges);
            // in return the kernel stops asking for security.capability before
            // every write (SB_NOSEC), a round trip that halved passthrough writes.
            wanted |= InitFlags::FUSE_HANDLE_KILLPRIV_V2;
        }
        let passthrough = self.inner.passthrough_wanted
            && config.capabilities().contains(InitFlags::FUSE_PASSTHROUGH)
            && config.set_max_stack_depth(1).is_ok();
        if passthrough {
            // The kernel offers passthrough only without the writeback cache.
            wanted |= InitFlags::FUSE_PASSTHROUGH;
        } else if tuning.writeback_cache && self.inner.writeback_allowed {
            // Small writes gather in the page cache. Files a data rule touches are
            // opened direct-I/O, which bypasses it, so faults still reach callers.
            wanted |= InitFlags::FUSE_WRITEBACK_CACHE;
        }
        let supported = config.capabilities() & wanted;
        let _ = config.add_capabilities(supported);
        self.inner.writeback.store(
            supported.contains(InitFlags::FUSE_WRITEBACK_CACHE),
            std::sync::atomic::Ordering::Relaxed,
        );
        self.inner.passthrough.store(
            supported.contains(InitFlags::FUSE_PASSTHROUGH),
            std::sync::atomic::Ordering::Relaxed,
        );
        self.inner.dont_mask.store(
            supported.contains(InitFlags::FUSE_DONT_MASK),
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok(())
    }

    fn destroy(&mut self) {
        self.inner.scheduler.shutdown();
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let inner = &self.inner;
        let path = inner.child_path(parent.0, name);
        let name = name.to_os_string();
        inner.serve(
            Ask::new(req, Op::Lookup, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                let result = inner
                    .inodes
                    .get(parent)
                    .and_then(|dir| inner.entry(parent.0, &dir, &name));
                let ttl = inner.ttl();
                match result {
                    // A missing name is cached as missing (a negative entry) as
                    // long as an existing one is cached: the create that usually
                    // follows skips a lookup round trip.
                    Err(fuser::Errno::ENOENT) if !ttl.is_zero() => {
                        let failed = Outcome {
                            bytes: 0,
                            failed: true,
                        };
                        // SAFETY: a stat is plain old data; all zeroes is valid.
                        let none: libc::stat = unsafe { std::mem::zeroed() };
                        done.record(inner, failed).entry_with_ttls(
                            &std::time::Duration::ZERO,
                            &ttl,
                            &attr(0, &none),
                            GENERATION,
                        );
                    }
                    result => done.respond(inner, result, |r, a| {
                        let attr_ttl = inner.attr_ttl(a.ino.0);
                        r.entry_with_ttls(&attr_ttl, &ttl, &a, GENERATION);
                    }),
                }
            },
        );
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.inner.inodes.forget(ino.0, nlookup);
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let inner = &self.inner;
        let path = inner.path_of(ino.0);
        inner.serve(
            Ask::new(req, Op::Getattr, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                let result = match fh.map(|fh| inner.handles.get(fh)) {
                    Some(Ok(handle)) => sys::stat_fd(handle.raw()),
                    _ => inner.inodes.get(ino).and_then(|i| sys::stat_fd(i.raw())),
                };
                let ttl = inner.attr_ttl(ino.0);
                done.respond(inner, result, |r, st| {
                    r.attr(&ttl, &attr(ino.0, &st));
                })
            },
        );
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let inner = &self.inner;
        let path = inner.path_of(ino.0);
        let caller = Caller::of(req);
        inner.serve(
            Ask::new(req, Op::Setattr, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                let change = AttrChange {
                    mode,
                    uid,
                    gid,
                    size,
                    atime,
                    mtime,
                };
                let truncated = change.size;
                let mut result = inner.set_attributes(ino, fh, change);
                if let (Ok(_), Some(_)) = (&result, truncated) {
                    // A truncate by a caller without CAP_FSETID drops set-ID bits.
                    result = inner.inodes.get(ino).and_then(|inode| {
                        sys::drop_privileges(inode.raw(), caller)?;
                        sys::stat_fd(inode.raw())
                    });
                }
                if let (Ok(_), Some(len)) = (&result, truncated) {
                    inner.record(|| {
                        Some(LogOp::SetLen {
                            node: inner.node(ino.0)?,
                            len,
                        })
                    });
                }
                let ttl = inner.ttl();
                done.respond(inner, result, |r, st| {
                    r.attr(&ttl, &attr(ino.0, &st));
                })
            },
        );
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        let inner = &self.inner;
        let path = inner.path_of(ino.0);
        inner.serve(
            Ask::new(req, Op::Readlink, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                let result = inner
                    .inodes
                    .get(ino)
                    .and_then(|i| sys::readlink_fd(i.raw()));
                done.respond(inner, result, |r, target| {
                    r.data(&target);
                })
            },
        );
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let inner = &self.inner;
        let path = inner.child_path(parent.0, name);
        let name = name.to_os_string();
        let caller = Caller::of(req);
        inner.serve(
            Ask::new(req, Op::Mknod, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                let result = (|| {
                    let dir = inner.inodes.get(parent)?;
                    let cname = sys::component(&name)?;
                    sys::with_umask(inner.create_mask(umask), || {
                        sys::mknod_at(dir.raw(), &cname, mode, rdev as u64)
                    })?;
                    inner.adopt(&dir, &cname, caller, mode, mode & libc::S_IFMT)?;
                    inner
                        .entry(parent.0, &dir, &name)
                        .inspect(|a| inner.record_created(parent.0, &name, a, NodeKind::File))
                })();
                let ttl = inner.ttl();
                done.respond(inner, result, |r, a| {
                    r.entry(&ttl, &a, GENERATION);
                })
            },
        );
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let inner = &self.inner;
        let path = inner.child_path(parent.0, name);
        let name = name.to_os_string();
        let caller = Caller::of(req);
        inner.serve(
            Ask::new(req, Op::Mkdir, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                let result = (|| {
                    let dir = inner.inodes.get(parent)?;
                    let cname = sys::component(&name)?;
                    sys::with_umask(inner.create_mask(umask), || {
                        sys::mkdir_at(dir.raw(), &cname, mode)
                    })?;
                    inner.adopt(&dir, &cname, caller, mode, libc::S_IFDIR)?;
                    inner
                        .entry(parent.0, &dir, &name)
                        .inspect(|a| inner.record_created(parent.0, &name, a, NodeKind::Dir))
                })();
                let ttl = inner.ttl();
                done.respond(inner, result, |r, a| {
                    r.entry(&ttl, &a, GENERATION);
                })
            },
        );
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(req, Op::Unlink, parent, name, 0, reply);
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.remove(req, Op::Rmdir, parent, name, libc::AT_REMOVEDIR, reply);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let inner = &self.inner;
        let path = inner.child_path(parent.0, link_name);
        let name = link_name.to_os_string();
        let target = target.as_os_str().to_os_string();
        let caller = Caller::of(req);
        inner.serve(
            Ask::new(req, Op::Symlink, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                let result = (|| {
                    let dir = inner.inodes.get(parent)?;
                    let cname = sys::component(&name)?;
                    let target = CString::new(target.as_bytes()).map_err(|_| Errno::EINVAL)?;
                    sys::symlink_at(&target, dir.raw(), &cname)?;
                    inner.adopt(&dir, &cname, caller, 0o777, libc::S_IFLNK)?;
                    inner.entry(parent.0, &dir, &name).inspect(|a| {
                        let target = String::from_utf8_lossy(target.as_bytes()).into_owned();
                        inner.record_created(parent.0, &name, a, NodeKind::Symlink(target))
                    })
                })();
                let ttl = inner.ttl();
                done.respond(inner, result, |r, a| {
                    r.entry(&ttl, &a, GENERATION);
                })
            },
        );
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let inner = &self.inner;
        let path = inner.child_path(parent.0, name);
        let (name, newname) = (name.to_os_string(), newname.to_os_string());
        inner.serve(
            Ask::new(req, Op::Rename, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                let result = (|| {
                    let from = inner.inodes.get(parent)?;
                    let to = inner.inodes.get(newparent)?;
                    let (cname, cnew) = (sys::component(&name)?, sys::component(&newname)?);
                    let exchange = flags.contains(RenameFlags::RENAME_EXCHANGE);
                    // A file renamed over loses the name it is reopened by: keep its fd.
                    let displaced = (!exchange)
                        .then(|| inner.inodes.at(newparent.0, &newname))
                        .flatten()
                        .and_then(|ino| inner.inodes.get(INodeNo(ino)).ok());
                    // What moves, for the log: looked up before the names change.
                    let moving = inner.recording().then(|| {
                        let node = sys::stat_at(from.raw(), &cname, 0).ok()?.st_ino;
                        let other = exchange
                            .then(|| sys::stat_at(to.raw(), &cnew, 0).ok().map(|st| st.st_ino))
                            .flatten();
                        Some((node, other))
                    });
                    sys::rename_at(from.raw(), &cname, to.raw(), &cnew, flags.bits())?;
                    inner.record(|| {
                        let (node, exchanged) = moving.flatten()?;
                        Some(LogOp::Rename {
                            from_dir: from.key.1,
                            from_name: name.to_string_lossy().into_owned(),
                            to_dir: to.key.1,
                            to_name: newname.to_string_lossy().into_owned(),
                            node,
                            exchanged,
                        })
                    });
                    if let Some(displaced) = displaced {
                        inner.inodes.pin(&displaced);
                    }
                    inner
                        .inodes
                        .renamed((parent.0, &name), (newparent.0, &newname), exchange);
                    Ok(())
                })();
                done.respond(inner, result, |r, ()| {
                    r.ok();
                })
            },
        );
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let inner = &self.inner;
        let path = inner.child_path(newparent.0, newname);
        let newname = newname.to_os_string();
        inner.serve(
            Ask::new(req, Op::Link, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                let result = (|| {
                    let inode = inner.inodes.get(ino)?;
                    let dir = inner.inodes.get(newparent)?;
                    let cname = sys::component(&newname)?;
                    sys::link_fd_at(inode.raw(), dir.raw(), &cname)?;
                    inner.entry(newparent.0, &dir, &newname).inspect(|_| {
                        inner.record(|| {
                            Some(LogOp::Link {
                                dir: inner.node(newparent.0)?,
                                name: newname.to_string_lossy().into_owned(),
                                node: inner.node(ino.0)?,
                            })
                        })
                    })
                })();
                let ttl = inner.ttl();
                done.respond(inner, result, |r, a| {
                    r.entry(&ttl, &a, GENERATION);
                })
            },
        );
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let inner = &self.inner;
        let path = inner.path_of(ino.0);
        let fopen = inner.open_flags(&path);
        let passthrough = inner.passthrough_for(&path);
        let caller = Caller::of(req);
        inner.serve(
            Ask::new(req, Op::Open, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                let truncate = flags.0 & libc::O_TRUNC != 0;
                let opened = inner.inodes.get(ino).and_then(|inode| {
                    let fd = inner.with_fds(|| {
                        inner.without_atime(backing_flags(flags.0, inner.writeback()), |flags| {
                            sys::reopen(inode.raw(), flags)
                        })
                    })?;
                    if truncate && sys::drop_privileges(sys::raw(&fd), caller)? {
                        inner.attributes_changed(ino.0);
                    }
                    // Writes to a set-ID file must reach the daemon, which drops the bits
                    // (asked only when passthrough is on the table: a stat per open).
                    let privileged =
                        passthrough && sys::is_privileged(sys::stat_fd(sys::raw(&fd))?.st_mode);
                    Ok((inode, fd, privileged))
                });
                let (inode, fd, privileged) = match opened {
                    Ok(opened) => opened,
                    Err(errno) => return done.respond(inner, Err::<(), _>(errno), |_, ()| {}),
                };
                if truncate {
                    inner.record(|| {
                        Some(LogOp::SetLen {
                            node: inner.node(ino.0)?,
                            len: 0,
                        })
                    });
                }
                let reply = done.record(inner, Outcome::default());
                let backing = (passthrough && !privileged)
                    .then(|| inner.backing_for(&inode, || reply.open_backing(&fd)))
                    .flatten();
                let fh = inner.handles.insert(fd, backing.clone());
                match backing {
                    Some(id) => {
                        let write = flags.0 & libc::O_ACCMODE != libc::O_RDONLY;
                        inner.opened_passthrough(fh.0, ino.0, write);
                        reply.opened_passthrough(fh, FopenFlags::empty(), &id)
                    }
                    None => reply.opened(fh, fopen),
                }
            },
        );
    }

    fn read(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let inner = &self.inner;
        let path = inner.path_of(ino.0);
        inner.serve(
            Ask::new(req, Op::Read, &path).moving(size as u64),
            &[],
            reply,
            move |inner, done, effects, _| {
                let len = effects.short_to.map_or(size as usize, |s| s as usize);
                let result = inner
                    .handles
                    .get(fh)
                    .and_then(|h| sys::pread(h.raw(), len, offset))
                    .map(|data| lies::lie_about_read(&effects, inner, ino.0, offset, data));
                done.respond_moved(
                    inner,
                    result,
                    |buf| buf.len() as u64,
                    |r, buf| {
                        r.data(&buf);
                    },
                )
            },
        );
    }

    fn write(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let inner = &self.inner;
        let path = inner.path_of(ino.0);
        let len = data.len() as u64;
        let caller = Caller::of(req);
        inner.serve(
            Ask::new(req, Op::Write, &path)
                .moving(len)
                .write_back(write_flags.contains(WriteFlags::FUSE_WRITE_CACHE)),
            data,
            reply,
            move |inner, done, effects, data| {
                let data = &data[..effects.short_to.map_or(data.len(), |s| s as usize)];
                let mut dropped = false;
                let result = inner.handles.get(fh).and_then(|h| {
                    if effects.lose {
                        // Acknowledged, never applied (nor recorded).
                        return Ok(data.len());
                    }
                    if write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID) {
                        dropped = sys::drop_privileges(h.raw(), caller)?;
                    }
                    let n = sys::pwrite(h.raw(), data, offset)?;
                    inner.record(|| {
                        Some(LogOp::Write {
                            node: inner.node(ino.0)?,
                            offset: sys::written_at(h.raw(), offset, n),
                            data: data[..n].to_vec(),
                        })
                    });
                    Ok(n)
                });
                done.respond_moved(
                    inner,
                    result,
                    |n| *n as u64,
                    |r, n| {
                        r.written(n as u32);
                    },
                );
                if dropped {
                    inner.attributes_changed(ino.0);
                }
            },
        );
    }

    fn flush(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let inner = &self.inner;
        let path = inner.path_of(ino.0);
        inner.serve(
            Ask::new(req, Op::Flush, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                // close(dup(fd)): what close(2) would do on the backing file (NFS-style
                // backing filesystems report write-back errors here), without closing ours.
                let result = inner.handles.get(fh).and_then(|h| {
                    // SAFETY: dup of an fd we own; the copy is closed at once.
                    let copy = cvt(unsafe { libc::dup(h.raw()) })?;
                    check(unsafe { libc::close(copy) })
                });
                done.respond(inner, result, |r, ()| {
                    r.ok();
                })
            },
        );
    }

    fn release(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.close_handle(req, Op::Release, ino, fh, reply);
    }

    fn fsync(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.sync(
            req,
            if datasync { Op::Fdatasync } else { Op::Fsync },
            ino,
            fh,
            datasync,
            reply,
        );
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let inner = &self.inner;
        let path = inner.path_of(ino.0);
        inner.serve(
            Ask::new(req, Op::Opendir, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                let result = inner
                    .inodes
                    .get(ino)
                    .and_then(|i| {
                        inner.with_fds(|| {
                            inner.without_atime(libc::O_RDONLY | libc::O_DIRECTORY, |flags| {
                                sys::openat(i.raw(), c".", flags, 0)
                            })
                        })
                    })
                    .map(|fd| inner.handles.insert(fd, None));
                done.respond(inner, result, |r, fh| {
                    r.opened(fh, FopenFlags::empty());
                })
            },
        );
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        let inner = &self.inner;
        let path = inner.path_of(ino.0);
        inner.serve(
            Ask::new(req, Op::Readdir, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                let handle = match inner.handles.get(fh) {
                    Ok(handle) => handle,
                    Err(errno) => return done.respond(inner, Err::<(), _>(errno), |_, ()| {}),
                };
                let mut listing = handle.listing.lock().unwrap();
                if offset == 0 || !listing.filled {
                    if let Err(errno) = fill_listing(handle.raw(), &mut listing) {
                        drop(listing);
                        return done.respond(inner, Err::<(), _>(errno), |_, ()| {});
                    }
                }
                let mut reply = done.record(inner, Outcome::default());
                for (i, (entry_ino, kind, name)) in
                    listing.entries.iter().enumerate().skip(offset as usize)
                {
                    let shown = inner.inodes.entry_number(*entry_ino);
                    if reply.add(INodeNo(shown), i as u64 + 1, *kind, name) {
                        break;
                    }
                }
                reply.ok();
            },
        );
    }

    fn releasedir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.close_handle(req, Op::Releasedir, ino, fh, reply);
    }

    fn fsyncdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.sync(req, Op::Fsyncdir, ino, fh, datasync, reply);
    }

    fn statfs(&self, req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        let inner = &self.inner;
        let path = inner.path_of(ino.0);
        inner.serve(
            Ask::new(req, Op::Statfs, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                let result = inner.inodes.get(ino).and_then(|i| {
                    // SAFETY: zeroed statvfs is a valid out-parameter.
                    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
                    check(unsafe { libc::fstatvfs(i.raw(), &mut st) }).map(|()| st)
                });
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
            },
        );
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        let inner = &self.inner;
        let path = inner.path_of(ino.0);
        let name = name.to_os_string();
        let caller = Caller::of(req);
        inner.serve(
            Ask::new(req, Op::Xattr, &path),
            value,
            reply,
            move |inner, done, _, value| {
                let result = xattr_target(inner, ino).and_then(|p| {
                    let name = CString::new(name.as_bytes()).map_err(|_| Errno::EINVAL)?;
                    // SAFETY: valid C strings and a buffer of the given length.
                    check(unsafe {
                        libc::setxattr(
                            p.as_ptr(),
                            name.as_ptr(),
                            value.as_ptr().cast(),
                            value.len(),
                            flags,
                        )
                    })?;
                    // An access ACL set by a caller outside the file's group drops
                    // set-group-ID, as the kernel's posix_acl_update_mode does; the
                    // daemon set it with its own credentials.
                    if name.as_bytes() == b"system.posix_acl_access" {
                        let inode = inner.inodes.get(ino)?;
                        sys::drop_group_id_unless_in_group(inode.raw(), caller)?;
                    }
                    Ok(())
                });
                let changed = result.is_ok();
                done.respond(inner, result, |r, ()| {
                    r.ok();
                });
                if changed {
                    // An ACL may have changed the mode.
                    inner.attributes_changed(ino.0);
                }
            },
        );
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let inner = &self.inner;
        let path = inner.path_of(ino.0);
        let name = name.to_os_string();
        inner.serve(
            Ask::new(req, Op::Xattr, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                let result = CString::new(name.as_bytes())
                    .map_err(|_| Errno::EINVAL)
                    .and_then(|name| {
                        xattr_query(inner, ino, size, |p, buf| {
                            // SAFETY: valid C strings; buffer valid for its length.
                            unsafe {
                                libc::getxattr(
                                    p.as_ptr(),
                                    name.as_ptr(),
                                    buf.as_mut_ptr().cast(),
                                    buf.len(),
                                )
                            }
                        })
                    });
                done.respond(inner, result, |r, answer| send_xattr(r, size, answer))
            },
        );
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let inner = &self.inner;
        let path = inner.path_of(ino.0);
        inner.serve(
            Ask::new(req, Op::Xattr, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                let result = xattr_query(inner, ino, size, |p, buf| {
                    // SAFETY: valid C string; buffer valid for its length.
                    unsafe { libc::listxattr(p.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) }
                });
                done.respond(inner, result, |r, answer| send_xattr(r, size, answer))
            },
        );
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let inner = &self.inner;
        let path = inner.path_of(ino.0);
        let name = name.to_os_string();
        inner.serve(
            Ask::new(req, Op::Xattr, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                let result = xattr_target(inner, ino).and_then(|p| {
                    let name = CString::new(name.as_bytes()).map_err(|_| Errno::EINVAL)?;
                    // SAFETY: valid C strings.
                    check(unsafe { libc::removexattr(p.as_ptr(), name.as_ptr()) })
                });
                let changed = result.is_ok();
                done.respond(inner, result, |r, ()| {
                    r.ok();
                });
                if changed {
                    inner.attributes_changed(ino.0);
                }
            },
        );
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        let inner = &self.inner;
        let path = inner.path_of(ino.0);
        inner.serve(
            Ask::new(req, Op::Access, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                let result = inner.inodes.get(ino).and_then(|i| {
                    let p = sys::proc_path(i.raw());
                    // SAFETY: valid C string.
                    check(unsafe { libc::faccessat(libc::AT_FDCWD, p.as_ptr(), mask.bits(), 0) })
                });
                done.respond(inner, result, |r, ()| {
                    r.ok();
                })
            },
        );
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let inner = &self.inner;
        let path = inner.child_path(parent.0, name);
        let fopen = inner.open_flags(&path);
        let passthrough = inner.passthrough_for(&path);
        let name = name.to_os_string();
        let caller = Caller::of(req);
        inner.serve(
            Ask::new(req, Op::Create, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                let result = (|| {
                    let dir = inner.inodes.get(parent)?;
                    let cname = sys::component(&name)?;
                    let fd: OwnedFd = inner.with_fds(|| {
                        sys::with_umask(inner.create_mask(umask), || {
                            let flags = backing_flags(flags, inner.writeback())
                                | libc::O_CREAT
                                | libc::O_NOFOLLOW;
                            inner.without_atime(flags, |flags| {
                                sys::openat(dir.raw(), &cname, flags, mode)
                            })
                        })
                    })?;
                    inner.adopt(&dir, &cname, caller, mode, libc::S_IFREG)?;
                    let attr = inner.entry(parent.0, &dir, &name)?;
                    inner.record_created(parent.0, &name, &attr, NodeKind::File);
                    Ok((attr, inner.inodes.get(attr.ino)?, fd))
                })();
                let (attr, inode, fd) = match result {
                    Ok(created) => created,
                    Err(errno) => return done.respond(inner, Err::<(), _>(errno), |_, ()| {}),
                };
                let reply = done.record(inner, Outcome::default());
                let backing = (passthrough && !sys::is_privileged(mode))
                    .then(|| inner.backing_for(&inode, || reply.open_backing(&fd)))
                    .flatten();
                let fh = inner.handles.insert(fd, backing.clone());
                if backing.is_some() {
                    let write = flags & libc::O_ACCMODE != libc::O_RDONLY;
                    inner.opened_passthrough(fh.0, attr.ino.0, write);
                }
                // After the handle is counted: a passthrough writer's attributes
                // are not cached.
                let ttl = inner.attr_ttl(attr.ino.0);
                match backing {
                    Some(id) => reply.created_passthrough(
                        &ttl,
                        &attr,
                        GENERATION,
                        fh,
                        FopenFlags::empty(),
                        &id,
                    ),
                    None => reply.created(&ttl, &attr, GENERATION, fh, fopen),
                }
            },
        );
    }

    fn fallocate(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let inner = &self.inner;
        let path = inner.path_of(ino.0);
        let caller = Caller::of(req);
        inner.serve(
            Ask::new(req, Op::Fallocate, &path).moving(length),
            &[],
            reply,
            move |inner, done, _, _| {
                let mut dropped = false;
                let result = inner.handles.get(fh).and_then(|h| {
                    // Like a write, an allocation by a caller without CAP_FSETID drops
                    // set-ID bits (the kernel leaves it to us under KILLPRIV_V2).
                    dropped = sys::drop_privileges(h.raw(), caller)?;
                    sys::fallocate(h.raw(), mode, offset, length)?;
                    inner.record(|| {
                        let node = inner.node(ino.0)?;
                        let size = sys::stat_fd(h.raw()).ok()?.st_size as u64;
                        if mode & (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE) != 0 {
                            let end = (offset + length).min(size);
                            let data = vec![0; end.saturating_sub(offset) as usize];
                            Some(LogOp::Write { node, offset, data })
                        } else {
                            Some(LogOp::SetLen { node, len: size })
                        }
                    });
                    Ok(())
                });
                done.respond(inner, result, |r, ()| {
                    r.ok();
                });
                if dropped {
                    inner.attributes_changed(ino.0);
                }
            },
        );
    }

    fn lseek(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        let inner = &self.inner;
        let path = inner.path_of(ino.0);
        inner.serve(
            Ask::new(req, Op::Lseek, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                let result = inner.handles.get(fh).and_then(|h| {
                    // Reads use pread: moving this fd's position changes nothing else.
                    sys::lseek(h.raw(), offset, whence)
                });
                done.respond(inner, result, |r, pos| {
                    r.offset(pos);
                })
            },
        );
    }

    fn copy_file_range(
        &self,
        req: &Request,
        ino_in: INodeNo,
        fh_in: FileHandle,
        offset_in: u64,
        ino_out: INodeNo,
        fh_out: FileHandle,
        offset_out: u64,
        len: u64,
        _flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        let inner = &self.inner;
        let path = inner.path_of(ino_in.0);
        inner.serve(
            Ask::new(req, Op::CopyFileRange, &path).moving(len),
            &[],
            reply,
            move |inner, done, effects, _| {
                let len = effects.short_to.unwrap_or(len) as usize;
                let result = (|| {
                    let (src, dst) = (inner.handles.get(fh_in)?, inner.handles.get(fh_out)?);
                    let (mut off_in, mut off_out) = (offset_in as i64, offset_out as i64);
                    // SAFETY: plain syscall on fds we own with valid offset pointers.
                    let n = cvt(unsafe {
                        libc::copy_file_range(
                            src.raw(),
                            &mut off_in,
                            dst.raw(),
                            &mut off_out,
                            len,
                            0,
                        )
                    })?;
                    inner.record(|| {
                        Some(LogOp::Write {
                            node: inner.node(ino_out.0)?,
                            offset: offset_out,
                            data: sys::pread(dst.raw(), n as usize, offset_out).ok()?,
                        })
                    });
                    Ok(n)
                })();
                done.respond_moved(
                    inner,
                    result,
                    |n| *n as u64,
                    |r, n| {
                        r.written(n as u32);
                    },
                )
            },
        );
    }
}

/// What a setattr request asks to change.
struct AttrChange {
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    size: Option<u64>,
    atime: Option<TimeOrNow>,
    mtime: Option<TimeOrNow>,
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
        if let Some(mode) = change.mode {
            // SAFETY: plain syscalls on owned fds / valid C strings.
            check(unsafe {
                match &handle {
                    Some(h) => libc::fchmod(h.raw(), mode & 0o7777),
                    None => libc::chmod(proc_path.as_ptr(), mode & 0o7777),
                }
            })?;
        }
        if change.uid.is_some() || change.gid.is_some() {
            let (uid, gid) = (
                change.uid.unwrap_or(u32::MAX),
                change.gid.unwrap_or(u32::MAX),
            );
            sys::chown_at(inode.raw(), c"", uid, gid)?;
        }
        if let Some(size) = change.size {
            // SAFETY: as above.
            check(unsafe {
                match &handle {
                    Some(h) => libc::ftruncate(h.raw(), size as i64),
                    None => libc::truncate(proc_path.as_ptr(), size as i64),
                }
            })?;
        }
        if change.atime.is_some() || change.mtime.is_some() {
            let times = [time_spec(change.atime), time_spec(change.mtime)];
            let by_name = if is_symlink && handle.is_none() {
                let (dir, name) = self.inodes.location(ino.0).ok_or(Errno::ESTALE)?;
                Some((dir, sys::component(&name)?))
            } else {
                None
            };
            // SAFETY: times is a valid two-element array; C strings are valid.
            check(unsafe {
                match (&handle, &by_name) {
                    (Some(h), _) => libc::futimens(h.raw(), times.as_ptr()),
                    (None, Some((dir, name))) => libc::utimensat(
                        dir.raw(),
                        name.as_ptr(),
                        times.as_ptr(),
                        libc::AT_SYMLINK_NOFOLLOW,
                    ),
                    (None, None) => {
                        libc::utimensat(libc::AT_FDCWD, proc_path.as_ptr(), times.as_ptr(), 0)
                    }
                }
            })?;
        }
        sys::stat_fd(inode.raw())
    }
}

impl SlowFs {
    /// release / releasedir: the handle (and its backing fd) goes.
    fn close_handle(&self, req: &Request, op: Op, ino: INodeNo, fh: FileHandle, reply: ReplyEmpty) {
        let inner = &self.inner;
        let path = inner.path_of(ino.0);
        inner.serve(
            Ask::new(req, op, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                inner.handles.remove(fh);
                inner.released(fh.0);
                done.record(inner, Outcome::default()).ok();
            },
        );
    }

    fn remove(
        &self,
        req: &Request,
        op: Op,
        parent: INodeNo,
        name: &OsStr,
        flags: i32,
        reply: ReplyEmpty,
    ) {
        let inner = &self.inner;
        let path = inner.child_path(parent.0, name);
        let name = name.to_os_string();
        inner.serve(
            Ask::new(req, op, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                let result = inner.inodes.get(parent).and_then(|dir| {
                    let cname = sys::component(&name)?;
                    // The inode loses the name it is reopened by: keep its fd.
                    let victim = inner.inodes.at(parent.0, &name).map(INodeNo);
                    let victim = victim.and_then(|ino| inner.inodes.get(ino).ok());
                    sys::unlink_at(dir.raw(), &cname, flags)?;
                    if let Some(victim) = victim {
                        inner.inodes.pin(&victim);
                    }
                    inner.record(|| {
                        Some(LogOp::Remove {
                            dir: dir.key.1,
                            name: name.to_string_lossy().into_owned(),
                        })
                    });
                    Ok(())
                });
                done.respond(inner, result, |r, ()| {
                    r.ok();
                })
            },
        );
    }

    fn sync(
        &self,
        req: &Request,
        op: Op,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let inner = &self.inner;
        let path = inner.path_of(ino.0);
        inner.serve(
            Ask::new(req, op, &path),
            &[],
            reply,
            move |inner, done, effects, _| {
                let result = inner.handles.get(fh).and_then(|h| {
                    if let Some(FsyncFailure { errno, evict }) = effects.fsync_fail {
                        if let Some(errno) =
                            inner.fail_write_back(ino.0, fh.0, h.raw(), errno, evict)
                        {
                            return Err(errno);
                        }
                    }
                    sys::sync(h.raw(), datasync)?;
                    inner.record(|| {
                        let node = inner.node(ino.0)?;
                        Some(if op == Op::Fsyncdir {
                            LogOp::FsyncDir { dir: node }
                        } else {
                            LogOp::Fsync { node }
                        })
                    });
                    // errseq: a write-back error another description hit is
                    // reported once here, after this fsync's own write-back.
                    if h.unreported_write_back_error
                        .swap(false, std::sync::atomic::Ordering::SeqCst)
                    {
                        return Err(Errno::EIO);
                    }
                    Ok(())
                });
                done.respond(inner, result, |r, ()| {
                    r.ok();
                })
            },
        );
    }
}

/// The path xattr calls go through for an inode (they take no `O_PATH` fd). The
/// kernel holds a lookup reference on the inode while it asks, so the fd stays open.
fn xattr_target(inner: &Arc<Inner>, ino: INodeNo) -> SysResult<CString> {
    inner.inodes.get(ino).map(|i| sys::proc_path(i.raw()))
}

/// getxattr/listxattr: calls `query` with a buffer of `size` bytes (0 asks for the
/// size); returns the size reported and the bytes.
fn xattr_query(
    inner: &Arc<Inner>,
    ino: INodeNo,
    size: u32,
    query: impl FnOnce(&CStr, &mut [u8]) -> isize,
) -> SysResult<(u32, Vec<u8>)> {
    let target = xattr_target(inner, ino)?;
    let mut buf = vec![0u8; size as usize];
    let n = cvt(query(&target, &mut buf))?;
    buf.truncate(n as usize);
    Ok((n as u32, buf))
}

/// Answers an xattr query: the size when the caller asked for it, else the bytes.
fn send_xattr(reply: ReplyXattr, size: u32, (n, buf): (u32, Vec<u8>)) {
    if size == 0 {
        reply.size(n)
    } else {
        reply.data(&buf)
    }
}

/// Reads a whole directory through a duplicate of `fd`, from the start.
fn fill_listing(fd: i32, listing: &mut super::handles::Listing) -> SysResult<()> {
    // SAFETY: rewinding and duplicating an fd we own.
    cvt(unsafe { libc::lseek(fd, 0, libc::SEEK_SET) })?;
    let copy = cvt(unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) })?;
    // SAFETY: the duplicate is ours; fdopendir takes it over and closedir closes it.
    let dir = unsafe { libc::fdopendir(copy) };
    if dir.is_null() {
        unsafe { libc::close(copy) };
        return Err(Errno::EIO);
    }
    listing.entries.clear();
    loop {
        // SAFETY: dir is a valid DIR*; the entry is copied before the next call.
        let entry = unsafe { libc::readdir64(dir) };
        if entry.is_null() {
            break;
        }
        let entry = unsafe { &*entry };
        let name = unsafe { CStr::from_ptr(entry.d_name.as_ptr()) };
        let kind = match entry.d_type {
            libc::DT_DIR => fuser::FileType::Directory,
            libc::DT_LNK => fuser::FileType::Symlink,
            libc::DT_FIFO => fuser::FileType::NamedPipe,
            libc::DT_SOCK => fuser::FileType::Socket,
            libc::DT_CHR => fuser::FileType::CharDevice,
            libc::DT_BLK => fuser::FileType::BlockDevice,
            libc::DT_REG => fuser::FileType::RegularFile,
            _ => file_type(0),
        };
        listing.entries.push((
            entry.d_ino,
            kind,
            OsStr::from_bytes(name.to_bytes()).to_os_string(),
        ));
    }
    unsafe { libc::closedir(dir) };
    listing.filled = true;
    Ok(())
}

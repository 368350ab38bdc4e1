//! File data: open and create (with the kernel-passthrough choice), read, write,
//! flush, release, fsync, fallocate, lseek and copy_file_range.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;

use fuser::{
    FileHandle, FopenFlags, INodeNo, LockOwner, OpenFlags, ReplyCreate, ReplyData, ReplyEmpty,
    ReplyLseek, ReplyOpen, ReplyWrite, Request, WriteFlags,
};
use slowfs_faults::durability::NodeKind;
use slowfs_faults::Op;

use super::changes::Change;
use super::filesystem::GENERATION;
use super::nfs::locks::UnlockOnDrop;
use super::nfs::silly::SillyDelete;
use super::sys::{self, Caller};
use super::{lies, Ask, Carry, Inner, SlowFs};
use crate::stats::RequestOutcome;

pub(super) fn open(fs: &SlowFs, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
    let inner = &fs.inner;
    let path = inner.path_of(ino.0);
    let fopen = inner.open_flags(&path);
    let passthrough = inner.passthrough_for(&path);
    inner.serve(
        Ask::new(req, Op::Open, &path),
        &[],
        reply,
        move |inner, done, _, _| {
            // Without FUSE_ATOMIC_O_TRUNC the kernel truncates by SETATTR (after
            // its ETXTBSY check), which drops set-ID bits and is recorded there;
            // an O_TRUNC here could only truncate a second time, unrecorded.
            let flags = inner.backing_flags(flags.0 & !libc::O_TRUNC);
            let opened = inner.inodes.get(ino).and_then(|inode| {
                let fd = inner.with_fds(|| {
                    inner.without_atime(flags, |flags| sys::reopen(inode.raw(), flags))
                })?;
                // A name this client cached for a file another client has
                // since removed: ESTALE makes the kernel look the name up again
                // (LOOKUP_REVAL), as the NFS client revalidates at open.
                inner.check_not_stale(sys::raw(&fd))?;
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
            let fopen = match inner.close_to_open(ino.0, &fd) {
                Some(keep) => keep,
                None => fopen,
            };
            let reply = done.record(inner, RequestOutcome::default());
            let backing = (passthrough && !privileged)
                .then(|| inner.backing_for(&inode, || reply.open_backing(&fd)))
                .flatten();
            let direct_io = fopen.contains(FopenFlags::FOPEN_DIRECT_IO);
            let fh = inner.handles.insert(fd, backing.clone(), direct_io);
            inner.sample_write_back(ino.0, fh);
            inner.file_opened(ino.0);
            match backing {
                Some(id) => {
                    let write = flags & libc::O_ACCMODE != libc::O_RDONLY;
                    inner.opened_passthrough(fh.0, ino.0, write);
                    reply.opened_passthrough(fh, FopenFlags::empty(), &id)
                }
                None => reply.opened(fh, fopen),
            }
        },
    );
}

pub(super) fn read(
    fs: &SlowFs,
    req: &Request,
    ino: INodeNo,
    fh: FileHandle,
    offset: u64,
    size: u32,
    reply: ReplyData,
) {
    let inner = &fs.inner;
    let path = inner.path_of(ino.0);
    inner.serve(
        Ask::new(req, Op::Read, &path)
            .moving(size as u64)
            .carrying(Carry::Gathered(ino.0)),
        &[],
        reply,
        move |inner, done, effects, _| {
            let result = inner.handles.get(fh).and_then(|h| {
                inner.check_not_stale(h.raw())?;
                let len = h.shortened(size as usize, effects.short_to);
                let mut read = lies::read(&effects, inner, ino.0, offset, || {
                    sys::pread(h.raw(), len, offset)
                })?;
                // What this client wrote and has not written back is in its
                // page cache for every local reader (see nfs/write_behind.rs).
                if let Some(nfs) = inner.nfs() {
                    nfs.write_behind.overlay(ino.0, offset, len, &mut read);
                }
                Ok(read)
            });
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

#[allow(clippy::too_many_arguments)] // the request's fields, as fuser passes them
pub(super) fn write(
    fs: &SlowFs,
    req: &Request,
    ino: INodeNo,
    fh: FileHandle,
    offset: u64,
    data: &[u8],
    write_flags: WriteFlags,
    reply: ReplyWrite,
) {
    let inner = &fs.inner;
    let path = inner.path_of(ino.0);
    let len = data.len() as u64;
    let caller = Caller::of(req);
    // A write by a caller without CAP_FSETID (FUSE_WRITE_KILL_SUIDGID) is
    // gathered like any other: its set-ID bits go at once (below).
    let gathered = !write_flags.contains(WriteFlags::FUSE_WRITE_CACHE);
    if let (Some(nfs), Some(wsize)) = (inner.nfs(), inner.write_behind_size()) {
        if gathered {
            let kill = write_flags
                .contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID)
                .then_some(caller);
            return super::nfs::gather::write(
                fs, nfs, req, ino, fh, offset, data, wsize, kill, reply,
            );
        }
    }
    inner.serve(
        Ask::new(req, Op::Write, &path)
            .moving(len)
            .write_back(write_flags.contains(WriteFlags::FUSE_WRITE_CACHE)),
        data,
        reply,
        move |inner, done, effects, data| {
            let mut dropped = false;
            let result = inner.handles.get(fh).and_then(|h| {
                inner.check_not_stale(h.raw())?;
                let data = &data[..h.shortened(data.len(), effects.short_to)];
                let kill = write_flags
                    .contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID)
                    .then_some(caller);
                let (n, killed) = inner.write_data(&effects, ino.0, &h, offset, data, kill)?;
                dropped = killed;
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

pub(super) fn flush(
    fs: &SlowFs,
    req: &Request,
    ino: INodeNo,
    fh: FileHandle,
    owner: LockOwner,
    reply: ReplyEmpty,
) {
    let inner = &fs.inner;
    // A close by this owner: its fcntl locks on the file go (POSIX), after
    // its gathered writes are sent (as NFS sends them before an unlock), and
    // also when a rule fails the flush (the guard goes with the job).
    let unlock = UnlockOnDrop::new(inner, ino.0, owner.0);
    // nfs_file_flush (fs/nfs/file.c): a description not open for writing
    // sends nothing and reports nothing; one open for writing samples the
    // file's write-back error sequence, sends what is gathered, and reports
    // an error that write-back hit (another description's fsync still
    // reports it too: errseq per description).
    let writer = inner.handles.get(fh).is_ok_and(|h| h.writable());
    let since = inner.nfs().map_or(0, |nfs| nfs.write_behind.sample(ino.0));
    let carry = if writer {
        Carry::Gathered(ino.0)
    } else {
        Carry::Nothing
    };
    // The COMMIT a close sends (what `flush` rules stand for under NFS) goes
    // only when it has WRITEs to commit: a read-only close, or one with
    // nothing written since the last fsync, sends nothing (nfs_wb_all).
    let local = inner
        .nfs()
        .is_some_and(|nfs| !(writer && nfs.write_behind.dirty(ino.0)));
    let path = inner.path_for(Op::Flush, ino.0);
    inner.serve(
        Ask::new(req, Op::Flush, &path).carrying(carry).local(local),
        &[],
        reply,
        move |inner, done, _, _| {
            let reported = match inner.nfs() {
                Some(nfs) if writer => {
                    nfs.write_behind.wait_landed(ino.0);
                    let reported = nfs.write_behind.since(ino.0, since);
                    if !local {
                        nfs.write_behind.committed(ino.0);
                    }
                    reported
                }
                _ => Ok(()),
            };
            let result = reported
                .and_then(|()| inner.handles.get(fh))
                .and_then(|h| sys::flush(h.raw()));
            drop(unlock);
            done.respond(inner, result, |r, ()| {
                r.ok();
            })
        },
    );
}

/// The last close of an open file description. With `flock_owner` (FUSE's
/// FUSE_RELEASE_FLOCK_UNLOCK: the description took flock(2) locks through the
/// daemon) its flock goes, after its gathered writes are sent (`do_unlk`,
/// fs/nfs/file.c, writes back before it unlocks), also when a rule fails the
/// release.
pub(super) fn release(
    fs: &SlowFs,
    req: &Request,
    ino: INodeNo,
    fh: FileHandle,
    flock_owner: Option<LockOwner>,
    closed: Option<SillyDelete>,
    reply: ReplyEmpty,
) {
    let guards = CloseGuards {
        unlock: flock_owner.map(|owner| UnlockOnDrop::new(&fs.inner, ino.0, owner.0)),
        silly: closed,
    };
    fs.close_handle(req, Op::Release, ino, fh, guards, reply);
}

/// What a close lets go of besides its handle: the owner's flock locks
/// (before the handle goes) and the file's silly names (after it, and after
/// what the RELEASE carried was sent). Both also when a rule fails it.
#[derive(Default)]
pub(super) struct CloseGuards {
    unlock: Option<UnlockOnDrop>,
    silly: Option<SillyDelete>,
}

pub(super) fn fsync(
    fs: &SlowFs,
    req: &Request,
    ino: INodeNo,
    fh: FileHandle,
    datasync: bool,
    reply: ReplyEmpty,
) {
    fs.sync(
        req,
        if datasync { Op::Fdatasync } else { Op::Fsync },
        ino,
        fh,
        datasync,
        reply,
    );
}

#[allow(clippy::too_many_arguments)] // the request's fields, as fuser passes them
pub(super) fn create(
    fs: &SlowFs,
    req: &Request,
    parent: INodeNo,
    name: &OsStr,
    mode: u32,
    umask: u32,
    flags: i32,
    reply: ReplyCreate,
) {
    let inner = &fs.inner;
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
                        let flags = inner.backing_flags(flags) | libc::O_CREAT | libc::O_NOFOLLOW;
                        inner.without_atime(flags, |flags| {
                            sys::openat(dir.raw(), &cname, flags, mode)
                        })
                    })
                })?;
                inner.adopt(&dir, &cname, caller, mode, libc::S_IFREG)?;
                let attr = inner.entry(parent.0, &dir, &name)?;
                inner.changed(Change::Created {
                    parent: parent.0,
                    name: &name,
                    ino: attr.ino.0,
                    kind: NodeKind::File,
                });
                Ok((attr, inner.inodes.get(attr.ino)?, fd))
            })();
            let (attr, inode, fd) = match result {
                Ok(created) => created,
                Err(errno) => return done.respond(inner, Err::<(), _>(errno), |_, ()| {}),
            };
            let reply = done.record(inner, RequestOutcome::default());
            let backing = (passthrough && !sys::is_privileged(mode))
                .then(|| inner.backing_for(&inode, || reply.open_backing(&fd)))
                .flatten();
            let direct_io = fopen.contains(FopenFlags::FOPEN_DIRECT_IO);
            let fh = inner.handles.insert(fd, backing.clone(), direct_io);
            inner.sample_write_back(attr.ino.0, fh);
            inner.file_opened(attr.ino.0);
            if backing.is_some() {
                let write = flags & libc::O_ACCMODE != libc::O_RDONLY;
                inner.created_passthrough(fh.0, attr.ino.0, write);
            }
            // One time for the name and the attributes: the shorter. A
            // passthrough writer's attributes are otherwise not cached (the
            // daemon cannot see stores through a mapping), but a new file is
            // empty: nothing can be stored in it before a size change, after
            // which the kernel asks for its attributes again.
            let ttl = if inner.is_nfs_client() {
                inner
                    .attr_ttl(attr.ino.0, &attr)
                    .min(inner.entry_ttl(parent.0))
            } else {
                inner.entry_ttl(parent.0)
            };
            match backing {
                Some(id) => {
                    reply.created_passthrough(&ttl, &attr, GENERATION, fh, FopenFlags::empty(), &id)
                }
                None => reply.created(&ttl, &attr, GENERATION, fh, fopen),
            }
        },
    );
}

#[allow(clippy::too_many_arguments)] // the request's fields, as fuser passes them
pub(super) fn fallocate(
    fs: &SlowFs,
    req: &Request,
    ino: INodeNo,
    fh: FileHandle,
    offset: u64,
    length: u64,
    mode: i32,
    reply: ReplyEmpty,
) {
    let inner = &fs.inner;
    let path = inner.path_of(ino.0);
    let caller = Caller::of(req);
    inner.serve(
        Ask::new(req, Op::Fallocate, &path)
            .moving(length)
            .carrying(Carry::Gathered(ino.0)),
        &[],
        reply,
        move |inner, done, _, _| {
            let mut dropped = false;
            let result = inner.handles.get(fh).and_then(|h| {
                // Like a write, an allocation by a caller without CAP_FSETID drops
                // set-ID bits (the kernel leaves it to us under KILLPRIV_V2).
                dropped = sys::drop_privileges(h.raw(), caller)?;
                sys::fallocate(h.raw(), mode, offset, length)?;
                inner.changed(Change::Allocated {
                    ino: ino.0,
                    fd: h.raw(),
                    offset,
                    length,
                    mode,
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

pub(super) fn lseek(
    fs: &SlowFs,
    req: &Request,
    ino: INodeNo,
    fh: FileHandle,
    offset: i64,
    whence: i32,
    reply: ReplyLseek,
) {
    fs.inner
        .serve_on(req, Op::Lseek, ino, reply, move |inner, done, _, _| {
            let result = inner.handles.get(fh).and_then(|h| {
                // Reads use pread: moving this fd's position changes nothing else.
                sys::lseek(h.raw(), offset, whence)
            });
            done.respond(inner, result, |r, pos| {
                r.offset(pos);
            })
        });
}

#[allow(clippy::too_many_arguments)] // the request's fields, as fuser passes them
pub(super) fn copy_file_range(
    fs: &SlowFs,
    req: &Request,
    ino_in: INodeNo,
    fh_in: FileHandle,
    offset_in: u64,
    ino_out: INodeNo,
    fh_out: FileHandle,
    offset_out: u64,
    len: u64,
    reply: ReplyWrite,
) {
    let inner = &fs.inner;
    let path = inner.path_of(ino_in.0);
    inner.serve(
        Ask::new(req, Op::CopyFileRange, &path)
            .moving(len)
            // The source's gathered data must be read, and the
            // destination's must not land over the copy afterwards.
            .carrying(Carry::Both(ino_in.0, ino_out.0)),
        &[],
        reply,
        move |inner, done, effects, _| {
            let len = effects.short_to.unwrap_or(len) as usize;
            let result = (|| {
                let (src, dst) = (inner.handles.get(fh_in)?, inner.handles.get(fh_out)?);
                let n = sys::copy_file_range(src.raw(), offset_in, dst.raw(), offset_out, len)?;
                inner.changed(Change::CopiedIn {
                    ino: ino_out.0,
                    fd: dst.raw(),
                    offset: offset_out,
                    len: n,
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

impl SlowFs {
    /// release / releasedir: the handle (and its backing fd) goes.
    pub(super) fn close_handle(
        &self,
        req: &Request,
        op: Op,
        ino: INodeNo,
        fh: FileHandle,
        CloseGuards { unlock, silly }: CloseGuards,
        reply: ReplyEmpty,
    ) {
        self.inner
            .serve_on(req, op, ino, reply, move |inner, done, _, _| {
                drop(unlock);
                inner.handles.remove(fh);
                inner.released(fh.0);
                drop(silly);
                done.record(inner, RequestOutcome::default()).ok();
            });
    }

    /// fsync / fsyncdir: the backing fd synced, or the rule's failure.
    pub(super) fn sync(
        &self,
        req: &Request,
        op: Op,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.inner
            .serve_on(req, op, ino, reply, move |inner, done, effects, _| {
                if let Some(nfs) = inner.nfs() {
                    nfs.write_behind.wait_landed(ino.0);
                }
                let result = inner.handles.get(fh).and_then(|h| {
                    inner.check_not_stale(h.raw())?;
                    if let Some(nfs) = inner.nfs() {
                        nfs.write_behind.check_and_advance(ino.0, &h.wb_seen)?;
                        nfs.write_behind.committed(ino.0);
                    }
                    lies::sync(&effects, inner, ino.0, fh.0, &h, || {
                        sys::sync(h.raw(), datasync)?;
                        inner.changed(Change::Synced {
                            ino: ino.0,
                            dir: op == Op::Fsyncdir,
                            datasync,
                        });
                        Ok(())
                    })
                });
                done.respond(inner, result, |r, ()| {
                    r.ok();
                })
            });
    }
}

impl Inner {
    /// The backing open's flags for a caller's `flags` ([`backing_flags`]);
    /// under `--cache nfs` without O_APPEND: the NFS client places an append
    /// at the end of the file as it knows it (its cached size, revalidated
    /// first) and sends a WRITE at that offset, so two clients appending to
    /// one file overwrite each other (open(2): "O_APPEND may lead to
    /// corrupted files on NFS"; `nfs_file_write` -> `generic_write_checks`).
    /// FUSE does the same: the kernel sends the WRITE at its size.
    fn backing_flags(&self, flags: i32) -> i32 {
        let flags = backing_flags(flags, self.writeback());
        if self.is_nfs_client() {
            flags & !libc::O_APPEND
        } else {
            flags
        }
    }

    /// The one data path of a write that reaches the backing file, for a
    /// caller's write(2) and for the NFS client's WRITE alike: what the rules'
    /// `effects` make of it (`lose`: acknowledged, never applied), set-ID bits
    /// dropped first for a caller without CAP_FSETID (`kill`), the backing
    /// pwrite, and the layers that watch the tree change. Returns the bytes
    /// written and whether set-ID bits were dropped.
    pub(super) fn write_data(
        &self,
        effects: &slowfs_faults::Effects,
        ino: u64,
        h: &super::handles::Handle,
        offset: u64,
        data: &[u8],
        kill: Option<Caller>,
    ) -> sys::SysResult<(usize, bool)> {
        let mut dropped = false;
        let n = lies::write(effects, data.len(), || {
            if let Some(caller) = kill {
                dropped = sys::drop_privileges(h.raw(), caller)?;
            }
            let n = sys::pwrite(h.raw(), data, offset)?;
            self.wrote_here(ino, h.raw());
            self.changed(Change::Wrote {
                ino,
                fd: h.raw(),
                offset,
                data: &data[..n],
            });
            Ok(n)
        })?;
        Ok((n, dropped))
    }

    /// A new open file description `fh` of `ino` reports only write-back
    /// errors from now on (`file->f_wb_err` sampled at open).
    fn sample_write_back(&self, ino: u64, fh: FileHandle) {
        if let (Ok(h), Some(nfs)) = (self.handles.get(fh), self.nfs()) {
            h.wb_seen.store(
                nfs.write_behind.sample(ino),
                std::sync::atomic::Ordering::SeqCst,
            );
        }
    }
}

//! `fuser::Filesystem` for slowfs: INIT (what the mount negotiates), and the
//! table that sends each request to its family's module: [`super::entries`],
//! [`super::attributes`], [`super::files`], [`super::directories`],
//! [`super::xattrs`]. There each handler names its operation, the path the rules
//! see and the bytes it moves, and hands the syscall (a `sys` call returning a
//! Result) to `Inner::serve`.

use std::ffi::OsStr;
use std::path::Path;
use std::time::SystemTime;

use fuser::{
    AccessFlags, BsdFileFlags, CopyFileRangeFlags, Errno, FileHandle, Filesystem, Generation,
    INodeNo, InitFlags, IoctlFlags, KernelConfig, LockOwner, OpenFlags, PollEvents, PollFlags,
    PollNotifier, RenameFlags, ReplyAttr, ReplyBmap, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyIoctl, ReplyLock, ReplyLseek, ReplyOpen, ReplyPoll, ReplyStatfs,
    ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use super::contain::contain;
use super::nfs::locks;
use super::SlowFs;
use super::{attributes, directories, entries, files, xattrs};

pub(super) const GENERATION: Generation = Generation(0);

impl Filesystem for SlowFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let tuning = self.inner.options.tuning;
        let _ = config.set_max_write(tuning.max_write);
        let readahead = match self.inner.mode.nfs() {
            Some(nfs) => nfs.settings.rsize,
            None => tuning.max_write,
        };
        let _ = config.set_max_readahead(readahead);
        let _ = config.set_max_background(tuning.max_background);
        let _ = config.set_congestion_threshold((tuning.max_background / 4 * 3).max(1));
        // No FUSE_ATOMIC_O_TRUNC: with it the daemon truncates at FUSE_OPEN,
        // before the kernel checks that the file is not being executed, so
        // open(O_RDONLY|O_TRUNC) of a running program emptied it (and answered
        // ETXTBSY or, racing, success). Without it the kernel checks first and
        // truncates by SETATTR, as for any filesystem.
        let mut wanted = InitFlags::FUSE_PARALLEL_DIROPS
            | InitFlags::FUSE_ASYNC_DIO
            | InitFlags::FUSE_AUTO_INVAL_DATA
            | InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP
            // The caller's umask comes with each create and the backing filesystem
            // applies it, or, where the parent has a default ACL, the ACL instead.
            | InitFlags::FUSE_DONT_MASK;
        if let Some(nfs) = self.inner.nfs_client() {
            // nfs(5) `lock` and `local_lock=`: a mechanism not kept local is
            // the server's (see nfs/locks.rs); without its flag the kernel keeps
            // that mechanism's locks to this mount.
            if !nfs.local_lock.posix() {
                wanted |= InitFlags::FUSE_POSIX_LOCKS;
            }
            if !nfs.local_lock.flock() {
                wanted |= InitFlags::FUSE_FLOCK_LOCKS;
            }
            // `rdirplus`: listings as READDIRPLUS, adaptively as the NFS
            // client chooses it (see nfs/listings.rs).
            if nfs.rdirplus {
                wanted |= InitFlags::FUSE_DO_READDIRPLUS | InitFlags::FUSE_READDIRPLUS_AUTO;
            }
        }
        if tuning.kill_priv_v2 {
            // The daemon drops set-user/group-ID itself (see sys::drop_privileges);
            // in return the kernel stops asking for security.capability before
            // every write (SB_NOSEC), a round trip that halved passthrough writes.
            wanted |= InitFlags::FUSE_HANDLE_KILLPRIV_V2;
        }
        let passthrough = self.inner.options.passthrough_wanted
            && config.capabilities().contains(InitFlags::FUSE_PASSTHROUGH)
            && config.set_max_stack_depth(1).is_ok();
        if passthrough {
            // The kernel offers passthrough only without the writeback cache.
            wanted |= InitFlags::FUSE_PASSTHROUGH;
        } else if tuning.writeback_cache && self.inner.options.writeback_allowed {
            // Small writes gather in the page cache. Files a data rule touches are
            // opened direct-I/O, which bypasses it, so faults still reach callers.
            wanted |= InitFlags::FUSE_WRITEBACK_CACHE;
        }
        let supported = config.capabilities() & wanted;
        let _ = config.add_capabilities(supported);
        self.inner.negotiated.granted(supported);
        Ok(())
    }

    fn destroy(&mut self) {
        self.inner.scheduler.shutdown();
        self.inner.send_all_gathered();
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.handle(req, "lookup", || {
            entries::lookup(self, req, parent, name, reply)
        });
    }

    // fuser's batch_forget calls this per node, with the batch's request:
    // its number counts once (see nfs/arrivals.rs).
    fn forget(&self, req: &Request, ino: INodeNo, nlookup: u64) {
        self.handle(req, "forget", || {
            if self.inner.inodes.forget(ino.0, nlookup) {
                // What this NFS client had seen of the file goes with it.
                if let Some(nfs) = self.inner.nfs() {
                    nfs.forget(ino.0);
                }
            }
        });
    }

    fn getattr(&self, req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        self.handle(req, "getattr", || {
            attributes::getattr(self, req, ino, fh, reply)
        });
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
        self.handle(req, "setattr", || {
            let change = attributes::AttrChange {
                mode,
                uid,
                gid,
                size,
                atime,
                mtime,
            };
            attributes::setattr(self, req, ino, change, fh, reply)
        });
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        self.handle(req, "readlink", || entries::readlink(self, req, ino, reply));
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
        self.handle(req, "mknod", || {
            entries::mknod(self, req, parent, name, mode, umask, rdev, reply)
        });
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
        self.handle(req, "mkdir", || {
            entries::mkdir(self, req, parent, name, mode, umask, reply)
        });
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.handle(req, "unlink", || {
            entries::unlink(self, req, parent, name, reply)
        });
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.handle(req, "rmdir", || {
            entries::rmdir(self, req, parent, name, reply)
        });
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        self.handle(req, "symlink", || {
            entries::symlink(self, req, parent, link_name, target, reply)
        });
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
        self.handle(req, "rename", || {
            entries::rename(self, req, parent, name, newparent, newname, flags, reply)
        });
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.handle(req, "link", || {
            entries::link(self, req, ino, newparent, newname, reply)
        });
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.handle(req, "open", || files::open(self, req, ino, flags, reply));
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
        self.handle(req, "read", || {
            files::read(self, req, ino, fh, offset, size, reply)
        });
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
        self.handle(req, "write", || {
            files::write(self, req, ino, fh, offset, data, write_flags, reply)
        });
    }

    fn flush(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        self.handle(req, "flush", || {
            files::flush(self, req, ino, fh, lock_owner, reply)
        });
    }

    fn getlk(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        _pid: u32,
        reply: ReplyLock,
    ) {
        self.handle(req, "getlk", || {
            locks::getlk(self, req, ino, lock_owner, start, end, typ, reply)
        });
    }

    fn setlk(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        _pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        self.handle(req, "setlk", || {
            locks::setlk(
                self, req, ino, fh, lock_owner, start, end, typ, sleep, reply,
            )
        });
    }

    fn release(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        // The file counts closed before the request counts as arrived: an
        // unlink the caller sent after its close(2) waits for the arrival
        // (nfs/arrivals.rs).
        let mut closed = None;
        contain("release", || closed = Some(self.inner.file_closed(ino.0)));
        self.handle(req, "release", || {
            files::release(self, req, ino, fh, lock_owner, closed, reply)
        });
    }

    fn fsync(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.handle(req, "fsync", || {
            files::fsync(self, req, ino, fh, datasync, reply)
        });
    }

    fn opendir(&self, req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.handle(req, "opendir", || {
            directories::opendir(self, req, ino, reply)
        });
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: fuser::ReplyDirectoryPlus,
    ) {
        self.handle(req, "readdirplus", || {
            super::nfs::listings::readdirplus(self, req, ino, fh, offset, reply)
        });
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        self.handle(req, "readdir", || {
            directories::readdir(self, req, ino, fh, offset, reply)
        });
    }

    fn releasedir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.handle(req, "releasedir", || {
            directories::releasedir(self, req, ino, fh, reply)
        });
    }

    fn fsyncdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.handle(req, "fsyncdir", || {
            directories::fsyncdir(self, req, ino, fh, datasync, reply)
        });
    }

    fn statfs(&self, req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        self.handle(req, "statfs", || attributes::statfs(self, req, ino, reply));
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
        self.handle(req, "setxattr", || {
            xattrs::setxattr(self, req, ino, name, value, flags, reply)
        });
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        self.handle(req, "getxattr", || {
            xattrs::getxattr(self, req, ino, name, size, reply)
        });
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        self.handle(req, "listxattr", || {
            xattrs::listxattr(self, req, ino, size, reply)
        });
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.handle(req, "removexattr", || {
            xattrs::removexattr(self, req, ino, name, reply)
        });
    }

    fn access(&self, req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        self.handle(req, "access", || {
            attributes::access(self, req, ino, mask, reply)
        });
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
        self.handle(req, "create", || {
            files::create(self, req, parent, name, mode, umask, flags, reply)
        });
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
        self.handle(req, "fallocate", || {
            files::fallocate(self, req, ino, fh, offset, length, mode, reply)
        });
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
        self.handle(req, "lseek", || {
            files::lseek(self, req, ino, fh, offset, whence, reply)
        });
    }

    // Not served, as fuser's defaults, but counted as arrived: an NFS
    // client's silly-rename check waits for every earlier request.
    fn bmap(&self, req: &Request, _ino: INodeNo, _size: u32, _idx: u64, reply: ReplyBmap) {
        self.handle(req, "bmap", || reply.error(Errno::ENOSYS));
    }

    fn ioctl(
        &self,
        req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        self.handle(req, "ioctl", || reply.error(Errno::ENOSYS));
    }

    fn poll(
        &self,
        req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _ph: PollNotifier,
        _events: PollEvents,
        _flags: PollFlags,
        reply: ReplyPoll,
    ) {
        self.handle(req, "poll", || reply.error(Errno::ENOSYS));
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
        self.handle(req, "copy_file_range", || {
            files::copy_file_range(
                self, req, ino_in, fh_in, offset_in, ino_out, fh_out, offset_out, len, reply,
            )
        });
    }
}

impl SlowFs {
    /// Runs a request's handler, a panic in it contained. On an NFS client
    /// the request first counts as arrived (see [`super::nfs::arrivals`]).
    fn handle(&self, req: &Request, op: &str, handler: impl FnOnce()) {
        if let Some(nfs) = self.inner.nfs() {
            nfs.arrivals.arrived(req.unique().0);
        }
        contain(op, handler);
    }
}

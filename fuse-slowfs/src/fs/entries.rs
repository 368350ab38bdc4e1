//! Names: lookup, the calls that make and remove entries (mknod, mkdir,
//! symlink, link, unlink, rmdir, rename) and readlink.

use std::ffi::{CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use fuser::{Errno, INodeNo, RenameFlags, ReplyData, ReplyEmpty, ReplyEntry, Request};
use slowfs_faults::durability::NodeKind;
use slowfs_faults::Op;

use super::changes::Change;
use super::filesystem::GENERATION;
use super::inodes::Node;
use super::sys::{self, Caller, SysResult};
use super::{attr, Ask, Carry, Inner, SlowFs};
use crate::stats::RequestOutcome;

pub(super) fn lookup(fs: &SlowFs, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
    let inner = &fs.inner;
    let path = inner.child_path_for(Op::Lookup, parent.0, name);
    let name = name.to_os_string();
    inner.serve(
        Ask::new(req, Op::Lookup, &path),
        &[],
        reply,
        move |inner, done, _, _| {
            let dir = inner.inodes.get(parent);
            let result = dir
                .as_ref()
                .map_err(|e| *e)
                .and_then(|dir| inner.entry(parent.0, dir, &name));
            let ttl = inner.entry_ttl(parent.0);
            let negative_ttl = inner.negative_ttl(parent.0);
            match result {
                // A missing name is cached as missing (a negative entry) as
                // long as an existing one is cached: the create that usually
                // follows skips a lookup round trip.
                Err(fuser::Errno::ENOENT) if !negative_ttl.is_zero() => {
                    if let (Ok(dir), Some(nfs)) = (&dir, inner.nfs()) {
                        // Stamped with the directory's version (nfs_set_verifier).
                        if let Ok(st) = sys::stat_fd(dir.raw()) {
                            let version = crate::client_cache::Version::of(&st);
                            nfs.negative_names.missing(parent.0, &name, version);
                        }
                    }
                    let failed = RequestOutcome {
                        bytes: 0,
                        failed: true,
                    };
                    let none = sys::no_stat();
                    done.record(inner, failed).entry_with_ttls(
                        &std::time::Duration::ZERO,
                        &negative_ttl,
                        &attr(0, &none),
                        GENERATION,
                    );
                }
                result => done.respond(inner, result, |r, a| {
                    let attr_ttl = inner.attr_ttl(a.ino.0, &a);
                    r.entry_with_ttls(&attr_ttl, &ttl, &a, GENERATION);
                }),
            }
        },
    );
}

pub(super) fn readlink(fs: &SlowFs, req: &Request, ino: INodeNo, reply: ReplyData) {
    fs.inner
        .serve_on(req, Op::Readlink, ino, reply, move |inner, done, _, _| {
            let result = inner
                .inodes
                .get(ino)
                .and_then(|i| sys::readlink_fd(i.raw()));
            done.respond(inner, result, |r, target| {
                r.data(&target);
            })
        });
}

#[allow(clippy::too_many_arguments)] // the request's fields, as fuser passes them
pub(super) fn mknod(
    fs: &SlowFs,
    req: &Request,
    parent: INodeNo,
    name: &OsStr,
    mode: u32,
    umask: u32,
    rdev: u32,
    reply: ReplyEntry,
) {
    make(
        fs,
        req,
        parent,
        name,
        umask,
        NewNode::Special { mode, rdev },
        reply,
    );
}

pub(super) fn mkdir(
    fs: &SlowFs,
    req: &Request,
    parent: INodeNo,
    name: &OsStr,
    mode: u32,
    umask: u32,
    reply: ReplyEntry,
) {
    make(fs, req, parent, name, umask, NewNode::Dir { mode }, reply);
}

/// What mknod and mkdir make.
#[derive(Debug, Clone, Copy)]
enum NewNode {
    /// A file, FIFO, socket or device node (`mode` carries the type).
    Special {
        mode: u32,
        rdev: u32,
    },
    Dir {
        mode: u32,
    },
}

impl NewNode {
    fn op(self) -> Op {
        match self {
            NewNode::Special { .. } => Op::Mknod,
            NewNode::Dir { .. } => Op::Mkdir,
        }
    }

    fn mode(self) -> u32 {
        match self {
            NewNode::Special { mode, .. } | NewNode::Dir { mode } => mode,
        }
    }

    /// The `S_IFMT` bits of what is made.
    fn file_type(self) -> u32 {
        match self {
            NewNode::Special { mode, .. } => mode & libc::S_IFMT,
            NewNode::Dir { .. } => libc::S_IFDIR,
        }
    }

    /// What the crash model's log calls it.
    fn kind(self) -> NodeKind {
        match self {
            NewNode::Special { .. } => NodeKind::File,
            NewNode::Dir { .. } => NodeKind::Dir,
        }
    }

    fn make_at(self, dir: std::os::fd::RawFd, name: &CStr) -> SysResult<()> {
        match self {
            NewNode::Special { mode, rdev } => sys::mknod_at(dir, name, mode, rdev as u64),
            NewNode::Dir { mode } => sys::mkdir_at(dir, name, mode),
        }
    }
}

/// mknod and mkdir: makes `node` under the caller's umask, gives it to the
/// caller, registers and records it.
fn make(
    fs: &SlowFs,
    req: &Request,
    parent: INodeNo,
    name: &OsStr,
    umask: u32,
    node: NewNode,
    reply: ReplyEntry,
) {
    let inner = &fs.inner;
    let path = inner.child_path(parent.0, name);
    let name = name.to_os_string();
    let caller = Caller::of(req);
    inner.serve(
        Ask::new(req, node.op(), &path),
        &[],
        reply,
        move |inner, done, _, _| {
            let result = (|| {
                let dir = inner.inodes.get(parent)?;
                let cname = sys::component(&name)?;
                sys::with_umask(inner.create_mask(umask), || node.make_at(dir.raw(), &cname))?;
                inner.adopt(&dir, &cname, caller, node.mode(), node.file_type())?;
                inner.entry(parent.0, &dir, &name).inspect(|a| {
                    inner.changed(Change::Created {
                        parent: parent.0,
                        name: &name,
                        ino: a.ino.0,
                        kind: node.kind(),
                    })
                })
            })();
            let ttl = inner.entry_ttl(parent.0);
            done.respond(inner, result, |r, a| {
                r.entry_with_ttls(&inner.attr_ttl(a.ino.0, &a), &ttl, &a, GENERATION);
            })
        },
    );
}

pub(super) fn unlink(fs: &SlowFs, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
    fs.remove(req, Op::Unlink, parent, name, 0, reply);
}

pub(super) fn rmdir(fs: &SlowFs, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
    fs.remove(req, Op::Rmdir, parent, name, libc::AT_REMOVEDIR, reply);
}

pub(super) fn symlink(
    fs: &SlowFs,
    req: &Request,
    parent: INodeNo,
    link_name: &OsStr,
    target: &Path,
    reply: ReplyEntry,
) {
    let inner = &fs.inner;
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
                    inner.changed(Change::Created {
                        parent: parent.0,
                        name: &name,
                        ino: a.ino.0,
                        kind: NodeKind::Symlink(target),
                    })
                })
            })();
            let ttl = inner.entry_ttl(parent.0);
            done.respond(inner, result, |r, a| {
                r.entry_with_ttls(&inner.attr_ttl(a.ino.0, &a), &ttl, &a, GENERATION);
            })
        },
    );
}

#[allow(clippy::too_many_arguments)] // the request's fields, as fuser passes them
pub(super) fn rename(
    fs: &SlowFs,
    req: &Request,
    parent: INodeNo,
    name: &OsStr,
    newparent: INodeNo,
    newname: &OsStr,
    flags: RenameFlags,
    reply: ReplyEmpty,
) {
    let inner = &fs.inner;
    let path = inner.child_path(parent.0, name);
    // nfs_rename (fs/nfs/dir.c) writes a regular file's dirty data back
    // before the RENAME (`nfs_sync_inode`), so that another client that
    // opens it under its new name finds it.
    let carry = match inner.inodes.at(parent.0, name) {
        Some(ino) => Carry::Gathered(ino),
        None => Carry::Nothing,
    };
    let (name, newname) = (name.to_os_string(), newname.to_os_string());
    let unique = req.unique().0;
    inner.serve(
        Ask::new(req, Op::Rename, &path).carrying(carry),
        &[],
        reply,
        move |inner, done, _, _| {
            let result = (|| {
                let from = inner.inodes.get(parent)?;
                let to = inner.inodes.get(newparent)?;
                let (cname, cnew) = (sys::component(&name)?, sys::component(&newname)?);
                let exchange = flags.contains(RenameFlags::RENAME_EXCHANGE);
                // A silly name held open moves nowhere, and nothing replaces it.
                inner.check_not_silly(parent.0, &name)?;
                inner.check_not_silly(newparent.0, &newname)?;
                let same_file = inner.inodes.at(parent.0, &name).is_some()
                    && inner.inodes.at(parent.0, &name) == inner.inodes.at(newparent.0, &newname);
                if !exchange && !same_file && !flags.contains(RenameFlags::RENAME_NOREPLACE) {
                    // An open file renamed over stays reachable under a silly name.
                    inner.silly_rename(unique, newparent.0, &to, &newname)?;
                }
                // A file renamed over loses the name it is reopened by: keep its fd.
                let displaced = (!exchange)
                    .then(|| inner.inodes.at(newparent.0, &newname))
                    .flatten()
                    .and_then(|ino| inner.inodes.get(INodeNo(ino)).ok());
                // What moves: looked up before the names change.
                let moved = inner
                    .wants_moved_nodes()
                    .then(|| {
                        let node = sys::stat_at(from.raw(), &cname, 0).ok()?.st_ino;
                        let other = exchange
                            .then(|| sys::stat_at(to.raw(), &cnew, 0).ok().map(|st| st.st_ino))
                            .flatten();
                        Some((node, other))
                    })
                    .flatten();
                sys::rename_at(from.raw(), &cname, to.raw(), &cnew, flags.bits())?;
                inner.changed(Change::Renamed {
                    from_dir: from.key.1,
                    from_name: &name,
                    to_dir: to.key.1,
                    to_name: &newname,
                    moved,
                });
                if let Some(displaced) = displaced {
                    inner.inodes.pin(&displaced);
                }
                inner
                    .inodes
                    .renamed((parent.0, &name), (newparent.0, &newname), exchange);
                if let Some(nfs) = inner.nfs() {
                    nfs.negative_names.found(newparent.0, &newname);
                }
                Ok(())
            })();
            done.respond(inner, result, |r, ()| {
                r.ok();
            })
        },
    );
}

pub(super) fn link(
    fs: &SlowFs,
    req: &Request,
    ino: INodeNo,
    newparent: INodeNo,
    newname: &OsStr,
    reply: ReplyEntry,
) {
    let inner = &fs.inner;
    let path = inner.child_path(newparent.0, newname);
    let newname = newname.to_os_string();
    // nfs_link writes a regular file's dirty data back first, as nfs_rename.
    inner.serve(
        Ask::new(req, Op::Link, &path).carrying(Carry::Gathered(ino.0)),
        &[],
        reply,
        move |inner, done, _, _| {
            let result = (|| {
                let inode = inner.inodes.get(ino)?;
                let dir = inner.inodes.get(newparent)?;
                let cname = sys::component(&newname)?;
                sys::link_fd_at(inode.raw(), dir.raw(), &cname)?;
                inner.entry(newparent.0, &dir, &newname).inspect(|_| {
                    inner.changed(Change::Linked {
                        parent: newparent.0,
                        name: &newname,
                        ino: ino.0,
                    })
                })
            })();
            let ttl = inner.entry_ttl(newparent.0);
            done.respond(inner, result, |r, a| {
                let attr_ttl = inner.attr_ttl(a.ino.0, &a);
                r.entry_with_ttls(&attr_ttl, &ttl, &a, GENERATION);
            })
        },
    );
}

impl SlowFs {
    pub(super) fn remove(
        &self,
        req: &Request,
        op: Op,
        parent: INodeNo,
        name: &OsStr,
        flags: i32,
        reply: ReplyEmpty,
    ) {
        let inner = &self.inner;
        let path = inner.child_path_for(op, parent.0, name);
        let name = name.to_os_string();
        let unique = req.unique().0;
        inner.serve(
            Ask::new(req, op, &path),
            &[],
            reply,
            move |inner, done, _, _| {
                let result = inner.inodes.get(parent).and_then(|dir| {
                    let cname = sys::component(&name)?;
                    if op == Op::Unlink && inner.silly_rename(unique, parent.0, &dir, &name)? {
                        return Ok(());
                    }
                    // The inode loses the name it is reopened by: keep its fd.
                    let victim = inner.inodes.at(parent.0, &name).map(INodeNo);
                    let victim = victim.and_then(|ino| inner.inodes.get(ino).ok());
                    sys::unlink_at(dir.raw(), &cname, flags)?;
                    if let Some(victim) = victim {
                        inner.inodes.pin(&victim);
                    }
                    inner.changed(Change::Removed {
                        dir: dir.key.1,
                        name: &name,
                    });
                    Ok(())
                });
                done.respond(inner, result, |r, ()| {
                    r.ok();
                })
            },
        );
    }
}

impl Inner {
    /// Looks `name` up in `parent` and registers the inode: the reply of lookup,
    /// mkdir, mknod, symlink and link.
    pub(super) fn entry(
        &self,
        parent: u64,
        dir: &Node,
        name: &OsStr,
    ) -> SysResult<fuser::FileAttr> {
        let cname = sys::component(name)?;
        let fd =
            self.with_fds(|| sys::openat(dir.raw(), &cname, libc::O_PATH | libc::O_NOFOLLOW, 0))?;
        let st = sys::stat_fd(sys::raw(&fd))?;
        let ino = self
            .inodes
            .remember(parent, name.to_os_string(), fd, (st.st_dev, st.st_ino));
        // The kernel's entry for it is a positive one now (a create or a
        // lookup that found it replaces a negative one).
        if let Some(nfs) = self.nfs() {
            nfs.negative_names.found(parent, name);
        }
        Ok(attr(ino, &st))
    }
}

impl Inner {
    /// Gives a new node in `dir` to the caller and the exact mode asked for: the
    /// daemon creates as itself, so ownership and masked mode bits are fixed up here.
    pub(super) fn adopt(
        &self,
        dir: &Node,
        name: &CStr,
        caller: Caller,
        mode: u32,
        kind: u32,
    ) -> SysResult<()> {
        let (euid, egid) = sys::daemon_ids();
        let special = libc::S_ISUID | libc::S_ISGID | libc::S_ISVTX;
        if (caller.uid, caller.gid) == (euid, egid) && mode & special == 0 {
            // Made as the caller, with the bits asked for: nothing to fix
            // (and no stat of the parent on the common path).
            return Ok(());
        }
        let parent = sys::stat_fd(dir.raw())?;
        let inherit_gid = parent.st_mode & libc::S_ISGID != 0;
        let gid = if inherit_gid { u32::MAX } else { caller.gid };
        if caller.uid != euid || (gid != u32::MAX && gid != egid) {
            sys::chown_at(dir.raw(), name, caller.uid, gid)?;
        }
        if kind == libc::S_IFLNK {
            return Ok(());
        }
        // The chown cleared the set-ID bits asked for: put them back on the
        // permission bits the umask or default ACL left.
        if mode & special != 0 {
            let now = sys::stat_at(dir.raw(), name, 0)?.st_mode;
            let mut mode = (now & 0o777) | (mode & special);
            if kind == libc::S_IFDIR && inherit_gid {
                mode |= libc::S_ISGID;
            }
            sys::chmod(sys::Target::At(dir.raw(), name), mode)?;
        }
        Ok(())
    }
}

//! Extended attributes: set, get, list and remove, through `/proc/self/fd`.

use std::ffi::{CStr, CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;

use fuser::{Errno, INodeNo, ReplyEmpty, ReplyXattr, Request};
use slowfs_faults::Op;

use super::nfs::acls::XattrRequest;
use super::sys::{self, Caller, SysResult};
use super::{Ask, Carry, Inner, SlowFs};

pub(super) fn setxattr(
    fs: &SlowFs,
    req: &Request,
    ino: INodeNo,
    name: &OsStr,
    value: &[u8],
    flags: i32,
    reply: ReplyEmpty,
) {
    let inner = &fs.inner;
    let path = inner.path_of(ino.0);
    let name = name.to_os_string();
    let caller = Caller::of(req);
    let local = inner.xattr_is_local(ino.0, XattrRequest::Change(&name));
    inner.serve(
        Ask::new(req, Op::Xattr, &path).local(local),
        value,
        reply,
        move |inner, done, _, value| {
            let result = xattr_target(inner, ino).and_then(|p| {
                let name = CString::new(name.as_bytes()).map_err(|_| Errno::EINVAL)?;
                sys::set_xattr(&p, &name, value, flags)?;
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

pub(super) fn getxattr(
    fs: &SlowFs,
    req: &Request,
    ino: INodeNo,
    name: &OsStr,
    size: u32,
    reply: ReplyXattr,
) {
    let inner = &fs.inner;
    let path = inner.path_of(ino.0);
    let local = inner.xattr_is_local(ino.0, XattrRequest::Get(name));
    let name = name.to_os_string();
    inner.serve(
        Ask::new(req, Op::Xattr, &path).local(local),
        &[],
        reply,
        move |inner, done, _, _| {
            let result = CString::new(name.as_bytes())
                .map_err(|_| Errno::EINVAL)
                .and_then(|name| {
                    xattr_query(inner, ino, size, |p, buf| sys::get_xattr(p, &name, buf))
                });
            // The server's answer, also that there is none, is the client's now.
            if matches!(result, Ok(_) | Err(Errno::ENODATA)) {
                inner.xattr_fetched(ino.0, XattrRequest::Get(&name));
            }
            done.respond(inner, result, |r, answer| send_xattr(r, size, answer))
        },
    );
}

pub(super) fn listxattr(fs: &SlowFs, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
    let inner = &fs.inner;
    let path = inner.path_for(Op::Xattr, ino.0);
    let local = inner.xattr_is_local(ino.0, XattrRequest::List);
    let ask = Ask::new(req, Op::Xattr, &path)
        .carrying(Carry::Gathered(ino.0))
        .local(local);
    inner.serve(ask, &[], reply, move |inner, done, _, _| {
        let result = xattr_query(inner, ino, size, sys::list_xattrs);
        if result.is_ok() {
            inner.xattr_fetched(ino.0, XattrRequest::List);
        }
        done.respond(inner, result, |r, answer| send_xattr(r, size, answer))
    });
}

pub(super) fn removexattr(
    fs: &SlowFs,
    req: &Request,
    ino: INodeNo,
    name: &OsStr,
    reply: ReplyEmpty,
) {
    let inner = &fs.inner;
    let path = inner.path_of(ino.0);
    let local = inner.xattr_is_local(ino.0, XattrRequest::Change(name));
    let name = name.to_os_string();
    inner.serve(
        Ask::new(req, Op::Xattr, &path).local(local),
        &[],
        reply,
        move |inner, done, _, _| {
            let result = xattr_target(inner, ino).and_then(|p| {
                let name = CString::new(name.as_bytes()).map_err(|_| Errno::EINVAL)?;
                sys::remove_xattr(&p, &name)
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
    query: impl FnOnce(&CStr, &mut [u8]) -> SysResult<usize>,
) -> SysResult<(u32, Vec<u8>)> {
    let target = xattr_target(inner, ino)?;
    let mut buf = vec![0u8; size as usize];
    let n = query(&target, &mut buf)?;
    buf.truncate(n);
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

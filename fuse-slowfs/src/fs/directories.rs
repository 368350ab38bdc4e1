//! Directories: opendir, readdir (from a listing taken once per handle),
//! releasedir and fsyncdir.

use fuser::{FileHandle, FopenFlags, INodeNo, ReplyDirectory, ReplyEmpty, ReplyOpen, Request};
use slowfs_faults::Op;

use super::sys::{self, SysResult};
use super::{file_type, SlowFs};
use crate::stats::RequestOutcome;

pub(super) fn opendir(fs: &SlowFs, req: &Request, ino: INodeNo, reply: ReplyOpen) {
    fs.inner
        .serve_on(req, Op::Opendir, ino, reply, move |inner, done, _, _| {
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
                .map(|fd| inner.handles.insert(fd, None, false));
            done.respond(inner, result, |r, fh| {
                r.opened(fh, FopenFlags::empty());
            })
        });
}

pub(super) fn readdir(
    fs: &SlowFs,
    req: &Request,
    ino: INodeNo,
    fh: FileHandle,
    offset: u64,
    reply: ReplyDirectory,
) {
    fs.inner
        .serve_on(req, Op::Readdir, ino, reply, move |inner, done, _, _| {
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
            let mut reply = done.record(inner, RequestOutcome::default());
            for (i, (entry_ino, kind, name)) in
                listing.entries.iter().enumerate().skip(offset as usize)
            {
                let shown = inner.inodes.entry_number(*entry_ino);
                if reply.add(INodeNo(shown), i as u64 + 1, *kind, name) {
                    break;
                }
            }
            reply.ok();
        });
}

pub(super) fn releasedir(
    fs: &SlowFs,
    req: &Request,
    ino: INodeNo,
    fh: FileHandle,
    reply: ReplyEmpty,
) {
    fs.close_handle(req, Op::Releasedir, ino, fh, None, reply);
}

pub(super) fn fsyncdir(
    fs: &SlowFs,
    req: &Request,
    ino: INodeNo,
    fh: FileHandle,
    datasync: bool,
    reply: ReplyEmpty,
) {
    fs.sync(req, Op::Fsyncdir, ino, fh, datasync, reply);
}

/// Reads a whole directory through a duplicate of `fd`, from the start.
fn fill_listing(fd: i32, listing: &mut super::handles::Listing) -> SysResult<()> {
    listing.entries = sys::read_dir(fd)?
        .into_iter()
        .map(|(ino, d_type, name)| (ino, kind_of(d_type), name))
        .collect();
    listing.filled = true;
    Ok(())
}

/// A directory entry's `d_type` as a FUSE file type.
fn kind_of(d_type: u8) -> fuser::FileType {
    match d_type {
        libc::DT_DIR => fuser::FileType::Directory,
        libc::DT_LNK => fuser::FileType::Symlink,
        libc::DT_FIFO => fuser::FileType::NamedPipe,
        libc::DT_SOCK => fuser::FileType::Socket,
        libc::DT_CHR => fuser::FileType::CharDevice,
        libc::DT_BLK => fuser::FileType::BlockDevice,
        libc::DT_REG => fuser::FileType::RegularFile,
        _ => file_type(0),
    }
}

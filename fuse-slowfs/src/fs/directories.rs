//! Directories: opendir (under `--cache nfs` a revalidation, as the NFS
//! client's), readdir (from a listing taken once per handle), releasedir and
//! fsyncdir.

use std::os::fd::RawFd;
use std::sync::Arc;

use fuser::{FileHandle, FopenFlags, INodeNo, ReplyDirectory, ReplyEmpty, ReplyOpen, Request};
use slowfs_faults::Op;

use super::sys::{self, SysResult};
use super::{file_type, Inner, SlowFs};
use crate::client_cache::Version;
use crate::stats::RequestOutcome;

pub(super) fn opendir(fs: &SlowFs, req: &Request, ino: INodeNo, reply: ReplyOpen) {
    fs.inner
        .serve_on(req, Op::Opendir, ino, reply, move |inner, done, _, _| {
            let opened = inner.inodes.get(ino).and_then(|i| {
                inner.with_fds(|| {
                    inner.without_atime(libc::O_RDONLY | libc::O_DIRECTORY, |flags| {
                        sys::openat(i.raw(), c".", flags, 0)
                    })
                })
            });
            let fd = match opened {
                Ok(fd) => fd,
                Err(errno) => return done.respond(inner, Err::<(), _>(errno), |_, ()| {}),
            };
            let (flags, version) = inner.revalidate_directory(ino.0, sys::raw(&fd));
            let fh = inner.handles.insert(fd, None, false);
            let answer = {
                let inner = Arc::clone(inner);
                move || done.respond(&inner, Ok(fh), |r, fh| r.opened(fh, flags))
            };
            match version {
                // The open answers once the names it found stale are gone, so
                // that the caller's next path walk asks again.
                Some(version) => match inner.nfs() {
                    Some(nfs) => {
                        nfs.negative_names
                            .revalidated(ino.0, version, Some(Box::new(answer)))
                    }
                    None => answer(),
                },
                None => answer(),
            }
        });
}

impl Inner {
    /// Under `--cache nfs`, an open of directory `ino` (backing `fd`) is a
    /// close-to-open point as a file's is (`nfs_lookup_verify_inode`,
    /// fs/nfs/dir.c: a LOOKUP_OPEN of a directory forces
    /// `__nfs_revalidate_inode` unless `nocto`): its listing is cached by the
    /// kernel (FOPEN_CACHE_DIR) and kept from the last open while the
    /// directory is the version this client last saw (FOPEN_KEEP_CACHE), as
    /// `nfs_readdir` keeps its page cache until `nfs_revalidate_mapping` finds
    /// the directory changed; a changed one drops the listing and the cached
    /// attributes. Within one open, the kernel's listing lasts as long as the
    /// directory's cached mtime (its attribute window). Also the version now,
    /// for dropping negative entries (none under `nocto`: nothing is
    /// revalidated at open). Elsewhere: no caching, nothing to revalidate.
    fn revalidate_directory(&self, ino: u64, fd: RawFd) -> (FopenFlags, Option<Version>) {
        let Some(super::nfs::NfsClient {
            settings: nfs,
            view,
            ..
        }) = self.mode.nfs()
        else {
            return (FopenFlags::empty(), None);
        };
        let cached = FopenFlags::FOPEN_CACHE_DIR | FopenFlags::FOPEN_KEEP_CACHE;
        if !nfs.cto {
            return (cached, None);
        }
        let Ok(st) = sys::stat_fd(fd) else {
            return (FopenFlags::empty(), None);
        };
        let version = Version::of(&st);
        if view.still_current(nfs, ino, version) {
            (cached, Some(version))
        } else {
            self.attributes_changed(ino);
            (FopenFlags::FOPEN_CACHE_DIR, Some(version))
        }
    }
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
            let listing = match listing_from(&handle, offset) {
                Ok(listing) => listing,
                Err(errno) => return done.respond(inner, Err::<(), _>(errno), |_, ()| {}),
            };
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
    fs.close_handle(req, Op::Releasedir, ino, fh, Default::default(), reply);
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

/// The listing of open directory `handle` for a read from `offset`: read
/// anew at offset 0 (a rewind) or if not read yet.
pub(super) fn listing_from(
    handle: &super::handles::Handle,
    offset: u64,
) -> SysResult<std::sync::MutexGuard<'_, super::handles::Listing>> {
    let mut listing = handle.listing.lock().unwrap();
    if offset == 0 || !listing.filled {
        fill_listing(handle.raw(), &mut listing)?;
    }
    Ok(listing)
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

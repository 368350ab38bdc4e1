//! READDIRPLUS: a listing that brings each entry's attributes and handle, so
//! that `ls -l`, `cp -r` or `tar` send no LOOKUP (and no GETATTR) per entry.
//!
//! The Linux NFS client uses READDIRPLUS (`rdirplus`, the default for v3)
//! adaptively (`nfs_use_readdirplus`, fs/nfs/dir.c): for a directory's first
//! listing, and again when the program looks at the entries' attributes
//! after listing them (`nfs_advise_use_readdirplus` from `nfs_lookup_revalidate`
//! and `nfs_getattr`), else plain READDIR. FUSE's kernel side has the same
//! heuristic, taken from NFS (FUSE_READDIRPLUS_AUTO: `fuse_use_readdirplus`,
//! fs/fuse/readdir.c), so the mount offers it and the kernel chooses.
//! Each entry's reply counts as a lookup of it, as the client instantiates a
//! dentry and inode from it (`nfs_prime_dcache`); its names and attributes
//! are cached for as long as a LOOKUP's would be. Rules on `readdir` act on
//! it; as on NFS, a `lookup` rule sees only the LOOKUPs still sent.

use fuser::{FileHandle, INodeNo, ReplyDirectoryPlus, Request};
use slowfs_faults::Op;

use crate::fs::directories::listing_from;
use crate::fs::filesystem::GENERATION;
use crate::fs::{sys, SlowFs};
use crate::stats::RequestOutcome;

pub(in crate::fs) fn readdirplus(
    fs: &SlowFs,
    req: &Request,
    ino: INodeNo,
    fh: FileHandle,
    offset: u64,
    reply: ReplyDirectoryPlus,
) {
    fs.inner
        .serve_on(req, Op::Readdir, ino, reply, move |inner, done, _, _| {
            let listed = inner.handles.get(fh).and_then(|handle| {
                let dir = inner.inodes.get(ino)?;
                Ok((handle, dir))
            });
            let (handle, dir) = match listed {
                Ok(listed) => listed,
                Err(errno) => return done.respond(inner, Err::<(), _>(errno), |_, ()| {}),
            };
            let listing = match listing_from(&handle, offset) {
                Ok(listing) => listing,
                Err(errno) => return done.respond(inner, Err::<(), _>(errno), |_, ()| {}),
            };
            let entry_ttl = inner.entry_ttl(ino.0);
            let mut reply = done.record(inner, RequestOutcome::default());
            for (i, (entry_ino, _, name)) in
                listing.entries.iter().enumerate().skip(offset as usize)
            {
                let next = i as u64 + 1;
                if name == "." || name == ".." {
                    // Never linked by the kernel, so not a lookup: the number
                    // and type only.
                    let mut st = sys::no_stat();
                    st.st_mode = libc::S_IFDIR;
                    let shown = inner.inodes.entry_number(*entry_ino);
                    let attr = crate::fs::attr(shown, &st);
                    if reply.add(
                        INodeNo(shown),
                        next,
                        name,
                        &std::time::Duration::ZERO,
                        &attr,
                        GENERATION,
                    ) {
                        break;
                    }
                    continue;
                }
                // Gone since the listing was read: nothing to show.
                let Ok(attr) = inner.entry(ino.0, &dir, name) else {
                    continue;
                };
                // One time for both (fuser takes one): the shorter.
                let ttl = entry_ttl.min(inner.attr_ttl(attr.ino.0, &attr));
                if reply.add(attr.ino, next, name, &ttl, &attr, GENERATION) {
                    // Did not fit: the kernel never saw it, so it is no lookup.
                    if inner.inodes.forget(attr.ino.0, 1) {
                        if let Some(nfs) = inner.nfs() {
                            nfs.forget(attr.ino.0);
                        }
                    }
                    break;
                }
            }
            drop(listing);
            reply.ok();
        });
}

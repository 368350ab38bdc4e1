//! A write(2) on an NFS client mount: the data lands in the client's page
//! cache (gathered per file, see [`super::write_behind`]) and the call
//! returns; only what does not fit goes out first, as a WRITE through the
//! rules and the one data path.

use fuser::{FileHandle, INodeNo, ReplyWrite, Request};
use slowfs_faults::Op;

use super::NfsClient;
use crate::fs::sys::{self, Caller};
use crate::fs::{Ask, Carry, SlowFs};

/// A write(2) under `--cache nfs`: gathered and answered at once; the data
/// gathered before it goes out as a WRITE first if this does not fit.
#[allow(clippy::too_many_arguments)] // the request's fields, as fuser passes them
pub(in crate::fs) fn write(
    fs: &SlowFs,
    nfs: &NfsClient,
    req: &Request,
    ino: INodeNo,
    fh: FileHandle,
    offset: u64,
    data: &[u8],
    wsize: usize,
    kill: Option<Caller>,
    reply: ReplyWrite,
) {
    let inner = &fs.inner;
    let handle = match inner.handles.get(fh) {
        Ok(h) => h,
        Err(errno) => return reply.error(errno),
    };
    if let Err(errno) = inner.check_not_stale(handle.raw()) {
        return reply.error(errno);
    }
    // The write(2) of a caller without CAP_FSETID drops the set-ID bits
    // before its data lands in the page cache (`file_remove_privs` in the
    // client's write path, a SETATTR to the server), not when it is sent.
    if let Some(caller) = kill {
        match sys::drop_privileges(handle.raw(), caller) {
            Ok(true) => inner.attributes_changed(ino.0),
            Ok(false) => {}
            Err(errno) => return reply.error(errno),
        }
    }
    let len = data.len() as u32;
    let previous = nfs.write_behind.gather(ino.0, &handle, offset, data, wsize);
    // The VM's limits (see write_back.rs): past the background threshold the
    // flusher starts; past the hard limit this writer waits for its own
    // file's data to go (balance_dirty_pages).
    let previous = match nfs.dirty_limits {
        Some(limits) if nfs.write_behind.gathered_bytes() > limits.limit => {
            nfs.flusher.kick();
            previous.or_else(|| nfs.write_behind.take(ino.0))
        }
        Some(limits) if nfs.write_behind.gathered_bytes() > limits.background => {
            nfs.flusher.kick();
            previous
        }
        _ => previous,
    };
    let Some(previous) = previous else {
        inner.stats.gathered(len.into());
        return reply.written(len);
    };
    let path = inner.path_for(Op::Write, ino.0);
    inner.serve(
        Ask::new(req, Op::Write, &path).carrying(Carry::Overflow(ino.0, previous)),
        &[],
        reply,
        move |inner, done, _, _| {
            inner.stats.gathered(len.into());
            done.reply.written(len);
        },
    );
}

//! One io_uring operation: what the kernel may touch, and who owns it when.

use std::future::Future;
use std::os::fd::{AsRawFd, OwnedFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use io_uring::{opcode, squeue, types};
use tokio::sync::oneshot;

use super::driver::Driver;

/// What an operation asks of the kernel. It owns every resource the kernel will
/// use — the buffer and the fd — so that they can outlive the caller's future.
#[derive(Debug)]
pub(super) enum OpKind {
    /// `pread` into `buf`.
    Read {
        fd: Arc<OwnedFd>,
        buf: Vec<u8>,
        offset: u64,
    },
    /// `pwrite` from `buf`.
    Write {
        fd: Arc<OwnedFd>,
        buf: Vec<u8>,
        offset: u64,
    },
    /// `fsync` or `fdatasync`.
    Fsync { fd: Arc<OwnedFd>, datasync: bool },
}

impl OpKind {
    /// The submission entry. The buffer's heap memory does not move while the op
    /// is in flight: the driver holds the `Vec` and never resizes it.
    pub(super) fn entry(&mut self, user_data: u64) -> squeue::Entry {
        match self {
            OpKind::Read { fd, buf, offset } => opcode::Read::new(
                types::Fd(fd.as_raw_fd()),
                buf.as_mut_ptr(),
                buf.len() as u32,
            )
            .offset(*offset)
            .build(),
            OpKind::Write { fd, buf, offset } => {
                opcode::Write::new(types::Fd(fd.as_raw_fd()), buf.as_ptr(), buf.len() as u32)
                    .offset(*offset)
                    .build()
            }
            OpKind::Fsync { fd, datasync } => {
                let mut op = opcode::Fsync::new(types::Fd(fd.as_raw_fd()));
                if *datasync {
                    op = op.flags(types::FsyncFlags::DATASYNC);
                }
                op.build()
            }
        }
        .user_data(user_data)
    }

    /// Gives the buffer back (empty for fsync).
    pub(super) fn into_buf(self) -> Vec<u8> {
        match self {
            OpKind::Read { buf, .. } | OpKind::Write { buf, .. } => buf,
            OpKind::Fsync { .. } => Vec::new(),
        }
    }
}

/// A finished operation: the kernel's result (bytes or `-errno`) and the buffer.
#[derive(Debug)]
pub(super) struct Completion {
    pub result: i32,
    pub buf: Vec<u8>,
}

/// Who is waiting for an operation the kernel holds.
#[derive(Debug)]
pub(super) enum Lifecycle {
    /// The caller's future waits; the completion (with the buffer) goes to it.
    Submitted(oneshot::Sender<Completion>),
    /// The caller's future was dropped. A cancel was submitted, and the driver
    /// keeps the buffer and the fd until the kernel's completion arrives; then
    /// they are dropped. Nothing the caller holds is ever touched.
    Ignored,
}

/// An operation the kernel has not completed: its resources and its waiter.
#[derive(Debug)]
pub(super) struct InFlight {
    pub kind: OpKind,
    pub lifecycle: Lifecycle,
}

/// The caller's side of an operation. Dropping it before completion cancels the
/// operation (the driver keeps its resources until the kernel lets go).
#[derive(Debug)]
pub(super) struct UringOp {
    pub id: u64,
    pub rx: oneshot::Receiver<Completion>,
    pub driver: Arc<Driver>,
    pub finished: bool,
}

impl Future for UringOp {
    type Output = Completion;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Completion> {
        match Pin::new(&mut self.rx).poll(cx) {
            Poll::Ready(Ok(completion)) => {
                self.finished = true;
                Poll::Ready(completion)
            }
            Poll::Ready(Err(_)) => {
                // The driver died with the op in flight: report it, never hang.
                self.finished = true;
                Poll::Ready(Completion {
                    result: -libc::ECANCELED,
                    buf: Vec::new(),
                })
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for UringOp {
    fn drop(&mut self) {
        if !self.finished {
            self.driver.cancel(self.id);
        }
    }
}

//! Receiving a file descriptor sent over a Unix socket (SCM_RIGHTS): how
//! fusermount3 hands over `/dev/fuse`, and how a workload hands over its seccomp
//! listener.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

/// Receives one fd (close-on-exec); `missing` says what was expected when the
/// peer sent none.
pub(crate) fn receive_fd(socket: &UnixStream, missing: &str) -> io::Result<OwnedFd> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    let mut byte = [0u8; 1];
    let mut iov = [io::IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let msg = recvmsg::<()>(
        socket.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    for cmsg in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            if let Some(&fd) = fds.first() {
                // SAFETY: the kernel just installed this fd for us.
                return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
            }
        }
    }
    Err(io::Error::other(missing.to_string()))
}

//! Seeing sync(2) and syncfs(2) from the workload's side.
//!
//! The kernel forwards FUSE_SYNCFS only to virtiofs, so a FUSE daemon never learns
//! that a program called `sync`. `slowfs explore` needs to (sync makes everything
//! durable), so the workload runs under a seccomp filter that turns those two
//! syscalls into *user notifications*: before each one runs, the listener (a thread
//! in slowfs) is told, records a `Sync`, and lets the syscall continue unchanged
//! (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`). Filters are inherited, so the whole process
//! tree of the workload is covered; every other syscall is allowed by the filter
//! without a round trip.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::thread::JoinHandle;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;

/// BPF_LD | BPF_W | BPF_ABS: load a 32-bit word of `seccomp_data`.
const BPF_LD_W_ABS: u16 = 0x20;
/// BPF_JMP | BPF_JEQ | BPF_K: compare with a constant.
const BPF_JEQ_K: u16 = 0x15;
/// BPF_RET | BPF_K: return a constant.
const BPF_RET_K: u16 = 0x06;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The filter: sync and syncfs notify the listener, everything else is allowed.
/// Built before fork: the child only passes it to the kernel.
pub struct SyncFilter {
    program: Vec<libc::sock_filter>,
}

impl Default for SyncFilter {
    fn default() -> Self {
        Self::new()
    }
}

impl SyncFilter {
    /// The BPF program (seccomp_data: `nr` at offset 0, `arch` at 4).
    pub fn new() -> SyncFilter {
        SyncFilter {
            program: vec![
                stmt(BPF_LD_W_ABS, 4),
                jump(BPF_JEQ_K, AUDIT_ARCH, 1, 0),
                stmt(BPF_RET_K, SECCOMP_RET_ALLOW),
                stmt(BPF_LD_W_ABS, 0),
                jump(BPF_JEQ_K, libc::SYS_sync as u32, 2, 0),
                jump(BPF_JEQ_K, libc::SYS_syncfs as u32, 1, 0),
                stmt(BPF_RET_K, SECCOMP_RET_ALLOW),
                stmt(BPF_RET_K, libc::SECCOMP_RET_USER_NOTIF),
            ],
        }
    }

    /// In the child, between fork and exec: installs the filter and sends its
    /// listener fd over `socket`. Only async-signal-safe syscalls, no allocation.
    ///
    /// # Safety
    /// Call only in a freshly forked child (e.g. from `pre_exec`).
    pub unsafe fn install(&self, socket: RawFd) -> io::Result<()> {
        let prog = libc::sock_fprog {
            len: self.program.len() as u16,
            filter: self.program.as_ptr() as *mut libc::sock_filter,
        };
        // Without CAP_SYS_ADMIN, a filter needs no_new_privs (set-ID programs in
        // the workload then run without their privileges).
        if libc::geteuid() != 0 && libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        let listener = libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        );
        if listener < 0 {
            return Err(io::Error::last_os_error());
        }
        let result = send_fd(socket, listener as RawFd);
        libc::close(listener as RawFd);
        result
    }
}

/// Sends one fd with SCM_RIGHTS, using only the stack.
unsafe fn send_fd(socket: RawFd, fd: RawFd) -> io::Result<()> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // Room for one cmsghdr carrying one int, suitably aligned.
    let mut space = [0u64; 4];
    let mut msg: libc::msghdr = std::mem::zeroed();
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = space.as_mut_ptr().cast();
    msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as _;
    let cmsg = libc::CMSG_FIRSTHDR(&msg);
    (*cmsg).cmsg_level = libc::SOL_SOCKET;
    (*cmsg).cmsg_type = libc::SCM_RIGHTS;
    (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
    std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
    if libc::sendmsg(socket, &msg, 0) < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Receives the listener from the child and serves its notifications on a thread:
/// `on_sync` runs before each sync/syncfs of the workload's process tree, which
/// then proceeds. The thread ends when the last process of the tree has exited.
pub fn watch(
    socket: UnixStream,
    on_sync: impl Fn() + Send + 'static,
) -> io::Result<JoinHandle<()>> {
    let listener = crate::mount::fd_passing::receive_fd(
        &socket,
        "the workload did not send its seccomp listener",
    )?;
    std::thread::Builder::new()
        .name("slowfs-sync-watch".into())
        .spawn(move || serve(listener, on_sync))
}

fn serve(listener: OwnedFd, on_sync: impl Fn()) {
    let fd = listener.as_raw_fd();
    loop {
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut poll, 1, -1) } < 0 {
            if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return;
        }
        if poll.revents & libc::POLLIN == 0 {
            return; // POLLHUP: no process uses the filter any more
        }
        // SAFETY: zeroed notification buffer of the kernel's layout.
        let mut request: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: ioctl with a buffer of the type it expects.
        if unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut request) } < 0 {
            continue; // the caller died meanwhile (ENOENT)
        }
        on_sync();
        let mut response = libc::seccomp_notif_resp {
            id: request.id,
            val: 0,
            error: 0,
            flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
        };
        // SAFETY: ioctl with a buffer of the type it expects.
        unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SEND, &mut response) };
    }
}

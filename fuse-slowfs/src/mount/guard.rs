//! The unmount guard: a small process, forked at mount time, that unmounts the
//! slowfs if the daemon dies without doing it (SIGKILL, an OOM kill, a CI
//! timeout killing the process group), so that no dead mount is left behind
//! for every later access to fail with ENOTCONN.
//!
//! The guard waits on a pipe whose only writer is the daemon. After its own
//! unmount the daemon writes a byte: the guard exits without looking (the
//! mountpoint may carry someone else's mount by then). When the daemon dies
//! the kernel closes the pipe: the guard looks at the mountpoint, and ours
//! still there (its FUSE device, or a dead connection: ENOTCONN, or
//! ECONNABORTED while the kernel aborts it) is detached;
//! a plain directory, or another filesystem, is left alone. The guard runs in
//! its own session and ignores the terminal's signals, so what kills the
//! daemon's process group does not kill it. Between fork and exit it makes
//! only async-signal-safe calls on data prepared before the fork.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The daemon's side of a guard: the pipe's write end and the guard's pid.
#[derive(Debug)]
pub(crate) struct UnmountGuard {
    write_end: Option<OwnedFd>,
    pid: libc::pid_t,
}

impl UnmountGuard {
    /// Forks a guard for the slowfs at `mountpoint` whose FUSE device is
    /// `connection` (`st_dev` of its root).
    pub(crate) fn spawn(mountpoint: &Path, connection: u64) -> io::Result<UnmountGuard> {
        let path = CString::new(mountpoint.as_os_str().as_bytes())?;
        // Without root, umount2 is refused: the setuid helper detaches instead.
        let helper = super::fusermount::helper_path()
            .and_then(|p| CString::new(p.as_os_str().as_bytes()).ok());
        let argv_strings = [c"fusermount3", c"-u", c"-z"];
        let argv: Vec<*const libc::c_char> = argv_strings
            .iter()
            .map(|s| s.as_ptr())
            .chain([path.as_ptr(), std::ptr::null()])
            .collect();
        let envp: [*const libc::c_char; 1] = [std::ptr::null()];
        let mut fds = [0; 2];
        // SAFETY: a two-int array for pipe2.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fresh fds we own.
        let (read_end, write_end) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: the child calls only async-signal-safe functions on memory
        // prepared above, and never returns.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: see `guard`.
            unsafe {
                guard(
                    read_end.as_raw_fd(),
                    &path,
                    connection,
                    helper.as_deref(),
                    &argv,
                    &envp,
                )
            }
        }
        drop(read_end);
        Ok(UnmountGuard {
            write_end: Some(write_end),
            pid,
        })
    }

    /// The daemon has unmounted: the guard exits without touching anything.
    pub(crate) fn release(&mut self) {
        if let Some(write_end) = self.write_end.take() {
            // SAFETY: one byte from a valid buffer to our pipe.
            unsafe { libc::write(write_end.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
            drop(write_end);
            let mut status = 0;
            // SAFETY: waiting for our own child, which exits once the pipe is closed.
            unsafe { libc::waitpid(self.pid, &mut status, 0) };
        }
    }
}

impl Drop for UnmountGuard {
    fn drop(&mut self) {
        self.release();
    }
}

/// The guard process.
///
/// # Safety
/// Only in the child of a fork; the pointers must be valid.
unsafe fn guard(
    read_fd: libc::c_int,
    path: &CString,
    connection: u64,
    helper: Option<&std::ffi::CStr>,
    argv: &[*const libc::c_char],
    envp: &[*const libc::c_char; 1],
) -> ! {
    unsafe {
        libc::setsid();
        for signal in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGPIPE,
        ] {
            libc::signal(signal, libc::SIG_IGN);
        }
        // Keep only the pipe (as fd 0): no FUSE device, no other pipe held open.
        libc::dup2(read_fd, 0);
        libc::syscall(libc::SYS_close_range, 1u32, u32::MAX, 0u32);
        let mut byte = 0u8;
        loop {
            match libc::read(0, (&mut byte as *mut u8).cast(), 1) {
                // Released: the daemon unmounted.
                1 => libc::_exit(0),
                n if n < 0 && *libc::__errno_location() == libc::EINTR => continue,
                // The daemon is gone.
                _ => break,
            }
        }
        let mut st: libc::stat = std::mem::zeroed();
        let stat = if libc::stat(path.as_ptr(), &mut st) == 0 {
            Ok(st.st_dev)
        } else {
            Err(*libc::__errno_location())
        };
        let ours = still_ours(stat, connection);
        if ours && libc::umount2(path.as_ptr(), libc::MNT_DETACH) != 0 {
            if let Some(helper) = helper {
                libc::execve(helper.as_ptr(), argv.as_ptr(), envp.as_ptr());
            }
        }
        libc::_exit(0)
    }
}

/// Whether the mountpoint, as a stat of it found it (its `st_dev`, or the
/// errno), still holds the dead daemon's mount. A stat sent while the kernel
/// aborts the connection fails with ECONNABORTED; one sent after it, with
/// ENOTCONN: both are our mount, its daemon gone. Anything else (a plain
/// directory, another filesystem mounted since) is left alone.
fn still_ours(stat: Result<libc::dev_t, libc::c_int>, connection: u64) -> bool {
    match stat {
        Ok(dev) => dev == connection,
        Err(errno) => matches!(errno, libc::ENOTCONN | libc::ECONNABORTED),
    }
}

#[cfg(test)]
mod tests {
    use super::still_ours;

    #[test]
    fn a_connection_being_aborted_is_still_ours() {
        assert!(still_ours(Err(libc::ECONNABORTED), 42));
        assert!(still_ours(Err(libc::ENOTCONN), 42));
        assert!(still_ours(Ok(42), 42));
        assert!(!still_ours(Ok(7), 42), "another filesystem mounted since");
        assert!(!still_ours(Err(libc::ENOENT), 42));
    }
}

//! Taking a slowfs down at the kernel level: unmount, detach when busy, abort
//! the FUSE connection so that no caller stays blocked. Used by [`crate::Mount`]
//! on drop, by the control server's `shutdown`, and by `slowfs umount`.

use std::io;
use std::path::Path;

/// Whether the slowfs of FUSE connection `connection` is still mounted at
/// `mountpoint` (and not another one mounted there since).
pub(crate) fn mounted_here(mountpoint: &Path, connection: Option<u64>) -> bool {
    super::table::slowfs_at(mountpoint)
        .is_some_and(|entry| connection.is_none_or(|dev| entry.connection == libc::minor(dev)))
}

/// Unmounts a slowfs: a plain unmount when nothing holds it; when something does
/// (a process with a file open or its cwd inside), detach it and abort the FUSE
/// connection so that the daemon ends and every pending request fails with ENOTCONN.
pub fn unmount(mountpoint: &Path, connection: Option<u64>) -> io::Result<()> {
    use nix::errno::Errno;
    use nix::mount::{umount2, MntFlags};
    match umount2(mountpoint, MntFlags::empty()) {
        Ok(()) | Err(Errno::EINVAL) | Err(Errno::ENOENT) => Ok(()),
        Err(Errno::EPERM) => unmount_as_user(mountpoint),
        Err(Errno::EBUSY) => {
            umount2(mountpoint, MntFlags::MNT_DETACH)?;
            if let Some(dev) = connection {
                abort_connection(dev);
            }
            Ok(())
        }
        Err(e) => Err(io::Error::from(e)),
    }
}

/// [`unmount`] right after the daemon released its parked requests: their
/// callers are still returning (the rest of a read, a close) and keep the
/// mount busy for a moment. A busy mount is retried for up to `grace` before
/// it is detached and its connection aborted, so that a released caller gets
/// its answer, not ECONNABORTED.
pub fn unmount_after_release(
    mountpoint: &Path,
    connection: Option<u64>,
    grace: std::time::Duration,
) -> io::Result<()> {
    use nix::errno::Errno;
    use nix::mount::{umount2, MntFlags};
    let deadline = std::time::Instant::now() + grace;
    while std::time::Instant::now() < deadline {
        match umount2(mountpoint, MntFlags::empty()) {
            Err(Errno::EBUSY) => std::thread::sleep(std::time::Duration::from_millis(10)),
            Ok(()) => return Ok(()),
            Err(_) => break,
        }
    }
    unmount(mountpoint, connection)
}

/// Aborts a FUSE connection through fusectl (mounting fusectl if needed): every
/// request still pending fails with ENOTCONN, so no caller stays blocked.
pub fn abort_connection(dev: u64) {
    abort_connection_minor(libc::minor(dev));
}

/// [`abort_connection`] by the connection's device minor (the mount table's).
pub fn abort_connection_minor(minor: u32) {
    let connections = Path::new("/sys/fs/fuse/connections");
    let abort = connections.join(minor.to_string()).join("abort");
    if !abort.exists() {
        let _ = nix::mount::mount(
            Some("fusectl"),
            connections,
            Some("fusectl"),
            nix::mount::MsFlags::empty(),
            None::<&str>,
        );
    }
    match std::fs::write(&abort, "1") {
        // The connection ended on its own (its daemon closed it after the
        // unmount): nothing to abort.
        Err(e) if e.kind() == io::ErrorKind::NotFound && fusectl_mounted(connections) => {
            tracing::debug!("FUSE connection {minor} already gone");
        }
        Err(e) => tracing::warn!("cannot abort FUSE connection {}: {e}", abort.display()),
        Ok(()) => {}
    }
}

/// Whether fusectl is mounted at `dir` (so that a connection missing from it has ended).
fn fusectl_mounted(dir: &Path) -> bool {
    const FUSE_CTL_SUPER_MAGIC: i64 = 0x6573_5543;
    nix::sys::statfs::statfs(dir).is_ok_and(|fs| fs.filesystem_type().0 == FUSE_CTL_SUPER_MAGIC)
}

/// Unmounts a slowfs whatever state it is in, including one whose daemon died
/// (every access then fails with ENOTCONN): plain unmount, else lazy detach.
pub fn force_unmount(mountpoint: &Path) -> io::Result<()> {
    use nix::mount::{umount2, MntFlags};
    match umount2(mountpoint, MntFlags::empty()) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::EPERM) => unmount_as_user(mountpoint),
        Err(_) => umount2(mountpoint, MntFlags::MNT_DETACH).map_err(io::Error::from),
    }
}

/// Unmounts through the setuid helper (a user's own mount); detaches it when busy.
fn unmount_as_user(mountpoint: &Path) -> io::Result<()> {
    super::fusermount::unmount(mountpoint, false)
        .or_else(|_| super::fusermount::unmount(mountpoint, true))
}

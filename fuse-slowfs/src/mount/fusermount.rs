//! Mounting without root: the setuid `fusermount3` helper (Debian's `fuse3`) opens
//! `/dev/fuse`, mounts it and passes the fd back over a socket (`_FUSE_COMMFD`), as
//! libfuse does. slowfs uses it whenever it does not run as root, so that a user
//! mounts whatever the mode of `/dev/fuse`; unmounting goes through it too, since
//! `umount2` is root's.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// The helper's name; `FUSERMOUNT_PATH` overrides it (as fuser's does).
fn helper() -> std::ffi::OsString {
    std::env::var_os("FUSERMOUNT_PATH").unwrap_or_else(|| "fusermount3".into())
}

/// The helper's absolute path (a name is looked up in `PATH`), for a caller
/// that must exec it without a search: the unmount guard after its fork.
pub(crate) fn helper_path() -> Option<std::path::PathBuf> {
    let helper = std::path::PathBuf::from(helper());
    if helper.is_absolute() {
        return Some(helper);
    }
    let dirs = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&dirs)
        .map(|dir| dir.join(&helper))
        .find(|candidate| candidate.is_file())
}

fn not_installed(e: io::Error) -> io::Error {
    io::Error::new(
        e.kind(),
        format!(
            "cannot run {:?}: {e} (a non-root mount needs the setuid fusermount3 helper: \
             `apt-get install fuse3`)",
            helper()
        ),
    )
}

/// Mounts a FUSE filesystem at `mountpoint` with `options` (`-o` list) and returns
/// the `/dev/fuse` fd the helper opened for it.
pub fn mount(mountpoint: &Path, options: &[String]) -> io::Result<OwnedFd> {
    let (ours, theirs) = UnixStream::pair()?;
    let mut cmd = Command::new(helper());
    if !options.is_empty() {
        cmd.arg("-o").arg(options.join(","));
    }
    cmd.arg("--")
        .arg(mountpoint)
        .env("_FUSE_COMMFD", theirs.as_raw_fd().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let theirs_fd = theirs.as_raw_fd();
    // SAFETY: only fcntl, which is async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // The helper must inherit its end of the socket.
            if libc::fcntl(theirs_fd, libc::F_SETFD, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(not_installed)?;
    drop(theirs);
    let received = super::fd_passing::receive_fd(&ours, "fusermount3 sent no /dev/fuse fd");
    let output = child.wait_with_output()?;
    match received {
        Ok(fd) if output.status.success() => Ok(fd),
        _ => Err(io::Error::other(format!(
            "{:?} could not mount {}: {}{}",
            helper(),
            mountpoint.display(),
            String::from_utf8_lossy(&output.stderr).trim(),
            device_hint()
        ))),
    }
}

/// Why a user may not open `/dev/fuse`, and the fix: fusermount3 opens it with the
/// user's own file permissions, so the node must be readable and writable by them.
fn device_hint() -> String {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata("/dev/fuse") else {
        return " (/dev/fuse is missing: `modprobe fuse`; in a container, pass --device /dev/fuse)"
            .into();
    };
    // SAFETY: access(2) with a valid C string.
    let usable = unsafe { libc::access(c"/dev/fuse".as_ptr(), libc::R_OK | libc::W_OK) } == 0;
    if usable {
        return String::new();
    }
    format!(
        " (/dev/fuse is mode {:o} and this user may not open it; fusermount3 opens it with \
         the user's permissions, so it must be 0666 — the usual setting: `chmod 0666 \
         /dev/fuse` as root — or run slowfs as root)",
        meta.permissions().mode() & 0o7777
    )
}

/// Unmounts through the helper; `lazy` detaches a mount still in use.
pub fn unmount(mountpoint: &Path, lazy: bool) -> io::Result<()> {
    let mut cmd = Command::new(helper());
    cmd.arg("-u").arg("-q");
    if lazy {
        cmd.arg("-z");
    }
    let output = cmd
        .arg("--")
        .arg(mountpoint)
        .stdin(Stdio::null())
        .output()
        .map_err(not_installed)?;
    if output.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{:?} -u {}: {}",
            helper(),
            mountpoint.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    }
}

/// Mounts as root, the way fusermount3 does it for users: opens `/dev/fuse`
/// and calls mount(2) with the fd, so the mount carries `source` (the backing
/// directory) and the options' flags. The session owns nothing that unmounts
/// by path: a session whose mount was taken down from outside never touches a
/// newer mount at the same place.
pub fn mount_as_root(
    mountpoint: &Path,
    source: &Path,
    options: &crate::mount_options::MountOptions,
    max_read: Option<u32>,
) -> io::Result<OwnedFd> {
    use std::os::unix::fs::MetadataExt;
    let fd: OwnedFd = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .map_err(|e| io::Error::new(e.kind(), format!("opening /dev/fuse: {e}")))?
        .into();
    let root = std::fs::metadata(mountpoint)?;
    let mut data = format!(
        "fd={},rootmode={:o},user_id={},group_id={}",
        fd.as_raw_fd(),
        root.mode() & libc::S_IFMT,
        nix::unistd::geteuid(),
        nix::unistd::getegid()
    );
    if options.allow_other {
        data.push_str(",allow_other");
    }
    if options.default_permissions {
        data.push_str(",default_permissions");
    }
    if let Some(max_read) = max_read {
        data.push_str(&format!(",max_read={max_read}"));
    }
    nix::mount::mount(
        Some(source),
        mountpoint,
        Some("fuse.slowfs"),
        options.flags(),
        Some(data.as_str()),
    )
    .map_err(|e| io::Error::other(format!("mount(2) of {}: {e}", mountpoint.display())))?;
    Ok(fd)
}

/// An fsname for fusermount3's `-o` list: commas and backslashes escaped.
pub fn escape_option(value: &str) -> String {
    value.replace('\\', "\\\\").replace(',', "\\,")
}

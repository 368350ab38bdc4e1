//! Where control sockets live and how one is made: a private directory, a
//! socket that is mode 0600 from its first moment, a leftover claimed only
//! when no live mount answers on it, the peer checked on every connection.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::client::request;
use super::protocol::Command;

/// Where the control socket of a mount at `mountpoint` lives, unless given explicitly:
/// `$SLOWFS_RUNTIME_DIR`, else `/run/slowfs` for root, else `$XDG_RUNTIME_DIR/slowfs`,
/// else `/tmp/slowfs-UID`; named after a hash of the canonical mountpoint. Fails
/// when that directory exists but is not private to this user (see
/// [`check_private_dir`]): a socket in a directory another user can write to
/// could be theirs, answering this user's commands.
pub fn default_socket(mountpoint: &Path) -> std::io::Result<PathBuf> {
    let canonical = mountpoint
        .canonicalize()
        .unwrap_or_else(|_| mountpoint.to_path_buf());
    let mut hash: u64 = 0xcbf29ce484222325;
    for byte in canonical.as_os_str().as_encoded_bytes() {
        hash = (hash ^ *byte as u64).wrapping_mul(0x100000001b3);
    }
    let dir = runtime_dir();
    check_private_dir(&dir)?;
    Ok(dir.join(format!("{hash:016x}.sock")))
}

fn runtime_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SLOWFS_RUNTIME_DIR") {
        return dir.into();
    }
    // SAFETY: plain id query.
    let uid = unsafe { libc::geteuid() };
    if uid == 0 {
        return "/run/slowfs".into();
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) => PathBuf::from(dir).join("slowfs"),
        None => std::env::temp_dir().join(format!("slowfs-{uid}")),
    }
}

/// A runtime directory is safe when it is missing (it will be created 0700)
/// or is a real directory (not a symlink) owned by this user that no one else
/// can write to (so no one else can put a socket there).
pub fn check_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(with_path(e, "checking", dir)),
    };
    // SAFETY: plain id query.
    let uid = unsafe { libc::geteuid() };
    let problem = if !meta.is_dir() {
        Some("is not a directory (a symlink or a file)".to_string())
    } else if meta.uid() != uid {
        Some(format!(
            "belongs to uid {}, not to you (uid {uid})",
            meta.uid()
        ))
    } else if meta.mode() & 0o022 != 0 {
        Some(format!(
            "has mode {:o}: other users can create files in it",
            meta.mode() & 0o7777
        ))
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "control socket directory {} {problem}; a socket there could be another user's, \
                 answering your commands. Remove it (`rm -r {}`, if it is yours) or point \
                 SLOWFS_RUNTIME_DIR (or XDG_RUNTIME_DIR) at a directory of your own with mode 0700",
                dir.display(),
                dir.display()
            ),
        )),
    }
}

/// Makes `path` free for a new control socket. Only a socket may be replaced:
/// one no daemon answers on (a killed daemon's leftover) is removed, and so is
/// one whose daemon says its mount has ended (it is on its way out; the new
/// mount takes the path over at once). A daemon that still serves a mount is
/// refused, and so is anything at `path` that is not a socket.
pub fn claim_socket(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(with_path(e, "checking", path)),
    };
    if !meta.file_type().is_socket() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!(
                "{} exists and is not a socket: refusing to replace it; pass another --ctl-socket",
                path.display()
            ),
        ));
    }
    if UnixStream::connect(path).is_err() {
        // Nobody listens: a stale socket.
        return remove_socket(path);
    }
    let info = request(path, &Command::Info).ok().filter(|r| r.ok);
    let ended = info.as_ref().is_some_and(|r| {
        r.data
            .get("ended")
            .and_then(|e| e.as_bool())
            .unwrap_or(false)
    });
    if ended {
        return remove_socket(path);
    }
    let who = info
        .map(|r| r.message)
        .unwrap_or_else(|| "another slowfs (busy)".into());
    Err(std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        format!(
            "control socket {} is in use by {who}; unmount that one first \
             (`slowfs umount MOUNTPOINT`) or pass another --ctl-socket",
            path.display()
        ),
    ))
}

fn remove_socket(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(with_path(e, "removing the stale socket", path))
        }
        _ => Ok(()),
    }
}

/// Removes sockets in the runtime directory that no daemon listens on any more
/// (left by daemons that were killed). Touches nothing in a directory that is
/// not private to this user.
pub fn sweep_stale_sockets() {
    let dir = runtime_dir();
    if check_private_dir(&dir).is_err() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let socket = entry
            .file_type()
            .is_ok_and(|t| std::os::unix::fs::FileTypeExt::is_socket(&t));
        if socket
            && path.extension().is_some_and(|e| e == "sock")
            && UnixStream::connect(&path).is_err()
        {
            let _ = std::fs::remove_file(&path);
        }
        // An empty staging directory of bind_private, a minute old: a daemon
        // killed after moving its socket out and before removing it (a
        // daemon binding right now has one seconds old, or not empty).
        let stale_staging = entry.file_type().is_ok_and(|t| t.is_dir())
            && entry
                .file_name()
                .to_string_lossy()
                .starts_with(".slowfs-ctl-")
            && entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().unwrap_or_default() > Duration::from_secs(60));
        if stale_staging {
            let _ = std::fs::remove_dir(&path);
        }
    }
}

/// Binds a listening socket at `path` that is mode 0600 from its first moment:
/// bound inside a fresh private directory beside `path` (bind(2) gives the
/// socket the umask's mode, which in a shared directory let another user
/// connect before a chmod), made 0600 there, then renamed into place.
pub(super) fn bind_private(path: &Path) -> std::io::Result<UnixListener> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let private = tempfile::Builder::new()
        .prefix(".slowfs-ctl-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(parent)
        .map_err(|e| with_path(e, "creating a private directory in", parent))?;
    let staged = private.path().join("sock");
    let listener = UnixListener::bind(&staged).map_err(|e| with_path(e, "binding", &staged))?;
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| with_path(e, "setting the mode of", &staged))?;
    std::fs::rename(&staged, path).map_err(|e| with_path(e, "moving the socket to", path))?;
    Ok(listener)
}

/// Whether the peer of `stream` may control this mount: the daemon's own user
/// or root (SO_PEERCRED, checked on every connection, whatever the socket's mode).
pub(super) fn peer_allowed(stream: &UnixStream) -> Result<(), String> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let owner = nix::unistd::geteuid().as_raw();
    match getsockopt(stream, PeerCredentials) {
        Ok(cred) if cred.uid() == owner || cred.uid() == 0 => Ok(()),
        Ok(cred) => Err(format!(
            "refused: uid {} may not control this mount (only its owner, uid {owner}, and root may)",
            cred.uid()
        )),
        Err(e) => Err(format!("refused: cannot tell who is connecting ({e})")),
    }
}

pub(super) fn with_path(e: std::io::Error, doing: &str, path: &Path) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{doing} {}: {e}", path.display()))
}

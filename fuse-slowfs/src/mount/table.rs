//! What is mounted: `/proc/self/mountinfo` parsed once for everyone
//! ([`mounts`]), its slowfs entries (type `fuse.slowfs`; the source is the
//! backing directory), and whether each is alive (its daemon answers) or dead
//! (every access fails with ENOTCONN).

use std::path::{Path, PathBuf};

/// The FUSE subtype: slowfs mounts are of type `fuse.slowfs` in `/proc/mounts`
/// (their source is the backing directory).
pub const SUBTYPE: &str = "slowfs";

/// One slowfs mount in the mount table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// Where it is mounted.
    pub mountpoint: PathBuf,
    /// The FUSE connection's device minor: `/sys/fs/fuse/connections/N`.
    pub connection: u32,
    /// The user who mounted it (FUSE's `user_id=` option).
    pub user_id: Option<u32>,
}

impl MountEntry {
    /// Whether its daemon is gone: a `statfs` of the mountpoint (which the kernel
    /// never answers from a cache, unlike `stat`) fails with ENOTCONN. A daemon
    /// that does not answer within a second (a `statfs hang` rule) counts as alive.
    pub fn is_dead(&self) -> bool {
        let (tx, rx) = std::sync::mpsc::channel();
        let path = self.mountpoint.clone();
        std::thread::spawn(move || {
            let _ = tx.send(nix::sys::statfs::statfs(&path).err());
        });
        matches!(
            rx.recv_timeout(std::time::Duration::from_secs(1)),
            Ok(Some(nix::errno::Errno::ENOTCONN))
        )
    }
}

/// One line of `/proc/self/mountinfo`:
/// `ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The filesystem's `MAJOR:MINOR`.
    pub device: String,
    /// The directory of that filesystem mounted here (`/` unless a bind mount).
    pub root: PathBuf,
    /// Where it is mounted.
    pub mountpoint: PathBuf,
    /// `ext4`, `fuse.slowfs`, ...
    pub fstype: String,
    /// What was mounted (a device, a backing directory).
    pub source: PathBuf,
    /// The filesystem's own options (FUSE's `user_id=` among them).
    pub super_options: String,
}

impl Mount {
    fn parse(line: &str) -> Option<Mount> {
        let (left, right) = line.split_once(" - ")?;
        let fields: Vec<&str> = left.split(' ').collect();
        let mut right = right.split(' ');
        Some(Mount {
            device: fields.get(2)?.to_string(),
            root: unescape(fields.get(3)?),
            mountpoint: unescape(fields.get(4)?),
            fstype: right.next()?.to_string(),
            source: unescape(right.next()?),
            super_options: right.next().unwrap_or_default().to_string(),
        })
    }
}

/// Every mount this process sees, in mount order (none if the table cannot
/// be read).
pub fn mounts() -> Vec<Mount> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|table| table.lines().filter_map(Mount::parse).collect())
        .unwrap_or_default()
}

/// Every slowfs mount, in mount order.
pub fn slowfs_mount_entries() -> Vec<MountEntry> {
    mounts().iter().filter_map(slowfs_entry).collect()
}

/// Every slowfs mountpoint, in mount order.
pub fn slowfs_mounts() -> Vec<PathBuf> {
    slowfs_mount_entries()
        .into_iter()
        .map(|e| e.mountpoint)
        .collect()
}

/// The slowfs mounted at `path`, if any (the last one, if stacked).
pub fn slowfs_at(path: &Path) -> Option<MountEntry> {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    slowfs_mount_entries()
        .into_iter()
        .rev()
        .find(|e| e.mountpoint == path)
}

/// Where a directory really is, however its path is spelled: the filesystem
/// (`MAJOR:MINOR`) and the path inside it. A bind mount of `/data` at `/alias`
/// gives `/alias/x` and `/data/x` the same location. `None` when the mount
/// table cannot be read.
pub fn location(path: &Path) -> Option<(String, PathBuf)> {
    let path = path.canonicalize().ok()?;
    // The mount holding `path`: the longest mountpoint above it, the last
    // one mounted where several are stacked.
    let mount = mounts()
        .into_iter()
        .filter(|m| path.starts_with(&m.mountpoint))
        .fold(None, |best: Option<Mount>, m| match &best {
            Some(b) if b.mountpoint.as_os_str().len() > m.mountpoint.as_os_str().len() => best,
            _ => Some(m),
        })?;
    let (device, root, mountpoint) = (mount.device, mount.root, mount.mountpoint);
    let inside = path.strip_prefix(&mountpoint).ok()?;
    Some((device, root.join(inside)))
}

/// A mount table entry as a slowfs mount, if it is one.
fn slowfs_entry(mount: &Mount) -> Option<MountEntry> {
    if mount.fstype.strip_prefix("fuse.") != Some(SUBTYPE) {
        return None;
    }
    let connection = mount.device.split_once(':')?.1.parse().ok()?;
    let user_id = mount
        .super_options
        .split(',')
        .find_map(|o| o.strip_prefix("user_id="))
        .and_then(|id| id.parse().ok());
    Some(MountEntry {
        mountpoint: mount.mountpoint.clone(),
        connection,
        user_id,
    })
}

/// The mount table writes spaces and the like as octal escapes (`\040`).
pub fn unescape(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4].iter().all(u8::is_ascii_digit)
        {
            let code = u8::from_str_radix(&field[i + 1..i + 4], 8).unwrap_or(b'?');
            out.push(code);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_line(line: &str) -> Option<MountEntry> {
        slowfs_entry(&Mount::parse(line)?)
    }

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape("/tmp/a\\040b\\011c"), PathBuf::from("/tmp/a b\tc"));
        assert_eq!(unescape("/plain"), PathBuf::from("/plain"));
        assert_eq!(unescape(r"/odd\\x"), PathBuf::from(r"/odd\\x"));
    }

    #[test]
    fn parses_a_slowfs_line_and_skips_others() {
        let line = "812 29 0:77 / /tmp/a\\040b rw,nosuid,nodev,relatime shared:400 - fuse.slowfs /srv/data rw,user_id=1001,group_id=1001";
        assert_eq!(
            parse_line(line),
            Some(MountEntry {
                mountpoint: "/tmp/a b".into(),
                connection: 77,
                user_id: Some(1001),
            })
        );
        let other = "22 1 8:1 / / rw,relatime - ext4 /dev/vda rw";
        assert_eq!(parse_line(other), None);
        let other = "23 1 0:90 / /mnt rw - fuse.sshfs slowfs rw";
        assert_eq!(parse_line(other), None);
    }
}

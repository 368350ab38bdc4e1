//! Explore on a real filesystem: the workload runs on ext4, XFS or btrfs made
//! in an image on the recording mount and attached as a loop device, so the
//! recording is a block device's life (the loop driver writes the image for
//! the filesystem's block writes and fsyncs it for its flushes). Each crash
//! state is a block-level image; the checker mounts it (the kernel's own
//! journal or log recovery runs), checks the application in it and unmounts.
//!
//! Workload and checks run in mount namespaces of their own with
//! auto-clearing loop devices (`mount -o loop`): whatever kills them
//! (a `--timeout`, Ctrl-C, SIGKILL of explore) takes their mounts and loop
//! devices with them.

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use slowfs_faults::crash::blocks::Device;
use slowfs_faults::crash::models::FsModel;
use slowfs_faults::durability::Kept;

/// A filesystem explore can run a workload on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RealFs {
    /// ext4 (journal; data=ordered by default).
    Ext4,
    /// XFS (metadata log).
    Xfs,
    /// btrfs (copy-on-write, log tree).
    Btrfs,
}

impl RealFs {
    /// Every one, in the order documented.
    pub const ALL: [RealFs; 3] = [RealFs::Ext4, RealFs::Xfs, RealFs::Btrfs];

    /// The kernel's name for it.
    pub fn name(self) -> &'static str {
        match self {
            RealFs::Ext4 => "ext4",
            RealFs::Xfs => "xfs",
            RealFs::Btrfs => "btrfs",
        }
    }

    /// The smallest image its mkfs accepts (XFS refuses under 300 MiB).
    pub fn default_size(self) -> u64 {
        match self {
            RealFs::Ext4 => 64 << 20,
            RealFs::Xfs => 300 << 20,
            RealFs::Btrfs => 128 << 20,
        }
    }

    /// Mount options of the recorded run unless given: short commit intervals,
    /// so that metadata reaches the disk apart from data within a run.
    pub fn default_mount_options(self) -> &'static str {
        match self {
            RealFs::Ext4 | RealFs::Btrfs => "commit=1",
            // XFS has no commit= option: the log is pushed by xfssyncd, whose
            // interval explore shortens for the run (see `XfsSyncInterval`).
            RealFs::Xfs => "",
        }
    }

    /// Options every check's mount needs: clones of one XFS share its UUID.
    fn check_mount_options(self) -> &'static str {
        match self {
            RealFs::Xfs => "nouuid",
            RealFs::Ext4 | RealFs::Btrfs => "",
        }
    }

    /// mkfs and the arguments that make the filesystem as it is deployed:
    /// ext4 with 4 KiB blocks and 256-byte inodes whatever the image size
    /// (plain mkfs.ext4 takes the "small" type below 512 MiB, 1 KiB blocks,
    /// and the kernel then writes a 4 KiB page as 3 KiB + 1 KiB); XFS and
    /// btrfs take their defaults at any size.
    fn mkfs(self) -> (&'static str, &'static [&'static str]) {
        match self {
            RealFs::Ext4 => ("mkfs.ext4", &["-q", "-F", "-b", "4096", "-I", "256"]),
            RealFs::Xfs => ("mkfs.xfs", &["-q", "-f"]),
            RealFs::Btrfs => ("mkfs.btrfs", &["-q", "-f"]),
        }
    }

    /// A read-only consistency check of an unmounted image.
    fn fsck(self) -> &'static str {
        match self {
            RealFs::Ext4 => "e2fsck -fn",
            RealFs::Xfs => "xfs_repair -n -f",
            RealFs::Btrfs => "btrfs check --readonly",
        }
    }

    /// The Debian package with its tools.
    fn package(self) -> &'static str {
        match self {
            RealFs::Ext4 => "e2fsprogs",
            RealFs::Xfs => "xfsprogs",
            RealFs::Btrfs => "btrfs-progs",
        }
    }
}

impl fmt::Display for RealFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RealFs {
    type Err = String;
    fn from_str(s: &str) -> Result<RealFs, String> {
        RealFs::ALL
            .into_iter()
            .find(|fs| fs.name() == s)
            .ok_or_else(|| format!("unknown filesystem '{s}' (one of: ext4, xfs, btrfs)"))
    }
}

/// How the real filesystem is made and mounted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FsSetup {
    /// Which filesystem.
    pub fs: RealFs,
    /// Image size in bytes.
    pub size: u64,
    /// Extra mkfs arguments.
    pub mkfs_args: Vec<String>,
    /// Mount options of the recorded run (`data=journal`, `noauto_da_alloc`, ...).
    pub mount_options: String,
    /// How long to wait after the workload before unmounting, so that the
    /// commit timers write what the workload left in memory.
    pub settle: Duration,
    /// Check each recovered image with the filesystem's fsck (read-only).
    pub fsck: bool,
}

impl FsSetup {
    /// The defaults for `fs`.
    pub fn new(fs: RealFs) -> FsSetup {
        FsSetup {
            fs,
            size: fs.default_size(),
            mkfs_args: Vec::new(),
            mount_options: fs.default_mount_options().to_string(),
            settle: Duration::from_secs(2),
            fsck: false,
        }
    }

    /// What the report says the states were observed on.
    pub fn describe(&self) -> String {
        let mut text = format!("real {}", self.fs);
        if !self.mount_options.is_empty() {
            text.push_str(&format!(" (-o {})", self.mount_options));
        }
        if !self.mkfs_args.is_empty() {
            text.push_str(&format!(" (mkfs {})", self.mkfs_args.join(" ")));
        }
        text
    }

    /// The persistence model that stands for this filesystem as mounted:
    /// ext4 without `auto_da_alloc` (or with `data=writeback`) orders no data
    /// before a rename, as XFS does.
    pub fn model(&self) -> FsModel {
        let option = |o: &str| self.mount_options.split(',').any(|x| x == o);
        match self.fs {
            RealFs::Ext4 if option("noauto_da_alloc") || option("data=writeback") => FsModel::Xfs,
            RealFs::Ext4 => FsModel::Ext4Ordered,
            RealFs::Xfs => FsModel::Xfs,
            RealFs::Btrfs => FsModel::Btrfs,
        }
    }

    /// Fails with what to install or change if this machine cannot do it.
    pub fn preflight(&self) -> io::Result<()> {
        if !nix::unistd::geteuid().is_root() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "--fs {} mounts loop devices, which needs root (run explore as root)",
                    self.fs
                ),
            ));
        }
        let (mkfs, _) = self.fs.mkfs();
        for tool in [mkfs, "mount", "umount", "unshare"] {
            if which(tool).is_none() {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "--fs {}: {tool} is not installed (apt install {} util-linux)",
                        self.fs,
                        self.fs.package()
                    ),
                ));
            }
        }
        let supported = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
        let module_loads = Command::new("modprobe").arg(self.fs.name()).status();
        let supported = supported.contains(self.fs.name())
            || module_loads.is_ok_and(|s| s.success())
                && std::fs::read_to_string("/proc/filesystems")
                    .unwrap_or_default()
                    .contains(self.fs.name());
        if !supported {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "--fs {}: this kernel has no {} (not in /proc/filesystems)",
                    self.fs, self.fs
                ),
            ));
        }
        if !Path::new("/dev/loop-control").exists() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "--fs needs loop devices: /dev/loop-control is missing (modprobe loop)",
            ));
        }
        Ok(())
    }

    /// The mkfs command that makes the image at `path` (the user's
    /// arguments after ours: the last of a repeated option wins).
    pub fn mkfs_command(&self, path: &Path) -> Vec<String> {
        let (mkfs, args) = self.fs.mkfs();
        std::iter::once(mkfs.to_string())
            .chain(args.iter().map(|a| a.to_string()))
            .chain(self.mkfs_args.iter().cloned())
            .chain(std::iter::once(path.display().to_string()))
            .collect()
    }

    /// Makes the filesystem in a new sparse image `path`.
    pub fn make_image(&self, path: &Path) -> io::Result<()> {
        let file = std::fs::File::create(path)?;
        file.set_len(self.size)?;
        drop(file);
        let command = self.mkfs_command(path);
        let mkfs = self.fs.mkfs().0;
        let out = Command::new(&command[0]).args(&command[1..]).output()?;
        if !out.status.success() {
            // mkfs's complaint, not the usage text some print after it.
            let stderr = String::from_utf8_lossy(&out.stderr);
            let complaint: Vec<&str> = stderr
                .lines()
                .take_while(|l| !l.starts_with("Usage"))
                .collect();
            return Err(io::Error::other(format!(
                "{mkfs} {} {}: {} (the image is {} bytes: --fs-size takes e.g. 512MiB; the \
                 default for {} is {} MiB)",
                self.mkfs_args.join(" "),
                path.display(),
                complaint.join(" ").trim(),
                self.size,
                self.fs.name(),
                self.fs.default_size() >> 20
            )));
        }
        Ok(())
    }

    /// Runs `command` (by `sh -c`) in the root of the filesystem in `image`,
    /// mounted at `mountpoint` with the recorded run's options, before the
    /// recording: what it leaves is the initial, durable state (a repository
    /// to commit to, the old file an export replaces).
    pub fn populate(&self, image: &Path, mountpoint: &Path, command: &str) -> io::Result<()> {
        const SCRIPT: &str = r#"fs=$1 img=$2 mnt=$3 opts=$4 command=$5
mount -t "$fs" -o "loop${opts:+,$opts}" "$img" "$mnt" || exit 125
(cd "$mnt" && SLOWFS_MOUNT="$mnt" exec sh -c "$command"); rc=$?
umount "$mnt" || exit 125
exit $rc"#;
        let out = Command::new("unshare")
            .args([
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                SCRIPT,
                "sh",
            ])
            .arg(self.fs.name())
            .arg(image)
            .arg(mountpoint)
            .arg(&self.mount_options)
            .arg(command)
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "--fs-setup `{command}` failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }

    /// The recorded command: the workload on the filesystem in the
    /// recording mount's `image`, mounted at `mountpoint` (its working directory and `SLOWFS_MOUNT`),
    /// then a settle pause and the unmount, in mount and PID namespaces of its
    /// own: if explore is killed (its workload child gets SIGKILL too, see
    /// `record`), the namespace's first process dies and the kernel kills
    /// every process in it, which releases the mount and its loop device.
    ///
    /// `unshare --fork` blocks SIGINT and SIGTERM while it waits, and the
    /// namespace's first process hears only signals it handles: so the
    /// script traps them and passes a SIGTERM to the workload
    /// ([`super::run::ExplorePlan::signal_workload`] signals the script).
    /// It writes `changed` or `unchanged` to `seen`: whether the workload
    /// changed anything in the filesystem (a run that changed nothing has
    /// no crash state to check, whatever the filesystem itself wrote): its
    /// listing has each inode's change time, so a chown or an xattr counts.
    pub fn workload(&self, mountpoint: &Path, seen: &Path, workload: &[OsString]) -> Vec<OsString> {
        const SCRIPT: &str = r#"fs=$1 mnt=$2 opts=$3 settle=$4 seen=$5; shift 5
img="$SLOWFS_MOUNT/image"
mount -t "$fs" -o "loop${opts:+,$opts}" "$img" "$mnt" || { echo "slowfs explore: cannot mount the $fs image" >&2; exit 125; }
listing() { (cd "$mnt" && find . -path ./lost+found -prune -o -printf '%p %y %s %m %T@ %C@ %l\n' | sort | cksum); }
before=$(listing)
exec 3<&0
(cd "$mnt" && SLOWFS_MOUNT="$mnt" exec "$@" <&3) & wl=$!
trap 'kill -TERM $wl 2>/dev/null' INT TERM
wait $wl; rc=$?
while kill -0 $wl 2>/dev/null; do wait $wl; rc=$?; done
wait $wl 2>/dev/null; last=$?; [ "$last" = 127 ] || rc=$last
trap - INT TERM
if [ "$(listing)" = "$before" ]; then echo unchanged >"$seen"; else echo changed >"$seen"; fi
sleep "$settle"
umount "$mnt" || { echo "slowfs explore: the workload left $mnt busy" >&2; exit 125; }
exit $rc"#;
        let mut command: Vec<OsString> = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--pid",
            "--fork",
            "--kill-child",
            "--mount-proc",
            "sh",
            "-c",
            SCRIPT,
            "sh",
        ]
        .map(OsString::from)
        .into();
        command.push(self.fs.name().into());
        command.push(mountpoint.into());
        command.push(self.mount_options.clone().into());
        command.push(format!("{:.3}", self.settle.as_secs_f64()).into());
        command.push(seen.into());
        command.extend(workload.iter().cloned());
        command
    }

    /// The checker command for a state directory holding `image`: mount it
    /// (recovery), run `check` in it, unmount, and fsck if asked. A state
    /// the kernel cannot mount is rejected with the kernel's words.
    pub fn checker(&self, check: &str) -> String {
        const SCRIPT: &str = r#"fs=$1 opts=$2 fsck=$3 check=$4
mkdir -p mnt
if ! mount -t "$fs" -o "loop${opts:+,$opts}" image mnt 2>mount.err; then
  echo "the $fs image does not mount after the crash: $(cat mount.err)"; dmesg 2>/dev/null | tail -n 3; exit 1
fi
(cd mnt && SLOWFS_STATE="$PWD" exec sh -c "$check"); rc=$?
umount mnt || umount -l mnt
if [ "$rc" = 0 ] && [ -n "$fsck" ]; then
  $fsck image >fsck.out 2>&1 || { echo "$fsck finds the recovered image inconsistent:"; tail -n 20 fsck.out; exit 1; }
fi
exit $rc"#;
        let fsck = if self.fsck { self.fs.fsck() } else { "" };
        format!(
            "exec unshare --mount --propagation private sh -c {} sh {} {} {} {}",
            shell_quote(SCRIPT),
            self.fs.name(),
            shell_quote(self.fs.check_mount_options()),
            shell_quote(fsck),
            shell_quote(check),
        )
    }
}

/// The image a run's states are made from: the base (the filesystem as
/// mkfs left it) and the recorded device.
#[derive(Debug)]
pub struct ImageStates {
    /// The base image, on the machine's disk.
    pub base: PathBuf,
    /// The recorded writes and flushes.
    pub device: std::sync::Arc<Device>,
}

impl ImageStates {
    /// Writes the state at `point` keeping `kept` as `dir/image`: a sparse
    /// copy of the base, then the state's writes.
    pub fn materialize(&self, point: usize, kept: &Kept, dir: &Path) -> io::Result<()> {
        let epoch = self.device.epoch_at(point).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("crash point {point} ends no flush epoch of the image"),
            )
        })?;
        std::fs::create_dir_all(dir)?;
        let image = dir.join("image");
        sparse_copy(&self.base, &image)?;
        let file = std::fs::OpenOptions::new().write(true).open(&image)?;
        for (offset, data) in self.device.writes(epoch, kept) {
            file.write_all_at(data, offset)?;
        }
        Ok(())
    }
}

/// The data extents of `file` (offset, end), holes left out.
fn data_extents(file: &std::fs::File) -> io::Result<Vec<(u64, u64)>> {
    use nix::unistd::{lseek, Whence};
    let len = file.metadata()?.len() as i64;
    let mut extents = Vec::new();
    let mut pos: i64 = 0;
    while pos < len {
        let data = match lseek(file, pos, Whence::SeekData) {
            Ok(data) => data,
            Err(nix::errno::Errno::ENXIO) => break, // only a hole is left
            Err(e) => return Err(e.into()),
        };
        let hole = lseek(file, data, Whence::SeekHole).map_err(io::Error::from)?;
        extents.push((data as u64, hole as u64));
        pos = hole;
    }
    Ok(extents)
}

/// Copies `from` to a new `to`, holes kept holes (only data extents are read).
pub fn sparse_copy(from: &Path, to: &Path) -> io::Result<()> {
    let src = std::fs::File::open(from)?;
    let dst = std::fs::File::create(to)?;
    dst.set_len(src.metadata()?.len())?;
    let mut buf = vec![0u8; 1 << 20];
    for (start, end) in data_extents(&src)? {
        let mut at = start;
        while at < end {
            let n = (buf.len() as u64).min(end - at) as usize;
            src.read_exact_at(&mut buf[..n], at)?;
            dst.write_all_at(&buf[..n], at)?;
            at += n as u64;
        }
    }
    Ok(())
}

/// A hash of an image's content (its length and data extents, zero runs
/// in them included), in hex: how a saved run names its base image.
pub fn image_hash(path: &Path) -> io::Result<String> {
    use std::hash::Hasher;
    let file = std::fs::File::open(path)?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    hasher.write_u64(file.metadata()?.len());
    let mut buf = vec![0u8; 1 << 20];
    for (start, end) in data_extents(&file)? {
        let mut at = start;
        while at < end {
            let n = (buf.len() as u64).min(end - at) as usize;
            file.read_exact_at(&mut buf[..n], at)?;
            if buf[..n].iter().any(|b| *b != 0) {
                hasher.write_u64(at);
                hasher.write(&buf[..n]);
            }
            at += n as u64;
        }
    }
    Ok(format!("{:016x}", hasher.finish()))
}

fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(tool))
        .find(|p| p.is_file())
}

/// `text` as one word for sh.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sparse_copy_is_equal_and_keeps_its_holes() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("a");
        let file = std::fs::File::create(&from).unwrap();
        file.set_len(64 << 20).unwrap();
        file.write_all_at(b"start", 0).unwrap();
        file.write_all_at(b"middle", 20 << 20).unwrap();
        file.write_all_at(b"end", (64 << 20) - 3).unwrap();
        let to = dir.path().join("b");
        sparse_copy(&from, &to).unwrap();
        assert_eq!(std::fs::read(&from).unwrap(), std::fs::read(&to).unwrap());
        use std::os::unix::fs::MetadataExt;
        let blocks = std::fs::metadata(&to).unwrap().blocks() * 512;
        assert!(blocks < 4 << 20, "{blocks} bytes allocated");
    }

    #[test]
    fn names_parse_and_unknown_ones_say_the_choices() {
        assert_eq!("xfs".parse::<RealFs>(), Ok(RealFs::Xfs));
        assert!("zfs"
            .parse::<RealFs>()
            .unwrap_err()
            .contains("ext4, xfs, btrfs"));
    }
}

//! `-o` mount options, as `mount(8)` and fstab spell them: the generic ones a
//! filesystem honours (`ro`, `nosuid`, `nodev`, `noexec`, the atime family,
//! `sync`, `dirsync`) plus FUSE's `allow_other` and `default_permissions`.
//!
//! Like every FUSE filesystem, slowfs mounts `nosuid,nodev` unless told `suid`
//! or `dev` (which only root may ask for: fusermount3 refuses them to users);
//! the mount(8) helper gives root mount(8)'s defaults instead (see `slowfs
//! mount-helper --help`).

use std::fmt;
use std::str::FromStr;

use nix::mount::MsFlags;

/// How access times are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Atime {
    /// `relatime` (the kernel's default).
    #[default]
    Relatime,
    /// `noatime`.
    Noatime,
    /// `strictatime`: every read updates it.
    Strictatime,
}

/// Parsed `-o` options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountOptions {
    /// `ro`.
    pub read_only: bool,
    /// `nosuid` (default) or `suid`.
    pub nosuid: bool,
    /// `nodev` (default) or `dev`.
    pub nodev: bool,
    /// `noexec`.
    pub noexec: bool,
    /// The atime policy.
    pub atime: Atime,
    /// `nodiratime`.
    pub nodiratime: bool,
    /// `lazytime`.
    pub lazytime: bool,
    /// `sync`.
    pub sync: bool,
    /// `dirsync`.
    pub dirsync: bool,
    /// `allow_other` (implies `default_permissions`: the kernel checks modes).
    pub allow_other: bool,
    /// `default_permissions`.
    pub default_permissions: bool,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            read_only: false,
            nosuid: true,
            nodev: true,
            noexec: false,
            atime: Atime::default(),
            nodiratime: false,
            lazytime: false,
            sync: false,
            dirsync: false,
            allow_other: false,
            default_permissions: false,
        }
    }
}

/// The options `-o` knows, for error messages.
pub const KNOWN: &str = "ro, rw, suid, nosuid, dev, nodev, exec, noexec, atime, noatime, \
    relatime, strictatime, diratime, nodiratime, lazytime, nolazytime, sync, async, dirsync, \
    allow_other, default_permissions, defaults, auto, noauto, user, nouser, nofail, _netdev";

impl MountOptions {
    /// Applies one comma-separated list (later options win, as in mount(8)).
    pub fn apply(&mut self, list: &str) -> Result<(), String> {
        for option in list.split(',').map(str::trim).filter(|o| !o.is_empty()) {
            match option {
                "ro" => self.read_only = true,
                "rw" => self.read_only = false,
                "suid" => self.nosuid = false,
                "nosuid" => self.nosuid = true,
                "dev" => self.nodev = false,
                "nodev" => self.nodev = true,
                "exec" => self.noexec = false,
                "noexec" => self.noexec = true,
                "atime" | "relatime" => self.atime = Atime::Relatime,
                "noatime" => self.atime = Atime::Noatime,
                "strictatime" => self.atime = Atime::Strictatime,
                "diratime" => self.nodiratime = false,
                "nodiratime" => self.nodiratime = true,
                "lazytime" => self.lazytime = true,
                "nolazytime" => self.lazytime = false,
                "sync" => self.sync = true,
                "async" => self.sync = false,
                "dirsync" => self.dirsync = true,
                "allow_other" => {
                    self.allow_other = true;
                    self.default_permissions = true;
                }
                "default_permissions" => self.default_permissions = true,
                // fstab's own words, for mount(8), not the filesystem.
                "defaults" | "auto" | "noauto" | "user" | "nouser" | "users" | "nofail"
                | "_netdev" => {}
                other => return Err(format!("unknown mount option '{other}' (known: {KNOWN})")),
            }
        }
        Ok(())
    }

    /// The `mount(2)` flags.
    pub fn flags(&self) -> MsFlags {
        let mut flags = MsFlags::empty();
        flags.set(MsFlags::MS_RDONLY, self.read_only);
        flags.set(MsFlags::MS_NOSUID, self.nosuid);
        flags.set(MsFlags::MS_NODEV, self.nodev);
        flags.set(MsFlags::MS_NOEXEC, self.noexec);
        flags.set(MsFlags::MS_NOATIME, self.atime == Atime::Noatime);
        flags.set(MsFlags::MS_STRICTATIME, self.atime == Atime::Strictatime);
        flags.set(MsFlags::MS_RELATIME, self.atime == Atime::Relatime);
        flags.set(MsFlags::MS_NODIRATIME, self.nodiratime);
        flags.set(MsFlags::MS_LAZYTIME, self.lazytime);
        flags.set(MsFlags::MS_SYNCHRONOUS, self.sync);
        flags.set(MsFlags::MS_DIRSYNC, self.dirsync);
        flags
    }

    /// The same options as fusermount3 takes them: only those that differ from
    /// a mount's defaults (Debian's fusermount3 knows no `relatime`, and it
    /// forces nosuid,nodev on users itself; `suid` or `dev` it refuses, rightly).
    pub fn fusermount(&self) -> Vec<String> {
        let defaults = ["rw", "nosuid", "nodev", "exec", "relatime"];
        self.to_string()
            .split(',')
            .filter(|o| !defaults.contains(o))
            .map(String::from)
            .collect()
    }
}

impl fmt::Display for MountOptions {
    /// The options as a `-o` list (`rw,nosuid,nodev,relatime`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut words = vec![if self.read_only { "ro" } else { "rw" }];
        words.push(if self.nosuid { "nosuid" } else { "suid" });
        words.push(if self.nodev { "nodev" } else { "dev" });
        words.push(if self.noexec { "noexec" } else { "exec" });
        words.push(match self.atime {
            Atime::Relatime => "relatime",
            Atime::Noatime => "noatime",
            Atime::Strictatime => "strictatime",
        });
        for (on, word) in [
            (self.nodiratime, "nodiratime"),
            (self.lazytime, "lazytime"),
            (self.sync, "sync"),
            (self.dirsync, "dirsync"),
            (self.allow_other, "allow_other"),
            (self.default_permissions, "default_permissions"),
        ] {
            if on {
                words.push(word);
            }
        }
        f.write_str(&words.join(","))
    }
}

impl FromStr for MountOptions {
    type Err = String;

    /// ```
    /// use slowfs::mount_options::MountOptions;
    /// let o: MountOptions = "ro,noatime,suid".parse().unwrap();
    /// assert_eq!(o.to_string(), "ro,suid,nodev,exec,noatime");
    /// assert!("ro,noatim".parse::<MountOptions>().unwrap_err().contains("unknown mount option 'noatim'"));
    /// ```
    fn from_str(list: &str) -> Result<MountOptions, String> {
        let mut options = MountOptions::default();
        options.apply(list)?;
        Ok(options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_nosuid_nodev_and_print_back() {
        let o = MountOptions::default();
        assert_eq!(o.to_string(), "rw,nosuid,nodev,exec,relatime");
        assert!(o.flags().contains(MsFlags::MS_NOSUID | MsFlags::MS_NODEV));
        let back: MountOptions = o.to_string().parse().unwrap();
        assert_eq!(back, o);
        let strict: MountOptions = "strictatime,dev,allow_other".parse().unwrap();
        assert!(strict.flags().contains(MsFlags::MS_STRICTATIME));
        assert!(!strict.flags().contains(MsFlags::MS_NODEV));
        assert!(strict.default_permissions);
    }
}

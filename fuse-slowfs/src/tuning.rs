//! FUSE tuning: the INIT settings and session options slowfs negotiates with the
//! kernel. Each default is the one the fio table in the README measured best on the
//! daemon path (`bench/fio.sh tuning` runs every alternative side by side); `slowfs
//! mount --tune KEY=VALUE` changes one, for such measurements.

use std::fmt;

/// FUSE settings for one mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    /// Largest READ/WRITE request (and the readahead window), in bytes. 1 MiB keeps
    /// a call of up to 1 MiB on a file a rule touches (direct I/O) one request: one
    /// rule decision, one delay, one short count. At 128 KiB such a call is split in
    /// eight, though buffered sequential writes through the daemon measured ~10%
    /// faster; fidelity wins.
    pub max_write: u32,
    /// Background requests (readahead, writeback, async direct I/O) the kernel keeps
    /// in flight. fio (psync) does not tell 12 from 1024, but io_uring reads of a
    /// delayed file queue behind the cap (`slowfs-bench engines`).
    pub max_background: u16,
    /// The kernel gathers small writes in its page cache and sends them in batches
    /// (files a data rule touches bypass it; kernel passthrough excludes it). Off
    /// by default, fidelity first: with it, data the kernel still holds is
    /// invisible to SEEK_DATA/SEEK_HOLE and mtime is the write-back's time, not
    /// the write's (xfstests 003, 286, 436, ...); on, buffered writes in
    /// `--passthrough never` are ~1.8x faster.
    pub writeback_cache: bool,
    /// FUSE_HANDLE_KILLPRIV_V2: the daemon drops set-ID bits on writes, so the
    /// kernel need not ask for `security.capability` before every write.
    pub kill_priv_v2: bool,
    /// FUSE worker threads. Delays and hangs do not occupy them; blocking syscalls
    /// (fsync, reads from disk) do. One thread is ~15% faster for a single fsync-heavy
    /// writer but halves four concurrent ones (their fsyncs queue); more than four
    /// gains nothing on two cores.
    pub threads: usize,
    /// One `/dev/fuse` fd per worker thread instead of a shared one (measured no
    /// different: the kernel still has one request queue).
    pub clone_fd: bool,
    /// Reopen evicted inodes by kernel file handle (`open_by_handle_at`, needs
    /// CAP_DAC_READ_SEARCH and a filesystem that exports handles); `off`, or where
    /// handles are unavailable, by the name each inode was last seen under.
    pub file_handles: bool,
    /// How many inode fds the daemon keeps open at most; `0`: half of what the
    /// open-file limit (raised to its hard limit at start) leaves after a reserve.
    pub fd_cache: usize,
    /// Seconds the kernel may cache names and attributes while no rule asks to
    /// see lookups or getattrs, so a stat costs what it costs natively (a rule
    /// added at runtime invalidates them first). A change made in the backing
    /// directory by another process, not through the mount, shows through it
    /// after at most this long; `0`: every stat asks the daemon.
    pub attr_timeout: u32,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            max_write: 1 << 20,
            max_background: 1024,
            writeback_cache: false,
            kill_priv_v2: true,
            threads: 4,
            clone_fd: false,
            file_handles: true,
            fd_cache: 0,
            attr_timeout: 60,
        }
    }
}

/// The settings `--tune` knows, with what each takes.
pub const KEYS: &[(&str, &str)] = &[
    ("max-write", "a size from 4KiB to 1MiB"),
    ("max-background", "a count from 1 to 65535"),
    ("writeback-cache", "on or off"),
    ("kill-priv-v2", "on or off"),
    ("threads", "a count from 1 to 256"),
    ("clone-fd", "on or off"),
    ("file-handles", "on or off"),
    (
        "fd-cache",
        "a count from 16 to 1048576, or 0 for the default",
    ),
    ("attr-timeout", "seconds from 0 to 86400"),
];

/// A `--tune` setting that could not be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TuningError {
    setting: String,
    problem: String,
}

impl fmt::Display for TuningError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "--tune '{}': {}", self.setting, self.problem)
    }
}

impl std::error::Error for TuningError {}

impl Tuning {
    /// Applies one `KEY=VALUE` setting (see [`KEYS`]).
    ///
    /// ```
    /// let mut tuning = slowfs::Tuning::default();
    /// tuning.set("max-write=128KiB").unwrap();
    /// tuning.set("writeback-cache=on").unwrap();
    /// assert_eq!((tuning.max_write, tuning.writeback_cache), (128 << 10, true));
    /// let err = tuning.set("max-writes=1MiB").unwrap_err().to_string();
    /// assert!(err.contains("unknown setting 'max-writes'"), "{err}");
    /// ```
    pub fn set(&mut self, setting: &str) -> Result<(), TuningError> {
        let fail = |problem: String| TuningError {
            setting: setting.to_string(),
            problem,
        };
        let Some((key, value)) = setting.split_once('=') else {
            return Err(fail("expected KEY=VALUE, e.g. writeback-cache=off".into()));
        };
        let expected = KEYS
            .iter()
            .find(|(known, _)| *known == key)
            .map(|(_, expected)| *expected)
            .ok_or_else(|| {
                let known: Vec<_> = KEYS.iter().map(|(k, _)| *k).collect();
                fail(format!(
                    "unknown setting '{key}' (known: {})",
                    known.join(", ")
                ))
            })?;
        let bad = || fail(format!("{key} takes {expected}, not '{value}'"));
        let switch = || match value {
            "on" => Ok(true),
            "off" => Ok(false),
            _ => Err(bad()),
        };
        let count = |max: u64| {
            value
                .parse::<u64>()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(bad)
        };
        match key {
            "max-write" => {
                let bytes = slowfs_faults::parse_size(value).map_err(|_| bad())?;
                if !(4096..=1 << 20).contains(&bytes) {
                    return Err(bad());
                }
                self.max_write = bytes as u32;
            }
            "max-background" => self.max_background = count(u16::MAX as u64)? as u16,
            "writeback-cache" => self.writeback_cache = switch()?,
            "kill-priv-v2" => self.kill_priv_v2 = switch()?,
            "threads" => self.threads = count(256)? as usize,
            "clone-fd" => self.clone_fd = switch()?,
            "file-handles" => self.file_handles = switch()?,
            "fd-cache" => {
                self.fd_cache = match value.parse::<usize>() {
                    Ok(n) if n == 0 || (16..=1 << 20).contains(&n) => n,
                    _ => return Err(bad()),
                }
            }
            "attr-timeout" => {
                self.attr_timeout = match value.parse::<u32>() {
                    Ok(n) if n <= 86_400 => n,
                    _ => return Err(bad()),
                }
            }
            _ => unreachable!("every key in KEYS is handled"),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_say_what_is_expected() {
        let mut tuning = Tuning::default();
        let err = |s: &str| Tuning::default().set(s).unwrap_err().to_string();
        assert_eq!(
            err("threads"),
            "--tune 'threads': expected KEY=VALUE, e.g. writeback-cache=off"
        );
        assert_eq!(
            err("threads=0"),
            "--tune 'threads=0': threads takes a count from 1 to 256, not '0'"
        );
        assert_eq!(
            err("clone-fd=yes"),
            "--tune 'clone-fd=yes': clone-fd takes on or off, not 'yes'"
        );
        assert_eq!(
            err("max-write=2MiB"),
            "--tune 'max-write=2MiB': max-write takes a size from 4KiB to 1MiB, not '2MiB'"
        );
        tuning.set("threads=1").unwrap();
        tuning.set("max-background=12").unwrap();
        assert_eq!((tuning.threads, tuning.max_background), (1, 12));
    }
}

//! The daemon's open-file budget: raised to the hard limit at start, and split
//! between the inode fd cache and everything else (open handles, the control
//! socket, the FUSE device).

use std::sync::OnceLock;

/// Fds kept free for open handles and the daemon's own files, besides the cache.
const RESERVED: u64 = 64;
/// More cached fds than this gain nothing: a miss costs one `open_by_handle_at`.
const MAX_CACHE: u64 = 65_536;

/// Raises the soft RLIMIT_NOFILE to the hard limit (once per process) and returns
/// the soft limit now in force.
pub fn raise_nofile() -> u64 {
    static RAISED: OnceLock<u64> = OnceLock::new();
    *RAISED.get_or_init(|| {
        use nix::sys::resource::{getrlimit, setrlimit, Resource};
        let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
            return 1024;
        };
        if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
            tracing::debug!("open-file limit raised from {soft} to {hard}");
            return hard;
        }
        soft
    })
}

/// How many inode fds the cache may hold: half of what the limit leaves after the
/// reserve, so open handles (one fd each) have the other half.
pub fn fd_cache_capacity() -> usize {
    let limit = raise_nofile();
    (limit.saturating_sub(RESERVED) / 2).clamp(16, MAX_CACHE) as usize
}

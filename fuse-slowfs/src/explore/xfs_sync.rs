//! XFS pushes its log every `fs.xfs.xfssyncd_centisecs` (30 s by default):
//! shortened to 1 s while a workload is recorded, and put back after.
//!
//! The setting is machine-wide, and explore runs may overlap: each run adds
//! its pid to a holders file (under `flock`), whose first line is the value
//! before the first of them; the last run out puts that value back. A dead
//! holder's pid is pruned, so a SIGKILLed run does not keep the setting
//! short for ever: the next run out restores it.

use std::fs::File;
use std::io::{self, Read, Seek, Write};

use nix::fcntl::{Flock, FlockArg};

use super::realfs::RealFs;

const XFSSYNCD: &str = "/proc/sys/fs/xfs/xfssyncd_centisecs";
const HOLDERS: &str = "/run/slowfs-xfssyncd.holders";

/// The shortened interval while held; see the module docs.
pub struct XfsSyncInterval {
    held: bool,
}

impl XfsSyncInterval {
    /// Shortens it for `fs` XFS (nothing otherwise).
    pub fn shorten_for(fs: RealFs) -> XfsSyncInterval {
        let held = fs == RealFs::Xfs
            && update_holders(|original, pids| {
                pids.push(std::process::id());
                std::fs::write(XFSSYNCD, "100")?;
                Ok(original)
            })
            .map_err(|e| tracing::warn!("cannot shorten {XFSSYNCD}: {e}"))
            .is_ok();
        XfsSyncInterval { held }
    }
}

impl Drop for XfsSyncInterval {
    fn drop(&mut self) {
        if !self.held {
            return;
        }
        let me = std::process::id();
        let _ = update_holders(|original, pids| {
            pids.retain(|p| *p != me);
            if pids.is_empty() {
                if let Some(value) = &original {
                    std::fs::write(XFSSYNCD, value.trim())?;
                }
                return Ok(None);
            }
            Ok(original)
        });
    }
}

/// Runs `change` on the holders file's (original value, live pids) under an
/// exclusive lock and writes back what it returns (no original: empty).
/// With none recorded yet, the original is the value now, read before `change`
/// shortens anything.
fn update_holders(
    change: impl FnOnce(Option<String>, &mut Vec<u32>) -> io::Result<Option<String>>,
) -> io::Result<()> {
    let file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(HOLDERS)?;
    let mut file =
        Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| io::Error::from(e))?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    let mut lines = text.lines();
    let mut original = lines.next().filter(|l| !l.is_empty()).map(str::to_string);
    let mut pids: Vec<u32> = lines
        .filter_map(|l| l.parse().ok())
        .filter(|&pid| alive(pid))
        .collect();
    if original.is_none() {
        original = std::fs::read_to_string(XFSSYNCD).ok();
    }
    let original = change(original, &mut pids)?;
    let mut out = String::new();
    if let Some(value) = original {
        out.push_str(value.trim());
        out.push('\n');
        for pid in &pids {
            out.push_str(&format!("{pid}\n"));
        }
    }
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(out.as_bytes())
}

fn alive(pid: u32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok()
}

//! Fault traces of a cell's mounts: every fault a cell's slowfs mounts fired
//! (`slowfs_faults::trace`), one file per mount in the order the cell mounts
//! them, so that a failure seen once replays with the same faults even where
//! the engine's threads reach the mount in another order than the seed's run.
//!
//! The runner records every cell's traces into a directory of its own, keeps
//! them where the cell failed (and says where, beside the seed), and drops the
//! rest; `run --replay-faults DIR` mounts the cell's slowfs replaying them.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use slowfs::FaultTraceFile;

use crate::report::{Cell, Status};

/// Whether a cell's mounts record their faults or replay recorded ones.
#[derive(Debug, Clone)]
pub struct FaultTraces {
    dir: PathBuf,
    replay: bool,
    /// Mounts so far: the next one's file number.
    mounts: Arc<AtomicUsize>,
}

impl FaultTraces {
    /// Every mount records into a new file under `dir`.
    pub fn record(dir: &Path) -> FaultTraces {
        Self::new(dir, false)
    }

    /// Every mount replays its file under `dir` (as recorded).
    pub fn replay(dir: &Path) -> FaultTraces {
        Self::new(dir, true)
    }

    fn new(dir: &Path, replay: bool) -> FaultTraces {
        FaultTraces {
            dir: dir.to_path_buf(),
            replay,
            mounts: Arc::default(),
        }
    }

    /// The directory of the traces.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the mounts replay.
    pub fn replaying(&self) -> bool {
        self.replay
    }

    /// The trace of the cell's next mount.
    pub fn next_mount(&self) -> FaultTraceFile {
        let n = self.mounts.fetch_add(1, Ordering::SeqCst) + 1;
        let file = self.dir.join(format!("mount-{n}.faults"));
        if self.replay {
            FaultTraceFile::Replay(file)
        } else {
            FaultTraceFile::Record(file)
        }
    }
}

/// How many faults the traces in `dir` hold (a line each).
pub fn count(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .map(|text| text.lines().filter(|l| !l.trim().is_empty()).count())
        .sum()
}

/// A directory's name for the traces of `engine` x `suite`.
pub fn cell_dir_name(engine: &str, suite: &str) -> String {
    let safe: String = engine
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(60)
        .collect();
    format!("{safe}--{suite}")
}

/// Keeps the fault traces of a cell that failed the run (an unexpected
/// failure or timeout; a known finding is not kept) under `keep`, when its
/// mounts fired any, and names them in its replay command; drops them
/// otherwise.
pub fn keep_if_failed(cell: &mut Cell, traces: &FaultTraces, keep: &Path) {
    let recorded = traces.dir();
    let failed_the_run =
        matches!(cell.status, Status::Fail | Status::Timeout) && cell.unexpected.is_some();
    // Read the traces back only for a cell that may keep them.
    let faults = if failed_the_run { count(recorded) } else { 0 };
    if faults > 0 {
        let kept = keep.join(recorded.file_name().expect("a cell's directory"));
        let moved = std::fs::create_dir_all(keep)
            .and_then(|()| {
                let _ = std::fs::remove_dir_all(&kept);
                std::fs::rename(recorded, &kept).or_else(|_| copy_dir(recorded, &kept))
            })
            .and_then(|()| std::path::absolute(&kept));
        match moved {
            Ok(kept) => {
                cell.fault_traces = Some(format!("{} ({faults} faults)", kept.display()));
                cell.replay
                    .push_str(&format!(" --replay-faults {}", kept.display()));
            }
            Err(e) => eprintln!(
                "slowfs-conformance: cannot keep the fault traces in {}: {e}",
                kept.display()
            ),
        }
    }
    let _ = std::fs::remove_dir_all(recorded);
}

/// Copies the files of `from` into a new directory `to` (across filesystems).
fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        std::fs::copy(entry.path(), to.join(entry.file_name()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mount_gets_the_next_file_and_replays_read_the_same_names() {
        let traces = FaultTraces::record(Path::new("/t"));
        let names: Vec<_> = (0..2)
            .map(|_| match traces.next_mount() {
                FaultTraceFile::Record(file) => file,
                FaultTraceFile::Replay(_) => panic!("recording"),
            })
            .collect();
        assert_eq!(
            names,
            [
                PathBuf::from("/t/mount-1.faults"),
                PathBuf::from("/t/mount-2.faults")
            ]
        );
        let again = FaultTraces::replay(Path::new("/t"));
        assert!(matches!(again.next_mount(), FaultTraceFile::Replay(f) if f == names[0]));
    }

    #[test]
    fn cell_directories_are_plain_names() {
        assert_eq!(
            cell_dir_name("cmd:python3 d.py --lib aiofiles", "short-io"),
            "cmd_python3_d_py_--lib_aiofiles--short-io"
        );
    }
}

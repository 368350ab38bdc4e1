//! The strict crash model inside a live mount: a crash (a `crash` rule firing, or
//! `slowfs ctl MNT crash`) replaces the backing tree by its durable state, makes
//! every handle opened before it fail with EIO, and starts a new log from there.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;
use slowfs_faults::durability::{Log, Tree};

use super::Inner;
use slowfs_faults::crash::text::{describe, node_names};

use crate::tree_io::{materialize, scan};

/// What the crash model keeps between crashes.
#[derive(Debug)]
pub struct CrashState {
    backing: PathBuf,
    /// The durable tree the current log starts from.
    initial: Mutex<Tree>,
    crashes: Mutex<u64>,
}

impl CrashState {
    /// Reads the backing tree: everything in it is durable at mount time.
    pub fn new(backing: &Path) -> std::io::Result<CrashState> {
        Ok(CrashState {
            backing: backing.to_path_buf(),
            initial: Mutex::new(scan(backing)?),
            crashes: Mutex::new(0),
        })
    }
}

/// `slowfs ctl MNT durable`: what a crash now would lose.
#[derive(Debug, Clone, Serialize)]
pub struct DurabilityReport {
    /// Operations since the mount (or the last crash).
    pub ops: usize,
    /// Those not yet durable, described.
    pub pending: Vec<String>,
    /// Paths whose data a crash now would change: unsynced data or entries, and
    /// data a failed write-back dropped that the file still shows.
    pub at_risk: Vec<String>,
    /// Crashes so far.
    pub crashes: u64,
}

impl Inner {
    pub(super) fn current_log(&self, crash: &CrashState) -> Log {
        Log::from_recorded(
            crash.initial.lock().unwrap().clone(),
            self.recorded(),
            crate::explore::BLOCK_SIZE,
        )
    }

    /// Power loss now. Without the crash model, nothing happens.
    pub fn crash_now(&self) -> bool {
        let Some(crash) = self.mode.crash() else {
            return false;
        };
        let mut crashes = crash.crashes.lock().unwrap();
        let log = self.current_log(crash);
        let durable = log.durable_state(log.ops().len());
        self.handles.stale_all();
        let result = (|| -> std::io::Result<Tree> {
            for entry in std::fs::read_dir(&crash.backing)? {
                let path = entry?.path();
                if path.is_dir() && !path.is_symlink() {
                    std::fs::remove_dir_all(&path)?;
                } else {
                    std::fs::remove_file(&path)?;
                }
            }
            materialize(&durable, &crash.backing)?;
            scan(&crash.backing)
        })();
        match result {
            Ok(tree) => *crash.initial.lock().unwrap() = tree,
            Err(e) => tracing::error!("crash: rewriting {} failed: {e}", crash.backing.display()),
        }
        if let Some(recorder) = self.mode.recorder() {
            recorder.clear();
        }
        self.inodes.reset_to_root();
        *crashes += 1;
        true
    }

    /// What a crash now would lose; `None` without the crash model.
    pub fn durability_report(&self) -> Option<DurabilityReport> {
        let crash = self.mode.crash()?;
        let log = self.current_log(crash);
        let k = log.ops().len();
        let names = node_names(&log);
        let durable = log.durable_state(k);
        // What is visible is the backing tree itself, not the log's latest
        // state: a failed write-back (`fsync error=EIO drop`) takes data out of
        // the log that the files still show, and a crash loses it.
        let visible = scan(&crash.backing).unwrap_or_else(|_| log.volatile_state(k));
        let at_risk = durable.differences(&visible);
        Some(DurabilityReport {
            ops: k,
            pending: log
                .pending(k)
                .into_iter()
                .map(|i| describe(&log.ops()[i], &names))
                .collect(),
            at_risk,
            crashes: *crash.crashes.lock().unwrap(),
        })
    }
}

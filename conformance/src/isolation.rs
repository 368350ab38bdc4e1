//! Each cell in a child process of its own, so that every run ends in bounded
//! time and leaves nothing behind.
//!
//! The child (`slowfs-conformance cell ...`) runs one suite against one engine
//! and writes its [`Outcome`] as JSON. It runs in its own process group with
//! `TMPDIR` pointing into a directory made for the cell, where its slowfs
//! mounts and backing directories live. When the cell exceeds its time limit,
//! or the runner gets SIGINT/SIGTERM/SIGHUP, the whole group (the child and any
//! driver it started) is killed, every slowfs still mounted under the cell's
//! directory is detached (its daemon died with the child, so nothing blocks on
//! it), and the directory is removed.

use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, SigSet, Signal};
use nix::unistd::Pid;

use crate::runner::PlannedCell;
use crate::{Outcome, SuiteConfig};

/// How an isolated cell ended.
#[derive(Debug)]
pub enum CellEnd {
    /// It finished and reported its outcome.
    Finished(Outcome),
    /// It ran past its time limit and was killed.
    TimedOut,
    /// The runner was asked to stop (the signal), and the cell was killed.
    Signalled(Signal),
    /// The child ended without an outcome (it crashed): what it said.
    Crashed(String),
}

/// The arguments of the hidden `cell` subcommand that runs `planned`.
pub fn cell_args(planned: &PlannedCell, config: &SuiteConfig, out: &Path) -> Vec<String> {
    let mut args = vec![
        "cell".to_string(),
        "--engine".into(),
        planned.engine.spec.source.clone(),
        "--suite".into(),
        planned.suite.name().into(),
        "--seed".into(),
        config.seed.to_string(),
        "--cases".into(),
        config.cases.to_string(),
        "--out".into(),
        out.display().to_string(),
    ];
    if let Some(profile) = &config.profile {
        args.extend(["--profile".into(), profile.clone()]);
    }
    if let Some(bound) = config.lag_bound_ms {
        args.extend(["--lag-bound-ms".into(), bound.to_string()]);
    }
    if let Some(traces) = &config.fault_traces {
        let flag = if traces.replaying() {
            "--replay-faults"
        } else {
            "--record-faults"
        };
        args.extend([flag.into(), traces.dir().display().to_string()]);
    }
    args
}

/// A cell's directory and its child, cleaned up on drop whatever happened.
struct Sandbox {
    dir: Option<tempfile::TempDir>,
    child: Option<Child>,
}

impl Sandbox {
    /// Kills the child's process group (the child, and any driver it started).
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
            let _ = child.wait();
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.kill();
        if let Some(dir) = self.dir.take() {
            unmount_under(dir.path());
            let path = dir.path().to_path_buf();
            if let Err(e) = dir.close() {
                eprintln!("slowfs-conformance: cannot remove {}: {e}", path.display());
            }
        }
    }
}

/// Detaches every slowfs mounted under `dir` (deepest first).
pub fn unmount_under(dir: &Path) {
    let mut entries: Vec<_> = slowfs::mount_table::slowfs_mount_entries()
        .into_iter()
        .filter(|e| e.mountpoint.starts_with(dir))
        .collect();
    entries.reverse();
    for entry in entries {
        slowfs::mount::abort_connection_minor(entry.connection);
        if let Err(e) = slowfs::mount::force_unmount(&entry.mountpoint) {
            eprintln!(
                "slowfs-conformance: cannot unmount {}: {e}",
                entry.mountpoint.display()
            );
        }
    }
}

/// Runs `planned` in a child process of `exe` (this program), for at most
/// `timeout`, while watching `signals` (blocked in this process; see
/// [`slowfs::signals::block_termination`]). `tick` is called a few times a
/// second with the time the cell has run.
pub fn run_isolated(
    exe: &Path,
    planned: &PlannedCell,
    config: &SuiteConfig,
    timeout: Duration,
    signals: &SigSet,
    mut tick: impl FnMut(Duration),
) -> io::Result<CellEnd> {
    let dir = tempfile::Builder::new()
        .prefix("slowfs-conformance-")
        .tempdir()?;
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp)?;
    let out = dir.path().join("outcome.json");
    let mut command = Command::new(exe);
    command
        .args(cell_args(planned, config, &out))
        .env("TMPDIR", &tmp)
        .stdin(Stdio::null())
        .process_group(0);
    // SAFETY: unblock_termination only calls async-signal-safe functions.
    unsafe {
        command.pre_exec(|| {
            slowfs::signals::unblock_termination();
            Ok(())
        });
    }
    let mut sandbox = Sandbox {
        child: Some(command.spawn()?),
        dir: Some(dir),
    };
    let started = Instant::now();
    loop {
        if let Some(signal) = slowfs::signals::wait_for(signals, Duration::from_millis(100)) {
            return Ok(CellEnd::Signalled(signal));
        }
        let child = sandbox.child.as_mut().expect("running");
        if let Some(status) = child.try_wait()? {
            sandbox.child = None;
            return Ok(match std::fs::read(&out) {
                Ok(json) => match serde_json::from_slice::<Outcome>(&json) {
                    Ok(outcome) => CellEnd::Finished(outcome),
                    Err(e) => CellEnd::Crashed(format!("its outcome is unreadable ({e})")),
                },
                Err(_) => CellEnd::Crashed(format!("it ended ({status}) without an outcome")),
            });
        }
        let ran = started.elapsed();
        if ran >= timeout {
            return Ok(CellEnd::TimedOut);
        }
        tick(ran);
    }
}

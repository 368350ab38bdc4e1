//! `slowfs run`: a command on a fresh mount, its signals forwarded, the
//! mount ended on every path.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use nix::sys::signal::{SigSet, Signal};
use slowfs::signals::{self, block_termination, Terminal};
use slowfs::Mount;

use super::super::FaultArgs;
use super::mounting::{announce, backing_dir, config};

/// How long `slowfs run` lets the command react to a forwarded termination signal
/// before it releases the command's parked requests and kills its process group.
const GRACE: Duration = Duration::from_secs(5);

pub fn run(args: FaultArgs, quiet: bool, command: Vec<OsString>) -> anyhow::Result<ExitCode> {
    let signals = block_termination();
    let (backing, _temp_backing) = backing_dir(&args)?;
    let mountpoint = tempfile::Builder::new()
        .prefix("slowfs-mnt-")
        .tempdir()
        .context("creating a temporary mountpoint")?;
    let mount = Mount::start(config(&args, backing.clone(), mountpoint.path().into())?)?;
    if !quiet {
        announce(&mount, args.seed.is_some(), &backing);
    }
    let mut child = std::process::Command::new(&command[0]);
    child
        .args(&command[1..])
        .env("SLOWFS_MOUNT", mount.mountpoint())
        .env("SLOWFS_SEED", mount.seed().to_string());
    if let Some(socket) = mount.control_socket() {
        child.env("SLOWFS_CTL", socket);
    }
    // SAFETY: only async-signal-safe calls (sigprocmask, setpgid) between fork and exec.
    unsafe {
        child.pre_exec(|| {
            SigSet::all()
                .thread_unblock()
                .map_err(std::io::Error::from)?;
            // Its own process group, so that it and everything it starts can be
            // ended together.
            nix::unistd::setpgid(nix::unistd::Pid::from_raw(0), nix::unistd::Pid::from_raw(0))?;
            Ok(())
        });
    }
    let mut child = match child.spawn() {
        Ok(child) => child,
        Err(e) => {
            drop(mount);
            bail!("cannot start {:?}: {e}", command[0]);
        }
    };
    let group = nix::unistd::Pid::from_raw(child.id() as i32);
    let terminal = Terminal::hand_to(group);
    // A termination signal goes on to the command's group; if it has not exited
    // GRACE later, its parked requests are let go and the group is killed.
    let release = mount.releaser();
    std::thread::spawn(move || {
        let mut escalation: Option<std::time::Instant> = None;
        loop {
            let timeout = escalation.map(|at| at.saturating_duration_since(Instant::now()));
            match signals::wait_for(&signals, timeout.unwrap_or(Duration::from_secs(3600))) {
                Some(signal) => {
                    let _ = nix::sys::signal::killpg(group, signal);
                    escalation.get_or_insert(Instant::now() + GRACE);
                }
                None if escalation.is_some_and(|at| Instant::now() >= at) => {
                    note!(
                        "slowfs: the command did not exit {} s after the signal; releasing \
                         its requests and killing its process group",
                        GRACE.as_secs()
                    );
                    release();
                    let _ = nix::sys::signal::killpg(group, Signal::SIGKILL);
                    escalation = None;
                }
                None => {}
            }
        }
    });
    let status = child.wait().context("waiting for the command")?;
    drop(terminal);
    if !quiet {
        note_part!("{}", mount.stats().render());
    }
    mount.unmount().context("unmounting")?;
    let code = match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => {
            if !quiet {
                let name = Signal::try_from(signal).map_or("?", |s| s.as_str());
                note!("slowfs: command killed by {name}");
            }
            128 + signal
        }
        _ => 1,
    };
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

//! `umount` and `umount --all`: ending mounts, live, silent or dead.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use slowfs::control::{default_socket, nobody_listens, Command as CtlCommand};

use super::control::request;

/// Ends the slowfs at `mountpoint`: asks a live daemon to release its parked
/// requests, unmount and exit, and waits for it; detaches a dead or silent one.
pub fn umount(
    mountpoint: &Path,
    socket: Option<PathBuf>,
    force: bool,
    timeout: Duration,
) -> anyhow::Result<ExitCode> {
    let Some(entry) = slowfs::mount_table::slowfs_at(mountpoint) else {
        bail!(
            "no slowfs is mounted at {} (`findmnt -t fuse.slowfs` lists them)",
            mountpoint.display()
        );
    };
    end_mount(&entry, socket, force, timeout)
}

/// `umount --all`: every dead slowfs mount; with `force`, live ones too (the
/// caller's own, or everyone's as root).
pub fn umount_all(force: bool, timeout: Duration) -> anyhow::Result<ExitCode> {
    // SAFETY: plain id query.
    let uid = unsafe { libc::geteuid() };
    let mut failed = false;
    let mut skipped = 0;
    for entry in slowfs::mount_table::slowfs_mount_entries() {
        let mine = uid == 0 || entry.user_id == Some(uid);
        if entry.is_dead() || (force && mine) {
            failed |= end_mount(&entry, None, force, timeout)? != ExitCode::SUCCESS;
        } else {
            skipped += 1;
            let why = if mine {
                "live (--force ends it)"
            } else {
                "live, another user's"
            };
            say!("kept {}: {why}", entry.mountpoint.display());
        }
    }
    if skipped == 0 && !failed {
        say!("no slowfs mounts left");
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Ends one mount; `force` detaches one whose daemon is alive but does not answer.
fn end_mount(
    entry: &slowfs::mount_table::MountEntry,
    socket: Option<PathBuf>,
    force: bool,
    timeout: Duration,
) -> anyhow::Result<ExitCode> {
    let mountpoint = &entry.mountpoint;
    if entry.is_dead() {
        detach(entry)?;
        say!(
            "unmounted {}: its daemon was gone; removed the dead mount",
            mountpoint.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let socket = match socket {
        Some(socket) => socket,
        None => default_socket(mountpoint)?,
    };
    let answer = match request(&socket, &CtlCommand::Shutdown) {
        Ok(answer) if answer.ok => answer,
        // A daemon that answers is alive, even when it refuses: never cut it off
        // unless told to.
        Ok(answer) if !force => bail!(
            "the daemon of {} answered but did not unmount: {} \
             (`slowfs umount --force {}` detaches the mount anyway)",
            mountpoint.display(),
            answer.message,
            mountpoint.display()
        ),
        // Connected but silent: stopped or overloaded, not dead.
        Err(e) if !force && !nobody_listens(&e) => bail!(
            "{e}. Nothing was changed: the daemon of {} still owns it. \
             `slowfs umount --force {}` detaches the mount anyway (its pending \
             requests fail with ENOTCONN)",
            mountpoint.display(),
            mountpoint.display()
        ),
        other => {
            detach(entry)?;
            let why = match other {
                Err(e) if nobody_listens(&e) => {
                    format!("no daemon answered at {}", socket.display())
                }
                Err(e) => format!("--force, and the daemon did not answer ({e})"),
                Ok(answer) => format!("--force, and the daemon said: {}", answer.message),
            };
            say!(
                "unmounted {}: {why}; detached the mount and aborted its \
                 FUSE connection (requests still pending fail with ENOTCONN)",
                mountpoint.display(),
            );
            return Ok(ExitCode::SUCCESS);
        }
    };
    say!("{}", answer.message);
    let Some(pid) = answer.data.get("pid").and_then(|p| p.as_i64()) else {
        return Ok(ExitCode::SUCCESS);
    };
    let started = Instant::now();
    while process_alive(pid as i32) {
        if started.elapsed() > timeout {
            note!(
                "slowfs umount: daemon pid {pid} is still running after {timeout:?}; \
                 `kill {pid}` ends it"
            );
            return Ok(ExitCode::FAILURE);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    say!(
        "daemon pid {pid} exited after {} ms",
        started.elapsed().as_millis()
    );
    Ok(ExitCode::SUCCESS)
}

/// Detaches a mount and aborts its FUSE connection.
fn detach(entry: &slowfs::mount_table::MountEntry) -> anyhow::Result<()> {
    slowfs::mount::force_unmount(&entry.mountpoint)
        .with_context(|| format!("unmounting {}", entry.mountpoint.display()))?;
    slowfs::mount::abort_connection_minor(entry.connection);
    Ok(())
}

/// Whether process `pid` still runs (a zombie has ended).
fn process_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

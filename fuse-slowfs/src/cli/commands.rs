//! What each subcommand does.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use fault_inject::{FaultSpec, PROFILES};
use nix::sys::signal::{SigSet, Signal};
use slowfs::control::{default_socket, request, Command as CtlCommand};
use slowfs::{Mount, MountConfig};

use slowfs::signals::{self, block_termination, wait_unless, Terminal};

/// How long `slowfs run` lets the command react to a forwarded termination signal
/// before it releases the command's parked requests and kills its process group.
const GRACE: Duration = Duration::from_secs(5);
use super::{CtlAction, FaultArgs};

/// Builds the fault spec from `--profile`, `--config` and `--set`, in that order.
fn spec(args: &FaultArgs) -> anyhow::Result<FaultSpec> {
    let mut spec = FaultSpec::default();
    for profile in &args.profile {
        spec.add_profile(profile)?;
    }
    if let Some(file) = &args.config {
        spec.add_file(file)?;
    }
    for (i, rule) in args.rules.iter().enumerate() {
        spec.add_rule(&format!("--set #{}", i + 1), rule)?;
    }
    if args.seed.is_some() {
        spec.seed = args.seed;
    }
    Ok(spec)
}

fn config(args: &FaultArgs, backing: PathBuf, mountpoint: PathBuf) -> anyhow::Result<MountConfig> {
    let mut config = MountConfig::new(backing, mountpoint);
    config.spec = spec(args)?;
    config.allow_other = args.allow_other;
    for setting in &args.tune {
        config.tuning.set(setting)?;
    }
    if let Some(threads) = args.threads {
        config.tuning.set(&format!("threads={threads}"))?;
    }
    config.control = Some(args.ctl_socket.clone());
    config.crash_model = args.crash_model;
    config.passthrough = args.passthrough == "auto";
    config.interruptible = !args.no_intr;
    Ok(config)
}

fn announce(mount: &Mount, seeded: bool, backing: &std::path::Path) {
    eprintln!(
        "slowfs: mounted {} over {} ({} rule(s))",
        mount.mountpoint().display(),
        backing.display(),
        mount.plan().rules().len()
    );
    if !seeded {
        eprintln!(
            "slowfs: seed {0} (pass --seed {0} to reproduce)",
            mount.seed()
        );
    }
    if let Some(socket) = mount.control_socket() {
        eprintln!(
            "slowfs: control: slowfs ctl {} stats|rules|set RULE|clear|release  (socket {})",
            mount.mountpoint().display(),
            socket.display()
        );
    }
}

pub fn mount(args: FaultArgs, mountpoint: PathBuf) -> anyhow::Result<ExitCode> {
    let signals = block_termination();
    let (backing, _temp) = backing_dir(&args)?;
    let mount = Mount::start(config(&args, backing.clone(), mountpoint)?)?;
    announce(&mount, args.seed.is_some(), &backing);
    eprintln!("slowfs: running until SIGINT/SIGTERM (Ctrl-C)");
    match wait_unless(&signals, || mount.ended()) {
        Some(signal) => eprintln!("slowfs: {signal}, unmounting"),
        None => eprintln!(
            "slowfs: {} was unmounted, exiting",
            mount.mountpoint().display()
        ),
    }
    eprint!("{}", mount.stats().render());
    mount.unmount().context("unmounting")?;
    Ok(ExitCode::SUCCESS)
}

/// The backing directory: `--backing`, or a fresh temporary one (removed afterwards).
fn backing_dir(args: &FaultArgs) -> anyhow::Result<(PathBuf, Option<tempfile::TempDir>)> {
    match &args.backing {
        Some(dir) => Ok((dir.clone(), None)),
        None => {
            let temp = tempfile::Builder::new()
                .prefix("slowfs-backing-")
                .tempdir()
                .context("creating a temporary backing directory")?;
            Ok((temp.path().to_path_buf(), Some(temp)))
        }
    }
}

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
                    eprintln!(
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
        eprint!("{}", mount.stats().render());
    }
    mount.unmount().context("unmounting")?;
    let code = match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(signal)) => {
            if !quiet {
                let name = Signal::try_from(signal).map_or("?", |s| s.as_str());
                eprintln!("slowfs: command killed by {name}");
            }
            128 + signal
        }
        _ => 1,
    };
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

pub fn ctl(
    mountpoint: PathBuf,
    socket: Option<PathBuf>,
    action: CtlAction,
) -> anyhow::Result<ExitCode> {
    let socket = socket.unwrap_or_else(|| default_socket(&mountpoint));
    let (command, json) = match action {
        CtlAction::Stats { json } => (CtlCommand::Stats, json),
        CtlAction::Set { rule } => (CtlCommand::Set { rule }, false),
        CtlAction::Clear { id } => (CtlCommand::Clear { id }, false),
        CtlAction::Rules => (CtlCommand::Rules, false),
        CtlAction::Release => (CtlCommand::Release, false),
        CtlAction::Crash => (CtlCommand::Crash, false),
        CtlAction::Durable { json } => (CtlCommand::Durable, json),
    };
    let response = request(&socket, &command)?;
    if !response.ok {
        eprintln!("slowfs ctl: {}", response.message);
        return Ok(ExitCode::FAILURE);
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&response.data)?);
    } else {
        println!("{}", response.message.trim_end());
    }
    Ok(ExitCode::SUCCESS)
}

pub fn profiles(name: Option<String>) -> anyhow::Result<ExitCode> {
    match name {
        None => {
            for p in PROFILES {
                println!("{:<18} {}", p.name, p.summary);
            }
            println!("\n`slowfs profiles NAME` shows a profile's rules and sources.");
        }
        Some(name) => {
            let Some(p) = fault_inject::profile(&name) else {
                let names: Vec<&str> = PROFILES.iter().map(|p| p.name).collect();
                bail!("unknown profile '{name}' (built-in: {})", names.join(", "));
            };
            println!(
                "{}: {}\n\nwhere the numbers come from: {}\n\nrules:",
                p.name, p.summary, p.source
            );
            for rule in p.rules {
                println!("  {rule}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn check(file: PathBuf) -> anyhow::Result<ExitCode> {
    let mut spec = FaultSpec::default();
    spec.add_file(&file)?;
    println!("{}: ok, {} rule(s)", file.display(), spec.rules.len());
    if let Some(seed) = spec.seed {
        println!("seed {seed}");
    }
    for rule in &spec.rules {
        println!("  {rule}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Ends the slowfs at `mountpoint`: asks a live daemon to release its parked
/// requests, unmount and exit, and waits for it; detaches a dead or silent one.
pub fn umount(
    mountpoint: &Path,
    socket: Option<PathBuf>,
    timeout: Duration,
) -> anyhow::Result<ExitCode> {
    let Some(entry) = slowfs::mount_table::slowfs_at(mountpoint) else {
        bail!(
            "no slowfs is mounted at {} (`grep '^slowfs ' /proc/mounts` lists them)",
            mountpoint.display()
        );
    };
    end_mount(&entry, socket, timeout)
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
            failed |= end_mount(&entry, None, timeout)? != ExitCode::SUCCESS;
        } else {
            skipped += 1;
            let why = if mine {
                "live (--force ends it)"
            } else {
                "live, another user's"
            };
            println!("kept {}: {why}", entry.mountpoint.display());
        }
    }
    if skipped == 0 && !failed {
        println!("no slowfs mounts left");
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn end_mount(
    entry: &slowfs::mount_table::MountEntry,
    socket: Option<PathBuf>,
    timeout: Duration,
) -> anyhow::Result<ExitCode> {
    let mountpoint = &entry.mountpoint;
    if entry.is_dead() {
        detach(entry)?;
        println!(
            "unmounted {}: its daemon was gone; removed the dead mount",
            mountpoint.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let socket = socket.unwrap_or_else(|| default_socket(mountpoint));
    let answer = request(&socket, &CtlCommand::Shutdown).ok();
    let Some(answer) = answer.filter(|a| a.ok) else {
        detach(entry)?;
        println!(
            "unmounted {}: no daemon answered at {}; detached the mount and aborted its \
             FUSE connection (requests still pending fail with ENOTCONN)",
            mountpoint.display(),
            socket.display()
        );
        return Ok(ExitCode::SUCCESS);
    };
    println!("{}", answer.message);
    let Some(pid) = answer.data.get("pid").and_then(|p| p.as_i64()) else {
        return Ok(ExitCode::SUCCESS);
    };
    let started = Instant::now();
    while process_alive(pid as i32) {
        if started.elapsed() > timeout {
            eprintln!(
                "slowfs umount: daemon pid {pid} is still running after {timeout:?}; \
                 `kill {pid}` ends it"
            );
            return Ok(ExitCode::FAILURE);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    println!(
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

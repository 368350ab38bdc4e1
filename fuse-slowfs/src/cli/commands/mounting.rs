//! `mount`, `mount-helper` (mount(8) and fstab), remounts, and the mount a
//! command of `run` gets: from the fault flags to a running mount.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Parser;
use slowfs::signals::{block_termination, wait_unless};
use slowfs::{ControlSocket, FaultTraceFile, Mount, MountConfig};
use slowfs_faults::FaultSpec;

use super::super::FaultArgs;

/// Builds the fault spec from `--profile`, `--config` and `--set`, in that order.
pub(super) fn spec(args: &FaultArgs) -> anyhow::Result<FaultSpec> {
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

pub(super) fn config(
    args: &FaultArgs,
    backing: PathBuf,
    mountpoint: PathBuf,
) -> anyhow::Result<MountConfig> {
    let mut config = MountConfig::new(backing, mountpoint);
    config.spec = spec(args)?;
    for list in &args.options {
        config
            .options
            .apply(list)
            .map_err(|e| anyhow::anyhow!("-o {list}: {e}"))?;
    }
    if args.allow_other {
        config.options.apply("allow_other").expect("a known option");
    }
    for setting in &args.tune {
        config.tuning.set(setting)?;
    }
    if let Some(threads) = args.threads {
        config.tuning.set(&format!("threads={threads}"))?;
    }
    config.control = match &args.ctl_socket {
        Some(path) => ControlSocket::At(path.clone()),
        None => ControlSocket::Default,
    };
    config.durability = args.crash_model;
    config.fault_trace = match (&args.record_faults, &args.replay_faults) {
        (Some(file), _) => Some(FaultTraceFile::Record(file.clone())),
        (None, Some(file)) => Some(FaultTraceFile::Replay(file.clone())),
        (None, None) => None,
    };
    config.passthrough = args.passthrough == "auto";
    config.interruptible = !args.no_intr;
    config.cache = match args.cache {
        Some(policy) => policy,
        // NFS's slowness is per RPC, and its client caches.
        None if args.profile.iter().any(|p| p == "nfs") && !config.durability.records() => {
            slowfs::CachePolicy::Nfs(Default::default())
        }
        None => slowfs::CachePolicy::EveryCall,
    };
    if config.cache != slowfs::CachePolicy::EveryCall && config.durability.records() {
        anyhow::bail!(
            "--cache {} cannot go with --crash-model strict: the crash model must see every write when it is made; use --cache every-call",
            config.cache
        );
    }
    Ok(config)
}

pub(super) fn announce(mount: &Mount, seeded: bool, backing: &std::path::Path) {
    note!(
        "slowfs: mounted {} over {} ({} rule(s))",
        mount.mountpoint().display(),
        backing.display(),
        mount.plan().rules().len()
    );
    if !seeded {
        note!(
            "slowfs: seed {0} (pass --seed {0} to reproduce; --record-faults FILE when \
             threads race)",
            mount.seed()
        );
    }
    match mount.fault_trace() {
        Some(FaultTraceFile::Record(file)) => {
            note!(
                "slowfs: recording the faults that fire in {}",
                file.display()
            )
        }
        Some(FaultTraceFile::Replay(file)) => note!(
            "slowfs: replaying {} fault(s) from {} (the rules are not drawn from)",
            mount.plan().traced_faults(),
            file.display()
        ),
        None => {}
    }
    if let Some(socket) = mount.control_socket() {
        note!(
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
    note!("slowfs: running until SIGINT/SIGTERM (Ctrl-C)");
    match wait_unless(&signals, || mount.ended()) {
        Some(signal) => note!("slowfs: {signal}, unmounting"),
        None => note!(
            "slowfs: {} was unmounted, exiting",
            mount.mountpoint().display()
        ),
    }
    note_part!("{}", mount.stats().render());
    mount.unmount().context("unmounting")?;
    Ok(ExitCode::SUCCESS)
}

/// `mount-helper` (mount.fuse.slowfs): mount(8)'s call, turned into `slowfs
/// mount --background` with the options sorted into slowfs's and the mount's.
pub fn mount_helper(
    source: PathBuf,
    mountpoint: PathBuf,
    options: &[String],
    fake: bool,
    verbose: bool,
) -> anyhow::Result<ExitCode> {
    let words: Vec<&str> = options
        .iter()
        .flat_map(|list| list.split(','))
        .filter(|o| !o.is_empty())
        .collect();
    if words.contains(&"remount") {
        return remount(&mountpoint, &words, fake, verbose);
    }
    let mut argv: Vec<std::ffi::OsString> =
        vec!["slowfs".into(), "mount".into(), "--background".into()];
    // A mount helper is silent on success: mount(8) shows what it prints
    // (xfstests compare that output, and 003/294 failed on these lines).
    if !verbose {
        argv.push("--quiet".into());
    }
    argv.extend(["--backing".into(), source.clone().into_os_string()]);
    let mut generic = Vec::new();
    for option in words {
        let flag = match option.split_once('=') {
            Some(("profile", v)) => Some(("--profile", v)),
            Some(("config", v)) => Some(("--config", v)),
            Some(("seed", v)) => Some(("--seed", v)),
            Some(("ctl_socket", v)) => Some(("--ctl-socket", v)),
            Some(("passthrough", v)) => Some(("--passthrough", v)),
            Some(("crash_model", v)) => Some(("--crash-model", v)),
            Some(("cache", v)) => Some(("--cache", v)),
            _ => None,
        };
        match flag {
            Some((flag, value)) => argv.extend([flag.into(), value.into()]),
            None => generic.push(option.to_string()),
        }
    }
    // mount(8) passes only what differs from its own defaults, and for root
    // those are `suid,dev` (it adds nosuid,nodev itself for fstab `user`
    // mounts): an absent `nodev` means dev, as for any filesystem root mounts.
    // A backing directory on a nosuid or nodev mount keeps that through slowfs
    // (its set-ID binaries and device nodes are passed through).
    if nix::unistd::geteuid().is_root() {
        let backing = nix::sys::statvfs::statvfs(source.as_path())
            .map(|s| s.flags())
            .unwrap_or(
                nix::sys::statvfs::FsFlags::ST_NOSUID | nix::sys::statvfs::FsFlags::ST_NODEV,
            );
        if !backing.contains(nix::sys::statvfs::FsFlags::ST_NODEV) {
            generic.insert(0, "dev".to_string());
        }
        if !backing.contains(nix::sys::statvfs::FsFlags::ST_NOSUID) {
            generic.insert(0, "suid".to_string());
        }
    }
    if !generic.is_empty() {
        let list = generic.join(",");
        // Checked here too, so that `mount -f` reports a bad option.
        list.parse::<slowfs::mount_options::MountOptions>()
            .map_err(|e| anyhow::anyhow!("{e}; slowfs's own: {}=", SLOWFS_OPTIONS.join("=, ")))?;
        argv.extend(["-o".into(), list.into()]);
    }
    argv.push(mountpoint.into_os_string());
    let cli = super::super::Cli::try_parse_from(argv)?;
    if fake {
        return Ok(ExitCode::SUCCESS);
    }
    super::super::run(cli)
}

/// slowfs's own `-o key=value` options.
const SLOWFS_OPTIONS: &[&str] = &[
    "profile",
    "config",
    "seed",
    "ctl_socket",
    "passthrough",
    "crash_model",
    "cache",
];

/// The generic options a mounted filesystem has now, as `-o` words.
fn current_flags(mountpoint: &Path) -> anyhow::Result<Vec<&'static str>> {
    use nix::sys::statvfs::FsFlags;
    let flags = nix::sys::statvfs::statvfs(mountpoint)
        .with_context(|| format!("reading the flags of {}", mountpoint.display()))?
        .flags();
    let pick = |flag, on, off| if flags.contains(flag) { on } else { off };
    let mut words = vec![
        pick(FsFlags::ST_RDONLY, "ro", "rw"),
        pick(FsFlags::ST_NOSUID, "nosuid", "suid"),
        pick(FsFlags::ST_NODEV, "nodev", "dev"),
        pick(FsFlags::ST_NOEXEC, "noexec", "exec"),
    ];
    words.push(if flags.contains(FsFlags::ST_NOATIME) {
        "noatime"
    } else if flags.contains(FsFlags::ST_RELATIME) {
        "relatime"
    } else {
        "strictatime"
    });
    if flags.contains(FsFlags::ST_NODIRATIME) {
        words.push("nodiratime");
    }
    Ok(words)
}

/// `mount -o remount,...`: the mount's flags changed in place (mount(8) passes
/// the mount's current options merged with the new ones). The daemon and its
/// rules stay; the kernel enforces `ro` and the per-mount flags.
fn remount(
    mountpoint: &Path,
    words: &[&str],
    fake: bool,
    verbose: bool,
) -> anyhow::Result<ExitCode> {
    // The words given change the mount's flags as they are now (mount(8) may
    // pass fstab's options, not the live ones: what they leave out stays).
    let mut generic = current_flags(mountpoint)?;
    for word in words.iter().copied().filter(|w| *w != "remount") {
        match word.split_once('=') {
            // FUSE's own, fixed when the connection was made.
            Some(("user_id" | "group_id" | "rootmode" | "max_read" | "blksize" | "fd", _)) => {}
            Some((key, _)) if !SLOWFS_OPTIONS.contains(&key) => bail!(
                "unknown mount option '{word}' (slowfs's own: {}=)",
                SLOWFS_OPTIONS.join("=, ")
            ),
            // mount(8) passes the mount's options again (fstab's, or the
            // first mount's -o): slowfs's own cannot change in place, so they
            // are left as they are (said with -v: they are usually unchanged,
            // and a remount must print nothing then).
            Some(_) if !verbose => {}
            Some(_) => note!(
                "slowfs: note: '{word}' is left as mounted: slowfs's own options are fixed at \
                 mount time (change rules live with `slowfs ctl {} set RULE`, or unmount and \
                 mount again)",
                mountpoint.display()
            ),
            None => generic.push(word),
        }
    }
    let options: slowfs::mount_options::MountOptions = generic
        .join(",")
        .parse()
        .map_err(|e: String| anyhow::anyhow!(e))?;
    if fake {
        return Ok(ExitCode::SUCCESS);
    }
    let flags = nix::mount::MsFlags::MS_REMOUNT | options.flags();
    nix::mount::mount(None::<&str>, mountpoint, None::<&str>, flags, None::<&str>).map_err(
        |e| match e {
            nix::errno::Errno::EPERM => anyhow::anyhow!(
                "remounting {} needs root (mount(2) with MS_REMOUNT): unmount and mount again \
                 with the new options instead",
                mountpoint.display()
            ),
            e => anyhow::anyhow!("remounting {} with {options}: {e}", mountpoint.display()),
        },
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `mount --background`: forks before any thread starts; the child mounts and
/// serves (in a session of its own, detached from the terminal), the parent
/// waits until the child says it is mounted, or why not, and returns that.
pub fn mount_in_background(
    args: FaultArgs,
    quiet: bool,
    mountpoint: PathBuf,
) -> anyhow::Result<ExitCode> {
    use std::io::{Read, Write as _};
    use std::os::fd::AsRawFd;
    let (read_end, write_end) = nix::unistd::pipe()?;
    // SAFETY: no thread has started yet (this runs first in the command), so
    // the child may do anything the parent could.
    match unsafe { nix::unistd::fork() }? {
        nix::unistd::ForkResult::Parent { child } => {
            drop(write_end);
            let mut said = String::new();
            std::fs::File::from(read_end).read_to_string(&mut said)?;
            match said.strip_prefix("ok ") {
                Some(_) if quiet => Ok(ExitCode::SUCCESS),
                Some(announce) => {
                    note_part!("{announce}");
                    note!("slowfs: daemon pid {child} serves it until unmounted");
                    Ok(ExitCode::SUCCESS)
                }
                None if said.is_empty() => {
                    bail!("the daemon (pid {child}) exited before mounting")
                }
                None => bail!("{}", said.trim_end()),
            }
        }
        nix::unistd::ForkResult::Child => {
            drop(read_end);
            let _ = nix::unistd::setsid();
            let mut report = std::fs::File::from(write_end);
            let signals = block_termination();
            let mounted = (|| -> anyhow::Result<Mount> {
                let backing = args.backing.clone().ok_or_else(|| {
                    anyhow::anyhow!("--background needs --backing DIR (the data must outlive the daemon's start)")
                })?;
                Ok(Mount::start(config(&args, backing, mountpoint)?)?)
            })();
            let mount = match mounted {
                Ok(mount) => mount,
                Err(e) => {
                    let _ = write!(report, "{e:#}");
                    std::process::exit(2);
                }
            };
            let _ = writeln!(
                report,
                "ok slowfs: mounted {} over {} ({} rule(s)), seed {}",
                mount.mountpoint().display(),
                args.backing
                    .as_deref()
                    .unwrap_or(std::path::Path::new("?"))
                    .display(),
                mount.plan().rules().len(),
                mount.seed()
            );
            drop(report);
            // Detached: nothing to print to any more.
            if let Ok(null) = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/null")
            {
                for fd in 0..3 {
                    // SAFETY: dup2 onto the standard descriptors.
                    unsafe { libc::dup2(null.as_raw_fd(), fd) };
                }
            }
            let _ = wait_unless(&signals, || mount.ended());
            let _ = mount.unmount();
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The backing directory: `--backing`, or a fresh temporary one (removed afterwards).
pub(super) fn backing_dir(
    args: &FaultArgs,
) -> anyhow::Result<(PathBuf, Option<tempfile::TempDir>)> {
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

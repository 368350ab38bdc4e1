//! `slowfs explore`: record a workload, then check its crash states.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use fault_inject::durability::{Keep, Log};
use slowfs::explore::{
    describe, explore as run_explore, kept_spec, materialize, node_names, parse_state, scan,
    ExploreConfig,
};
use slowfs::{Mount, MountConfig};

use super::ExploreArgs;

pub fn explore(args: ExploreArgs) -> anyhow::Result<ExitCode> {
    if let Some(log_path) = &args.replay {
        return replay(
            log_path,
            args.state.as_deref().unwrap_or_default(),
            &args.check,
        );
    }
    if args.workload.is_empty() {
        bail!("give the workload after --, e.g. slowfs explore --check ./check.sh -- ./export.sh");
    }
    let (backing, _temp) = match &args.backing {
        Some(dir) => (dir.clone(), None),
        None => {
            let temp = tempfile::Builder::new()
                .prefix("slowfs-explore-")
                .tempdir()?;
            (temp.path().to_path_buf(), Some(temp))
        }
    };
    let initial = scan(&backing)
        .with_context(|| format!("reading the initial state of {}", backing.display()))?;
    let mountpoint = tempfile::Builder::new().prefix("slowfs-mnt-").tempdir()?;
    let mut config = MountConfig::new(&backing, mountpoint.path());
    config.record = true;
    config.control = None;
    let mount = Mount::start(config)?;
    eprintln!(
        "slowfs explore: running the workload on a recording mount at {}",
        mount.mountpoint().display()
    );
    let status = run_workload(&args.workload, &mount);
    let ops = mount.recorded();
    mount.unmount().context("unmounting the recording mount")?;
    let status =
        status.with_context(|| format!("cannot start the workload {:?}", args.workload[0]))?;
    if !status.success() {
        eprintln!("slowfs explore: the workload failed ({status}); no crash states were checked");
        return Ok(ExitCode::from(2));
    }
    let mut log = Log::new(initial);
    for op in ops {
        log.push(op);
    }
    let log_dir = args.log_dir.clone().unwrap_or_else(std::env::temp_dir);
    let saved = tempfile::Builder::new()
        .prefix("slowfs-explore-log-")
        .suffix(".json")
        .tempfile_in(&log_dir)
        .with_context(|| format!("saving the log in {}", log_dir.display()))?;
    serde_json::to_writer(saved.as_file(), &log)?;
    let (_, saved_path) = saved.keep().context("keeping the log")?;

    let config = ExploreConfig {
        check: args.check.clone(),
        max_states: args.max_states,
        torn_sector: args.torn.then_some(args.sector),
        seed: args.seed,
    };
    eprintln!(
        "slowfs explore: {} operations recorded; checking crash states",
        log.ops().len()
    );
    let result = run_explore(&log, &config, |k, states| {
        eprintln!(
            "slowfs explore: crash point {k}/{}, {states} states checked",
            log.ops().len()
        );
    })?;
    let names = node_names(&log);
    println!(
        "ops recorded: {}\ncrash points: {}\nstates checked: {}{}\nstates/s: {:.0}\nviolations: {}",
        result.ops,
        result.crash_points,
        result.states,
        if result.budget_hit {
            " (the --max-states / sampling budget cut the search; raise --max-states)".to_string()
        } else {
            String::new()
        },
        result.states as f64 / result.seconds.max(1e-9),
        result.violations.len()
    );
    for (n, v) in result.violations.iter().enumerate().take(10) {
        println!(
            "\nviolation {}: crash after {} of {} operations (checker exit {})",
            n + 1,
            v.crash_point,
            result.ops,
            v.status
        );
        for (i, op) in log.ops()[..v.crash_point].iter().enumerate() {
            let fate = if !v.pending.contains(&i) {
                "durable"
            } else {
                match v.kept.get(&i) {
                    Some(Keep::Whole) => "kept",
                    Some(Keep::Torn(_)) => "torn",
                    None => "DROPPED",
                }
            };
            let torn = match v.kept.get(&i) {
                Some(Keep::Torn(bytes)) => format!(" (first {bytes} bytes survive)"),
                _ => String::new(),
            };
            println!("  {i:>3} {fate:<8} {}{torn}", describe(op, &names));
        }
        for line in v.output.lines().take(5) {
            println!("  checker: {line}");
        }
        println!(
            "  replay: slowfs explore --replay {} --state {}/{} --check {}",
            saved_path.display(),
            v.crash_point,
            kept_spec(&v.kept),
            shell_quote(&args.check)
        );
    }
    if result.violations.len() > 10 {
        println!("\n... and {} more violations", result.violations.len() - 10);
    }
    Ok(if result.violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Runs the workload with sync(2)/syncfs(2) reported to the recorder (see
/// `slowfs::sync_watch`); its exit status.
fn run_workload(
    workload: &[std::ffi::OsString],
    mount: &Mount,
) -> std::io::Result<std::process::ExitStatus> {
    use std::os::unix::process::CommandExt;
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    let filter = slowfs::sync_watch::SyncFilter::new();
    let theirs_fd = std::os::fd::AsRawFd::as_raw_fd(&theirs);
    let mut command = std::process::Command::new(&workload[0]);
    command
        .args(&workload[1..])
        .env("SLOWFS_MOUNT", mount.mountpoint());
    // SAFETY: `install` makes only async-signal-safe syscalls and does not allocate.
    unsafe {
        command.pre_exec(move || filter.install(theirs_fd));
    }
    let mut child = command.spawn()?;
    drop(theirs);
    let watcher = slowfs::sync_watch::watch(ours, mount.sync_recorder());
    if let Err(e) = &watcher {
        eprintln!("slowfs explore: sync(2) will not be seen: {e}");
    }
    // Each sync is recorded before it runs, so once the workload has exited every
    // one of its syncs is in the log; the watcher thread ends with the last process
    // of the tree.
    child.wait()
}

fn replay(log_path: &PathBuf, state: &str, check: &str) -> anyhow::Result<ExitCode> {
    let log: Log = serde_json::from_reader(
        std::fs::File::open(log_path).with_context(|| format!("opening {}", log_path.display()))?,
    )
    .with_context(|| format!("{} is not a slowfs explore log", log_path.display()))?;
    let (point, kept) = parse_state(state).map_err(anyhow::Error::msg)?;
    if point > log.ops().len() {
        bail!(
            "crash point {point} is past the log's {} operations",
            log.ops().len()
        );
    }
    let dir = tempfile::Builder::new().prefix("slowfs-state-").tempdir()?;
    let tree = log.state_with(point, &kept);
    let state_dir = dir.path().join("state");
    materialize(&tree, &state_dir)?;
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(check)
        .env("SLOWFS_STATE", &state_dir)
        .env("SLOWFS_CRASH_POINT", point.to_string())
        .env("SLOWFS_OPS", log.ops().len().to_string())
        .status()
        .context("running the checker")?;
    println!(
        "state {state}: checker {}",
        if status.success() {
            "accepts it"
        } else {
            "rejects it"
        }
    );
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn shell_quote(text: &str) -> String {
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-=".contains(c))
    {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

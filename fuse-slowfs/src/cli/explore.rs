//! `slowfs explore`: flags wired to `slowfs::explore`, and the report printed.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context};
use slowfs::explore::{
    anchored_to, checker_reads_crash_point, explore as run_explore, log_digest, materialize, merge,
    record, record_over, replay, CheckSettings, Cut, Exploration, ExploreConfig, Judgement,
    Progress, Running, SavedRun, ShardReport,
};
use slowfs::signals::block_termination;
use slowfs_faults::crash::text::parse_state;
use slowfs_faults::durability::{Log, LogOp};

use super::explore_report::{ModelRun, Report};
use super::ExploreArgs;

pub fn explore(args: ExploreArgs) -> anyhow::Result<ExitCode> {
    if let Some(saved) = &args.replay {
        return replay_one(saved, &args);
    }
    if !args.merge.is_empty() {
        return merge_shards(&args);
    }
    let check = anchored_to(
        args.check
            .as_deref()
            .expect("clap requires --check without --replay"),
        &std::env::current_dir()?,
    );
    if args.workload.is_empty() {
        bail!("give the workload after --, e.g. slowfs explore --check ./check.sh -- ./export.sh");
    }
    // Read before the workload runs: a wrong file is said at once.
    let model_run = match (&args.compare_with, args.fs) {
        (Some(path), Some(_)) => Some(ModelRun::load(path)?),
        _ => None,
    };
    if checker_reads_crash_point(&check) && !args.per_point {
        eprintln!(
            "slowfs explore: note: the checker reads SLOWFS_CRASH_POINT; without --per-point a \
             state seen at several crash points is checked at the first one only"
        );
    }
    // Ctrl-C / SIGTERM: passed to the workload while it runs; then they stop the
    // checking (checkers run in process groups of their own, so only slowfs
    // hears a terminal's Ctrl-C and ends them itself), and the summary of what
    // was found is printed.
    let signals = block_termination();
    let stop = Arc::new(AtomicBool::new(false));
    let running = Running::default();
    let workload_pid = Arc::new(AtomicI32::new(0));
    {
        let (stop, running, workload_pid) = (
            Arc::clone(&stop),
            running.clone(),
            Arc::clone(&workload_pid),
        );
        std::thread::spawn(move || loop {
            if let Ok(signal) = signals.wait() {
                stop.store(true, Ordering::SeqCst);
                running.stop_all();
                let pid = workload_pid.load(Ordering::SeqCst);
                if pid > 0 {
                    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
                }
            }
        });
    }
    let recorded = match args.fs {
        Some(fs) => record_on_real_fs(&args, fs, &check, &workload_pid)?,
        None => record_on_mount(&args, &workload_pid)?,
    };
    if stop.load(Ordering::SeqCst) {
        eprintln!("slowfs explore: interrupted during the workload; no crash states were checked");
        return Ok(ExitCode::from(130));
    }
    if !recorded.status.success() {
        eprintln!(
            "slowfs explore: the workload failed ({}); no crash states were checked",
            recorded.status
        );
        return Ok(ExitCode::from(2));
    }
    let log = recorded.log;
    if log.ops().is_empty() {
        // A verdict about no operations would be green on nothing.
        eprintln!(
            "slowfs explore: the workload changed nothing on the recording mount, so there is \
             no crash state to check. It runs in this directory with SLOWFS_MOUNT set to the \
             mount: make it write there (e.g. start it with `cd \"$SLOWFS_MOUNT\"`)"
        );
        return Ok(ExitCode::from(2));
    }
    let check = match &recorded.real {
        Some(real) => real.setup.checker(&check),
        None => check,
    };
    let config = config(&args, check, stop, running);
    eprintln!(
        "slowfs explore: {} operations recorded; checking crash states with {} checker(s)",
        log.ops().len(),
        config.jobs
    );
    let mut line = ProgressLine::new();
    let result = match &recorded.real {
        Some(real) => {
            let image = Arc::new(slowfs::explore::ImageStates {
                base: real.base.clone(),
                device: Arc::clone(&real.device),
            });
            slowfs::explore::explore_image(
                &log,
                image,
                real.names.clone(),
                &real.setup,
                &config,
                |p| line.show(p),
            )
        }
        None => run_explore(&log, &config, |p| line.show(p)),
    };
    line.finish();
    let result = result?;
    let saved = save_if_needed(
        &log,
        &config,
        &args,
        result.violations > 0,
        recorded.real.as_ref(),
    )?;
    let report = Report {
        result: &result,
        saved: saved.as_deref(),
        per_point: args.per_point,
        time_budget: args.time_budget.is_some(),
        epochs: recorded
            .real
            .as_ref()
            .map(|real| real.device.epochs().iter().map(|e| e.point).collect()),
        model_run: model_run
            .as_ref()
            .zip(recorded.real.as_ref())
            .map(|(run, real)| (run, real.setup.model())),
    };
    report.print();
    let mut violations = result.violations;
    let mut json = report.json();
    if let Some(shard) = args.shard {
        json["shard_report"] = serde_json::to_value(ShardReport {
            exploration: result.clone(),
            log_digest: log_digest(&log),
            seed: args.seed,
            max_states: args.max_states,
            per_point: args.per_point,
            torn_sector: config.torn_sector,
            ignore: args.ignore.clone(),
            fs_model: args.fs_model,
            time_budget: args.time_budget.is_some(),
            saved_run: saved.clone(),
        })?;
        println!(
            "\nthis was shard {shard}: it checked {} of the run's {} states; \
             `slowfs explore --merge` joins the shards' --json reports into the run's verdict",
            result.checked_here, result.states
        );
    }
    if args.fsync_fails && result.cut != Some(Cut::Interrupted) {
        let (found, runs) = explore_fsync_failures(&args, &log, &config, &workload_pid)?;
        violations += found;
        json["fsync_fails"] = serde_json::Value::Array(runs);
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&json)?)
            .with_context(|| format!("writing {}", path.display()))?;
        println!("\nreport as JSON: {}", path.display());
    }
    if let Some(path) = &args.html {
        std::fs::write(path, slowfs::explore::html::page(&json, log.ops()))
            .with_context(|| format!("writing {}", path.display()))?;
        println!("report as HTML: {}", path.display());
    }
    Ok(exit_code(&result, violations, args.partial_ok))
}

/// A recorded workload, and with `--fs` what its states are made from.
struct RecordedRun {
    log: Log,
    status: std::process::ExitStatus,
    real: Option<RealRun>,
}

/// An `--fs` run's filesystem: its setup, base image and recorded device
/// (the temporary directory holding the base lives as long as this).
struct RealRun {
    setup: slowfs::explore::FsSetup,
    base: PathBuf,
    device: Arc<slowfs_faults::crash::blocks::Device>,
    /// What the written blocks hold at the end of the workload.
    names: slowfs::explore::BlockNames,
    node: u64,
    _dir: tempfile::TempDir,
}

/// The workload on a recording mount over `--backing` (or a fresh directory).
fn record_on_mount(args: &ExploreArgs, workload_pid: &AtomicI32) -> anyhow::Result<RecordedRun> {
    let (backing, _temp) = match &args.backing {
        Some(dir) => (dir.clone(), None),
        None => {
            let temp = tempfile::Builder::new()
                .prefix("slowfs-explore-")
                .tempdir()?;
            (temp.path().to_path_buf(), Some(temp))
        }
    };
    eprintln!("slowfs explore: running the workload on a recording mount");
    let recorded = record(&args.workload, &backing, None, workload_pid)?;
    Ok(RecordedRun {
        log: recorded.log,
        status: recorded.status,
        real: None,
    })
}

/// `--fs`: the filesystem made in a base image, the workload run on it in a
/// copy on the recording mount, and the disk's writes taken from the log.
fn record_on_real_fs(
    args: &ExploreArgs,
    fs: slowfs::explore::RealFs,
    check: &str,
    workload_pid: &AtomicI32,
) -> anyhow::Result<RecordedRun> {
    use slowfs::explore::{realfs, FsSetup};
    let mut setup = FsSetup::new(fs);
    if let Some(size) = args.fs_size {
        setup.size = size;
    }
    setup.mkfs_args = args.mkfs_args.clone();
    if let Some(options) = &args.mount_options {
        setup.mount_options = options.clone();
    }
    setup.settle = args.fs_settle;
    setup.fsck = args.fsck;
    setup.preflight()?;
    let dir = tempfile::Builder::new().prefix("slowfs-fs-").tempdir()?;
    let base = dir.path().join("base.img");
    setup
        .make_image(&base)
        .with_context(|| format!("making the {fs} image"))?;
    let mountpoint = dir.path().join("fs");
    std::fs::create_dir(&mountpoint)?;
    if let Some(command) = &args.fs_setup {
        setup.populate(&base, &mountpoint, command)?;
    }
    let backing = dir.path().join("backing");
    std::fs::create_dir(&backing)?;
    realfs::sparse_copy(&base, &backing.join("image"))?;
    let initial = image_tree(&backing)?;
    let node = initial_image_node(&initial);
    eprintln!(
        "slowfs explore: running the workload on {} in a {} image on a recording mount (checker: {check})",
        setup.describe(),
        slowfs_faults::DisplaySize(setup.size)
    );
    let recorded = {
        let _interval = realfs::XfsSyncInterval::shorten_for(fs);
        // It runs in the filesystem's root: `./export.sh` means the user's.
        let mut workload = args.workload.clone();
        if Path::new(&workload[0]).components().count() > 1 && Path::new(&workload[0]).is_relative()
        {
            workload[0] = std::env::current_dir()?.join(&workload[0]).into_os_string();
        }
        record_over(
            &setup.workload(&mountpoint, &workload),
            &backing,
            initial,
            None,
            workload_pid,
        )?
    };
    let device = slowfs_faults::crash::blocks::Device::new(&recorded.log, node)
        .map_err(|e| anyhow::anyhow!("the recorded disk: {e}"))?;
    if recorded.status.success() && device.epochs().is_empty() {
        bail!(
            "the {fs} filesystem wrote nothing to its disk during the workload: no crash state \
             to check (does the workload write in its working directory, SLOWFS_MOUNT?)"
        );
    }
    eprintln!(
        "slowfs explore: the disk took {} writes ({}) in {} flush epochs",
        device.write_count(),
        slowfs_faults::DisplaySize(device.bytes_written()),
        device.epochs().len()
    );
    let names = slowfs::explore::BlockNames::read(fs, &backing.join("image"), &device.extents())
        .unwrap_or_else(|e| {
            eprintln!(
                "slowfs explore: the written blocks are not named (lost writes are shown \
                     as byte ranges): {e}"
            );
            Default::default()
        });
    Ok(RecordedRun {
        log: recorded.log,
        status: recorded.status,
        real: Some(RealRun {
            setup,
            base,
            device: Arc::new(device),
            names,
            node,
            _dir: dir,
        }),
    })
}

/// The initial state of a backing directory holding only `image`: the image
/// without its data (states are made from the base image on disk).
fn image_tree(backing: &Path) -> std::io::Result<slowfs_faults::durability::Tree> {
    use slowfs_faults::durability::{Node, Tree};
    use std::os::unix::fs::MetadataExt;
    let root = std::fs::metadata(backing)?.ino();
    let image = std::fs::metadata(backing.join("image"))?.ino();
    let mut tree = Tree::empty(root);
    tree.nodes.insert(
        root,
        Node::Dir(std::collections::BTreeMap::from([(
            "image".to_string(),
            image,
        )])),
    );
    tree.nodes.insert(image, Node::File(Vec::new()));
    Ok(tree)
}

fn initial_image_node(tree: &slowfs_faults::durability::Tree) -> u64 {
    tree.lookup_id("image").expect("image_tree makes it")
}

/// 130 interrupted, 1 violations, 4 explore's own error, 3 not every point
/// covered (unless `partial_ok`), else 0.
fn exit_code(result: &Exploration, violations: usize, partial_ok: bool) -> ExitCode {
    ExitCode::from(if result.cut == Some(Cut::Interrupted) {
        130
    } else if violations > 0 {
        1
    } else if result.cut == Some(Cut::OwnError) {
        4
    } else if !result.coverage.complete() && !partial_ok {
        3
    } else {
        0
    })
}

/// `--merge`: the shards' reports joined, printed and judged as one run.
fn merge_shards(args: &ExploreArgs) -> anyhow::Result<ExitCode> {
    let mut shards = Vec::new();
    for path in &args.merge {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let json: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", path.display()))?;
        let shard =
            serde_json::from_value::<ShardReport>(json["shard_report"].clone()).map_err(|e| {
                anyhow::anyhow!(
                    "{}: {e} (expected the --json report of `slowfs explore --shard K/N`)",
                    path.display()
                )
            })?;
        shards.push(shard);
    }
    let merged = merge(shards).map_err(|e| anyhow::anyhow!("slowfs explore --merge: {e}"))?;
    let result = &merged.exploration;
    let report = Report {
        result,
        saved: merged.saved_run.as_deref(),
        per_point: merged.per_point,
        time_budget: merged.time_budget,
        epochs: None,
        model_run: None,
    };
    report.print();
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report.json())?)
            .with_context(|| format!("writing {}", path.display()))?;
        println!("\nreport as JSON: {}", path.display());
    }
    Ok(exit_code(result, result.violations, args.partial_ok))
}

fn config(
    args: &ExploreArgs,
    check: String,
    stop: Arc<AtomicBool>,
    running: Running,
) -> ExploreConfig {
    let mut config = ExploreConfig::new(check);
    config.settings.persistent = args.persistent;
    config.settings.ignore = args.ignore.clone();
    config.settings.timeout_ms = args.timeout.as_millis() as u64;
    config.max_states = args.max_states;
    config.time_budget = args.time_budget;
    config.torn_sector = args.torn.then_some(args.sector);
    config.seed = args.seed;
    config.crash_points = args.crash_points;
    config.per_point = args.per_point;
    config.shard = args.shard;
    config.fs_model = args.fs_model;
    if let Some(jobs) = args.jobs {
        config.jobs = jobs.max(1);
    }
    config.stop = stop;
    config.running = running;
    config
}

/// Saves the run for `--replay`: into `--log-dir` always, else into the
/// current directory when there is something to replay.
fn save_if_needed(
    log: &Log,
    config: &ExploreConfig,
    args: &ExploreArgs,
    violations: bool,
    real: Option<&RealRun>,
) -> anyhow::Result<Option<PathBuf>> {
    let dir = match (&args.log_dir, violations) {
        (Some(dir), _) => dir.clone(),
        (None, true) => PathBuf::from("."),
        (None, false) => return Ok(None),
    };
    let image = match real {
        Some(real) => {
            // The base image beside the run, named by the run's own name.
            let base = tempfile::Builder::new()
                .prefix("slowfs-explore-base-")
                .suffix(".img")
                .tempfile_in(&dir)?
                .keep()
                .map_err(|e| e.error)?
                .1;
            slowfs::explore::realfs::sparse_copy(&real.base, &base)?;
            let base = base.canonicalize()?;
            Some(slowfs::explore::SavedImage {
                setup: real.setup.clone(),
                base_hash: slowfs::explore::realfs::image_hash(&base)?,
                base,
                node: real.node,
            })
        }
        None => None,
    };
    let saved = SavedRun {
        settings: config.settings.clone(),
        log: log.clone(),
        image,
    };
    Ok(Some(saved.save(&dir)?))
}

/// `--fsync-fails`: runs the workload again once per fsync of the first run,
/// from the same initial state, with that fsync failing as Linux fails one
/// (EIO; the file's unsynced data dropped; a retry succeeds), and checks each
/// run's crash states within what is left of the budget.
fn explore_fsync_failures(
    args: &ExploreArgs,
    first: &Log,
    config: &ExploreConfig,
    workload_pid: &AtomicI32,
) -> anyhow::Result<(usize, Vec<serde_json::Value>)> {
    let fsyncs = first
        .ops()
        .iter()
        .filter(|op| matches!(op, LogOp::Fsync { .. }))
        .count();
    // What the page cache holds after the failure follows the model.
    let evicts = args
        .fs_model
        .is_some_and(slowfs_faults::crash::models::FsModel::evicts_after_failed_fsync);
    let (drop, cache) = if evicts {
        ("drop=evict", "evicted from the cache as btrfs does")
    } else {
        (
            "drop",
            "kept in the cache as clean pages as ext4 and XFS do",
        )
    };
    println!(
        "\n--fsync-fails: the workload fsynced files {fsyncs} time(s); running it again with each \
         fsync failing in turn (EIO, the file's unsynced data dropped and {cache}, a retry succeeds)"
    );
    let start = std::time::Instant::now();
    let mut states_left = config.max_states;
    let mut violations = 0;
    let mut runs = Vec::new();
    for i in 0..fsyncs {
        let time_left = config
            .time_budget
            .map(|t| t.saturating_sub(start.elapsed()));
        if states_left == 0 || time_left.is_some_and(|t| t.is_zero()) {
            println!("--fsync-fails: budget spent after {i} of {fsyncs} failing fsyncs");
            break;
        }
        if config.stop.load(Ordering::SeqCst) {
            println!("--fsync-fails: interrupted after {i} of {fsyncs} failing fsyncs");
            break;
        }
        let scratch = tempfile::Builder::new()
            .prefix("slowfs-explore-")
            .tempdir()?;
        let backing = scratch.path().join("backing");
        materialize(first.initial(), &backing)?;
        let rule = format!("fsync,fdatasync error=EIO {drop} after={i}");
        let run = record(&args.workload, &backing, Some(&rule), workload_pid)?;
        let mut config = config.clone();
        config.max_states = states_left;
        config.time_budget = time_left;
        let result = run_explore(&run.log, &config, |_| {})?;
        states_left = states_left.saturating_sub(result.states);
        println!(
            "\n== fsync #{} of {fsyncs} fails: the workload {} ==",
            i + 1,
            if run.status.success() {
                "carried on and exited 0".to_string()
            } else {
                format!("stopped ({})", run.status)
            }
        );
        println!(
            "(the data that fsync dropped is gone from every state of this run, the no-crash \
             state included: it was lost at the fsync, not at a crash)"
        );
        let saved = save_if_needed(&run.log, &config, args, result.violations > 0, None)?;
        let report = Report {
            result: &result,
            saved: saved.as_deref(),
            per_point: args.per_point,
            time_budget: args.time_budget.is_some(),
            epochs: None,
            model_run: None,
        };
        report.print();
        let mut json = report.json();
        json["failing_fsync"] = serde_json::json!(i + 1);
        json["workload_exit"] = serde_json::json!(run.status.code());
        runs.push(json);
        violations += result.violations;
    }
    println!("\nfsync-fails violations: {violations}");
    Ok((violations, runs))
}

/// One updating line on a terminal; a plain line every 10 s otherwise (the
/// first one after a second, so a log shows the run is alive).
struct ProgressLine {
    tty: bool,
    last_plain: Option<std::time::Instant>,
    shown: bool,
}

impl ProgressLine {
    fn new() -> ProgressLine {
        ProgressLine {
            tty: std::io::stderr().is_terminal(),
            last_plain: None,
            shown: false,
        }
    }

    fn show(&mut self, p: &Progress) {
        let rate = p.rate();
        let eta = if p.high_yield_left > 0 {
            format!(
                "{} high-yield states left, ETA {:.0} s",
                p.high_yield_left,
                p.high_yield_left as f64 / rate.max(1e-9)
            )
        } else {
            "high-yield states done; sampling with the budget left".to_string()
        };
        let text = format!(
            "slowfs explore: {} states checked ({:.0}/s), {} duplicates skipped; {eta}; {} violation(s)",
            p.checked, rate, p.duplicates, p.violations
        );
        if self.tty {
            eprint!("\r\x1b[K{text}");
            let _ = std::io::stderr().flush();
            self.shown = true;
        } else if self.last_plain.is_none_or(|t| t.elapsed().as_secs() >= 10) {
            eprintln!("{text}");
            self.last_plain = Some(std::time::Instant::now());
        }
    }

    fn finish(&self) {
        if self.shown {
            eprintln!();
        }
    }
}

fn replay_one(saved_path: &Path, args: &ExploreArgs) -> anyhow::Result<ExitCode> {
    let state = args.state.as_deref().unwrap_or_default();
    let mut saved = SavedRun::load(saved_path)?;
    if let Some(check) = &args.check {
        let check = &anchored_to(check, &std::env::current_dir()?);
        if *check != saved.settings.check {
            eprintln!(
                "slowfs explore: checking with `{check}` (the run used `{}`)",
                saved.settings.check
            );
        }
        saved.settings = CheckSettings {
            check: check.clone(),
            ..saved.settings
        };
    }
    if let (Some(_), Some(image)) = (&args.check, &saved.image) {
        // A checker given for an --fs run runs in the mounted image, as the run's did.
        saved.settings.check = image.setup.checker(&saved.settings.check);
    }
    let (point, kept) = parse_state(state).map_err(anyhow::Error::msg)?;
    if let Some(keep) = &args.keep_state {
        if keep.exists() && std::fs::read_dir(keep).is_ok_and(|mut d| d.next().is_some()) {
            bail!(
                "--keep-state {}: the directory is not empty (give a new or empty one)",
                keep.display()
            );
        }
    }
    let verdict = replay(&saved, point, &kept, args.keep_state.as_deref())
        .map_err(|e| anyhow::anyhow!("--state {state}: {e}"))?;
    let accepted = verdict == Judgement::Accepted;
    match &verdict {
        Judgement::Accepted => println!("state {state}: checker accepts it"),
        Judgement::Rejected(status, output) => {
            println!("state {state}: checker rejects it (status {status})");
            for line in output.lines().take(20) {
                println!("  {line}");
            }
        }
    }
    if let Some(keep) = &args.keep_state {
        println!("state kept in {}", keep.display());
    }
    Ok(if accepted {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

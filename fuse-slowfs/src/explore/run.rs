//! Explore as one library call: an [`ExplorePlan`] (resolved once from the
//! flags or built in code) goes in, an [`ExploreReport`] comes out. Records
//! the workload (on a recording mount, or with `--fs` on a real filesystem in
//! an image on one), checks its crash states, runs it again with each fsync
//! failing if asked, and saves what `--replay` needs.

/// A line of progress on stderr; dropped if stderr is gone (a closed pipe
/// must not end the run in a panic).
macro_rules! progress {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use slowfs_faults::crash::blocks::Device;
use slowfs_faults::crash::models::FsModel;
use slowfs_faults::durability::{Log, LogOp, Node, Tree};

use super::report::{FsyncFailRun, ReportContext, ReportSettings};
use super::{
    explore, explore_image, log_digest, materialize, realfs, record, record_over, BlockNames,
    ExploreConfig, ExploreReport, FsSetup, ImageStates, ModelRun, Progress, RefusedInput,
    SavedImage, SavedRun, ShardReport,
};

/// Everything one exploration needs, resolved.
#[derive(Debug, Clone)]
pub struct ExplorePlan {
    /// The workload: a command and its arguments.
    pub workload: Vec<OsString>,
    /// The initial state (a directory); a fresh empty one if `None`.
    pub backing: Option<PathBuf>,
    /// How states are checked (the checker is in `config.settings`).
    pub config: ExploreConfig,
    /// `--fs`: a real filesystem in an image, and a command that fills the
    /// image before the workload runs.
    pub real_fs: Option<(FsSetup, Option<String>)>,
    /// `--compare-with`: the model run a real filesystem's groups are
    /// judged against.
    pub compare_with: Option<ModelRun>,
    /// `--fsync-fails`: run again with each fsync failing in turn.
    pub fsync_fails: bool,
    /// `--log-dir`: always save the run there (else only a run with
    /// violations, into the current directory).
    pub log_dir: Option<PathBuf>,
    /// `--partial-ok`.
    pub partial_ok: bool,
    /// Whether a `--time-budget` was given.
    pub time_budget: bool,
    /// The workload's process id while it runs (for passing it signals).
    pub workload_pid: Arc<AtomicI32>,
}

/// What a run produced: its report, and the recorded log (for the HTML
/// page's timeline), if anything was recorded.
#[derive(Debug)]
pub struct Explored {
    /// The report.
    pub report: ExploreReport,
    /// The recorded operations.
    pub log: Option<Log>,
}

impl Explored {
    /// The report as one HTML page.
    pub fn html(&self) -> String {
        let empty = Log::new(Tree::empty(1));
        let log = self.log.as_ref().unwrap_or(&empty);
        super::html::page(&self.report, log.ops(), &super::report::op_names(log))
    }
}

impl ExplorePlan {
    /// Passes `signal` (a Ctrl-C, a SIGTERM explore heard) to the running
    /// workload, if one runs. With `--fs` the workload runs under `unshare
    /// --fork`, which blocks both while it waits: the script it runs (the
    /// namespace's first process, its child) hears them and ends the
    /// workload with a SIGTERM.
    pub fn signal_workload(&self, signal: nix::sys::signal::Signal) {
        use nix::sys::signal::kill;
        use nix::unistd::Pid;
        let pid = self.workload_pid.load(Ordering::SeqCst);
        if pid <= 0 {
            return;
        }
        if self.real_fs.is_none() {
            let _ = kill(Pid::from_raw(pid), signal);
            return;
        }
        let children =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
            let _ = kill(Pid::from_raw(child), signal);
        }
    }

    /// A plan to explore `workload` with `check`, everything else default.
    pub fn new(workload: Vec<OsString>, check: impl Into<String>) -> ExplorePlan {
        ExplorePlan {
            workload,
            backing: None,
            config: ExploreConfig::new(check),
            real_fs: None,
            compare_with: None,
            fsync_fails: false,
            log_dir: None,
            partial_ok: false,
            time_budget: false,
            workload_pid: Arc::default(),
        }
    }

    fn settings(&self) -> ReportSettings {
        ReportSettings {
            torn_sector: self.config.torn_sector,
            size_only: self.config.size_only,
            fs_model: self.config.fs_model,
            per_point: self.config.per_point,
            time_budget: self.time_budget,
            partial_ok: self.partial_ok,
            seed: self.config.seed,
            max_states: self.config.max_states,
        }
    }
}

/// Runs the plan; `progress` hears how the checking goes. An error is
/// explore's own (a mount, an image); what the workload or checker did is
/// in the report.
pub fn run(plan: &ExplorePlan, mut progress: impl FnMut(&Progress)) -> io::Result<Explored> {
    sweep_killed_runs();
    let recorded = match &plan.real_fs {
        Some((setup, populate)) => record_on_real_fs(plan, setup, populate.as_deref())?,
        None => record_on_mount(plan)?,
    };
    let refused = |reason| Explored {
        report: ExploreReport::refused(reason),
        log: Some(recorded.log.clone()),
    };
    if plan.config.stop.load(Ordering::SeqCst) {
        return Ok(refused(RefusedInput::InterruptedDuringWorkload));
    }
    if !recorded.status.success() {
        return Ok(refused(RefusedInput::WorkloadFailed {
            status: recorded.status.to_string(),
        }));
    }
    let nothing = match &recorded.real {
        Some(real) if real.device.epochs().is_empty() || !real.changed => Some(format!(
            "the workload changed nothing in the {} filesystem, so there is no crash state to \
             check. It runs in the filesystem's root (its working directory, SLOWFS_MOUNT): make \
             it write there",
            real.setup.fs
        )),
        None if recorded.log.ops().is_empty() => Some(
            "the workload changed nothing on the recording mount, so there is no crash state to \
             check. It runs in this directory with SLOWFS_MOUNT set to the mount: make it write \
             there (e.g. start it with `cd \"$SLOWFS_MOUNT\"`)"
                .to_string(),
        ),
        _ => None,
    };
    if let Some(hint) = nothing {
        return Ok(refused(RefusedInput::NothingRecorded { hint }));
    }
    let mut config = plan.config.clone();
    if let Some(real) = &recorded.real {
        config.settings.check = real.setup.checker(&config.settings.check);
    }
    let log = recorded.log;
    progress!(
        "slowfs explore: {} operations recorded; checking crash states with {} checker(s)",
        log.ops().len(),
        config.jobs
    );
    let result = match &recorded.real {
        Some(real) => explore_image(
            &log,
            Arc::new(ImageStates {
                base: real.base.clone(),
                device: Arc::clone(&real.device),
            }),
            real.names.clone(),
            &real.setup,
            &config,
            &mut progress,
        )?,
        None => explore(&log, &config, &mut progress)?,
    };
    let saved = save_if_needed(
        &log,
        &config,
        plan.log_dir.as_deref(),
        result.violations > 0,
        recorded.real.as_ref(),
    )?;
    let mut report = ExploreReport::new(
        &result,
        ReportContext {
            saved: saved.clone(),
            settings: plan.settings(),
            epochs: recorded
                .real
                .as_ref()
                .map(|real| real.device.epochs().iter().map(|e| e.point).collect()),
            model_run: plan
                .compare_with
                .as_ref()
                .zip(recorded.real.as_ref())
                .map(|(run, real)| (run, real.setup.model())),
        },
    );
    if config.shard.is_some() {
        report.shard_report = Some(Box::new(ShardReport {
            exploration: result.clone(),
            log_digest: log_digest(&log),
            seed: config.seed,
            max_states: config.max_states,
            per_point: config.per_point,
            torn_sector: config.torn_sector,
            size_only: config.size_only,
            ignore: config.settings.ignore.clone(),
            fs_model: config.fs_model,
            time_budget: plan.time_budget,
            saved_run: saved,
        }));
    }
    let interrupted = matches!(report.outcome, super::ExploreVerdict::Interrupted { .. });
    if plan.fsync_fails && !interrupted {
        let runs = explore_fsync_failures(plan, &log, &config)?;
        report = report.with_fsync_fails(runs);
    }
    Ok(Explored {
        report,
        log: Some(log),
    })
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
    setup: FsSetup,
    base: PathBuf,
    device: Arc<Device>,
    /// What the written blocks hold at the end of the workload.
    names: BlockNames,
    /// Whether the workload changed anything in the filesystem.
    changed: bool,
    node: u64,
    _dir: super::scratch::Scratch,
}

/// The workload on a recording mount over the plan's backing directory (or
/// a fresh one).
fn record_on_mount(plan: &ExplorePlan) -> io::Result<RecordedRun> {
    let (backing, _temp) = match &plan.backing {
        Some(dir) => (dir.clone(), None),
        None => {
            let temp = super::scratch::Scratch::new("slowfs-explore-")?;
            // A directory of its own: the scratch root holds the owner's lock.
            let backing = temp.path().join("backing");
            std::fs::create_dir(&backing)?;
            (backing, Some(temp))
        }
    };
    progress!("slowfs explore: running the workload on a recording mount");
    let recorded = record(&plan.workload, &backing, None, &plan.workload_pid)?;
    Ok(RecordedRun {
        log: recorded.log,
        status: recorded.status,
        real: None,
    })
}

/// Removes what SIGKILLed runs left in the temporary directory, and says so.
fn sweep_killed_runs() {
    let swept = super::scratch::sweep(&std::env::temp_dir());
    if swept.removed > 0 {
        progress!(
            "slowfs explore: removed {} scratch director{} of killed runs ({})",
            swept.removed,
            if swept.removed == 1 { "y" } else { "ies" },
            slowfs_faults::DisplaySize(swept.bytes)
        );
    }
    for dir in &swept.in_use {
        progress!(
            "slowfs explore: {} is a killed run's, but a loop device still reads a file in it: \
             detach it (losetup -j FILE shows which; losetup -d DEVICE), then remove it",
            dir.display()
        );
    }
    for (dir, error) in &swept.failed {
        progress!(
            "slowfs explore: cannot remove {}, a killed run's: {error}",
            dir.display()
        );
    }
}

/// `--fs`: the filesystem made in a base image, the workload run on it in a
/// copy on the recording mount, and the disk's writes taken from the log.
fn record_on_real_fs(
    plan: &ExplorePlan,
    setup: &FsSetup,
    populate: Option<&str>,
) -> io::Result<RecordedRun> {
    let fs = setup.fs;
    setup.preflight()?;
    let dir = super::scratch::Scratch::new("slowfs-fs-")?;
    let base = dir.path().join("base.img");
    progress!(
        "slowfs explore: making the image: {}",
        setup.mkfs_command(Path::new("IMAGE")).join(" ")
    );
    setup
        .make_image(&base)
        .map_err(|e| io::Error::new(e.kind(), format!("making the {fs} image: {e}")))?;
    let mountpoint = dir.path().join("fs");
    std::fs::create_dir(&mountpoint)?;
    let seen = dir.path().join("changed");
    if let Some(command) = populate {
        setup.populate(&base, &mountpoint, command)?;
    }
    let backing = dir.path().join("backing");
    std::fs::create_dir(&backing)?;
    realfs::sparse_copy(&base, &backing.join("image"))?;
    let initial = image_tree(&backing)?;
    let node = initial.lookup_id("image").expect("image_tree makes it");
    progress!(
        "slowfs explore: running the workload on {} in a {} image on a recording mount \
         (checker: {})",
        setup.describe(),
        slowfs_faults::DisplaySize(setup.size),
        plan.config.settings.check
    );
    let recorded = {
        let _interval = super::XfsSyncInterval::shorten_for(fs);
        // It runs in the filesystem's root: `./export.sh` means the user's.
        let mut workload = plan.workload.clone();
        if Path::new(&workload[0]).components().count() > 1 && Path::new(&workload[0]).is_relative()
        {
            workload[0] = std::env::current_dir()?.join(&workload[0]).into_os_string();
        }
        record_over(
            &setup.workload(&mountpoint, &seen, &workload),
            &backing,
            initial,
            None,
            &plan.workload_pid,
        )?
    };
    let device = Device::new(&recorded.log, node)
        .map_err(|e| io::Error::other(format!("the recorded disk: {e}")))?;
    progress!(
        "slowfs explore: the disk took {} writes ({}) in {} flush epochs",
        device.write_count(),
        slowfs_faults::DisplaySize(device.bytes_written()),
        device.epochs().len()
    );
    let names =
        BlockNames::read(fs, &backing.join("image"), &device.extents()).unwrap_or_else(|e| {
            progress!(
                "slowfs explore: the written blocks are not named (lost writes are shown as byte \
                 ranges): {e}"
            );
            Default::default()
        });
    let changed = std::fs::read_to_string(&seen).is_ok_and(|s| s.trim() == "changed");
    Ok(RecordedRun {
        log: recorded.log,
        status: recorded.status,
        real: Some(RealRun {
            changed,
            setup: setup.clone(),
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
fn image_tree(backing: &Path) -> io::Result<Tree> {
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

/// Saves the run for `--replay`: into `log_dir` always, else into the
/// current directory when there is something to replay.
fn save_if_needed(
    log: &Log,
    config: &ExploreConfig,
    log_dir: Option<&Path>,
    violations: bool,
    real: Option<&RealRun>,
) -> io::Result<Option<PathBuf>> {
    let dir = match (log_dir, violations) {
        (Some(dir), _) => dir.to_path_buf(),
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
            realfs::sparse_copy(&real.base, &base)?;
            let base = base.canonicalize()?;
            Some(SavedImage {
                setup: real.setup.clone(),
                base_hash: realfs::image_hash(&base)?,
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
    plan: &ExplorePlan,
    first: &Log,
    config: &ExploreConfig,
) -> io::Result<Vec<FsyncFailRun>> {
    let fsyncs = first
        .ops()
        .iter()
        .filter(|op| matches!(op, LogOp::Fsync { .. }))
        .count();
    // What the page cache holds after the failure follows the model.
    let evicts = config
        .fs_model
        .is_some_and(FsModel::evicts_after_failed_fsync);
    let drop = if evicts { "drop=evict" } else { "drop" };
    progress!(
        "slowfs explore: --fsync-fails: the workload fsynced files {fsyncs} time(s); running it \
         again with each fsync failing in turn (the dropped data {})",
        if evicts {
            "evicted from the cache as btrfs does"
        } else {
            "kept in the cache as clean pages as ext4 and XFS do"
        }
    );
    let start = std::time::Instant::now();
    let mut states_left = config.max_states;
    let mut runs = Vec::new();
    for i in 0..fsyncs {
        let time_left = config
            .time_budget
            .map(|t| t.saturating_sub(start.elapsed()));
        if states_left == 0 || time_left.is_some_and(|t| t.is_zero()) {
            progress!(
                "slowfs explore: --fsync-fails: budget spent after {i} of {fsyncs} failing fsyncs"
            );
            break;
        }
        if config.stop.load(Ordering::SeqCst) {
            progress!(
                "slowfs explore: --fsync-fails: interrupted after {i} of {fsyncs} failing fsyncs"
            );
            break;
        }
        let scratch = super::scratch::Scratch::new("slowfs-explore-")?;
        let backing = scratch.path().join("backing");
        materialize(first.initial(), &backing)?;
        let rule = format!("fsync,fdatasync error=EIO {drop} after={i}");
        let run = record(&plan.workload, &backing, Some(&rule), &plan.workload_pid)?;
        let mut config = config.clone();
        config.max_states = states_left;
        config.time_budget = time_left;
        let result = explore(&run.log, &config, |_| {})?;
        states_left = states_left.saturating_sub(result.states);
        let saved = save_if_needed(
            &run.log,
            &config,
            plan.log_dir.as_deref(),
            result.violations > 0,
            None,
        )?;
        let report = ExploreReport::new(
            &result,
            ReportContext {
                saved,
                settings: plan.settings(),
                ..ReportContext::default()
            },
        );
        runs.push(FsyncFailRun {
            failing_fsync: i + 1,
            workload_exit: run.status.code(),
            report: Box::new(report),
        });
    }
    Ok(runs)
}

//! `slowfs explore` as a library: record a workload on a recording mount
//! ([`record()`]), check its crash states with a checker command ([`explore()`]),
//! and replay one state exactly as the run checked it ([`replay()`]).
//!
//! The pure parts (which states exist, in which order to check them, what was
//! covered, how violations group) are `slowfs_faults::crash`; this module does
//! the I/O: trees to directories, checker processes, a pool of workers.
//!
//! ```no_run
//! use std::sync::atomic::AtomicI32;
//! use slowfs::explore::{explore, record, ExploreConfig};
//!
//! let backing = tempfile::tempdir()?;
//! let workload: [std::ffi::OsString; 3] =
//!     ["sh".into(), "-c".into(), "echo new > \"$SLOWFS_MOUNT/f\"".into()];
//! let run = record(&workload, backing.path(), None, &AtomicI32::new(0))?;
//! let config = ExploreConfig::new("test ! -e f || grep -qx new f");
//! let found = explore(&run.log, &config, |_| {})?;
//! assert!(found.coverage.complete());
//! println!("{} states, {} violations", found.states, found.violations);
//! # Ok::<(), std::io::Error>(())
//! ```

pub mod block_names;
mod checker;
pub mod html;
mod pool;
pub mod realfs;
mod record;
pub mod report;
pub mod run;
mod scratch;
mod xfs_sync;

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::TrySendError;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use slowfs_faults::crash::blocks::BlockSpace;
use slowfs_faults::crash::coverage::CoverageSummary;
use slowfs_faults::crash::models::FsModel;
use slowfs_faults::crash::report::{Annotate, Group, Grouper, Tally, Violation};
use slowfs_faults::crash::search::{Candidate, Search, StateSpace};
use slowfs_faults::crash::trees::{TreeConfig, TreeSpace};
use slowfs_faults::durability::{Kept, Log, LogOp, Tree};
use slowfs_faults::shard::Shard;

use pool::{Pool, StateWriter, Task, WorkerAnswer};

pub use crate::tree_io::{materialize, scan};
mod shards;

pub use block_names::BlockNames;
pub use checker::{anchored_to, Checker, Judgement, Running, StateRef};
pub use realfs::{FsSetup, ImageStates, RealFs};
pub use record::{record, record_over, CheckSettings, Recorded, SavedImage, SavedRun};
pub use report::{ExploreReport, ExploreVerdict, ModelRun, RefusedInput, ReportContext};
pub use shards::{log_digest, merge, ShardReport};
pub use xfs_sync::XfsSyncInterval;

/// How to explore.
#[derive(Debug, Clone)]
pub struct ExploreConfig {
    /// The checker and how it runs.
    pub settings: CheckSettings,
    /// Most distinct states to check overall.
    pub max_states: usize,
    /// Most time to spend checking.
    pub time_budget: Option<Duration>,
    /// Let pending writes tear at boundaries of this size (by default the
    /// block size of ext4, XFS and btrfs, 4 KiB: what their page-sized
    /// writeback can leave; `--torn` asks for sectors).
    pub torn_sector: Option<u64>,
    /// Let a pending write that grows its file persist as its size alone,
    /// the new bytes zeros, as ext4 and XFS can leave it (delayed
    /// allocation, unwritten extents). On by default: the models must
    /// produce every state the kernels can.
    pub size_only: bool,
    /// Seed for the sampled part of large state spaces.
    pub seed: u64,
    /// Only these crash points (inclusive); all by default.
    pub crash_points: Option<(usize, usize)>,
    /// Check the same state again at every crash point where it occurs (for
    /// checkers that read SLOWFS_CRASH_POINT); by default once in all.
    pub per_point: bool,
    /// Checkers running at once.
    pub jobs: usize,
    /// Check only the states this persistence model can leave (all of the
    /// strict model's by default); each violation says under which models it
    /// can happen either way.
    pub fs_model: Option<FsModel>,
    /// Check only this shard's part of the states (every run walks the same
    /// sequence of distinct states; shard K/N checks every Nth); [`merge`]
    /// joins the shards' results.
    pub shard: Option<Shard>,
    /// Set from outside (Ctrl-C) to stop early; what was found is kept.
    pub stop: Arc<AtomicBool>,
    /// The checker processes running; [`Running::stop_all`] ends them (a
    /// signal handler calls it, so that a stop is prompt).
    pub running: Running,
}

impl ExploreConfig {
    /// Defaults for `check`: 10,000 states, one job per core, 60 s per check.
    pub fn new(check: impl Into<String>) -> ExploreConfig {
        ExploreConfig {
            settings: CheckSettings {
                check: check.into(),
                persistent: false,
                ignore: Vec::new(),
                timeout_ms: 60_000,
            },
            max_states: 10_000,
            time_budget: None,
            torn_sector: Some(BLOCK_SIZE),
            size_only: true,
            seed: 1,
            crash_points: None,
            per_point: false,
            jobs: std::thread::available_parallelism().map_or(2, |n| n.get()),
            fs_model: None,
            shard: None,
            stop: Arc::default(),
            running: Running::default(),
        }
    }
}

/// The block size of the filesystems the models stand for: where their
/// writes tear by default, and where a truncate's zeroing ends.
pub const BLOCK_SIZE: u64 = 4096;

/// Why an exploration ended before it had checked everything it planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Cut {
    /// `--max-states` was reached.
    MaxStates,
    /// `--time-budget` ran out.
    TimeBudget,
    /// Stopped from outside (Ctrl-C, SIGTERM).
    Interrupted,
    /// Explore's own temporary space failed (the error says how).
    OwnError,
}

/// Counts so far, for a progress line.
#[derive(Debug, Clone, Copy, Default)]
pub struct Progress {
    /// Distinct states checked.
    pub checked: usize,
    /// States skipped as already checked.
    pub duplicates: usize,
    /// Violations found.
    pub violations: usize,
    /// High-yield states still to check (what the run promised).
    pub high_yield_left: usize,
    /// Seconds since checking began.
    pub seconds: f64,
}

impl Progress {
    /// States checked per second.
    pub fn rate(&self) -> f64 {
        self.checked as f64 / self.seconds.max(1e-9)
    }
}

/// What an exploration found.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Exploration {
    /// Operations recorded.
    pub ops: usize,
    /// The crash points visited (inclusive).
    pub crash_points: (usize, usize),
    /// Distinct states checked (by all the shards, in a sharded run).
    pub states: usize,
    /// The shard this run was, if it was one.
    pub shard: Option<Shard>,
    /// Distinct states this run checked itself (`states`, unless a shard).
    pub checked_here: usize,
    /// States skipped because the same content had been checked.
    pub duplicates: usize,
    /// States skipped because `--fs-model` cannot leave them.
    #[serde(default)]
    pub ruled_out: usize,
    /// Of the states checked, how many each persistence model can leave
    /// (by model name): the coverage per model.
    #[serde(default)]
    pub per_model: std::collections::BTreeMap<String, usize>,
    /// What was covered, per category (they add up to the points).
    pub coverage: CoverageSummary,
    /// Whether the search handed out every state it plans (phase 3 included).
    pub finished: bool,
    /// Why it stopped early, if it did.
    pub cut: Option<Cut>,
    /// What went wrong with explore's own temporary space, if anything.
    pub error: Option<String>,
    /// Seconds spent checking.
    pub seconds: f64,
    /// When every crash point's high-yield states had been checked (seconds
    /// from the start), if they were.
    pub high_yield_seconds: Option<f64>,
    /// Rejected states.
    pub violations: usize,
    /// Them, grouped by cause, largest group first.
    pub groups: Vec<Group>,
    /// What the groups are made from, for merging shards.
    pub tally: Tally,
    /// With `--fs`: the real filesystem the states were checked on (then
    /// the groups name no models: what they show was observed, not modelled).
    #[serde(default)]
    pub real_fs: Option<String>,
}

/// Compiles `--ignore` globs.
pub fn ignore_set(globs: &[String]) -> io::Result<globset::GlobSet> {
    let mut set = globset::GlobSetBuilder::new();
    for glob in globs {
        let parsed = globset::GlobBuilder::new(glob)
            .literal_separator(false)
            .build()
            .map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("--ignore '{glob}': {e}"),
                )
            })?;
        set.add(parsed);
    }
    set.build()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))
}

/// Checks crash states of `log` in the order of `slowfs_faults::crash::search`,
/// each distinct state once (or once per crash point with `per_point`), with
/// `jobs` checkers at once, until the search is done or the budget, time or a
/// stop ends it. `progress` is called about once a second. Memory: O(states
/// checked), plus one group per cause of violation.
pub fn explore(
    log: &Log,
    config: &ExploreConfig,
    progress: impl FnMut(&Progress),
) -> io::Result<Exploration> {
    let total = log.ops().len();
    let (first, last) = config.crash_points.unwrap_or((0, total));
    let ignore = ignore_set(&config.settings.ignore)?;
    let space = TreeSpace::new(
        log,
        TreeConfig {
            first,
            last,
            sector: config.torn_sector,
            size_only: config.size_only,
            per_point: config.per_point,
            ignore: ignore.clone(),
            models: true,
        },
    );
    run_states(
        log,
        &mut Search::new(space, config.seed),
        Arc::new(|candidate: &Candidate<Tree>, dir: &Path| materialize(&candidate.state, dir)),
        ignore,
        None,
        config,
        progress,
    )
}

/// Checks the crash states of a block device (an `--fs` run): each a
/// block-level image, in the order of [`Search`]; the checker in
/// `config` mounts it (see [`FsSetup::checker`]). The groups name no models:
/// they were observed on `setup`'s filesystem. Lost writes are described
/// with what `names` says their blocks hold.
pub fn explore_image(
    log: &Log,
    image: Arc<ImageStates>,
    names: BlockNames,
    setup: &FsSetup,
    config: &ExploreConfig,
    progress: impl FnMut(&Progress),
) -> io::Result<Exploration> {
    let space = BlockSpace::new(Arc::clone(&image.device), log, config.torn_sector);
    let ignore = globset::GlobSet::empty();
    let annotate: Annotate = Box::new(move |op| match op {
        LogOp::Write { offset, data, .. } => names.describe(*offset, offset + data.len() as u64),
        _ => None,
    });
    let write: StateWriter<()> = Arc::new(move |candidate: &Candidate<()>, dir: &Path| {
        image.materialize(candidate.point, &candidate.kept, dir)
    });
    let mut found = run_states(
        log,
        &mut Search::new(space, config.seed),
        write,
        ignore,
        Some(annotate),
        config,
        progress,
    )?;
    for group in &mut found.groups {
        group.models.clear();
        group.unknown.clear();
    }
    found.per_model.clear();
    found.real_fs = Some(setup.describe());
    Ok(found)
}

fn run_states<S: StateSpace>(
    log: &Log,
    search: &mut Search<S>,
    write: StateWriter<S::State>,
    ignore: globset::GlobSet,
    annotate: Option<Annotate>,
    config: &ExploreConfig,
    mut progress: impl FnMut(&Progress),
) -> io::Result<Exploration>
where
    S::State: Clone + Send + 'static,
{
    let total = log.ops().len();
    let modelled = search.space().labels();
    let start = Instant::now();
    let deadline = config.time_budget.map(|t| start + t);
    let mut pool = Pool::start(config, write, total)?;
    let mut run = Run {
        counts: Progress::default(),
        checked_here: 0,
        ruled_out: 0,
        per_model: FsModel::ALL
            .iter()
            .filter(|_| modelled)
            .map(|m| (m.name().to_string(), 0))
            .collect(),
        grouper: match annotate {
            Some(annotate) => Grouper::new(log, ignore).annotating(annotate),
            None => Grouper::new(log, ignore),
        },
        fatal: None,
        scratch_error: None,
    };
    let mut cut: Option<Cut>;
    // The first state is reported at once: a run shows it is alive from its
    // first second, then once a second.
    let mut last_report: Option<Instant> = None;
    let mut high_yield_seconds = None;
    loop {
        pool.answers().for_each(|outcome| run.absorb(outcome));
        cut = run.cut(config, deadline);
        if cut.is_some() || run.fatal.is_some() {
            break;
        }
        if high_yield_seconds.is_none() && search.high_yield_finished() {
            // Handed out; their checks are the ones still in flight.
            high_yield_seconds = Some(start.elapsed().as_secs_f64());
        }
        // Asked before each state built, so that a long run of duplicates
        // (each one a state's build) still ends at the budget or a stop.
        let should_stop =
            || config.stop.load(Ordering::SeqCst) || deadline.is_some_and(|d| Instant::now() >= d);
        let Some(candidate) = search.next_unless(&should_stop) else {
            if should_stop() {
                continue;
            }
            break;
        };
        if !run.counts_in(&candidate.models, &candidate.unknown, modelled, config) {
            continue;
        }
        match run.hand_out(&pool, Task { candidate }, &config.stop) {
            HandedOut::Queued => {}
            HandedOut::Dropped => continue,
            HandedOut::NoWorkers => break,
        }
        if last_report.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
            run.counts.duplicates = search.duplicates();
            run.counts.high_yield_left = search.high_yield_left();
            run.counts.seconds = start.elapsed().as_secs_f64();
            progress(&run.counts);
            last_report = Some(Instant::now());
        }
    }
    // Workers that saw the stop first end, and a send to them then fails:
    // the loop left without seeing the stop itself.
    if cut.is_none() && config.stop.load(Ordering::SeqCst) {
        cut = Some(Cut::Interrupted);
    }
    if cut == Some(Cut::Interrupted) {
        config.running.stop_all();
    }
    pool.finish();
    for outcome in pool.answers() {
        if cut != Some(Cut::Interrupted) {
            run.absorb(outcome);
        }
    }
    if let Some(e) = run.fatal.take() {
        return Err(e);
    }
    // Workers that hit a scratch error stop, so the search can end (all
    // handed out, or no one left to take a task) before the loop saw it.
    if cut.is_none() && run.scratch_error.is_some() {
        cut = Some(Cut::OwnError);
    }
    Ok(Exploration {
        ops: total,
        crash_points: search.range(),
        states: run.counts.checked,
        shard: config.shard,
        checked_here: run.checked_here,
        duplicates: search.duplicates(),
        ruled_out: run.ruled_out,
        per_model: run.per_model,
        coverage: search.summary(),
        finished: search.finished(),
        cut,
        error: run.scratch_error.map(|e| e.to_string()),
        seconds: start.elapsed().as_secs_f64(),
        high_yield_seconds: high_yield_seconds.or_else(|| {
            search
                .high_yield_finished()
                .then(|| start.elapsed().as_secs_f64())
        }),
        violations: run.grouper.total(),
        groups: run.grouper.groups(),
        tally: run.grouper.tally().clone(),
        real_fs: None,
    })
}

/// What became of a state handed to the pool.
enum HandedOut {
    /// A worker will check it.
    Queued,
    /// Not queued: a stop or a failure came first, which the loop then sees.
    Dropped,
    /// Not queued: every worker has ended.
    NoWorkers,
}

/// The bookkeeping of one exploration.
struct Run<'a> {
    counts: Progress,
    checked_here: usize,
    /// States `--fs-model` cannot leave, skipped.
    ruled_out: usize,
    /// States checked per model that can leave them, by model name.
    per_model: std::collections::BTreeMap<String, usize>,
    grouper: Grouper<'a>,
    fatal: Option<io::Error>,
    scratch_error: Option<io::Error>,
}

impl Run<'_> {
    /// Counts a state of the search with `models` (if `modelled`), and says
    /// whether this run checks it: not if `--fs-model` rules it out (says
    /// never: a state it is `unknown` on is checked), nor if it is another
    /// shard's.
    fn counts_in(
        &mut self,
        models: &[FsModel],
        unknown: &[FsModel],
        modelled: bool,
        config: &ExploreConfig,
    ) -> bool {
        if modelled
            && config
                .fs_model
                .is_some_and(|model| !models.contains(&model) && !unknown.contains(&model))
        {
            self.ruled_out += 1;
            return false;
        }
        for model in models {
            *self.per_model.entry(model.name().to_string()).or_default() += 1;
        }
        // Every shard counts every state, so that the budget is the run's.
        let ours = config.shard.is_none_or(|s| s.owns(self.counts.checked));
        self.counts.checked += 1;
        self.checked_here += usize::from(ours);
        ours
    }

    /// Why the run must end now, if it must (a failed checker ends it too,
    /// as an error).
    fn cut(&self, config: &ExploreConfig, deadline: Option<Instant>) -> Option<Cut> {
        if config.stop.load(Ordering::SeqCst) {
            Some(Cut::Interrupted)
        } else if self.scratch_error.is_some() {
            Some(Cut::OwnError)
        } else if deadline.is_some_and(|d| Instant::now() >= d) {
            Some(Cut::TimeBudget)
        } else if self.counts.checked >= config.max_states {
            Some(Cut::MaxStates)
        } else {
            None
        }
    }

    /// Queues `task` for a worker, taking in answers while every worker is
    /// busy.
    fn hand_out<T: Clone + Send + 'static>(
        &mut self,
        pool: &Pool<T>,
        mut task: Task<T>,
        stop: &AtomicBool,
    ) -> HandedOut {
        loop {
            match pool.try_send(task) {
                Ok(()) => return HandedOut::Queued,
                Err(TrySendError::Full(back)) => {
                    task = back;
                    pool.answers().for_each(|outcome| self.absorb(outcome));
                    if stop.load(Ordering::SeqCst)
                        || self.fatal.is_some()
                        || self.scratch_error.is_some()
                    {
                        return HandedOut::Dropped;
                    }
                    std::thread::sleep(Duration::from_micros(300));
                }
                Err(TrySendError::Disconnected(_)) => return HandedOut::NoWorkers,
            }
        }
    }

    fn absorb<T>(&mut self, outcome: WorkerAnswer<T>) {
        match outcome {
            WorkerAnswer::Judged(_, Judgement::Accepted) => {}
            WorkerAnswer::Judged(c, Judgement::Rejected(status, output)) => {
                self.counts.violations += 1;
                self.grouper.add(&Violation {
                    point: c.point,
                    kept: c.kept,
                    pending: c.pending,
                    output,
                    status,
                });
            }
            WorkerAnswer::CheckerBroken(e) => {
                self.fatal.get_or_insert(e);
            }
            WorkerAnswer::Scratch(e) => {
                self.scratch_error.get_or_insert(e);
            }
        }
    }
}

/// Checks one state of a saved run again, exactly as the run checked it: the
/// same checker (persistent or not), environment, working directory, ignored
/// paths and timeout. With `keep`, the state is written there and left.
pub fn replay(
    saved: &SavedRun,
    point: usize,
    kept: &Kept,
    keep: Option<&Path>,
) -> io::Result<Judgement> {
    saved
        .log
        .validate(point, kept)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let scratch = scratch::Scratch::new("slowfs-state-")?;
    let dir = match keep {
        Some(keep) => keep.to_path_buf(),
        None => scratch.path().join("state"),
    };
    match &saved.image {
        Some(image) => replayed_image(saved, image)?.materialize(point, kept, &dir)?,
        None => {
            let ignore = ignore_set(&saved.settings.ignore)?;
            materialize(&saved.log.state_with(point, kept).without(&ignore), &dir)?;
        }
    }
    let mut checker = Checker::new(
        &saved.settings.check,
        saved.settings.persistent,
        Duration::from_millis(saved.settings.timeout_ms),
        scratch.path(),
        &Running::default(),
    )?;
    checker.judge(&StateRef {
        dir: &dir,
        crash_point: point,
        ops: saved.log.ops().len(),
    })
}

/// The states of a saved `--fs` run, once its base image is found unchanged.
fn replayed_image(saved: &SavedRun, image: &SavedImage) -> io::Result<ImageStates> {
    let hash = realfs::image_hash(&image.base).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("the run's base image {}: {e}", image.base.display()),
        )
    })?;
    if hash != image.base_hash {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "the run's base image {} has changed since the run (hash {hash}, was {})",
                image.base.display(),
                image.base_hash
            ),
        ));
    }
    let device = slowfs_faults::crash::blocks::Device::new(&saved.log, image.node)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    Ok(ImageStates {
        base: image.base.clone(),
        device: Arc::new(device),
    })
}

/// Whether the checker command reads `SLOWFS_CRASH_POINT` (in the command or
/// in the script it runs): such a checker needs `--per-point`, or a state seen
/// at two points is judged at the first only.
pub fn checker_reads_crash_point(check: &str) -> bool {
    if check.contains("SLOWFS_CRASH_POINT") {
        return true;
    }
    check
        .split_whitespace()
        .filter(|word| !word.starts_with('-'))
        .take(3)
        .any(|word| {
            std::fs::read(word)
                .is_ok_and(|text| text.windows(18).any(|w| w == b"SLOWFS_CRASH_POINT"))
        })
}

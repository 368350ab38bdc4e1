//! `slowfs explore`: run a workload once on a recording mount, then check every
//! crash state it could leave behind.
//!
//! The backing directory's content before the workload is the initial, durable
//! state ([`scan`]). For each crash point (after each recorded operation) the
//! durability model gives the surely-durable state and the pending operations;
//! each candidate state (within the budget) is written to a directory
//! ([`materialize`]) and the checker runs on it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use fault_inject::durability::{Keep, Kept, Log, LogOp, Node, Tree};

/// Reads a directory tree into the model, nodes keyed by inode number.
pub fn scan(root: &Path) -> io::Result<Tree> {
    let root_ino = std::fs::metadata(root)?.ino();
    let mut tree = Tree {
        nodes: HashMap::new(),
        root: root_ino,
    };
    scan_dir(root, root_ino, &mut tree)?;
    Ok(tree)
}

fn scan_dir(path: &Path, ino: u64, tree: &mut Tree) -> io::Result<()> {
    let mut entries = BTreeMap::new();
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        let name = entry.file_name().to_string_lossy().into_owned();
        entries.insert(name, meta.ino());
        if tree.nodes.contains_key(&meta.ino()) {
            continue; // a hard link seen already
        }
        if meta.is_dir() {
            scan_dir(&entry.path(), meta.ino(), tree)?;
        } else if meta.file_type().is_symlink() {
            let target = std::fs::read_link(entry.path())?;
            tree.nodes.insert(
                meta.ino(),
                Node::Symlink(target.to_string_lossy().into_owned()),
            );
        } else if meta.is_file() {
            tree.nodes
                .insert(meta.ino(), Node::File(std::fs::read(entry.path())?));
        } else {
            tree.nodes.insert(meta.ino(), Node::File(Vec::new()));
        }
    }
    tree.nodes.insert(ino, Node::Dir(entries));
    Ok(())
}

/// Writes the reachable part of a tree into `dir` (created if missing; must be empty).
pub fn materialize(tree: &Tree, dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut written: HashMap<u64, PathBuf> = HashMap::new();
    for (path, node) in tree.walk() {
        let target = dir.join(&path);
        match node {
            Node::Dir(_) => std::fs::create_dir(&target)?,
            Node::Symlink(to) => std::os::unix::fs::symlink(to, &target)?,
            Node::File(data) => {
                let id = tree.lookup_id(&path);
                match id.and_then(|id| written.get(&id)) {
                    Some(first) => std::fs::hard_link(first, &target)?,
                    None => {
                        std::fs::write(&target, data)?;
                        if let Some(id) = id {
                            written.insert(id, target);
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

mod checker;

pub use checker::{Checker, StateRef, Verdict};

/// How to explore.
#[derive(Debug, Clone)]
pub struct ExploreConfig {
    /// The checker command (`sh -c`), run in each state's directory.
    pub check: String,
    /// Most distinct states to check overall.
    pub max_states: usize,
    /// Most time to spend checking.
    pub time_budget: Option<Duration>,
    /// Let pending writes tear at sector boundaries of this size.
    pub torn_sector: Option<u64>,
    /// Seed for the sampled part of large state spaces.
    pub seed: u64,
    /// Only these crash points (inclusive); all by default.
    pub crash_points: Option<(usize, usize)>,
    /// Check the same state again at every crash point where it occurs (for
    /// checkers that read SLOWFS_CRASH_POINT); by default once in all.
    pub per_point: bool,
    /// Paths (globs, relative to the state root) left out of every state: files the
    /// application discards on open, such as SQLite's `-shm`.
    pub ignore: Vec<String>,
    /// Checkers running at once.
    pub jobs: usize,
    /// One checker process per job, fed a state per line (see [`Checker`]).
    pub persistent: bool,
    /// Longest one check may take.
    pub timeout: Duration,
    /// Set from outside (Ctrl-C) to stop early; what was found is kept.
    pub stop: Arc<AtomicBool>,
}

impl ExploreConfig {
    /// Defaults for `check`: 10,000 states, one job per core, 60 s per check.
    pub fn new(check: impl Into<String>) -> ExploreConfig {
        ExploreConfig {
            check: check.into(),
            max_states: 10_000,
            time_budget: None,
            torn_sector: None,
            seed: 1,
            crash_points: None,
            per_point: false,
            ignore: Vec::new(),
            jobs: std::thread::available_parallelism().map_or(2, |n| n.get()),
            persistent: false,
            timeout: Duration::from_secs(60),
            stop: Arc::default(),
        }
    }
}

/// One state the checker rejected.
#[derive(Debug, Clone)]
pub struct Violation {
    /// Crash after this many operations.
    pub crash_point: usize,
    /// The pending operations kept (the rest were dropped).
    pub kept: Kept,
    /// The pending operations at that point.
    pub pending: Vec<usize>,
    /// What the checker printed.
    pub output: String,
    /// Exit status of the checker (-1: a persistent checker's answer).
    pub status: i32,
}

/// Why an exploration ended before it had checked everything it planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// `--max-states` was reached.
    MaxStates,
    /// `--time-budget` ran out.
    TimeBudget,
    /// Stopped from outside (Ctrl-C, SIGTERM).
    Interrupted,
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
    /// High-yield states planned / done.
    pub high_yield: (usize, usize),
    /// Seconds since checking began.
    pub seconds: f64,
}

/// What an exploration found.
#[derive(Debug, Clone)]
pub struct Exploration {
    /// Operations recorded.
    pub ops: usize,
    /// The crash points visited (inclusive).
    pub crash_points: (usize, usize),
    /// Distinct states checked.
    pub states: usize,
    /// States skipped because the same content had been checked.
    pub duplicates: usize,
    /// Crash points that got only their high-yield states (their other states were
    /// neither all checked nor sampled).
    pub high_yield_only: Vec<usize>,
    /// Crash points whose every state was checked.
    pub exhausted: usize,
    /// Crash points where even the high-yield states were not all checked (the
    /// budget ran out first).
    pub high_yield_incomplete: Vec<usize>,
    /// Why it stopped early, if it did.
    pub cut: Option<Cut>,
    /// Seconds spent checking.
    pub seconds: f64,
    /// Rejected states, one per distinct state.
    pub violations: Vec<Violation>,
}

/// A state to check.
struct Task {
    crash_point: usize,
    kept: Kept,
    tree: Tree,
}

struct Outcome {
    crash_point: usize,
    kept: Kept,
    verdict: io::Result<Verdict>,
}

/// Removes every entry whose path matches `ignore` from a tree.
pub fn without(mut tree: Tree, ignore: &globset::GlobSet) -> Tree {
    if ignore.is_empty() {
        return tree;
    }
    let doomed: Vec<String> = tree
        .walk()
        .into_iter()
        .map(|(path, _)| path)
        .filter(|path| ignore.is_match(path))
        .collect();
    for path in doomed {
        let (dir, name) = match path.rsplit_once('/') {
            Some((dir, name)) => (tree.lookup_id(dir), name),
            None => (Some(tree.root), path.as_str()),
        };
        if let Some(Node::Dir(entries)) = dir.and_then(|d| tree.nodes.get_mut(&d)) {
            entries.remove(name);
        }
    }
    tree
}

fn glob_set(globs: &[String]) -> io::Result<globset::GlobSet> {
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

/// Checks crash states of `log`. Every crash point in range first gets its
/// high-yield states ([`Log::high_yield_states`]); the budget left then samples
/// random states, round-robin over the points, until every point is exhausted or
/// the budget or time runs out. Each distinct state (after `ignore`) is checked
/// once, or once per crash point with `per_point`; `jobs` checkers run at once.
/// `progress` is called about once a second.
pub fn explore(
    log: &Log,
    config: &ExploreConfig,
    mut progress: impl FnMut(&Progress),
) -> io::Result<Exploration> {
    let total = log.ops().len();
    let (first, last) = config.crash_points.unwrap_or((0, total));
    let (first, last) = (first.min(total), last.min(total));
    let ignore = glob_set(&config.ignore)?;
    let start = Instant::now();
    let deadline = config.time_budget.map(|t| start + t);
    let sector = config.torn_sector;
    let scratch = tempfile::Builder::new()
        .prefix("slowfs-states-")
        .tempdir()?;
    let jobs = config.jobs.max(1);

    let (task_tx, task_rx) = mpsc::sync_channel::<Task>(jobs * 2);
    let task_rx = Arc::new(Mutex::new(task_rx));
    let (out_tx, out_rx) = mpsc::channel::<Outcome>();
    let mut workers = Vec::new();
    for worker in 0..jobs {
        let dir = scratch.path().join(format!("worker-{worker}"));
        std::fs::create_dir(&dir)?;
        let mut checker = Checker::new(&config.check, config.persistent, config.timeout, &dir)?;
        let (task_rx, out_tx) = (Arc::clone(&task_rx), out_tx.clone());
        workers.push(std::thread::spawn(move || {
            let mut n = 0u64;
            loop {
                let task = task_rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
                let Ok(task) = task else { return };
                n += 1;
                let state = dir.join(format!("state-{n}"));
                let verdict = materialize(&task.tree, &state).and_then(|()| {
                    checker.judge(&StateRef {
                        dir: &state,
                        crash_point: task.crash_point,
                        ops: total,
                    })
                });
                let _ = std::fs::remove_dir_all(&state);
                let failed = verdict.is_err();
                let _ = out_tx.send(Outcome {
                    crash_point: task.crash_point,
                    kept: task.kept,
                    verdict,
                });
                if failed {
                    return;
                }
            }
        }));
    }
    drop(out_tx);

    let mut run = Run {
        log,
        config,
        ignore: &ignore,
        seen_states: HashSet::new(),
        progress: Progress::default(),
        violations: Vec::new(),
        error: None,
        out_rx: &out_rx,
        cut: None,
        start,
        deadline,
        last_report: Instant::now(),
    };

    // Phase 1: the high-yield states of every crash point, interleaved so that a
    // budget too small for all of them still reaches every point: first each
    // point's durable state, then each one's no-crash state, and so on.
    let points: Vec<usize> = (first..=last).collect();
    let plans: Vec<Vec<Kept>> = points
        .iter()
        .map(|&k| log.high_yield_states(k, sector))
        .collect();
    run.progress.high_yield.0 = plans.iter().map(Vec::len).sum();
    let mut tried: Vec<HashSet<Kept>> = vec![HashSet::new(); points.len()];
    let longest = plans.iter().map(Vec::len).max().unwrap_or(0);
    'high: for rank in 0..longest {
        for (slot, plan) in plans.iter().enumerate() {
            let Some(kept) = plan.get(rank) else { continue };
            run.progress.high_yield.1 += 1;
            tried[slot].insert(kept.clone());
            if !run.submit(&task_tx, points[slot], kept.clone(), &mut progress) {
                break 'high;
            }
        }
    }
    let high_yield_incomplete: Vec<usize> = points
        .iter()
        .zip(&plans)
        .zip(&tried)
        .filter(|((_, plan), tried)| plan.iter().any(|k| !tried.contains(k)))
        .map(|((k, _), _)| *k)
        .collect();
    // Phase 2: sampled states, one per point per round, while budget lasts.
    let mut sampled_points = HashSet::new();
    let survivals: Vec<_> = points.iter().map(|&k| log.survival(k, sector)).collect();
    let counts: Vec<Option<usize>> = survivals.iter().map(|s| s.count()).collect();
    let mut exhausted: Vec<bool> = counts
        .iter()
        .zip(&tried)
        .map(|(count, t)| count.is_some_and(|n| n <= t.len()))
        .collect();
    let mut rng = config.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    while run.cut.is_none() && run.error.is_none() && exhausted.iter().any(|e| !e) {
        for slot in 0..points.len() {
            if exhausted[slot] || run.cut.is_some() || run.error.is_some() {
                continue;
            }
            let k = points[slot];
            // A few tries for a state this point has not had.
            let fresh = (0..16)
                .map(|_| survivals[slot].random(&mut next))
                .find(|kept| !tried[slot].contains(kept));
            let Some(kept) = fresh else {
                // Sampling keeps missing: treat as done when small, else go on.
                let count = counts[slot].unwrap_or(usize::MAX);
                exhausted[slot] = tried[slot].len() * 2 >= count || tried[slot].len() > 1 << 16;
                continue;
            };
            tried[slot].insert(kept.clone());
            sampled_points.insert(k);
            if counts[slot].is_some_and(|n| n <= tried[slot].len()) {
                exhausted[slot] = true;
            }
            if !run.submit(&task_tx, k, kept, &mut progress) {
                break;
            }
        }
    }
    drop(task_tx);
    for worker in workers {
        let _ = worker.join();
    }
    while let Ok(outcome) = out_rx.try_recv() {
        run.absorb(outcome);
    }
    if let Some(e) = run.error.take() {
        return Err(e);
    }
    let high_yield_only = points
        .iter()
        .zip(&exhausted)
        .filter(|(k, done)| {
            !**done && !sampled_points.contains(*k) && !high_yield_incomplete.contains(*k)
        })
        .map(|(k, _)| *k)
        .collect();
    let mut violations = run.violations;
    violations.sort_by_key(|v| (v.crash_point, v.kept.len()));
    Ok(Exploration {
        high_yield_incomplete,
        ops: total,
        crash_points: (first, last),
        states: run.progress.checked,
        duplicates: run.progress.duplicates,
        high_yield_only,
        exhausted: exhausted.iter().filter(|e| **e).count(),
        cut: run.cut,
        seconds: start.elapsed().as_secs_f64(),
        violations,
    })
}

/// The bookkeeping of one exploration.
struct Run<'a> {
    log: &'a Log,
    config: &'a ExploreConfig,
    ignore: &'a globset::GlobSet,
    seen_states: HashSet<(usize, u64)>,
    progress: Progress,
    violations: Vec<Violation>,
    error: Option<io::Error>,
    out_rx: &'a mpsc::Receiver<Outcome>,
    cut: Option<Cut>,
    start: Instant,
    deadline: Option<Instant>,
    last_report: Instant,
}

impl Run<'_> {
    /// Queues one state unless already checked; false once the run must stop.
    fn submit(
        &mut self,
        tasks: &mpsc::SyncSender<Task>,
        k: usize,
        kept: Kept,
        progress: &mut impl FnMut(&Progress),
    ) -> bool {
        while let Ok(outcome) = self.out_rx.try_recv() {
            self.absorb(outcome);
        }
        if self.config.stop.load(Ordering::SeqCst) {
            self.cut = Some(Cut::Interrupted);
        } else if self.deadline.is_some_and(|d| Instant::now() >= d) {
            self.cut = Some(Cut::TimeBudget);
        } else if self.progress.checked >= self.config.max_states {
            self.cut = Some(Cut::MaxStates);
        }
        if self.cut.is_some() || self.error.is_some() {
            return false;
        }
        let tree = without(self.log.state_with(k, &kept), self.ignore);
        let key = (
            if self.config.per_point { k } else { 0 },
            tree.fingerprint(),
        );
        if !self.seen_states.insert(key) {
            self.progress.duplicates += 1;
            return true;
        }
        self.progress.checked += 1;
        if tasks
            .send(Task {
                crash_point: k,
                kept,
                tree,
            })
            .is_err()
        {
            return false;
        }
        if self.last_report.elapsed() >= Duration::from_secs(1) {
            self.progress.seconds = self.start.elapsed().as_secs_f64();
            progress(&self.progress);
            self.last_report = Instant::now();
        }
        true
    }

    fn absorb(&mut self, outcome: Outcome) {
        match outcome.verdict {
            Ok(Verdict::Accepted) => {}
            Ok(Verdict::Rejected(status, output)) => {
                self.progress.violations += 1;
                self.violations.push(Violation {
                    crash_point: outcome.crash_point,
                    pending: self.log.pending(outcome.crash_point),
                    kept: outcome.kept,
                    output,
                    status,
                });
            }
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
    }
}

/// Names nodes by the path they have in the given tree (for readable op lists).
pub fn describe(op: &LogOp, names: &HashMap<u64, String>) -> String {
    let name = |id: &u64| names.get(id).cloned().unwrap_or_else(|| format!("#{id}"));
    let entry = |dir: &u64, n: &str| {
        let d = name(dir);
        if d.is_empty() {
            n.to_string()
        } else {
            format!("{d}/{n}")
        }
    };
    match op {
        LogOp::Write { node, offset, data } => format!(
            "write {} [{offset}..{})",
            name(node),
            offset + data.len() as u64
        ),
        LogOp::SetLen { node, len } => format!("truncate {} to {len}", name(node)),
        LogOp::Create {
            dir, name: n, kind, ..
        } => format!("create {} ({kind:?})", entry(dir, n)),
        LogOp::Link { dir, name: n, node } => format!("link {} -> {}", entry(dir, n), name(node)),
        LogOp::Remove { dir, name: n } => format!("remove {}", entry(dir, n)),
        LogOp::Rename {
            from_dir,
            from_name,
            to_dir,
            to_name,
            exchanged,
            ..
        } => format!(
            "{} {} -> {}",
            if exchanged.is_some() {
                "exchange"
            } else {
                "rename"
            },
            entry(from_dir, from_name),
            entry(to_dir, to_name)
        ),
        LogOp::Fsync { node } => format!("fsync {}", name(node)),
        LogOp::FsyncDir { dir } => format!(
            "fsync dir {}",
            if name(dir).is_empty() {
                "/".into()
            } else {
                name(dir)
            }
        ),
        LogOp::Sync => "sync".into(),
    }
}

/// A name for every node that ever had one (its first path), for [`describe`].
pub fn node_names(log: &Log) -> HashMap<u64, String> {
    let mut names = HashMap::new();
    names.insert(log.initial().root, String::new());
    for k in 0..=log.ops().len() {
        let tree = log.volatile_state(k);
        for (path, _) in tree.walk() {
            if let Some(id) = tree.lookup_id(&path) {
                names.entry(id).or_insert(path);
            }
        }
        if k > 64 {
            break; // enough for naming; states past this add few names and cost O(n²)
        }
    }
    names
}

/// Renders a kept set as `i,j,k:t=BYTES` for `--state`.
pub fn kept_spec(kept: &Kept) -> String {
    kept.iter()
        .map(|(i, keep)| match keep {
            Keep::Whole => i.to_string(),
            Keep::Torn(bytes) => format!("{i}:{bytes}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses `K` or `K/i,j,k:BYTES` (crash point, then the pending ops kept).
pub fn parse_state(spec: &str) -> Result<(usize, Kept), String> {
    let (point, kept) = spec.split_once('/').unwrap_or((spec, ""));
    let point = point.parse().map_err(|_| {
        format!("bad state '{spec}': expected CRASH_POINT or CRASH_POINT/OP,OP:BYTES,...")
    })?;
    let mut out = Kept::new();
    for part in kept.split(',').filter(|p| !p.is_empty()) {
        let (i, keep) = match part.split_once(':') {
            Some((i, bytes)) => (
                i,
                Keep::Torn(
                    bytes
                        .parse()
                        .map_err(|_| format!("bad torn size in '{part}'"))?,
                ),
            ),
            None => (part, Keep::Whole),
        };
        out.insert(
            i.parse()
                .map_err(|_| format!("bad op index '{i}' in '{spec}'"))?,
            keep,
        );
    }
    Ok((point, out))
}

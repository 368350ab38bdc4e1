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
use std::process::{Command, Stdio};
use std::time::Instant;

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

/// How to explore.
#[derive(Debug, Clone)]
pub struct ExploreConfig {
    /// The checker, run by `sh -c` in each state.
    pub check: String,
    /// Most states to check overall.
    pub max_states: usize,
    /// Let pending writes tear at sector boundaries of this size.
    pub torn_sector: Option<u64>,
    /// Seed for the random part of large state spaces.
    pub seed: u64,
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
    /// Exit status of the checker.
    pub status: i32,
}

/// What an exploration found.
#[derive(Debug, Clone)]
pub struct Exploration {
    /// Operations recorded.
    pub ops: usize,
    /// Crash points visited.
    pub crash_points: usize,
    /// Distinct states checked.
    pub states: usize,
    /// Whether the state budget cut the search short.
    pub budget_hit: bool,
    /// Seconds spent checking.
    pub seconds: f64,
    /// Rejected states, one per distinct state.
    pub violations: Vec<Violation>,
}

/// Runs the checker in one state; `Ok(None)` when it accepts the state.
fn run_check(
    check: &str,
    dir: &Path,
    crash_point: usize,
    total: usize,
) -> io::Result<Option<(i32, String)>> {
    let output = Command::new("sh")
        .arg("-c")
        .arg(check)
        .env("SLOWFS_STATE", dir)
        .env("SLOWFS_CRASH_POINT", crash_point.to_string())
        .env("SLOWFS_OPS", total.to_string())
        .stdin(Stdio::null())
        .output()?;
    let code = output.status.code().unwrap_or(128);
    if code == 126 || code == 127 {
        return Err(io::Error::other(format!(
            "the checker cannot start (sh exit {code}): {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    if output.status.success() {
        return Ok(None);
    }
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    Ok(Some((code, text.trim().to_string())))
}

/// Checks crash states of `log`: every crash point, candidate states within the
/// budget, each distinct state once. `progress` is called about once a second.
pub fn explore(
    log: &Log,
    config: &ExploreConfig,
    mut progress: impl FnMut(usize, usize),
) -> io::Result<Exploration> {
    let total = log.ops().len();
    let start = Instant::now();
    let mut last_report = Instant::now();
    let mut seen = HashSet::new();
    let mut violations = Vec::new();
    let mut budget_hit = false;
    let scratch = tempfile::Builder::new().prefix("slowfs-state-").tempdir()?;
    let mut checked = 0usize;
    for k in 0..=total {
        let remaining = config.max_states.saturating_sub(checked);
        if remaining == 0 {
            budget_hit = true;
            break;
        }
        let (candidates, cut) =
            log.candidate_states(k, config.torn_sector, remaining.min(4096), config.seed);
        budget_hit |= cut;
        for kept in candidates {
            let tree = log.state_with(k, &kept);
            // Distinct per crash point: a checker may judge the same tree
            // differently depending on how far the workload got.
            if !seen.insert((k, tree.fingerprint())) {
                continue;
            }
            checked += 1;
            let dir = scratch.path().join(checked.to_string());
            materialize(&tree, &dir)?;
            if let Some((status, output)) = run_check(&config.check, &dir, k, total)? {
                violations.push(Violation {
                    crash_point: k,
                    kept,
                    pending: log.pending(k),
                    output,
                    status,
                });
            }
            std::fs::remove_dir_all(&dir)?;
            if last_report.elapsed().as_secs() >= 1 {
                progress(k, checked);
                last_report = Instant::now();
            }
            if checked >= config.max_states {
                budget_hit = true;
                break;
            }
        }
    }
    Ok(Exploration {
        ops: total,
        crash_points: total + 1,
        states: checked,
        budget_hit,
        seconds: start.elapsed().as_secs_f64(),
        violations,
    })
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

//! `slowfs explore`: record a workload, then check its crash states.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context};
use fault_inject::durability::{Keep, Log, LogOp};
use slowfs::explore::{
    describe, explore as run_explore, kept_spec, materialize, node_names, parse_state, scan, Cut,
    Exploration, ExploreConfig, Progress, Violation,
};
use slowfs::{Mount, MountConfig};

use super::ExploreArgs;
use slowfs::signals::block_termination;

/// Violation groups printed in full; `--json` has every violation.
const GROUPS_SHOWN: usize = 20;

pub fn explore(args: ExploreArgs) -> anyhow::Result<ExitCode> {
    if let Some(log_path) = &args.replay {
        return replay(
            log_path,
            args.state.as_deref().unwrap_or_default(),
            &args.check,
            args.keep_state.as_deref(),
        );
    }
    if args.workload.is_empty() {
        bail!("give the workload after --, e.g. slowfs explore --check ./check.sh -- ./export.sh");
    }
    // Ctrl-C / SIGTERM: passed to the workload while it runs, then they stop the
    // checking and the summary of what was found is printed.
    let signals = block_termination();
    let stop = Arc::new(AtomicBool::new(false));
    let workload_pid = Arc::new(AtomicI32::new(0));
    {
        let (stop, workload_pid) = (Arc::clone(&stop), Arc::clone(&workload_pid));
        std::thread::spawn(move || loop {
            if let Ok(signal) = signals.wait() {
                stop.store(true, Ordering::SeqCst);
                let pid = workload_pid.load(Ordering::SeqCst);
                if pid > 0 {
                    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
                }
            }
        });
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
    let first = record(&args.workload, &backing, None, &workload_pid)?;
    if !first.status.success() {
        eprintln!(
            "slowfs explore: the workload failed ({}); no crash states were checked",
            first.status
        );
        return Ok(ExitCode::from(2));
    }
    let log = first.log;
    let log_dir = args.log_dir.clone().unwrap_or_else(std::env::temp_dir);
    let saved_path = save_log(&log, &log_dir)?;

    let mut config = ExploreConfig::new(args.check.clone());
    config.max_states = args.max_states;
    config.time_budget = args.time_budget;
    config.torn_sector = args.torn.then_some(args.sector);
    config.seed = args.seed;
    config.crash_points = args.crash_points;
    config.per_point = args.per_point;
    config.ignore = args.ignore.clone();
    if let Some(jobs) = args.jobs {
        config.jobs = jobs.max(1);
    }
    config.persistent = args.persistent;
    config.timeout = args.timeout;
    config.stop = Arc::clone(&stop);
    if stop.load(Ordering::SeqCst) {
        eprintln!("slowfs explore: interrupted during the workload; no crash states were checked");
        return Ok(ExitCode::from(130));
    }
    eprintln!(
        "slowfs explore: {} operations recorded; checking crash states with {} checker(s)",
        log.ops().len(),
        config.jobs
    );
    let mut line = ProgressLine::new();
    let result = run_explore(&log, &config, |p| line.show(p, &config));
    line.finish();
    let result = result?;
    let report = Report {
        names: node_names(&log),
        log: &log,
        result: &result,
        saved: &saved_path,
        check: &args.check,
        config: &config,
    };
    report.print_summary();
    report.print_groups();
    let mut violations = result.violations.len();
    let mut json = report.json();
    if args.fsync_fails && result.cut != Some(Cut::Interrupted) {
        let (found, runs) = explore_fsync_failures(&args, &log, &config, &workload_pid)?;
        violations += found;
        json["fsync_fails"] = serde_json::Value::Array(runs);
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&json)?)
            .with_context(|| format!("writing {}", path.display()))?;
        println!("\nevery violation: {}", path.display());
    }
    Ok(if violations == 0 {
        if stop.load(Ordering::SeqCst) {
            ExitCode::from(130)
        } else {
            ExitCode::SUCCESS
        }
    } else {
        ExitCode::FAILURE
    })
}

/// One recorded run of the workload.
struct Recorded {
    log: Log,
    status: std::process::ExitStatus,
}

/// Runs the workload once on a recording mount over `backing` (with `rule`, if
/// any) and returns its log over the backing's state before the run.
fn record(
    workload: &[std::ffi::OsString],
    backing: &Path,
    rule: Option<&str>,
    workload_pid: &AtomicI32,
) -> anyhow::Result<Recorded> {
    let initial = scan(backing)
        .with_context(|| format!("reading the initial state of {}", backing.display()))?;
    let mountpoint = tempfile::Builder::new().prefix("slowfs-mnt-").tempdir()?;
    let mut config = MountConfig::new(backing, mountpoint.path());
    config.record = true;
    config.control = None;
    if let Some(rule) = rule {
        config.spec.add_rule("--fsync-fails", rule)?;
    }
    let mount = Mount::start(config)?;
    eprintln!(
        "slowfs explore: running the workload on a recording mount at {}{}",
        mount.mountpoint().display(),
        rule.map(|r| format!(" with \"{r}\"")).unwrap_or_default()
    );
    let status = run_workload(workload, &mount, workload_pid);
    workload_pid.store(0, Ordering::SeqCst);
    let ops = mount.recorded();
    mount.unmount().context("unmounting the recording mount")?;
    let status = status.with_context(|| format!("cannot start the workload {:?}", workload[0]))?;
    let mut log = Log::new(initial);
    for op in ops {
        log.push(op);
    }
    Ok(Recorded { log, status })
}

/// Saves a log where `--replay` can read it; returns its path.
fn save_log(log: &Log, dir: &Path) -> anyhow::Result<PathBuf> {
    let saved = tempfile::Builder::new()
        .prefix("slowfs-explore-log-")
        .suffix(".json")
        .tempfile_in(dir)
        .with_context(|| format!("saving the log in {}", dir.display()))?;
    serde_json::to_writer(saved.as_file(), log)?;
    let (_, path) = saved.keep().context("keeping the log")?;
    Ok(path)
}

/// `--fsync-fails`: runs the workload again once per fsync of the first run,
/// from the same initial state, with that fsync failing as Linux fails one
/// (EIO; the file's unsynced data dropped; a retry succeeds), and checks each
/// run's crash states within what is left of the budget. Returns the violations,
/// and each run's report as JSON (with the failing fsync and the workload's exit).
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
    println!(
        "\n--fsync-fails: the workload fsynced files {fsyncs} time(s); running it again with each \
         fsync failing in turn (EIO, the file's unsynced data dropped, a retry succeeds)"
    );
    let start = std::time::Instant::now();
    let log_dir = args.log_dir.clone().unwrap_or_else(std::env::temp_dir);
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
        let rule = format!("fsync,fdatasync error=EIO drop after={i}");
        let run = record(&args.workload, &backing, Some(&rule), workload_pid)?;
        let saved = save_log(&run.log, &log_dir)?;
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
        let report = Report {
            names: node_names(&run.log),
            log: &run.log,
            result: &result,
            saved: &saved,
            check: &args.check,
            config: &config,
        };
        report.print_summary();
        report.print_groups();
        let mut json = report.json();
        json["failing_fsync"] = serde_json::json!(i + 1);
        json["workload_exit"] = serde_json::json!(run.status.code());
        runs.push(json);
        violations += result.violations.len();
    }
    println!("\nfsync-fails violations: {violations}");
    Ok((violations, runs))
}

/// One updating line on a terminal; a plain line every 10 s otherwise.
struct ProgressLine {
    tty: bool,
    last_plain: std::time::Instant,
    shown: bool,
}

impl ProgressLine {
    fn new() -> ProgressLine {
        ProgressLine {
            tty: std::io::stderr().is_terminal(),
            last_plain: std::time::Instant::now(),
            shown: false,
        }
    }

    fn show(&mut self, p: &Progress, config: &ExploreConfig) {
        let rate = p.checked as f64 / p.seconds.max(1e-9);
        let (planned, done) = p.high_yield;
        let eta = if done < planned {
            // The high-yield pass is known; its ETA is what can be promised.
            format!(
                "high-yield {done}/{planned}, ETA {:.0} s",
                (planned - done) as f64 / rate.max(1e-9)
            )
        } else {
            let left = config.max_states.saturating_sub(p.checked);
            format!(
                "sampling, budget left {left} (~{:.0} s)",
                left as f64 / rate.max(1e-9)
            )
        };
        let text = format!(
            "slowfs explore: {} states checked ({:.0}/s), {} duplicates skipped, {}; {} violation(s)",
            p.checked, rate, p.duplicates, eta, p.violations
        );
        if self.tty {
            eprint!("\r\x1b[K{text}");
            let _ = std::io::stderr().flush();
            self.shown = true;
        } else if self.last_plain.elapsed().as_secs() >= 10 {
            eprintln!("{text}");
            self.last_plain = std::time::Instant::now();
        }
    }

    fn finish(&self) {
        if self.shown {
            eprintln!();
        }
    }
}

/// Runs the workload with sync(2)/syncfs(2) reported to the recorder (see
/// `slowfs::sync_watch`); its exit status.
fn run_workload(
    workload: &[std::ffi::OsString],
    mount: &Mount,
    pid: &AtomicI32,
) -> std::io::Result<std::process::ExitStatus> {
    use std::os::unix::process::CommandExt;
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    let filter = slowfs::sync_watch::SyncFilter::new();
    let theirs_fd = std::os::fd::AsRawFd::as_raw_fd(&theirs);
    let mut command = std::process::Command::new(&workload[0]);
    command
        .args(&workload[1..])
        .env("SLOWFS_MOUNT", mount.mountpoint());
    // SAFETY: `install` makes only async-signal-safe syscalls and does not
    // allocate; sigprocmask is async-signal-safe too.
    unsafe {
        command.pre_exec(move || {
            nix::sys::signal::SigSet::all()
                .thread_unblock()
                .map_err(std::io::Error::from)?;
            filter.install(theirs_fd)
        });
    }
    let mut child = command.spawn()?;
    pid.store(child.id() as i32, Ordering::SeqCst);
    drop(theirs);
    if let Err(e) = slowfs::sync_watch::watch(ours, mount.sync_recorder()) {
        eprintln!("slowfs explore: sync(2) will not be seen: {e}");
    }
    // Each sync is recorded before it runs, so once the workload has exited every
    // one of its syncs is in the log; the watcher thread ends with the last process
    // of the tree.
    child.wait()
}

/// The results, for people and for `--json`.
struct Report<'a> {
    log: &'a Log,
    /// A name for every node ([`node_names`]), computed once.
    names: std::collections::HashMap<u64, String>,
    result: &'a Exploration,
    saved: &'a Path,
    check: &'a str,
    config: &'a ExploreConfig,
}

/// Violations with the same checker message (numbers and hashes blanked), with
/// the patterns of lost operations among them, most common first.
struct Group<'a> {
    message: String,
    patterns: Vec<(String, usize)>,
    members: Vec<&'a Violation>,
}

impl Report<'_> {
    fn print_summary(&self) {
        let r = self.result;
        println!("ops recorded: {}", r.ops);
        println!(
            "crash points: {}..={} ({} in all)",
            r.crash_points.0,
            r.crash_points.1,
            r.crash_points.1 - r.crash_points.0 + 1
        );
        println!(
            "states checked: {} distinct ({} skipped as already checked{})",
            r.states,
            r.duplicates,
            if self.config.per_point {
                " at the same crash point"
            } else {
                ""
            }
        );
        println!("states/s: {:.0}", r.states as f64 / r.seconds.max(1e-9));
        let covered = match r.cut {
            None => "every crash point got its high-yield states; the budget was not reached"
                .to_string(),
            Some(cut) => {
                let why = match cut {
                    Cut::MaxStates => "--max-states was reached",
                    Cut::TimeBudget => "--time-budget ran out",
                    Cut::Interrupted => "interrupted",
                };
                format!("stopped early: {why}")
            }
        };
        println!("coverage: {covered}");
        println!("  crash points with every state checked: {}", r.exhausted);
        if !r.high_yield_incomplete.is_empty() {
            println!(
                "  crash points whose high-yield states were not all checked: {} ({}); raise \
                 --max-states or --time-budget, or focus with --crash-points",
                r.high_yield_incomplete.len(),
                ranges(&r.high_yield_incomplete)
            );
        }
        if !r.high_yield_only.is_empty() {
            println!(
                "  crash points that got only their high-yield states: {} ({})",
                r.high_yield_only.len(),
                ranges(&r.high_yield_only)
            );
        }
        println!("violations: {}", r.violations.len());
    }

    fn groups(&self) -> Vec<Group<'_>> {
        let mut groups: BTreeMap<String, Vec<&Violation>> = BTreeMap::new();
        for v in &self.result.violations {
            let message = normalise(v.output.lines().next().unwrap_or(""));
            groups.entry(message).or_default().push(v);
        }
        let mut groups: Vec<Group> = groups
            .into_iter()
            .map(|(message, members)| {
                let mut patterns: BTreeMap<String, usize> = BTreeMap::new();
                for v in &members {
                    // The kinds of loss, not their count: 3 lost writes of a file
                    // and 4 are one pattern.
                    let mut lost: Vec<String> = self.lost(v).iter().map(|l| normalise(l)).collect();
                    lost.sort();
                    lost.dedup();
                    *patterns.entry(lost.join("; ")).or_default() += 1;
                }
                let mut patterns: Vec<(String, usize)> = patterns.into_iter().collect();
                patterns.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
                Group {
                    message,
                    patterns,
                    members,
                }
            })
            .collect();
        groups.sort_by_key(|g| std::cmp::Reverse(g.members.len()));
        groups
    }

    /// The operations a violation's state lost: dropped or torn pending ones,
    /// described with path names (node ids and byte ranges left out of the pattern).
    fn lost(&self, v: &Violation) -> Vec<String> {
        let names = &self.names;
        v.pending
            .iter()
            .filter(|i| !matches!(v.kept.get(i), Some(Keep::Whole)))
            .map(|&i| {
                let op = &self.log.ops()[i];
                let what = match op {
                    LogOp::Write { node, .. } => format!(
                        "write {}",
                        names
                            .get(node)
                            .cloned()
                            .unwrap_or_else(|| format!("#{node}"))
                    ),
                    other => describe(other, names),
                };
                let fate = if v.kept.contains_key(&i) {
                    "torn"
                } else {
                    "lost"
                };
                format!("{fate} {what}")
            })
            .collect()
    }

    fn print_groups(&self) {
        let groups = self.groups();
        if groups.is_empty() {
            return;
        }
        println!(
            "\n{} violation group(s) (same checker message, numbers and hashes aside):",
            groups.len()
        );
        for (n, group) in groups.iter().enumerate().take(GROUPS_SHOWN) {
            // The smallest example: fewest lost operations, then earliest point.
            let example = group
                .members
                .iter()
                .min_by_key(|v| (v.pending.len() - v.kept.len(), v.crash_point))
                .expect("groups are not empty");
            let points: Vec<usize> = group.members.iter().map(|v| v.crash_point).collect();
            println!(
                "\ngroup {}: {} violation(s) at crash points {}",
                n + 1,
                group.members.len(),
                ranges(&points)
            );
            println!("  checker: {}", group.message);
            for (pattern, count) in group.patterns.iter().take(3) {
                let pattern = if pattern.is_empty() {
                    "nothing lost (the no-crash state itself)"
                } else {
                    pattern
                };
                println!("  {count:>5} x lost: {pattern}");
            }
            if group.patterns.len() > 3 {
                println!(
                    "        ... {} more patterns of lost operations",
                    group.patterns.len() - 3
                );
            }
            println!(
                "  smallest example: crash after {} of {} operations; not yet durable there:",
                example.crash_point, self.result.ops
            );
            for &i in &example.pending {
                let fate = match example.kept.get(&i) {
                    Some(Keep::Whole) => "kept",
                    Some(Keep::Torn(_)) => "torn",
                    None => "DROPPED",
                };
                let torn = match example.kept.get(&i) {
                    Some(Keep::Torn(bytes)) => format!(" (first {bytes} bytes survive)"),
                    _ => String::new(),
                };
                println!(
                    "    {i:>4} {fate:<8} {}{torn}",
                    describe(&self.log.ops()[i], &self.names)
                );
            }
            for line in example.output.lines().take(5) {
                println!("    checker: {line}");
            }
            println!("    replay: {}", self.replay_command(example));
        }
        if groups.len() > GROUPS_SHOWN {
            println!(
                "\n... and {} more group(s); --json FILE lists every violation",
                groups.len() - GROUPS_SHOWN
            );
        }
    }

    fn replay_command(&self, v: &Violation) -> String {
        format!(
            "slowfs explore --replay {} --state {}/{} --check {}",
            self.saved.display(),
            v.crash_point,
            kept_spec(&v.kept),
            shell_quote(self.check)
        )
    }

    fn json(&self) -> serde_json::Value {
        let r = self.result;
        let violations: Vec<_> = r
            .violations
            .iter()
            .map(|v| {
                serde_json::json!({
                    "crash_point": v.crash_point,
                    "state": format!("{}/{}", v.crash_point, kept_spec(&v.kept)),
                    "lost": self.lost(v),
                    "checker_status": v.status,
                    "checker_output": v.output,
                    "replay": self.replay_command(v),
                })
            })
            .collect();
        serde_json::json!({
            "ops": r.ops,
            "crash_points": [r.crash_points.0, r.crash_points.1],
            "states": r.states,
            "duplicates": r.duplicates,
            "high_yield_only": r.high_yield_only,
            "high_yield_incomplete": r.high_yield_incomplete,
            "cut": r.cut.map(|c| format!("{c:?}")),
            "seconds": r.seconds,
            "log": self.saved,
            "violations": violations,
        })
    }
}

/// A line with hashes, random names and numbers blanked, so that "row 17" and
/// "row 18", or two object files, group together: a word with a digit in it
/// becomes `#`.
fn normalise(line: &str) -> String {
    let mut out = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if word.chars().any(|c| c.is_ascii_digit()) {
            out.push('#');
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in line.trim().chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// `3, 5..9, 12` from sorted or unsorted points.
fn ranges(points: &[usize]) -> String {
    let mut points = points.to_vec();
    points.sort_unstable();
    points.dedup();
    let mut out = Vec::new();
    let mut i = 0;
    while i < points.len() {
        let mut j = i;
        while j + 1 < points.len() && points[j + 1] == points[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            points[i].to_string()
        } else {
            format!("{}..{}", points[i], points[j])
        });
        i = j + 1;
    }
    if out.len() > 12 {
        let more = out.len() - 12;
        out.truncate(12);
        out.push(format!("and {more} more"));
    }
    out.join(", ")
}

fn replay(
    log_path: &PathBuf,
    state: &str,
    check: &str,
    keep: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    let log: Log = serde_json::from_reader(
        std::fs::File::open(log_path).with_context(|| format!("opening {}", log_path.display()))?,
    )
    .with_context(|| format!("{} is not a slowfs explore log", log_path.display()))?;
    let (point, kept) = parse_state(state).map_err(anyhow::Error::msg)?;
    log.validate(point, &kept)
        .map_err(|e| anyhow::anyhow!("--state {state}: {e}"))?;
    let dir = tempfile::Builder::new().prefix("slowfs-state-").tempdir()?;
    let state_dir = match keep {
        Some(keep) => keep.to_path_buf(),
        None => dir.path().join("state"),
    };
    if keep
        .is_some_and(|k| k.exists() && std::fs::read_dir(k).is_ok_and(|mut d| d.next().is_some()))
    {
        bail!(
            "--keep-state {}: the directory is not empty (give a new or empty one)",
            state_dir.display()
        );
    }
    let tree = log.state_with(point, &kept);
    materialize(&tree, &state_dir)
        .with_context(|| format!("writing the state to {}", state_dir.display()))?;
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(check)
        .current_dir(&state_dir)
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
    if keep.is_some() {
        println!("state kept in {}", state_dir.display());
    }
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

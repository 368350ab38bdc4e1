//! `slowfs-conformance`: run async file engines through the conformance suites on
//! a slowfs it mounts itself, and print the matrix. Each cell runs in a child
//! process, so a cell can be timed out and a signal leaves nothing mounted.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use slowfs_conformance::broken::Defect;
use slowfs_conformance::expectations::{self, Expectation};
use slowfs_conformance::fault_traces::{self, FaultTraces};
use slowfs_conformance::isolation::{run_isolated, CellEnd};
use slowfs_conformance::progress::Progress;
use slowfs_conformance::report::{Cell, Report, Stopped};
use slowfs_conformance::runner::{self, EngineSpec, OWN_ENGINES};
use slowfs_conformance::shard::{self, Shard};
use slowfs_conformance::{Suite, SuiteConfig};
use slowfs_harness::ENGINE_NAMES;

/// Property-based conformance suites for async file engines, on slowfs.
#[derive(Parser)]
#[command(
    // Named, described and versioned here, not from the package: the wheel
    // (packaging/wheel) builds this file as a package of its own.
    name = "slowfs-conformance",
    version = env!("CARGO_PKG_VERSION"),
    about = "Conformance suites for async file libraries on slowfs: positioned and short I/O, \
             cancellation, errors, durability, atomic replace, event-loop lag, with negative controls",
    after_help = "Exit status: 0 when every cell of our own engines passed (or does \
    not apply, for a stated reason), every negative control was caught and every \
    third-party cell matched its expectation; 1 otherwise (a failure, a timeout, an \
    unsupported cell nobody explained, a run stopped early); 2 on bad usage (an \
    unknown engine, suite or capability, a bad expectations file, two engines with \
    one name); 128+N when stopped by signal N (after printing the partial report)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

fn duration(text: &str) -> Result<Duration, String> {
    slowfs_faults::parse_duration(text)
}

#[derive(Subcommand)]
enum Command {
    /// Run the matrix (default: every built-in engine, every suite, the negative controls).
    Run(RunArgs),
    /// Join the JSON reports of every shard of one run (`run --shard K/N`) into
    /// the report the unsharded run gives; exit status as `run`'s.
    Merge(MergeArgs),
    /// List engines, suites and how to name a driver.
    List,
    /// Run one cell and write its outcome as JSON (what `run` starts per cell).
    #[command(hide = true)]
    Cell(CellArgs),
}

/// `run`: the matrix.
#[derive(Args)]
struct RunArgs {
    /// An engine to test (repeatable): a built-in name, `cmd:COMMAND` (a
    /// driver, docs/driver-protocol.md), or `LABEL=ENGINE` to show it as
    /// LABEL. See `list`.
    #[arg(long = "engine")]
    engines: Vec<String>,
    /// A suite to run (repeatable). See `list`.
    #[arg(long = "suite")]
    suites: Vec<String>,
    /// Property cases per suite (more for nightly runs).
    #[arg(long, default_value_t = 24)]
    cases: u32,
    /// Seed (printed when not given; the same seed replays the same cases).
    #[arg(long)]
    seed: Option<u64>,
    /// Run under an extra slowfs profile as well (e.g. nfs).
    #[arg(long)]
    profile: Option<String>,
    /// loop-lag: largest acceptable heartbeat lateness in ms (default: half
    /// of the injected per-op delay, 50 ms: a loop that waits for one file
    /// operation is late by all of it; scheduler noise is not).
    #[arg(long)]
    lag_bound_ms: Option<f64>,
    /// Known findings about third-party engines (TOML, format in
    /// `conformance/expectations.toml`); added to the built-in ones.
    #[arg(long)]
    expectations: Option<PathBuf>,
    /// Skip the negative controls.
    #[arg(long)]
    no_controls: bool,
    /// Longest one cell may run (e.g. 90s, 5m); it is then killed and
    /// reported `timeout`. The engine's other cells still run (each with a
    /// driver of its own); --timeout bounds the whole run.
    #[arg(long, default_value = "2m", value_parser = duration)]
    cell_timeout: Duration,
    /// Longest the whole run may take; then it stops, prints what it has
    /// and fails.
    #[arg(long, default_value = "30m", value_parser = duration)]
    timeout: Duration,
    #[command(flatten)]
    outputs: Outputs,
    /// Run only shard K of N (1-based, e.g. 2/4): every Nth cell of the
    /// plan, so N CI jobs share a long run. Needs --seed (the shards must
    /// agree on it) and --json; `merge` joins the shards' reports.
    #[arg(long, value_name = "K/N", requires_all = ["seed", "json"])]
    shard: Option<Shard>,
    /// Where to keep the fault traces of cells that fail the run (every
    /// fault their slowfs mounts fired, a file per mount): a directory
    /// per cell, made only then; its replay command names it.
    #[arg(long, value_name = "DIR", default_value = "slowfs-conformance-faults")]
    fault_traces: PathBuf,
    /// Replay one cell with the faults kept for it (a directory a failed
    /// run printed), so it fails the same way even where threads reach
    /// the mount in another order; needs the run's --seed and one
    /// --engine and --suite.
    #[arg(long, value_name = "DIR", requires_all = ["seed", "engines", "suites"])]
    replay_faults: Option<PathBuf>,
}

/// Where `run` and `merge` also write the matrix.
#[derive(Args)]
struct Outputs {
    /// Write the matrix as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write the matrix as JUnit XML.
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Write the matrix as one self-contained HTML page (a CI artifact):
    /// each cell's status, reason and replay command.
    #[arg(long)]
    html: Option<PathBuf>,
}

/// `merge`: the shards of one run.
#[derive(Args)]
struct MergeArgs {
    /// The shards' JSON reports, one per shard, in any order.
    #[arg(required = true)]
    reports: Vec<PathBuf>,
    #[command(flatten)]
    outputs: Outputs,
}

/// `cell`: one cell, in a child process of `run`.
#[derive(Args)]
struct CellArgs {
    #[arg(long)]
    engine: String,
    #[arg(long)]
    suite: String,
    #[arg(long)]
    seed: u64,
    #[arg(long)]
    cases: u32,
    #[arg(long)]
    profile: Option<String>,
    #[arg(long)]
    lag_bound_ms: Option<f64>,
    #[arg(long)]
    out: PathBuf,
    #[arg(long, conflicts_with = "replay_faults")]
    record_faults: Option<PathBuf>,
    #[arg(long)]
    replay_faults: Option<PathBuf>,
}

fn main() -> ExitCode {
    // Before any thread starts: the signals wait for the code that cleans up.
    let signals = slowfs::signals::block_termination();
    match Cli::parse().command {
        Command::List => {
            list();
            ExitCode::SUCCESS
        }
        Command::Cell(args) => {
            slowfs::signals::unblock_termination();
            cell(args)
        }
        Command::Run(args) => run_matrix(args, &signals).unwrap_or_else(|message| {
            eprintln!("slowfs-conformance: {message}");
            ExitCode::from(2)
        }),
        Command::Merge(args) => merge(args),
    }
}

/// `cell`: runs one cell and writes its outcome as JSON.
fn cell(args: CellArgs) -> ExitCode {
    let Some(suite) = Suite::from_name(&args.suite) else {
        eprintln!("slowfs-conformance cell: unknown suite '{}'", args.suite);
        return ExitCode::from(2);
    };
    let spec: EngineSpec = args.engine.parse().expect("infallible");
    let planned = runner::plan(
        &[runner::CheckedEngine {
            name: spec.source.clone(),
            spec,
            useless: false,
        }],
        &[suite],
        false,
    );
    let traces = match (args.record_faults, args.replay_faults) {
        (Some(dir), _) => Some(FaultTraces::record(&dir)),
        (None, Some(dir)) => Some(FaultTraces::replay(&dir)),
        (None, None) => None,
    };
    let config = SuiteConfig::default()
        .cases(args.cases)
        .seed(args.seed)
        .profile(args.profile)
        .lag_bound_ms(args.lag_bound_ms)
        .fault_traces(traces);
    let outcome = runner::run_cell(&planned[0], &config);
    let json = serde_json::to_vec(&outcome).expect("serializes");
    match std::fs::write(&args.out, json) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "slowfs-conformance cell: writing {}: {e}",
                args.out.display()
            );
            ExitCode::from(2)
        }
    }
}

/// `run`: the matrix; `Err` is a usage error (exit 2).
fn run_matrix(args: RunArgs, signals: &nix::sys::signal::SigSet) -> Result<ExitCode, String> {
    let suites = suites_named(&args.suites)?;
    let controls = !args.no_controls && args.engines.is_empty();
    let engines: Vec<String> = if args.engines.is_empty() {
        ENGINE_NAMES.iter().map(|s| s.to_string()).collect()
    } else {
        args.engines
    };
    let specs: Vec<EngineSpec> = engines
        .iter()
        .map(|e| e.parse().expect("infallible"))
        .collect();
    eprintln!(
        "slowfs-conformance: starting {} engine(s) to read their handshakes",
        specs.len()
    );
    let checked = runner::preflight(&specs)?;
    let known = expectations_for(args.expectations.as_deref(), &checked)?;
    for engine in checked.iter().filter(|c| c.useless) {
        eprintln!(
            "slowfs-conformance: engine '{}' ({}) declares none of the capabilities any suite needs: every cell will be unsupported and the run fails",
            engine.name, engine.spec
        );
    }
    let seed = args
        .seed
        .unwrap_or_else(|| std::process::id() as u64 ^ rand_seed());
    let config = SuiteConfig::default()
        .cases(args.cases)
        .seed(seed)
        .profile(args.profile)
        .lag_bound_ms(args.lag_bound_ms);
    let mut planned = runner::plan(&checked, &suites, controls);
    if let Some(shard) = args.shard {
        planned = shard.select(planned);
    }
    let traces = match &args.replay_faults {
        Some(dir) if planned.len() != 1 => {
            return Err(format!(
                "--replay-faults {} replays one cell, and this run has {}: name one --engine and one --suite",
                dir.display(),
                planned.len()
            ))
        }
        Some(dir) if !dir.is_dir() => {
            return Err(format!(
                "--replay-faults {}: no such directory (give the one a failed cell's replay command names)",
                dir.display()
            ))
        }
        Some(dir) => Traces::Replay(dir.clone()),
        None => Traces::KeepFailed(args.fault_traces),
    };
    eprintln!(
        "slowfs-conformance: seed {seed} (pass --seed {seed} to replay); {} cells, at most {} each, {} in all",
        planned.len(),
        slowfs_faults::DisplayDuration(args.cell_timeout),
        slowfs_faults::DisplayDuration(args.timeout)
    );
    let limits = (args.cell_timeout, args.timeout);
    let mut report = run(&planned, &config, &known, limits, &traces, signals);
    report.shard = args.shard;
    if let Some(shard) = args.shard {
        eprintln!(
            "slowfs-conformance: this was shard {shard} ({} of the run's cells); `slowfs-conformance merge` joins the shards' --json reports",
            planned.len()
        );
    }
    Ok(finish(&report, args.outputs))
}

/// The suites `--suite` names, or every suite.
fn suites_named(names: &[String]) -> Result<Vec<Suite>, String> {
    if names.is_empty() {
        return Ok(Suite::ALL.to_vec());
    }
    names
        .iter()
        .map(|s| {
            Suite::from_name(s).ok_or_else(|| {
                let known: Vec<&str> = Suite::ALL.iter().map(|s| s.name()).collect();
                format!(
                    "unknown suite '{s}' (known: {}; see `slowfs-conformance list`)",
                    known.join(", ")
                )
            })
        })
        .collect()
}

/// The built-in expectations with the user's (`--expectations FILE`) before
/// them: what a user knows about the versions they run (a finding fixed
/// upstream) overrides the built-in expectation. Notes expectations about
/// engines not in this run.
fn expectations_for(
    extra: Option<&std::path::Path>,
    checked: &[runner::CheckedEngine],
) -> Result<Vec<Expectation>, String> {
    let known = expectations::parse("built-in expectations", expectations::BUILT_IN)?;
    let theirs = match extra {
        Some(path) => expectations::load(path)?,
        None => Vec::new(),
    };
    for e in &theirs {
        if !checked.iter().any(|c| c.name == e.engine) {
            eprintln!(
                "slowfs-conformance: note: {} expects engine '{}', which is not in this run (engines here: {})",
                extra.expect("loaded").display(),
                e.engine,
                checked.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
            );
        }
    }
    Ok(theirs.into_iter().chain(known).collect())
}

/// `merge`: the shards' reports joined into one.
fn merge(args: MergeArgs) -> ExitCode {
    let mut loaded = Vec::new();
    for path in &args.reports {
        let read = std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| serde_json::from_str::<Report>(&text).map_err(|e| e.to_string()));
        match read {
            Ok(report) => loaded.push(report),
            Err(e) => {
                eprintln!(
                    "slowfs-conformance merge: {}: {e} (expected a `run --shard K/N --json` report)",
                    path.display()
                );
                return ExitCode::from(2);
            }
        }
    }
    match shard::merge(loaded) {
        Ok(report) => finish(&report, args.outputs),
        Err(e) => {
            eprintln!("slowfs-conformance merge: {e}");
            ExitCode::from(2)
        }
    }
}

fn finish(report: &Report, Outputs { json, junit, html }: Outputs) -> ExitCode {
    print!("{}", report.render());
    let written = json
        .map(|path| {
            (
                path,
                serde_json::to_string_pretty(report).expect("serializes"),
            )
        })
        .into_iter()
        .chain(junit.map(|path| (path, report.junit())))
        .chain(html.map(|path| (path, slowfs_conformance::html::page(report))));
    for (path, text) in written {
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("slowfs-conformance: writing {}: {e}", path.display());
            return ExitCode::from(2);
        }
    }
    match &report.stopped {
        Some(Stopped { by, .. }) if by.starts_with("SIG") => {
            let signo = match by.as_str() {
                "SIGINT" => 2,
                "SIGHUP" => 1,
                _ => 15,
            };
            ExitCode::from(128 + signo)
        }
        _ if report.ok() => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    }
}

/// What a run does with fault traces.
enum Traces {
    /// Record every cell's; keep those of failed cells under this directory.
    KeepFailed(PathBuf),
    /// Replay these (one cell).
    Replay(PathBuf),
}

/// Runs the planned cells one at a time, each in a child process.
fn run(
    planned: &[runner::PlannedCell],
    config: &SuiteConfig,
    known: &[Expectation],
    (cell_timeout, run_timeout): (Duration, Duration),
    traces: &Traces,
    signals: &nix::sys::signal::SigSet,
) -> Report {
    let exe = std::env::current_exe().expect("this program's path");
    // Every cell's traces are recorded here; a failed cell's are moved out.
    let recorded = match traces {
        Traces::KeepFailed(_) => tempfile::Builder::new()
            .prefix("slowfs-conformance-faults-")
            .tempdir()
            .map_err(|e| eprintln!("slowfs-conformance: no fault traces this run: {e}"))
            .ok(),
        Traces::Replay(_) => None,
    };
    let mut report = Report::new(config.seed);
    let mut progress = Progress::new(planned.len());
    let started = Instant::now();
    for (index, cell) in planned.iter().enumerate() {
        progress.start(index, cell);
        let left = run_timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            report.stopped = Some(Stopped {
                by: format!(
                    "the run's time limit ({})",
                    slowfs_faults::DisplayDuration(run_timeout)
                ),
                planned: planned.len(),
            });
            break;
        }
        let cell_traces = match (traces, &recorded) {
            (Traces::Replay(dir), _) => Some(FaultTraces::replay(dir)),
            (Traces::KeepFailed(_), Some(root)) => {
                let dir = root.path().join(fault_traces::cell_dir_name(
                    &cell.engine.name,
                    cell.suite.name(),
                ));
                std::fs::create_dir_all(&dir)
                    .ok()
                    .map(|()| FaultTraces::record(&dir))
            }
            (Traces::KeepFailed(_), None) => None,
        };
        let result = {
            let limit = cell_timeout.min(left);
            let begun = Instant::now();
            let cell_config = config.clone().fault_traces(cell_traces.clone());
            let end = run_isolated(&exe, cell, &cell_config, limit, signals, |ran| {
                progress.running(index, cell, ran, limit)
            });
            let seconds = begun.elapsed().as_secs_f64();
            match end {
                Ok(CellEnd::Finished(outcome)) => runner::judge(cell, outcome, config, known),
                Ok(CellEnd::TimedOut) => {
                    let mut c = Cell::timed_out(
                        cell,
                        seconds,
                        format!(
                            "did not finish in {} (--cell-timeout); killed, with its driver and mounts",
                            slowfs_faults::DisplayDuration(limit)
                        ),
                        config,
                    );
                    runner::expect(&mut c, known);
                    c
                }
                Ok(CellEnd::Signalled(signal)) => {
                    eprintln!("\nslowfs-conformance: {signal}: stopped the running cell, unmounted its slowfs");
                    report.stopped = Some(Stopped {
                        by: signal.as_str().to_string(),
                        planned: planned.len(),
                    });
                    break;
                }
                Ok(CellEnd::Crashed(why)) => runner::judge(
                    cell,
                    slowfs_conformance::crashed_outcome(format!(
                        "the cell's process crashed: {why}"
                    )),
                    config,
                    known,
                ),
                Err(e) => runner::judge(
                    cell,
                    slowfs_conformance::crashed_outcome(format!("cannot run the cell: {e}")),
                    config,
                    known,
                ),
            }
        };
        let mut result = result;
        if let (Traces::KeepFailed(keep), Some(cell_traces)) = (traces, &cell_traces) {
            fault_traces::keep_if_failed(&mut result, cell_traces, keep);
        }
        progress.done(index, cell, &result);
        report.cells.push(result);
    }
    report
}

/// Prints the engines, suites and capabilities. Written in one piece, and a
/// reader that stops early (`| head`) ends it quietly, not with a panic.
fn list() {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "engines:");
    for name in ENGINE_NAMES {
        let kind = if OWN_ENGINES.contains(name) {
            "ours"
        } else {
            "built-in, third-party library"
        };
        let _ = writeln!(out, "  {name:<34} {kind}");
    }
    let _ = writeln!(
        out,
        "  {:<34} a driver in another process speaking docs/driver-protocol.md, e.g.\n  {:<34} --engine 'cmd:python3 drivers/python/slowfs_driver.py --lib aiofiles'",
        "cmd:COMMAND", ""
    );
    let _ = writeln!(
        out,
        "  {:<34} shows ENGINE as LABEL (two drivers that give the same name)",
        "LABEL=ENGINE"
    );
    for defect in Defect::ALL {
        let _ = writeln!(
            out,
            "  {:<34} negative control for {}",
            defect.name(),
            defect
                .caught_by()
                .iter()
                .map(|s| s.name())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let _ = writeln!(out, "suites:");
    for suite in Suite::ALL {
        let _ = writeln!(out, "  {:<34} {}", suite.name(), suite.summary());
    }
    let _ = writeln!(
        out,
        "capabilities (a driver's handshake declares them): {}",
        slowfs_harness::Capability::known_names()
    );
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), out.as_bytes());
}

fn rand_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

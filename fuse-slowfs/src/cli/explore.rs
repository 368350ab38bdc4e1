//! `slowfs explore`: flags wired to `slowfs::explore`, and the report printed.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

use anyhow::{bail, Context};
use slowfs::explore::report::ReportSettings;
use slowfs::explore::run::{ExplorePlan, Explored};
use slowfs::explore::{
    anchored_to, checker_reads_crash_point, merge, replay, CheckSettings, ExploreConfig,
    ExploreReport, ExploreVerdict, Judgement, ModelRun, Progress, ReportContext, SavedRun,
    ShardReport,
};
use slowfs::signals::block_termination;
use slowfs_faults::crash::text::parse_state;

use super::ExploreArgs;

pub fn explore(args: ExploreArgs) -> anyhow::Result<ExitCode> {
    if let Some(saved) = &args.replay {
        return replay_one(saved, &args);
    }
    if !args.merge.is_empty() {
        return merge_shards(&args);
    }
    let plan = plan(&args)?;
    if checker_reads_crash_point(&plan.config.settings.check) && !args.per_point {
        note!(
            "slowfs explore: note: the checker reads SLOWFS_CRASH_POINT; without --per-point a \
             state seen at several crash points is checked at the first one only"
        );
    }
    // Ctrl-C / SIGTERM: passed to the workload while it runs; then they stop the
    // checking (checkers run in process groups of their own, so only slowfs
    // hears a terminal's Ctrl-C and ends them itself), and the summary of what
    // was found is printed.
    let signals = block_termination();
    {
        let plan = plan.clone();
        std::thread::spawn(move || loop {
            if let Ok(signal) = signals.wait() {
                plan.config.stop.store(true, Ordering::SeqCst);
                plan.config.running.stop_all();
                plan.signal_workload(signal);
            }
        });
    }
    let mut line = ProgressLine::new();
    let explored = slowfs::explore::run::run(&plan, |p| line.show(p));
    line.finish();
    let explored = explored?;
    finish(&explored, &args)
}

/// The flags resolved into a plan (a wrong `--compare-with` is said before
/// the workload runs).
fn plan(args: &ExploreArgs) -> anyhow::Result<ExplorePlan> {
    let check = anchored_to(
        args.check
            .as_deref()
            .expect("clap requires --check without --replay"),
        &std::env::current_dir()?,
    );
    if args.workload.is_empty() {
        bail!("give the workload after --, e.g. slowfs explore --check ./check.sh -- ./export.sh");
    }
    if let (Some(fs), Some(backing)) = (args.fs, &args.backing) {
        bail!(
            "--fs {fs} and --backing {} together: with --fs the workload runs in a fresh {fs} \
             image, whose initial state --fs-setup makes (e.g. --fs-setup 'cp -a {}/. .'); \
             --backing is the initial state of a run on the recording mount, without --fs",
            backing.display(),
            backing.display()
        );
    }
    let mut plan = ExplorePlan::new(args.workload.clone(), check.clone());
    plan.backing = args.backing.clone();
    plan.config = config(args, check);
    plan.fsync_fails = args.fsync_fails;
    plan.log_dir = args.log_dir.clone();
    plan.partial_ok = args.partial_ok;
    plan.time_budget = args.time_budget.is_some();
    if let Some(fs) = args.fs {
        let mut setup = slowfs::explore::FsSetup::new(fs);
        if let Some(size) = args.fs_size {
            setup.size = size;
        }
        setup.mkfs_args = args.mkfs_args.clone();
        if let Some(options) = &args.mkfs_options {
            setup
                .mkfs_args
                .extend(options.split_whitespace().map(String::from));
        }
        if let Some(options) = &args.mount_options {
            setup.mount_options = options.clone();
        }
        setup.settle = args.fs_settle;
        setup.fsck = args.fsck;
        plan.real_fs = Some((setup, args.fs_setup.clone()));
        plan.compare_with = args
            .compare_with
            .as_deref()
            .map(ModelRun::load)
            .transpose()
            .map_err(anyhow::Error::msg)?;
    }
    Ok(plan)
}

/// Prints the report, writes its JSON and HTML, and exits with its code.
fn finish(explored: &Explored, args: &ExploreArgs) -> anyhow::Result<ExitCode> {
    let report = &explored.report;
    if let ExploreVerdict::Refused(_) = report.outcome {
        note!(
            "slowfs explore: {}",
            report.verdict.trim_start_matches("verdict: ")
        );
    }
    say!("{report}");
    if let Some(shard) = &report.shard {
        say!(
            "\nthis was shard {shard}: it checked {} of the run's {} states; \
             `slowfs explore --merge` joins the shards' --json reports into the run's verdict",
            report.checked_here,
            report.states
        );
    }
    if let Some(path) = &args.json {
        std::fs::write(path, report.to_json())
            .with_context(|| format!("writing {}", path.display()))?;
        say!("\nreport as JSON: {}", path.display());
    }
    if let Some(path) = &args.html {
        std::fs::write(path, explored.html())
            .with_context(|| format!("writing {}", path.display()))?;
        say!("report as HTML: {}", path.display());
    }
    Ok(ExitCode::from(report.exit_code))
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
    let report = ExploreReport::new(
        &merged.exploration,
        ReportContext {
            saved: merged.saved_run.clone(),
            settings: ReportSettings {
                torn_sector: merged.torn_sector,
                size_only: merged.size_only,
                fs_model: merged.fs_model,
                per_point: merged.per_point,
                time_budget: merged.time_budget,
                partial_ok: args.partial_ok,
                seed: merged.seed,
                max_states: merged.max_states,
            },
            ..ReportContext::default()
        },
    );
    finish(&Explored { report, log: None }, args)
}

fn config(args: &ExploreArgs, check: String) -> ExploreConfig {
    let mut config = ExploreConfig::new(check);
    config.settings.persistent = args.persistent;
    config.settings.ignore = args.ignore.clone();
    config.settings.timeout_ms = args.timeout.as_millis() as u64;
    config.max_states = args.max_states;
    config.time_budget = args.time_budget;
    // Sound by default: block tears and sizes without data (not for --fs,
    // whose states are the real disk's writes).
    config.torn_sector = if args.torn {
        Some(args.sector)
    } else if args.whole_writes || args.fs.is_some() {
        None
    } else {
        Some(slowfs::explore::BLOCK_SIZE)
    };
    config.size_only = !args.whole_writes && args.fs.is_none();
    config.seed = args.seed;
    config.crash_points = args.crash_points;
    config.per_point = args.per_point;
    config.shard = args.shard;
    config.fs_model = args.fs_model;
    if let Some(jobs) = args.jobs {
        config.jobs = jobs.max(1);
    }
    config
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
            note_part!("\r\x1b[K{text}");
            let _ = std::io::stderr().flush();
            self.shown = true;
        } else if self.last_plain.is_none_or(|t| t.elapsed().as_secs() >= 10) {
            note!("{text}");
            self.last_plain = Some(std::time::Instant::now());
        }
    }

    fn finish(&self) {
        if self.shown {
            note!();
        }
    }
}

fn replay_one(saved_path: &Path, args: &ExploreArgs) -> anyhow::Result<ExitCode> {
    let state = args.state.as_deref().unwrap_or_default();
    let mut saved = SavedRun::load(saved_path)?;
    if let Some(check) = &args.check {
        let check = &anchored_to(check, &std::env::current_dir()?);
        if *check != saved.settings.check {
            note!(
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
        Judgement::Accepted => say!("state {state}: checker accepts it"),
        Judgement::Rejected(status, output) => {
            say!("state {state}: checker rejects it (status {status})");
            for line in output.lines().take(20) {
                say!("  {line}");
            }
        }
    }
    if let Some(keep) = &args.keep_state {
        say!("state kept in {}", keep.display());
    }
    Ok(if accepted {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

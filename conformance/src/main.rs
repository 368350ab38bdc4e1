//! `slowfs-conformance`: run async file engines through the conformance suites on
//! a slowfs it mounts itself, and print the matrix.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use conformance::broken::Defect;
use conformance::runner::{run_matrix, OWN_ENGINES};
use conformance::{expectations, Suite, SuiteConfig};
use harness::ENGINE_NAMES;

/// Property-based conformance suites for async file engines, on slowfs.
#[derive(Parser)]
#[command(
    version,
    about,
    after_help = "Exit status: 0 when every cell of our own engines passed (or does \
    not apply), every negative control was caught and every third-party cell matched its expectation; \
    1 otherwise; 2 on bad usage."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the matrix (default: every built-in engine, every suite, the negative controls).
    Run {
        /// An engine to test (repeatable). See `list`.
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
        /// Known findings about third-party engines (TOML); added to the built-in ones.
        #[arg(long)]
        expectations: Option<PathBuf>,
        /// Skip the negative controls.
        #[arg(long)]
        no_controls: bool,
        /// Write the matrix as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Write the matrix as JUnit XML.
        #[arg(long)]
        junit: Option<PathBuf>,
    },
    /// List engines and suites.
    List,
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::List => {
            println!("engines:");
            for name in ENGINE_NAMES {
                let kind = if OWN_ENGINES.contains(name) {
                    "ours"
                } else {
                    "third-party"
                };
                println!("  {name:<34} {kind}");
            }
            for defect in Defect::ALL {
                println!(
                    "  {:<34} negative control for {}",
                    defect.name(),
                    defect.caught_by().name()
                );
            }
            println!("suites:");
            for suite in Suite::ALL {
                println!("  {:<34} {}", suite.name(), suite.summary());
            }
            ExitCode::SUCCESS
        }
        Command::Run {
            engines,
            suites,
            cases,
            seed,
            profile,
            lag_bound_ms,
            expectations: extra,
            no_controls,
            json,
            junit,
        } => {
            let suites: Vec<Suite> = if suites.is_empty() {
                Suite::ALL.to_vec()
            } else {
                match suites
                    .iter()
                    .map(|s| Suite::from_name(s).ok_or(s))
                    .collect::<Result<_, _>>()
                {
                    Ok(s) => s,
                    Err(bad) => {
                        eprintln!("slowfs-conformance: unknown suite '{bad}' (see `slowfs-conformance list`)");
                        return ExitCode::from(2);
                    }
                }
            };
            let controls = !no_controls && engines.is_empty();
            let engines: Vec<String> = if engines.is_empty() {
                ENGINE_NAMES.iter().map(|s| s.to_string()).collect()
            } else {
                engines
            };
            let seed = seed.unwrap_or_else(|| std::process::id() as u64 ^ rand_seed());
            let mut known =
                match expectations::parse("built-in expectations", expectations::BUILT_IN) {
                    Ok(k) => k,
                    Err(e) => {
                        eprintln!("slowfs-conformance: {e}");
                        return ExitCode::from(2);
                    }
                };
            if let Some(path) = extra {
                match expectations::load(&path) {
                    Ok(more) => known.extend(more),
                    Err(e) => {
                        eprintln!("slowfs-conformance: {e}");
                        return ExitCode::from(2);
                    }
                }
            }
            let config = SuiteConfig {
                cases,
                seed,
                lag_bound_ms,
                profile,
                ..SuiteConfig::default()
            };
            eprintln!("slowfs-conformance: seed {seed} (pass --seed {seed} to replay)");
            let report = run_matrix(&engines, &suites, controls, &config, &known, |cell| {
                eprintln!(
                    "  {:<16} {:<36} {:?} ({:.1}s)",
                    cell.suite, cell.engine, cell.status, cell.seconds
                );
            });
            print!("{}", report.render());
            if let Some(path) = json {
                if let Err(e) = std::fs::write(
                    &path,
                    serde_json::to_string_pretty(&report).expect("serializes"),
                ) {
                    eprintln!("slowfs-conformance: writing {}: {e}", path.display());
                    return ExitCode::from(2);
                }
            }
            if let Some(path) = junit {
                if let Err(e) = std::fs::write(&path, report.junit()) {
                    eprintln!("slowfs-conformance: writing {}: {e}", path.display());
                    return ExitCode::from(2);
                }
            }
            if report.ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

fn rand_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

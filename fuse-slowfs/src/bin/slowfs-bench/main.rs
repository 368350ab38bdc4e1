//! `slowfs-bench`: measurements of the filesystem itself, not tests.
//!
//! `slowfs-bench fidelity [--json FILE] [--plots DIR]` measures whether faults are what their
//! rules say, at the caller's syscall (see `fidelity.rs`). Engine throughput is
//! `slowfs-engine-bench` (crate slowfs-conformance).

mod fidelity;
mod plots;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "Benchmarks of slowfs itself (measurements, not tests)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Injected against observed: fixed delays (1 and 1,000 at once),
    /// distributions (KS statistic), spikes, throttle and IOPS, the nfs and hdd
    /// profiles, measured at the caller's syscall.
    Fidelity {
        /// Also write the report as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Fraction of the full sample counts (1.0 takes a few minutes).
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
        /// Also draw the report as SVG plots into DIR: injected vs observed
        /// delays, and each distribution's configured and observed CDFs.
        #[arg(long, value_name = "DIR")]
        plots: Option<PathBuf>,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Fidelity { json, scale, plots } => {
            let report = fidelity::run(scale)?;
            fidelity::print(&report);
            if let Some(path) = json {
                fidelity::write_json(&report, &path)?;
                eprintln!("slowfs-bench: wrote {}", path.display());
            }
            if let Some(dir) = plots {
                for path in plots::write(&report, &dir)? {
                    eprintln!("slowfs-bench: drew {}", path.display());
                }
            }
            Ok(())
        }
    }
}

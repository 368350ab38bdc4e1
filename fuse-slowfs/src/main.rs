//! The `slowfs` command: mount, run a command on a fresh mount, control a mount.

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("SLOWFS_LOG")
                .unwrap_or_else(|_| "warn,fuser=error".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = cli::Cli::from_args();
    match cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            // Not eprintln!: with stderr closed (`2>&1 | head -1`) it panics.
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "slowfs: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

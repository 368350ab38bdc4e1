//! `ctl`, `profiles` and `check`: talking to a running mount, and what the
//! rules and profiles say.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::bail;
use slowfs::control::{default_socket, Command as CtlCommand};
use slowfs_faults::{FaultSpec, PROFILES};

/// Sends a command to a daemon, saying on stderr what it waits for when the
/// answer takes longer than a second.
pub(super) fn request(
    socket: &Path,
    command: &CtlCommand,
) -> std::io::Result<slowfs::control::Response> {
    slowfs::control::request_noting_waits(socket, command, || {
        note!(
            "slowfs: waiting for the daemon at {} to answer (giving up after {} s) ...",
            socket.display(),
            slowfs::control::ANSWER_LIMIT.as_secs()
        )
    })
}

/// The control socket of the mount at `mountpoint`: `socket` if given, else
/// the default one.
pub fn socket_of(mountpoint: &Path, socket: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    Ok(match socket {
        Some(socket) => socket,
        None => default_socket(mountpoint)?,
    })
}

pub fn ctl(
    mountpoint: PathBuf,
    socket: Option<PathBuf>,
    command: CtlCommand,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let socket = socket_of(&mountpoint, socket)?;
    let response = request(&socket, &command)?;
    if !response.ok {
        note!("slowfs ctl: {}", response.message);
        return Ok(ExitCode::FAILURE);
    }
    // A command with no data (set, clear, ...) prints its message either way.
    if json && !response.data.is_null() {
        say!("{}", serde_json::to_string_pretty(&response.data)?);
    } else {
        say!("{}", response.message.trim_end());
    }
    Ok(ExitCode::SUCCESS)
}

pub fn profiles(name: Option<String>) -> anyhow::Result<ExitCode> {
    match name {
        None => {
            for p in PROFILES {
                say!("{:<18} {}", p.name, p.summary);
            }
            say!("\n`slowfs profiles NAME` shows a profile's rules and sources.");
        }
        Some(name) => {
            let Some(p) = slowfs_faults::profile(&name) else {
                let names: Vec<&str> = PROFILES.iter().map(|p| p.name).collect();
                bail!("unknown profile '{name}' (built-in: {})", names.join(", "));
            };
            say!(
                "{}: {}\n\nwhere the numbers come from: {}\n\nrules:",
                p.name,
                p.summary,
                p.source
            );
            for rule in p.rules {
                say!("  {rule}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn check(file: PathBuf) -> anyhow::Result<ExitCode> {
    let mut spec = FaultSpec::default();
    spec.add_file(&file)?;
    say!("{}: ok, {} rule(s)", file.display(), spec.rules.len());
    if let Some(seed) = spec.seed {
        say!("seed {seed}");
    }
    for rule in &spec.rules {
        say!("  {rule}");
    }
    Ok(ExitCode::SUCCESS)
}

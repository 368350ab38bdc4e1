//! The control socket: `slowfs ctl MOUNTPOINT ...` talks to a running mount over a
//! Unix socket (mode 0600), one JSON request and one JSON acknowledgement per line.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use fault_inject::parse_rule;
use serde::{Deserialize, Serialize};

use crate::fs::Inner;

/// A request to a running mount.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Command {
    /// Counters, latency and per-rule hits.
    Stats,
    /// Add a rule.
    Set {
        /// The rule string.
        rule: String,
    },
    /// Remove one rule (by id) or all.
    Clear {
        /// The rule id from `rules`; all rules when absent.
        id: Option<u64>,
    },
    /// List the rules in force.
    Rules,
    /// Release every hung request.
    Release,
    /// Power loss now (strict crash model).
    Crash,
    /// What a crash now would lose (strict crash model).
    Durable,
    /// Who serves this mount: process id, mountpoint, whether its session ended.
    Info,
    /// Release every parked request and unmount; the daemon then exits.
    Shutdown,
}

/// Most bytes one request line may have: a longer one is refused unread.
pub const MAX_LINE: usize = 1 << 20;
/// Most connections served at once: more get an error reply and are closed.
pub const MAX_CONNECTIONS: usize = 64;

/// The acknowledgement of a request.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Response {
    /// Whether the command was carried out.
    pub ok: bool,
    /// What happened, for people.
    pub message: String,
    /// Structured result (stats, rules), if any.
    #[serde(default)]
    pub data: serde_json::Value,
}

impl Response {
    fn ok(message: impl Into<String>, data: serde_json::Value) -> Response {
        Response {
            ok: true,
            message: message.into(),
            data,
        }
    }

    fn fail(message: impl Into<String>) -> Response {
        Response {
            ok: false,
            message: message.into(),
            data: serde_json::Value::Null,
        }
    }
}

/// Where the control socket of a mount at `mountpoint` lives, unless given explicitly:
/// `$SLOWFS_RUNTIME_DIR`, else `/run/slowfs` for root, else `$XDG_RUNTIME_DIR/slowfs`,
/// else `/tmp/slowfs-UID`; named after a hash of the canonical mountpoint.
pub fn default_socket(mountpoint: &Path) -> PathBuf {
    let canonical = mountpoint
        .canonicalize()
        .unwrap_or_else(|_| mountpoint.to_path_buf());
    let mut hash: u64 = 0xcbf29ce484222325;
    for byte in canonical.as_os_str().as_encoded_bytes() {
        hash = (hash ^ *byte as u64).wrapping_mul(0x100000001b3);
    }
    runtime_dir().join(format!("{hash:016x}.sock"))
}

fn runtime_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SLOWFS_RUNTIME_DIR") {
        return dir.into();
    }
    // SAFETY: plain id query.
    let uid = unsafe { libc::geteuid() };
    if uid == 0 {
        return "/run/slowfs".into();
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) => PathBuf::from(dir).join("slowfs"),
        None => std::env::temp_dir().join(format!("slowfs-{uid}")),
    }
}

/// A running control server; stops and removes its socket on drop.
#[derive(Debug)]
pub struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// What the control server needs to end its mount (`Shutdown`).
#[derive(Clone, Debug)]
pub struct Served {
    /// The mount's state.
    pub inner: Arc<Inner>,
    /// Where it is mounted.
    pub mountpoint: PathBuf,
    /// The FUSE connection's device, for aborting it.
    pub connection: Option<u64>,
}

impl Served {
    /// Whether the mount is gone from the mount table (unmounted, also from outside).
    fn ended(&self) -> bool {
        !crate::mount::mounted_here(&self.mountpoint, self.connection)
    }
}

/// Makes `path` free for a new control socket: removes it when no daemon answers
/// there (a killed daemon's leftover), waits up to `patience` for a daemon whose
/// mount has already ended to go away, and refuses one that still serves a mount.
pub fn claim_socket(path: &Path, patience: Duration) -> std::io::Result<()> {
    let deadline = std::time::Instant::now() + patience;
    loop {
        if UnixStream::connect(path).is_err() {
            // Nobody listens: a stale socket (or none at all).
            let _ = std::fs::remove_file(path);
            return Ok(());
        }
        // No answer: a daemon on its way out (closing its socket); wait for it.
        let info = request(path, &Command::Info).ok().filter(|r| r.ok);
        let serving = info.as_ref().is_some_and(|r| {
            !r.data
                .get("ended")
                .and_then(|e| e.as_bool())
                .unwrap_or(false)
        });
        if serving || std::time::Instant::now() >= deadline {
            let who = info
                .map(|r| r.message)
                .unwrap_or_else(|| "another slowfs".into());
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!(
                    "control socket {} is in use by {who}; unmount that one first \
                     (`slowfs umount MOUNTPOINT`) or pass another --ctl-socket",
                    path.display()
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Removes sockets in the runtime directory that no daemon listens on any more
/// (left by daemons that were killed).
pub fn sweep_stale_sockets() {
    let Ok(entries) = std::fs::read_dir(runtime_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "sock") && UnixStream::connect(&path).is_err() {
            let _ = std::fs::remove_file(&path);
        }
    }
}

impl ControlServer {
    /// Creates the socket's directory (private) if it does not exist.
    pub fn prepare_dir(path: &Path) -> std::io::Result<()> {
        if let Some(dir) = path.parent().filter(|dir| !dir.exists()) {
            // A directory of our own making is private; an existing one is left as it is.
            std::fs::create_dir_all(dir).map_err(|e| with_path(e, "creating", dir))?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| with_path(e, "setting the mode of", dir))?;
        }
        Ok(())
    }

    /// Listens on `path` (see [`claim_socket`]) for commands to the mount `served`.
    pub fn start(path: PathBuf, served: Served) -> std::io::Result<ControlServer> {
        Self::prepare_dir(&path)?;
        claim_socket(&path, Duration::from_secs(5))?;
        let listener = UnixListener::bind(&path).map_err(|e| with_path(e, "binding", &path))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| with_path(e, "setting the mode of", &path))?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("slowfs-ctl".into())
                .spawn(move || serve(listener, served, stop))?
        };
        Ok(ControlServer {
            path,
            stop,
            thread: Some(thread),
        })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = UnixStream::connect(&self.path);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn with_path(e: std::io::Error, doing: &str, path: &Path) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{doing} {}: {e}", path.display()))
}

fn serve(listener: UnixListener, served: Served, stop: Arc<AtomicBool>) {
    let active = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut stream) = stream else { continue };
        if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::SeqCst);
            let busy = Response::fail(format!(
                "too many control connections (at most {MAX_CONNECTIONS} at once); close idle ones and retry"
            ));
            let _ = send(&mut stream, &busy);
            continue;
        }
        let served = served.clone();
        let active = Arc::clone(&active);
        let spawned = std::thread::Builder::new()
            .name("slowfs-ctl-conn".into())
            .spawn(move || {
                let _ = converse(stream, &served);
                active.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            tracing::warn!("control: cannot start a connection thread");
        }
    }
}

fn send(stream: &mut UnixStream, response: &Response) -> std::io::Result<()> {
    let mut text = serde_json::to_string(response).expect("responses serialize");
    text.push('\n');
    stream.write_all(text.as_bytes())
}

fn converse(stream: UnixStream, served: &Served) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = Vec::new();
        // At most MAX_LINE bytes are read, whatever the peer sends.
        (&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)?;
        if line.is_empty() {
            return Ok(());
        }
        if line.len() > MAX_LINE {
            let refused = Response::fail(format!(
                "request longer than {} bytes; refused (one JSON command per line)",
                MAX_LINE
            ));
            return send(&mut writer, &refused);
        }
        let text = String::from_utf8_lossy(&line);
        if text.trim().is_empty() {
            continue;
        }
        let response = match serde_json::from_str::<Command>(&text) {
            Ok(command) => execute_served(served, command),
            Err(e) => {
                let shown: String = text.trim().chars().take(80).collect();
                Response::fail(format!("bad request '{shown}': {e}"))
            }
        };
        send(&mut writer, &response)?;
    }
}

/// Carries out a command that may concern the mount's life, not only its state.
fn execute_served(served: &Served, command: Command) -> Response {
    match command {
        Command::Info => {
            let ended = served.ended();
            Response::ok(
                format!(
                    "slowfs pid {} serving {}{}",
                    std::process::id(),
                    served.mountpoint.display(),
                    if ended { " (unmounted, exiting)" } else { "" }
                ),
                serde_json::json!({
                    "pid": std::process::id(),
                    "mountpoint": served.mountpoint,
                    "ended": ended,
                }),
            )
        }
        Command::Shutdown => {
            let parked = served.inner.scheduler.waiting();
            // Parked requests answer at once, so nothing waits on a fault.
            served.inner.scheduler.drain(Duration::from_secs(2));
            let unmounted = if served.ended() {
                Ok(())
            } else {
                crate::mount::unmount(&served.mountpoint, served.connection)
            };
            match unmounted {
                Ok(()) => Response::ok(
                    format!(
                        "released {parked} parked request(s) and unmounted {}; pid {} exits",
                        served.mountpoint.display(),
                        std::process::id()
                    ),
                    serde_json::json!({ "released": parked, "pid": std::process::id() }),
                ),
                Err(e) => Response::fail(format!(
                    "released {parked} parked request(s) but unmounting {} failed: {e}",
                    served.mountpoint.display()
                )),
            }
        }
        command => execute(&served.inner, command),
    }
}

/// Carries out one command against a mount.
pub fn execute(inner: &Inner, command: Command) -> Response {
    match command {
        Command::Stats => {
            let report = inner.stats.report(inner.plan.report());
            Response::ok(
                report.render(),
                serde_json::to_value(&report).expect("stats serialize"),
            )
        }
        Command::Set { rule } => match parse_rule(&rule) {
            Ok(rule)
                if rule.action.needs_crash_model() && inner.durability_report().is_none() =>
            {
                Response::fail(format!(
                    "`{}` rules work on what is durable: they need a mount started with a crash model (--crash-model strict)",
                    rule.action.keyword()
                ))
            }
            Ok(rule) => {
                let text = rule.to_string();
                let id = inner.plan.add(rule);
                Response::ok(
                    format!("added rule #{id}: {text}"),
                    serde_json::json!({ "id": id }),
                )
            }
            Err(e) => Response::fail(e.to_string()),
        },
        Command::Clear { id } => {
            let removed = inner.plan.clear(id);
            match (id, removed) {
                (Some(id), 0) => {
                    Response::fail(format!("no rule #{id} (see `slowfs ctl MOUNTPOINT rules`)"))
                }
                _ => Response::ok(
                    format!("removed {removed} rule(s)"),
                    serde_json::json!({ "removed": removed }),
                ),
            }
        }
        Command::Rules => {
            let rules = inner.plan.report();
            let exempt = inner.passthrough_handles();
            let mut text = if rules.is_empty() {
                "no rules".to_string()
            } else {
                rules
                    .iter()
                    .map(|r| format!("#{} {} (fired {}/{})", r.id, r.text, r.fired, r.matched))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            if exempt > 0 {
                text.push_str(&format!(
                    "\n{exempt} file handle(s) open in kernel passthrough: data rules apply to them only once reopened"
                ));
            }
            let data: Vec<_> = rules
                .iter()
                .map(|r| serde_json::json!({"id": r.id, "rule": r.text, "matched": r.matched, "fired": r.fired}))
                .collect();
            Response::ok(text, serde_json::Value::Array(data))
        }
        Command::Crash => {
            if inner.crash_now() {
                Response::ok("crashed: the tree is now its durable state; handles opened before fail with EIO", serde_json::Value::Null)
            } else {
                Response::fail("this mount has no crash model (start it with --crash-model strict)")
            }
        }
        Command::Durable => match inner.durability_report() {
            Some(report) => {
                let mut text = format!(
                    "{} operation(s) since the mount or last crash; {} not durable",
                    report.ops,
                    report.pending.len()
                );
                for op in &report.pending {
                    text.push_str(&format!("\n  pending: {op}"));
                }
                for path in &report.at_risk {
                    text.push_str(&format!("\n  at risk: {path}"));
                }
                Response::ok(text, serde_json::to_value(&report).expect("serializes"))
            }
            None => {
                Response::fail("this mount has no crash model (start it with --crash-model strict)")
            }
        },
        Command::Info | Command::Shutdown => {
            Response::fail("this command needs the mount's control server")
        }
        Command::Release => {
            let released = inner.scheduler.release();
            Response::ok(
                format!("released {released} hung request(s)"),
                serde_json::json!({ "released": released }),
            )
        }
    }
}

/// Sends one command to the mount listening on `socket` and waits for its answer.
pub fn request(socket: &Path, command: &Command) -> std::io::Result<Response> {
    let stream = UnixStream::connect(socket).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!(
                "cannot reach slowfs control socket {}: {e} (is a slowfs mounted there? \
                 `grep '^slowfs ' /proc/mounts` lists mounts)",
                socket.display()
            ),
        )
    })?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut writer = stream.try_clone()?;
    let mut text = serde_json::to_string(command).expect("commands serialize");
    text.push('\n');
    writer.write_all(text.as_bytes())?;
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line)?;
    serde_json::from_str(&line).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("bad answer from {}: {e}", socket.display()),
        )
    })
}

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

use serde::{Deserialize, Serialize};
use slowfs_faults::parse_rule;

use crate::fs::Inner;

/// A request to a running mount. Its doc comments are also the help of
/// `slowfs ctl MNT COMMAND` (the CLI parses straight into it).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "cli", derive(clap::Subcommand))]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Command {
    /// Per-operation counts, bytes, latency (p50/p99/max) and rule hits.
    Stats,
    /// Add a rule, e.g. `slowfs ctl /mnt/slow set "read delay=50ms"`.
    Set {
        /// The rule string (the syntax of `slowfs mount --set`).
        rule: String,
    },
    /// Remove rule ID (see `rules`), or every rule.
    Clear {
        /// The rule id; all rules if omitted.
        id: Option<u64>,
    },
    /// List the rules in force with their ids and hit counts.
    Rules,
    /// Release every request held by a `hang` rule.
    Release,
    /// Power loss now (mounts started with --crash-model strict): the tree
    /// becomes its durable state; handles opened before fail with EIO.
    Crash,
    /// What a crash now would lose: operations not yet durable, paths at risk.
    Durable,
    /// Who serves this mount: process id, mountpoint, whether its session ended.
    Info,
    /// Release every parked request and unmount; the daemon then exits (what
    /// `slowfs umount` asks).
    #[cfg_attr(feature = "cli", command(hide = true))]
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
/// else `/tmp/slowfs-UID`; named after a hash of the canonical mountpoint. Fails
/// when that directory exists but is not private to this user (see
/// [`check_private_dir`]): a socket in a directory another user can write to
/// could be theirs, answering this user's commands.
pub fn default_socket(mountpoint: &Path) -> std::io::Result<PathBuf> {
    let canonical = mountpoint
        .canonicalize()
        .unwrap_or_else(|_| mountpoint.to_path_buf());
    let mut hash: u64 = 0xcbf29ce484222325;
    for byte in canonical.as_os_str().as_encoded_bytes() {
        hash = (hash ^ *byte as u64).wrapping_mul(0x100000001b3);
    }
    let dir = runtime_dir();
    check_private_dir(&dir)?;
    Ok(dir.join(format!("{hash:016x}.sock")))
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

/// A runtime directory is safe when it is missing (it will be created 0700)
/// or is a real directory (not a symlink) owned by this user that no one else
/// can write to (so no one else can put a socket there).
pub fn check_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(with_path(e, "checking", dir)),
    };
    // SAFETY: plain id query.
    let uid = unsafe { libc::geteuid() };
    let problem = if !meta.is_dir() {
        Some("is not a directory (a symlink or a file)".to_string())
    } else if meta.uid() != uid {
        Some(format!(
            "belongs to uid {}, not to you (uid {uid})",
            meta.uid()
        ))
    } else if meta.mode() & 0o022 != 0 {
        Some(format!(
            "has mode {:o}: other users can create files in it",
            meta.mode() & 0o7777
        ))
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "control socket directory {} {problem}; a socket there could be another user's, \
                 answering your commands. Remove it (`rm -r {}`, if it is yours) or point \
                 SLOWFS_RUNTIME_DIR (or XDG_RUNTIME_DIR) at a directory of your own with mode 0700",
                dir.display(),
                dir.display()
            ),
        )),
    }
}

/// A running control server; stops and removes its socket on drop.
#[derive(Debug)]
pub struct ControlServer {
    path: PathBuf,
    /// The socket file's (device, inode): removed on stop only if still ours.
    inode: (u64, u64),
    listener: Arc<UnixListener>,
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
        !crate::unmount::mounted_here(&self.mountpoint, self.connection)
    }
}

/// Makes `path` free for a new control socket. Only a socket may be replaced:
/// one no daemon answers on (a killed daemon's leftover) is removed, and so is
/// one whose daemon says its mount has ended (it is on its way out; the new
/// mount takes the path over at once). A daemon that still serves a mount is
/// refused, and so is anything at `path` that is not a socket.
pub fn claim_socket(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(with_path(e, "checking", path)),
    };
    if !meta.file_type().is_socket() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!(
                "{} exists and is not a socket: refusing to replace it; pass another --ctl-socket",
                path.display()
            ),
        ));
    }
    if UnixStream::connect(path).is_err() {
        // Nobody listens: a stale socket.
        return remove_socket(path);
    }
    let info = request(path, &Command::Info).ok().filter(|r| r.ok);
    let ended = info.as_ref().is_some_and(|r| {
        r.data
            .get("ended")
            .and_then(|e| e.as_bool())
            .unwrap_or(false)
    });
    if ended {
        return remove_socket(path);
    }
    let who = info
        .map(|r| r.message)
        .unwrap_or_else(|| "another slowfs (busy)".into());
    Err(std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        format!(
            "control socket {} is in use by {who}; unmount that one first \
             (`slowfs umount MOUNTPOINT`) or pass another --ctl-socket",
            path.display()
        ),
    ))
}

fn remove_socket(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(with_path(e, "removing the stale socket", path))
        }
        _ => Ok(()),
    }
}

/// Removes sockets in the runtime directory that no daemon listens on any more
/// (left by daemons that were killed). Touches nothing in a directory that is
/// not private to this user.
pub fn sweep_stale_sockets() {
    let dir = runtime_dir();
    if check_private_dir(&dir).is_err() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let socket = entry
            .file_type()
            .is_ok_and(|t| std::os::unix::fs::FileTypeExt::is_socket(&t));
        if socket
            && path.extension().is_some_and(|e| e == "sock")
            && UnixStream::connect(&path).is_err()
        {
            let _ = std::fs::remove_file(&path);
        }
        // An empty staging directory of bind_private, a minute old: a daemon
        // killed after moving its socket out and before removing it (a
        // daemon binding right now has one seconds old, or not empty).
        let stale_staging = entry.file_type().is_ok_and(|t| t.is_dir())
            && entry
                .file_name()
                .to_string_lossy()
                .starts_with(".slowfs-ctl-")
            && entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().unwrap_or_default() > Duration::from_secs(60));
        if stale_staging {
            let _ = std::fs::remove_dir(&path);
        }
    }
}

impl ControlServer {
    /// Creates the socket's directory, private (0700), if it does not exist.
    pub fn prepare_dir(path: &Path) -> std::io::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        if let Some(dir) = path.parent().filter(|dir| !dir.exists()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| with_path(e, "creating", dir))?;
            // The mode is masked by the umask: make sure.
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| with_path(e, "setting the mode of", dir))?;
        }
        Ok(())
    }

    /// Listens on `path` (see [`claim_socket`]) for commands to the mount `served`.
    pub fn start(path: PathBuf, served: Served) -> std::io::Result<ControlServer> {
        use std::os::unix::fs::MetadataExt;
        Self::prepare_dir(&path)?;
        claim_socket(&path)?;
        let listener = bind_private(&path)?;
        let inode = std::fs::symlink_metadata(&path).map(|m| (m.dev(), m.ino()))?;
        let listener = Arc::new(listener);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (stop, listener) = (Arc::clone(&stop), Arc::clone(&listener));
            std::thread::Builder::new()
                .name("slowfs-ctl".into())
                .spawn(move || serve(&listener, served, stop))?
        };
        Ok(ControlServer {
            path,
            inode,
            listener,
            stop,
            thread: Some(thread),
        })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops answering and gives the path up (removing the socket, unless a new
    /// mount has taken it over): a mount at the same place can start at once.
    pub fn stop(&mut self) {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop even when the socket file was deleted: a
        // listening socket shut down makes accept(2) fail at once.
        // SAFETY: shutdown(2) on a socket this server owns.
        unsafe { libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RDWR) };
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let ours =
            std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.inode);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Binds a listening socket at `path` that is mode 0600 from its first moment:
/// bound inside a fresh private directory beside `path` (bind(2) gives the
/// socket the umask's mode, which in a shared directory let another user
/// connect before a chmod), made 0600 there, then renamed into place.
fn bind_private(path: &Path) -> std::io::Result<UnixListener> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let private = tempfile::Builder::new()
        .prefix(".slowfs-ctl-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir_in(parent)
        .map_err(|e| with_path(e, "creating a private directory in", parent))?;
    let staged = private.path().join("sock");
    let listener = UnixListener::bind(&staged).map_err(|e| with_path(e, "binding", &staged))?;
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| with_path(e, "setting the mode of", &staged))?;
    std::fs::rename(&staged, path).map_err(|e| with_path(e, "moving the socket to", path))?;
    Ok(listener)
}

/// Whether the peer of `stream` may control this mount: the daemon's own user
/// or root (SO_PEERCRED, checked on every connection, whatever the socket's mode).
fn peer_allowed(stream: &UnixStream) -> Result<(), String> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let owner = nix::unistd::geteuid().as_raw();
    match getsockopt(stream, PeerCredentials) {
        Ok(cred) if cred.uid() == owner || cred.uid() == 0 => Ok(()),
        Ok(cred) => Err(format!(
            "refused: uid {} may not control this mount (only its owner, uid {owner}, and root may)",
            cred.uid()
        )),
        Err(e) => Err(format!("refused: cannot tell who is connecting ({e})")),
    }
}

fn with_path(e: std::io::Error, doing: &str, path: &Path) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{doing} {}: {e}", path.display()))
}

fn serve(listener: &UnixListener, served: Served, stop: Arc<AtomicBool>) {
    let active = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let overflow = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut stream) = stream else {
            // A shut-down listener fails every accept: do not spin.
            if stop.load(Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        if let Err(refusal) = peer_allowed(&stream) {
            tracing::warn!("control socket: {refusal}");
            let _ = send(&mut stream, &Response::fail(refusal));
            continue;
        }
        let served = served.clone();
        let spawned = if active.fetch_add(1, Ordering::SeqCst) < MAX_CONNECTIONS {
            let active = Arc::clone(&active);
            std::thread::Builder::new()
                .name("slowfs-ctl-conn".into())
                .spawn(move || {
                    let _ = converse(stream, &served);
                    active.fetch_sub(1, Ordering::SeqCst);
                })
        } else {
            active.fetch_sub(1, Ordering::SeqCst);
            // Full: one more request per connection, briefly, so that `info` and
            // `shutdown` (umount) always get through; beyond a second batch, the
            // accept loop itself reads one line for a moment (a client such as
            // `slowfs umount` sends its command at once), so a crowd of idle
            // connections never makes a live daemon look dead.
            if overflow.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
                overflow.fetch_sub(1, Ordering::SeqCst);
                let _ = converse_when_full(stream, &served, Duration::from_millis(100));
                continue;
            }
            let overflow = Arc::clone(&overflow);
            std::thread::Builder::new()
                .name("slowfs-ctl-once".into())
                .spawn(move || {
                    let _ = converse_when_full(stream, &served, Duration::from_secs(2));
                    overflow.fetch_sub(1, Ordering::SeqCst);
                })
        };
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

/// A connection over the limit: one request within `patience`, answered only
/// if it concerns the mount's life (`info`, `shutdown`, `release`), so that
/// `slowfs umount` reaches a daemon whatever its idle connections; else "too many".
fn converse_when_full(
    mut stream: UnixStream,
    served: &Served,
    patience: Duration,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(patience))?;
    let mut line = Vec::new();
    let _ = BufReader::new((&stream).take(4096)).read_until(b'\n', &mut line);
    let response = match serde_json::from_slice::<Command>(&line) {
        Ok(command @ (Command::Info | Command::Shutdown | Command::Release)) => {
            execute_served(served, command)
        }
        _ => Response::fail(format!(
            "too many control connections (at most {MAX_CONNECTIONS} at once); close idle ones and retry"
        )),
    };
    send(&mut stream, &response)
}

/// Answers commands on one connection until it closes or idles for a minute.
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
                crate::unmount::unmount_after_release(
                    &served.mountpoint,
                    served.connection,
                    Duration::from_secs(2),
                )
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
            let mut report = inner.stats.report(inner.plan.report());
            report.parked = inner.scheduler.waiting() as u64;
            report.hung = inner.scheduler.hung() as u64;
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
                    "`{}` rules work on what is durable: they need a mount started with a crash model (--crash-model strict){}",
                    rule.action.keyword(),
                    if inner.is_nfs_client() {
                        ", which --cache nfs cannot have (the crash model must see every write when it is made; the NFS client gathers them)"
                    } else {
                        ""
                    }
                ))
            }
            Ok(rule) => {
                let text = rule.to_string();
                let id = inner.add_rule(rule);
                Response::ok(
                    format!("added rule #{id}: {text}"),
                    serde_json::json!({ "id": id }),
                )
            }
            Err(e) => Response::fail(e.to_string()),
        },
        Command::Clear { id } => {
            let removed = inner.plan.clear(id);
            // The rules' matchers and index were spread over the worker
            // threads' malloc arenas: hand the freed pages back, so that a
            // clear returns the memory the rules took.
            // SAFETY: malloc_trim only releases free memory.
            #[cfg(target_env = "gnu")]
            unsafe {
                libc::malloc_trim(0);
            }
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
                    "{} operation(s) since the mount or last crash; {} not durable; {} path(s) a crash now would change",
                    report.ops,
                    report.pending.len(),
                    report.at_risk.len()
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

/// How long a command waits for the daemon's answer before giving up.
pub const ANSWER_LIMIT: Duration = Duration::from_secs(10);
/// After this long without an answer, a caller is told what it is waiting for.
pub const ANSWER_NOTICE: Duration = Duration::from_secs(1);

/// Sends one command to the mount listening on `socket` and waits for its
/// answer, at most [`ANSWER_LIMIT`].
///
/// The error's kind tells the cases apart: `ConnectionRefused` or `NotFound`
/// when no daemon listens there (a dead mount's leftover, or none), anything
/// else (`TimedOut`, `BrokenPipe`, `InvalidData`) when one accepted the
/// connection and did not answer: it is alive, stopped or busy, not dead.
pub fn request(socket: &Path, command: &Command) -> std::io::Result<Response> {
    request_noting_waits(socket, command, || {})
}

/// [`request`], calling `waiting` once when no answer has come after
/// [`ANSWER_NOTICE`] (the CLI says what it waits for).
pub fn request_noting_waits(
    socket: &Path,
    command: &Command,
    waiting: impl FnOnce(),
) -> std::io::Result<Response> {
    let stream = UnixStream::connect(socket).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!(
                "cannot reach slowfs control socket {}: {e} (is a slowfs mounted there? \
                 `findmnt -t fuse.slowfs` lists mounts)",
                socket.display()
            ),
        )
    })?;
    let silent = |what: String| {
        std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "the daemon at {} accepted the connection but {what} (stopped? \
                 overloaded? `slowfs ctl MOUNTPOINT info` asks again)",
                socket.display()
            ),
        )
    };
    let mut writer = stream.try_clone()?;
    writer.set_write_timeout(Some(ANSWER_LIMIT))?;
    let mut text = serde_json::to_string(command).expect("commands serialize");
    text.push('\n');
    let sent = writer.write_all(text.as_bytes());
    if let Err(e) = &sent {
        // A daemon that refuses a connection (another user's, or too many)
        // answers and closes before reading: its answer is still there to read.
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            stream.set_read_timeout(Some(ANSWER_NOTICE))?;
            let mut line = Vec::new();
            let _ = BufReader::new(&stream).read_until(b'\n', &mut line);
            if let Ok(answer) = serde_json::from_slice::<Response>(&line) {
                return Ok(answer);
            }
        }
    }
    sent.map_err(|e| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            silent(format!("took no request in {} s", ANSWER_LIMIT.as_secs()))
        }
        _ => std::io::Error::new(
            e.kind(),
            format!("sending to the daemon at {}: {e}", socket.display()),
        ),
    })?;
    stream.set_read_timeout(Some(ANSWER_NOTICE))?;
    let started = std::time::Instant::now();
    let mut waiting = Some(waiting);
    let mut reader = BufReader::new((&stream).take(MAX_LINE as u64 * 64));
    let mut line = Vec::new();
    loop {
        match reader.read_until(b'\n', &mut line) {
            Ok(_) => break,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                if started.elapsed() >= ANSWER_LIMIT {
                    return Err(silent(format!(
                        "sent no answer in {} s",
                        ANSWER_LIMIT.as_secs()
                    )));
                }
                if let Some(waiting) = waiting.take() {
                    waiting();
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    serde_json::from_slice(&line).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("bad answer from {}: {e}", socket.display()),
        )
    })
}

/// Whether a [`request`] error means that no daemon listens on the socket
/// (as opposed to one that is alive but did not answer).
pub fn nobody_listens(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound
    )
}

//! The daemon side: a thread accepting connections on a mount's socket and
//! answering each line; commands about the mount's life (info, shutdown)
//! here, the rest in `execute`.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::fs::Controls;

use super::execute::execute;
use super::protocol::{Command, Response, MAX_CONNECTIONS, MAX_LINE};
use super::sockets::{bind_private, claim_socket, peer_allowed, with_path};

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
    /// What the socket may do to the mount.
    pub controls: Controls,
    /// Where it is mounted.
    pub mountpoint: PathBuf,
    /// The FUSE connection's device, for aborting it.
    pub connection: Option<u64>,
}

impl Served {
    /// Whether the mount is gone from the mount table (unmounted, also from outside).
    fn ended(&self) -> bool {
        !crate::mount::unmount::mounted_here(&self.mountpoint, self.connection)
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
            let parked = served.controls.waiting();
            // Parked requests answer at once, so nothing waits on a fault.
            served.controls.drain(Duration::from_secs(2));
            let unmounted = if served.ended() {
                Ok(())
            } else {
                crate::mount::unmount::unmount_after_release(
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
        command => execute(&served.controls, command),
    }
}

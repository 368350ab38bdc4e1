//! `cmd:COMMAND`: an engine in another process (any language), spoken to over the
//! driver protocol (`docs/driver-protocol.md`): JSON lines on the driver's stdin and
//! stdout, a versioned handshake declaring capabilities, ids on every request,
//! `cancel` for dropped operations, and the driver's own event-loop lag.
//!
//! A driver cannot hang the runner: every request has a timeout, and a driver that
//! exits or prints something that is not a protocol line fails every pending and
//! later request with what it printed on stderr.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::engine::{BufResult, CancelAnswer, Engine, EngineFile, Metadata, OpenOptions};
use crate::lag::LagReport;
use crate::Capability;

/// The protocol version this runner speaks.
pub const PROTOCOL_VERSION: u64 = 1;

/// How long a driver may take to send its handshake line (an interpreter
/// starting, a JIT warming up) before it is killed and reported;
/// `SLOWFS_DRIVER_HANDSHAKE_SECS` changes it.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

fn handshake_timeout() -> Duration {
    std::env::var("SLOWFS_DRIVER_HANDSHAKE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(HANDSHAKE_TIMEOUT, Duration::from_secs)
}

/// Longest a request may take before the runner gives up on it (30 s, or
/// `SLOWFS_DRIVER_TIMEOUT_MS`).
pub fn request_timeout() -> Duration {
    std::env::var("SLOWFS_DRIVER_TIMEOUT_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map_or(Duration::from_secs(30), Duration::from_millis)
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, io::Error>>>>>;
/// The last request the caller dropped, and how the driver answered it.
type LastCancel = Arc<Mutex<Option<(u64, CancelAnswer)>>>;

#[derive(Debug)]
struct Driver {
    handshake: Handshake,
    stdin: Mutex<ChildStdin>,
    child: Mutex<Child>,
    pending: Pending,
    last_cancel: LastCancel,
    /// Per file handle, its last request that was cancelled: the next request
    /// on that handle waits for its answer (docs/driver-protocol.md).
    cancelled_on: Mutex<HashMap<u64, u64>>,
    dead: Arc<Mutex<Option<String>>>,
    next: AtomicU64,
    stderr: tempfile::NamedTempFile,
}

/// What a driver's first line declares.
#[derive(Debug, Clone)]
struct Handshake {
    /// The library's name in the matrix and in expectations files.
    engine: String,
    /// What it can do; `positioned` unless it said `"positioned": false`.
    capabilities: BTreeSet<Capability>,
    /// Why it lacks a capability, where it says.
    unsupported: BTreeMap<Capability, String>,
    /// Its event loop's thread id, where it says (checked to be the driver's).
    loop_thread: Option<u32>,
}

impl Handshake {
    /// Reads a handshake; every capability name must be a known one. `driver_pid`
    /// is the process the runner started: a declared loop thread must be one of
    /// its threads or of its descendants'.
    fn parse(hello: &Value, driver_pid: u32) -> Result<Handshake, String> {
        let names = |field: &str, value: &Value| -> Result<Vec<(Capability, Value)>, String> {
            let pairs: Vec<(String, Value)> = match value {
                Value::Null => Vec::new(),
                Value::Array(items) => items
                    .iter()
                    .map(|c| match c.as_str() {
                        Some(name) => Ok((name.to_string(), Value::Null)),
                        None => Err(format!("`{field}` holds {c}, not a capability name")),
                    })
                    .collect::<Result<_, _>>()?,
                Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                other => return Err(format!("`{field}` is {other}, not a list of names")),
            };
            pairs
                .into_iter()
                .map(|(name, value)| {
                    name.parse::<Capability>()
                        .map(|cap| (cap, value))
                        .map_err(|e| format!("declares {e} in `{field}`"))
                })
                .collect()
        };
        let mut capabilities: BTreeSet<Capability> = names("capabilities", &hello["capabilities"])?
            .into_iter()
            .map(|(cap, _)| cap)
            .collect();
        if capabilities.contains(&Capability::ReadAt) && hello["positioned"] != Value::Bool(false) {
            capabilities.insert(Capability::Positioned);
        } else if hello["positioned"] == Value::Bool(false) {
            capabilities.remove(&Capability::Positioned);
        }
        let unsupported = names("unsupported", &hello["unsupported"])?
            .into_iter()
            .map(|(cap, why)| (cap, why.as_str().unwrap_or_default().to_string()))
            .collect();
        let loop_thread = match &hello["loop_thread"] {
            Value::Null => None,
            tid => {
                let tid = tid
                    .as_u64()
                    .and_then(|t| u32::try_from(t).ok())
                    .ok_or_else(|| format!("`loop_thread` is {tid}, not a thread id"))?;
                if !thread_of(tid, driver_pid) {
                    return Err(format!(
                        "declares `loop_thread` {tid}, which is no thread of the driver (pid {driver_pid}) or its children: send the event loop thread's id (Python: threading.get_native_id() on the loop's thread; Node: process.pid)"
                    ));
                }
                Some(tid)
            }
        };
        Ok(Handshake {
            engine: hello["engine"].as_str().unwrap_or("external").to_string(),
            capabilities,
            unsupported,
            loop_thread,
        })
    }
}

/// Whether thread `tid` belongs to process `ancestor` or to one of its descendants.
fn thread_of(tid: u32, ancestor: u32) -> bool {
    let field = |pid: u32, key: &str| -> Option<u32> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
    };
    let Some(mut pid) = field(tid, "Tgid:") else {
        return false;
    };
    for _ in 0..64 {
        if pid == ancestor {
            return true;
        }
        match field(pid, "PPid:") {
            Some(parent) if parent > 1 => pid = parent,
            _ => return false,
        }
    }
    false
}

/// An out-of-process engine.
#[derive(Debug, Clone)]
pub struct ExternalEngine {
    driver: Arc<Driver>,
}

fn stderr_tail(file: &tempfile::NamedTempFile) -> String {
    let text = std::fs::read_to_string(file.path()).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

impl ExternalEngine {
    /// Starts `command` (run by `sh -c`) and reads its handshake.
    pub fn start(command: &str) -> io::Result<ExternalEngine> {
        let stderr = tempfile::NamedTempFile::new()?;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr.reopen()?)
            .spawn()
            .map_err(|e| {
                io::Error::new(e.kind(), format!("cannot start driver `{command}`: {e}"))
            })?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        // The first line on a thread, so that a silent driver cannot hold the
        // run: after the timeout it is killed, which ends the read.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("driver-handshake".into())
            .spawn(move || {
                let mut stdout = stdout;
                let mut hello = String::new();
                let read = stdout.read_line(&mut hello);
                let _ = tx.send(read.map(|_| (stdout, hello)));
            })?;
        let timeout = handshake_timeout();
        let read = rx.recv_timeout(timeout);
        let bad = |child: &mut Child, why: String| {
            // A driver that failed its handshake is not left running.
            kill_tree(child);
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "driver `{command}` {why}; its stderr:\n{}",
                    stderr_tail(&stderr)
                ),
            )
        };
        let (stdout, hello) = match read {
            Ok(Ok(read)) => read,
            Ok(Err(e)) => return Err(bad(&mut child, format!("could not be read: {e}"))),
            Err(_) => {
                return Err(bad(
                    &mut child,
                    format!(
                        "sent no handshake line within {} s (is it a slowfs driver? its first \
                         line must be {{\"hello\": \"slowfs-driver\", ...}}: docs/driver-protocol.md)",
                        timeout.as_secs()
                    ),
                ))
            }
        };
        let hello: Value = match serde_json::from_str(hello.trim()) {
            Ok(hello) => hello,
            Err(_) => {
                let why = format!(
                    "did not start with a handshake line (got {:?})",
                    hello.trim()
                );
                return Err(bad(&mut child, why));
            }
        };
        if hello["hello"] != "slowfs-driver" {
            return Err(bad(
                &mut child,
                format!("sent {hello} instead of a handshake"),
            ));
        }
        if hello["version"] != PROTOCOL_VERSION {
            let why = format!(
                "speaks protocol version {} (this runner speaks {PROTOCOL_VERSION})",
                hello["version"]
            );
            return Err(bad(&mut child, why));
        }
        let handshake = match Handshake::parse(&hello, child.id()) {
            Ok(handshake) => handshake,
            Err(why) => return Err(bad(&mut child, why)),
        };
        let pending: Pending = Arc::default();
        let last_cancel: LastCancel = Arc::default();
        let dead = Arc::new(Mutex::new(None));
        {
            let (pending, last_cancel, dead) = (
                Arc::clone(&pending),
                Arc::clone(&last_cancel),
                Arc::clone(&dead),
            );
            std::thread::Builder::new()
                .name("driver-reader".into())
                .spawn(move || read_responses(stdout, pending, last_cancel, dead))?;
        }
        Ok(ExternalEngine {
            driver: Arc::new(Driver {
                handshake,
                stdin: Mutex::new(stdin),
                child: Mutex::new(child),
                pending,
                last_cancel,
                cancelled_on: Mutex::default(),
                dead,
                next: AtomicU64::new(1),
                stderr,
            }),
        })
    }

    async fn call(&self, op: &str, mut args: Value) -> io::Result<Value> {
        let driver = &self.driver;
        if let Some(why) = driver.dead.lock().unwrap().clone() {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                format!("{why}\n{}", stderr_tail(&driver.stderr)),
            ));
        }
        let file = args.get("file").and_then(Value::as_u64);
        if let Some(file) = file {
            driver.await_cancelled_answer(file).await;
        }
        let id = driver.next.fetch_add(1, Ordering::Relaxed);
        let asked = describe(op, &args);
        args["id"] = json!(id);
        args["op"] = json!(op);
        let (tx, rx) = oneshot::channel();
        driver.pending.lock().unwrap().insert(id, tx);
        let mut line = args.to_string();
        line.push('\n');
        if let Err(e) = driver.stdin.lock().unwrap().write_all(line.as_bytes()) {
            driver.pending.lock().unwrap().remove(&id);
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "writing to the driver: {e}\n{}",
                    stderr_tail(&driver.stderr)
                ),
            ));
        }
        let guard = CancelOnDrop {
            driver: Arc::clone(driver),
            id,
            file,
            armed: true,
        };
        let timeout = request_timeout();
        let result = tokio::time::timeout(timeout, rx).await;
        let mut guard = guard;
        guard.armed = false;
        match result {
            Ok(Ok(result)) => result.map_err(|e| {
                if e.kind() == io::ErrorKind::BrokenPipe {
                    io::Error::new(
                        e.kind(),
                        format!("{e}; driver stderr:\n{}", stderr_tail(&driver.stderr)),
                    )
                } else {
                    e
                }
            }),
            Ok(Err(_)) => Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                format!("driver died\n{}", stderr_tail(&driver.stderr)),
            )),
            Err(_) => {
                driver.pending.lock().unwrap().remove(&id);
                driver.send_cancel(id);
                // A driver that leaves a request unanswered this long is
                // broken for the rest of the cell: every other request fails
                // now, naming this one, instead of each waiting its own
                // timeout until the cell's time runs out.
                let why = format!(
                    "the driver left request #{id} {asked} unanswered for {} s \
                     (SLOWFS_DRIVER_TIMEOUT_MS); no later request was sent to it",
                    timeout.as_secs_f64()
                );
                *driver.dead.lock().unwrap() = Some(why.clone());
                for (_, tx) in driver.pending.lock().unwrap().drain() {
                    let _ = tx.send(Err(io::Error::new(io::ErrorKind::TimedOut, why.clone())));
                }
                Err(io::Error::new(io::ErrorKind::TimedOut, why))
            }
        }
    }
}

/// A request as people read it: `write_at {"file":3,"offset":0,"data":"<512 bytes>"}`.
fn describe(op: &str, args: &Value) -> String {
    let mut shown = args.clone();
    if let Some(data) = shown.get_mut("data") {
        let bytes = data.as_str().map_or(0, |b64| b64.len() / 4 * 3);
        *data = json!(format!("<~{bytes} bytes>"));
    }
    format!("`{op}` {shown}")
}

impl Driver {
    /// Waits (at most the request timeout) until the driver has answered the
    /// last cancelled request on `file`, so that no request on a handle
    /// overtakes a cancelled one still in flight (a `close` sent while a
    /// cancelled `write_at` runs would pull the handle from under it).
    async fn await_cancelled_answer(&self, file: u64) {
        let Some(id) = self.cancelled_on.lock().unwrap().remove(&file) else {
            return;
        };
        let deadline = tokio::time::Instant::now() + request_timeout();
        while self.pending.lock().unwrap().contains_key(&id)
            && self.dead.lock().unwrap().is_none()
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    fn send_cancel(&self, id: u64) {
        let line = format!("{}\n", json!({ "cancel": id }));
        let _ = self.stdin.lock().unwrap().write_all(line.as_bytes());
    }
}

/// Sends `cancel` when the caller drops an operation before its answer.
struct CancelOnDrop {
    driver: Arc<Driver>,
    id: u64,
    /// The file handle the request is on, if any.
    file: Option<u64>,
    armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.armed {
            // Keep the pending entry: the op is in flight in the driver until it
            // answers (cancelled or done), which keeps in_flight() honest.
            *self.driver.last_cancel.lock().unwrap() = Some((self.id, CancelAnswer::Pending));
            if let Some(file) = self.file {
                self.driver
                    .cancelled_on
                    .lock()
                    .unwrap()
                    .insert(file, self.id);
            }
            self.driver.send_cancel(self.id);
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Ok(mut child) = self.child.lock() {
            kill_tree(&mut child);
        }
    }
}

/// Kills a driver and what it started (`sh -c` may have forked the real
/// driver instead of becoming it), then reaps it.
fn kill_tree(child: &mut Child) {
    fn descendants(pid: u32, found: &mut Vec<u32>) {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task"));
        for task in tasks.into_iter().flatten().flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                found.push(child);
                descendants(child, found);
            }
        }
    }
    let mut found = Vec::new();
    descendants(child.id(), &mut found);
    let _ = child.kill();
    for pid in found {
        // SAFETY: kill(2) with a pid read from /proc; at worst it is gone.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    }
    let _ = child.wait();
}

fn read_responses(
    stdout: BufReader<std::process::ChildStdout>,
    pending: Pending,
    last_cancel: LastCancel,
    dead: Arc<Mutex<Option<String>>>,
) {
    let fail_all = |why: String| {
        *dead.lock().unwrap() = Some(why.clone());
        for (_, tx) in pending.lock().unwrap().drain() {
            let _ = tx.send(Err(io::Error::new(io::ErrorKind::BrokenPipe, why.clone())));
        }
    };
    for line in stdout.lines() {
        let Ok(line) = line else { break };
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            fail_all(format!(
                "driver printed a line that is not protocol JSON: {line:?}"
            ));
            return;
        };
        let Some(id) = message["id"].as_u64() else {
            fail_all(format!("driver sent a message without an id: {line}"));
            return;
        };
        if let Some((cancelled, answer)) = &mut *last_cancel.lock().unwrap() {
            if *cancelled == id {
                *answer = if message["err"] == "cancelled" {
                    CancelAnswer::Cancelled
                } else {
                    CancelAnswer::Completed
                };
            }
        }
        let Some(tx) = pending.lock().unwrap().remove(&id) else {
            continue;
        };
        let result = if message.get("ok").is_some() {
            Ok(message["ok"].clone())
        } else {
            let errno = message["errno"].as_i64().unwrap_or(0) as i32;
            let text = message["message"].as_str().unwrap_or("").to_string();
            Err(if errno > 0 {
                io::Error::from_raw_os_error(errno)
            } else if message["err"] == "unsupported" {
                io::Error::new(io::ErrorKind::Unsupported, text)
            } else if message["err"] == "cancelled" {
                io::Error::new(io::ErrorKind::Interrupted, "cancelled")
            } else {
                io::Error::other(format!("{}: {text}", message["err"]))
            })
        };
        let _ = tx.send(result);
    }
    fail_all("driver exited".into());
}

/// Copies a read's base64 `data` into the caller's buffer; returns the count the
/// driver reported (more than fits is the driver's lie, left for the suites to see).
fn fill(buf: &mut [u8], value: &Value) -> usize {
    let data = value["data"]
        .as_str()
        .and_then(|d| STANDARD.decode(d).ok())
        .unwrap_or_default();
    let n = data.len().min(buf.len());
    buf[..n].copy_from_slice(&data[..n]);
    data.len()
}

/// A file open in a driver.
#[derive(Debug)]
pub struct ExternalFile {
    engine: ExternalEngine,
    handle: u64,
}

impl EngineFile for ExternalFile {
    async fn read_at(&self, mut buf: Vec<u8>, offset: u64) -> BufResult {
        let result = self
            .engine
            .call(
                "read_at",
                json!({ "file": self.handle, "offset": offset, "len": buf.len() }),
            )
            .await
            .map(|v| fill(&mut buf, &v));
        (result, buf)
    }

    async fn read(&self, mut buf: Vec<u8>) -> BufResult {
        let result = self
            .engine
            .call("read", json!({ "file": self.handle, "len": buf.len() }))
            .await
            .map(|v| fill(&mut buf, &v));
        (result, buf)
    }

    async fn write_at(&self, buf: Vec<u8>, offset: u64) -> BufResult {
        let result = self
            .engine
            .call(
                "write_at",
                json!({ "file": self.handle, "offset": offset, "data": STANDARD.encode(&buf) }),
            )
            .await
            .map(|v| v["n"].as_u64().unwrap_or(0) as usize);
        (result, buf)
    }

    async fn fsync(&self) -> io::Result<()> {
        self.engine
            .call("fsync", json!({ "file": self.handle }))
            .await
            .map(drop)
    }

    async fn fdatasync(&self) -> io::Result<()> {
        self.engine
            .call("fdatasync", json!({ "file": self.handle }))
            .await
            .map(drop)
    }

    async fn set_len(&self, len: u64) -> io::Result<()> {
        self.engine
            .call("set_len", json!({ "file": self.handle, "len": len }))
            .await
            .map(drop)
    }

    async fn metadata(&self) -> io::Result<Metadata> {
        let v = self
            .engine
            .call("metadata", json!({ "file": self.handle }))
            .await?;
        Ok(Metadata {
            len: v["len"].as_u64().unwrap_or(0),
        })
    }

    async fn close(self) -> io::Result<()> {
        self.engine
            .call("close", json!({ "file": self.handle }))
            .await
            .map(drop)
    }
}

impl Engine for ExternalEngine {
    type File = ExternalFile;

    fn name(&self) -> &str {
        &self.driver.handshake.engine
    }

    async fn open(&self, path: &Path, options: &OpenOptions) -> io::Result<ExternalFile> {
        let v = self
            .call(
                "open",
                json!({
                    "path": path,
                    "read": options.read, "write": options.write, "create": options.create,
                    "truncate": options.truncate, "append": options.append, "create_new": options.create_new,
                }),
            )
            .await?;
        Ok(ExternalFile {
            engine: self.clone(),
            handle: v["file"].as_u64().unwrap_or(0),
        })
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.call("rename", json!({ "from": from, "to": to }))
            .await
            .map(drop)
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.call("remove_file", json!({ "path": path }))
            .await
            .map(drop)
    }

    async fn create_dir(&self, path: &Path) -> io::Result<()> {
        self.call("create_dir", json!({ "path": path }))
            .await
            .map(drop)
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.call("sync_dir", json!({ "path": path }))
            .await
            .map(drop)
    }

    async fn copy(&self, from: &Path, to: &Path) -> io::Result<u64> {
        let v = self.call("copy", json!({ "from": from, "to": to })).await?;
        Ok(v["n"].as_u64().unwrap_or(0))
    }

    fn in_flight(&self) -> usize {
        self.driver.pending.lock().unwrap().len()
    }

    fn last_cancel(&self) -> Option<CancelAnswer> {
        let last = *self.driver.last_cancel.lock().unwrap();
        Some(last.map_or(CancelAnswer::Completed, |(_, answer)| answer))
    }

    fn supports(&self, capability: Capability) -> bool {
        self.driver.handshake.capabilities.contains(&capability)
    }

    fn unsupported_reason(&self, capability: Capability) -> Option<String> {
        self.driver.handshake.unsupported.get(&capability).cloned()
    }

    fn own_loop_thread(&self) -> Option<u32> {
        self.driver.handshake.loop_thread
    }

    async fn own_loop_lag(&self, reset: bool) -> Option<LagReport> {
        let v = self.call("lag", json!({ "reset": reset })).await.ok()?;
        let mut report = LagReport::new(
            v["samples"].as_u64().unwrap_or(0),
            v["p50_ms"].as_f64().unwrap_or(0.0),
            v["p99_ms"].as_f64().unwrap_or(0.0),
            v["max_ms"].as_f64().unwrap_or(0.0),
        );
        report.late_ms = v["late_ms"]
            .as_array()
            .map(|late| late.iter().filter_map(Value::as_f64).collect());
        Some(report)
    }
}

//! The `slowfs ctl` side: one command, one answer, in bounded time.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use super::protocol::{Command, Response, MAX_LINE};

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

//! Running the checker on one crash state: a fresh `sh -c CHECK` per state, or a
//! persistent checker process that takes state directories on stdin, one per line,
//! so that an interpreter's start-up is paid once. Both run with the state
//! directory as working directory and are bounded by a timeout.
//!
//! Checkers run in process groups of their own: a Ctrl-C at the terminal goes
//! to slowfs, which stops them itself ([`Running::stop_all`]) and does not
//! count what a stopped checker said.

use std::collections::HashSet;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use slowfs_faults::crash::report::CHECKER_TIMED_OUT;

/// The checker processes running now, by process group.
#[derive(Debug, Clone, Default)]
pub struct Running(Arc<Mutex<HashSet<i32>>>);

impl Running {
    fn add(&self, pid: u32) {
        self.0.lock().unwrap().insert(pid as i32);
    }

    fn remove(&self, pid: u32) {
        self.0.lock().unwrap().remove(&(pid as i32));
    }

    /// Kills every running checker (and what it started).
    pub fn stop_all(&self) {
        for pgid in self.0.lock().unwrap().drain() {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// What the checker said about a state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    /// It accepts the state.
    Accepted,
    /// It rejects it: exit status (or -1 for a persistent checker) and its words.
    Rejected(i32, String),
}

/// Where a state is and which crash point it belongs to.
pub struct StateRef<'a> {
    /// The materialised state.
    pub dir: &'a Path,
    /// Crash after this many operations.
    pub crash_point: usize,
    /// Operations recorded in all.
    pub ops: usize,
}

/// A checker, ready to judge states one after another (one per worker thread).
pub enum Checker {
    /// `sh -c CHECK` for every state.
    OneShot {
        /// The command.
        check: String,
        /// Longest a run may take.
        timeout: Duration,
        /// Where its output goes while it runs (outside the state).
        log: std::path::PathBuf,
        /// Where its process is registered while it runs.
        running: Running,
    },
    /// One long-lived `sh -c CHECK` answering a line per state.
    Persistent(Box<Persistent>),
}

/// A persistent checker process and the lines it prints.
pub struct Persistent {
    check: String,
    timeout: Duration,
    running: Running,
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Persistent {
    fn start(check: &str, timeout: Duration, running: &Running) -> io::Result<Persistent> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(check)
            .env("SLOWFS_PERSISTENT", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()?;
        running.add(child.id());
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Persistent {
            check: check.to_string(),
            timeout,
            running: running.clone(),
            child,
            stdin,
            lines,
        })
    }

    fn judge(&mut self, state: &StateRef) -> io::Result<Judgement> {
        let request = format!(
            "{}\t{}\t{}\n",
            state.dir.display(),
            state.crash_point,
            state.ops
        );
        if self.stdin.write_all(request.as_bytes()).is_err() {
            return self.restart("the persistent checker exited");
        }
        let _ = self.stdin.flush();
        match self.lines.recv_timeout(self.timeout) {
            Ok(line)
                if line.trim() == "ok" || line.starts_with("ok\t") || line.starts_with("ok ") =>
            {
                Ok(Judgement::Accepted)
            }
            Ok(line) => Ok(Judgement::Rejected(-1, line)),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let verdict = Judgement::Rejected(
                    124,
                    format!("{CHECKER_TIMED_OUT} {:?} (restarted)", self.timeout),
                );
                self.restart("")?;
                Ok(verdict)
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                self.restart("the persistent checker exited without answering")
            }
        }
    }

    fn restart(&mut self, why: &str) -> io::Result<Judgement> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.running.remove(self.child.id());
        *self = Persistent::start(&self.check, self.timeout, &self.running)?;
        Ok(Judgement::Rejected(-1, why.to_string()))
    }
}

impl Drop for Persistent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.running.remove(self.child.id());
    }
}

impl Checker {
    /// A checker; `scratch` is a directory of the worker's own, outside states;
    /// its processes are registered in `running` while they run.
    pub fn new(
        check: &str,
        persistent: bool,
        timeout: Duration,
        scratch: &Path,
        running: &Running,
    ) -> io::Result<Checker> {
        if persistent {
            Ok(Checker::Persistent(Box::new(Persistent::start(
                check, timeout, running,
            )?)))
        } else {
            Ok(Checker::OneShot {
                check: check.to_string(),
                timeout,
                log: scratch.join("checker-output"),
                running: running.clone(),
            })
        }
    }

    /// Judges one state. An error means the checker cannot run at all.
    pub fn judge(&mut self, state: &StateRef) -> io::Result<Judgement> {
        match self {
            Checker::Persistent(p) => p.judge(state),
            Checker::OneShot {
                check,
                timeout,
                log,
                running,
            } => one_shot(check, *timeout, log, state, running),
        }
    }
}

fn one_shot(
    check: &str,
    timeout: Duration,
    log: &Path,
    state: &StateRef,
    running: &Running,
) -> io::Result<Judgement> {
    let output = std::fs::File::create(log)?;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(check)
        .current_dir(state.dir)
        .env("SLOWFS_STATE", state.dir)
        .env("SLOWFS_CRASH_POINT", state.crash_point.to_string())
        .env("SLOWFS_OPS", state.ops.to_string())
        .stdin(Stdio::null())
        .stdout(output.try_clone()?)
        .stderr(output)
        .process_group(0)
        .spawn()?;
    running.add(child.id());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if started.elapsed() > timeout {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_micros(200));
    };
    running.remove(child.id());
    let text = std::fs::read_to_string(log)
        .unwrap_or_default()
        .trim()
        .to_string();
    let Some(status) = status else {
        return Ok(Judgement::Rejected(
            124,
            format!("{CHECKER_TIMED_OUT} {timeout:?}\n{text}"),
        ));
    };
    let code = status.code().unwrap_or(128);
    if code == 126 || code == 127 {
        return Err(io::Error::other(format!(
            "the checker cannot start (sh exit {code}): {text}"
        )));
    }
    Ok(if status.success() {
        Judgement::Accepted
    } else {
        Judgement::Rejected(code, text)
    })
}

/// The checker command with a relative program path made absolute against
/// `cwd`, the directory `slowfs explore` was started in: the checker runs in
/// each state's directory, where `./check.sh` would name nothing, but the
/// user wrote it meaning the file beside them. Only a first word that names
/// an existing file there is changed; anything else is left to the shell.
pub fn anchored_to(check: &str, cwd: &Path) -> String {
    let trimmed = check.trim_start();
    let first = trimmed.split_whitespace().next().unwrap_or_default();
    let relative_path = first.contains('/') && !first.starts_with('/');
    let quoted_or_shell = first.contains(['\'', '"', '$', '`', '\\', '=']);
    if !relative_path || quoted_or_shell || !cwd.join(first).is_file() {
        return check.to_string();
    }
    // components() drops the `.` of `./check.sh`.
    let absolute: std::path::PathBuf = cwd.join(first).components().collect();
    let shown = absolute.to_string_lossy().replace('\'', "'\\''");
    format!("'{shown}'{}", &trimmed[first.len()..])
}

#[cfg(test)]
mod tests {
    use super::anchored_to;

    #[test]
    fn a_relative_checker_means_the_file_beside_the_user() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("check.sh"), "exit 0").unwrap();
        let here = dir.path();
        let abs = format!("'{}'", here.join("check.sh").display());
        assert_eq!(anchored_to("./check.sh", here), abs);
        assert_eq!(
            anchored_to("./check.sh --strict x", here),
            format!("{abs} --strict x")
        );
        // Not a file here, absolute, a plain command or shell syntax: unchanged.
        assert_eq!(anchored_to("./missing.sh", here), "./missing.sh");
        assert_eq!(anchored_to("/bin/true", here), "/bin/true");
        assert_eq!(anchored_to("python3 check.py", here), "python3 check.py");
        assert_eq!(anchored_to("X=1 ./check.sh", here), "X=1 ./check.sh");
    }
}

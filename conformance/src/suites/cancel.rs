//! `cancel`: operations dropped (by a timeout) while slowfs delays or hangs them.
//! After the cancel, the hang is released and the suite checks: the operation
//! drains from the engine (nothing left in flight), no fd is leaked, no buffer the
//! caller got back afterwards changes (an engine that recycles a cancelled op's
//! buffer while the kernel still writes into it is caught), each byte of a
//! cancelled write's range is old or new, and the engine still works.
//!
//! Engines that answer a cancel (drivers: `{"cancel": ID}`) make a claim the suite
//! checks: a cancelled request held by a `hang` must be answered within
//! `ANSWER_WITHIN` (`cancelled`, or its result if it finished first), and a
//! write answered `cancelled` must not land afterwards (a *ghost write*: the
//! library reported the write undone while a thread still carried it out).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use slowfs_harness::{CancelAnswer, Engine, EngineFile, OpenOptions};

use super::{ensure, mount};
use crate::proptest_run::check;
use crate::{outcome, Outcome, SuiteConfig, Verdict};

const OLD: u8 = 0x11;
const NEW: u8 = 0x22;
const FILE: usize = 64 << 10;
/// How long a driver may take to answer a cancelled request that slowfs holds.
const ANSWER_WITHIN: Duration = Duration::from_secs(1);

/// One case: what to cancel, how it is stalled, when to give up on it.
#[derive(Debug, Clone)]
pub struct Case {
    write: bool,
    hang: bool,
    cancel_after_ms: u64,
    len: usize,
}

fn case() -> impl Strategy<Value = Case> {
    (any::<bool>(), any::<bool>(), 0u64..40, 1usize..FILE).prop_map(
        |(write, hang, cancel_after_ms, len)| Case {
            write,
            hang,
            cancel_after_ms,
            len,
        },
    )
}

fn open_fds() -> usize {
    fds().len()
}

fn fds() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    let mut fds: Vec<String> = dir
        .filter_map(|e| e.ok())
        .map(|e| {
            let target = std::fs::read_link(e.path())
                .map(|t| t.display().to_string())
                .unwrap_or_default();
            format!("{}={target}", e.file_name().to_string_lossy())
        })
        .collect();
    fds.sort();
    fds
}

/// Runs the suite.
pub fn run<E: Engine>(engine: Arc<E>, config: &SuiteConfig) -> Outcome {
    let mount = match mount(config, &[]) {
        Ok(m) => m,
        Err(verdict) => return outcome(verdict, 0),
    };
    let rt = crate::runtime();
    if let Some(reason) = rt.block_on(cannot_cancel(&*engine, &mount)) {
        return outcome(
            Verdict::Fail {
                reason: format!("the engine declares `cancel`, but {reason}"),
                trace: "  read_at 5 bytes, delayed 500 ms by slowfs, dropped after 20 ms: the drop waited for the read".into(),
            },
            1,
        );
    }
    let n = AtomicU64::new(0);
    check(
        config.seed,
        config.cases,
        case(),
        |c| {
            format!(
                "  {} {} bytes at 0, {} by slowfs, dropped after {} ms; release; check",
                if c.write { "write_at" } else { "read_at" },
                c.len,
                if c.hang { "hung" } else { "delayed 100 ms" },
                c.cancel_after_ms
            )
        },
        |c| {
            let name = format!("cancel-{}", n.fetch_add(1, Ordering::Relaxed));
            rt.block_on(one_case(&*engine, &mount, &name, c))
        },
    )
}

/// If an operation cannot be dropped mid-flight (it runs to completion on the
/// runtime thread), there is nothing to check: the suite does not apply.
async fn cannot_cancel<E: Engine>(
    engine: &E,
    mount: &slowfs::fixture::SlowMount,
) -> Option<String> {
    std::fs::write(mount.backing_path("probe"), b"probe").ok()?;
    let rule = mount.set("read path=probe delay=500ms").ok()?;
    let file = engine
        .open(&mount.path("probe"), &OpenOptions::read())
        .await
        .ok()?;
    let start = std::time::Instant::now();
    let _ = tokio::time::timeout(Duration::from_millis(20), file.read_at(vec![0; 5], 0)).await;
    let waited = start.elapsed();
    mount.clear(Some(rule));
    let _ = file.close().await;
    (waited >= Duration::from_millis(400)).then(|| {
        "its operations cannot be cancelled: they run to completion on the runtime thread (declare no `cancel`, with the reason)".to_string()
    })
}

/// Clears a case's stall rule and releases what it holds, on every exit.
struct Unstall<'a> {
    mount: &'a slowfs::fixture::SlowMount,
    rule: u64,
}

impl Drop for Unstall<'_> {
    fn drop(&mut self) {
        self.mount.clear(Some(self.rule));
        self.mount.release();
    }
}

/// For engines that answer cancels: waits (up to [`ANSWER_WITHIN`] when slowfs
/// holds the request, else for the answer itself) and says how it was answered.
async fn cancel_answer<E: Engine>(engine: &E, held: bool) -> Option<CancelAnswer> {
    let start = std::time::Instant::now();
    let limit = if held {
        ANSWER_WITHIN
    } else {
        Duration::from_secs(5)
    };
    loop {
        let answer = engine.last_cancel()?;
        if answer != CancelAnswer::Pending || start.elapsed() >= limit {
            return Some(answer);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn one_case<E: Engine>(
    engine: &E,
    mount: &slowfs::fixture::SlowMount,
    name: &str,
    c: &Case,
) -> Result<(), String> {
    std::fs::write(mount.backing_path(name), vec![OLD; FILE]).map_err(|e| e.to_string())?;
    std::fs::write(mount.backing_path("plain"), vec![0x77u8; FILE]).map_err(|e| e.to_string())?;
    let op = if c.write { "write" } else { "read" };
    let stall = if c.hang {
        "hang".to_string()
    } else {
        "delay=100ms".to_string()
    };
    let rule = mount
        .set(&format!("{op} path={name} {stall}"))
        .map_err(|e| e.to_string())?;
    // A case that fails early must not leave its hang behind for the next one.
    let _unstall = Unstall { mount, rule };
    // The daemon runs in this process: let it look both files up first, so the
    // O_PATH fds of its inode table are in the baseline.
    std::fs::metadata(mount.path(name)).map_err(|e| e.to_string())?;
    std::fs::metadata(mount.path("plain")).map_err(|e| e.to_string())?;
    let before = fds();
    let baseline = before.len();
    let file = engine
        .open(&mount.path(name), &OpenOptions::read_write_create())
        .await
        .map_err(|e| e.to_string())?;
    let cancel_after = Duration::from_millis(c.cancel_after_ms);
    // What an operation that finished before its cancel reported, to check
    // against the file: (result, the buffer it read into).
    let finished = if c.write {
        tokio::time::timeout(cancel_after, file.write_at(vec![NEW; c.len], 0))
            .await
            .ok()
    } else {
        tokio::time::timeout(cancel_after, file.read_at(vec![0; c.len], 0))
            .await
            .ok()
    };
    let dropped = finished.is_none();
    if let Some((Ok(n), buf)) = &finished {
        ensure(
            c.write || buf[..(*n).min(buf.len())].iter().all(|b| *b == OLD),
            || {
                format!("read_at reported {n} bytes, and they are not the file's: the engine does not do the I/O it reports")
            },
        )?;
    }
    let answer = if dropped {
        cancel_answer(engine, c.hang).await
    } else {
        None
    };
    if c.hang {
        ensure(answer != Some(CancelAnswer::Pending), || {
            format!(
                "the engine declares `cancel` but left the cancelled {} unanswered for {ANSWER_WITHIN:?} while slowfs held it: the cancel did not stop it (ignored, or the operation cannot be cancelled once in flight)",
                if c.write { "write_at" } else { "read_at" }
            )
        })?;
    }
    // Buffers the caller gets back after the cancel, from reads that complete.
    let plain = engine
        .open(&mount.path("plain"), &OpenOptions::read())
        .await
        .map_err(|e| e.to_string())?;
    let mut returned = Vec::new();
    for _ in 0..4 {
        let (result, buf) = plain.read_at(vec![0; c.len], 0).await;
        result.map_err(|e| format!("read after cancel: {e}"))?;
        returned.push(buf);
    }
    let snapshot = returned.clone();
    mount.clear(Some(rule));
    mount.release();
    drained(engine, mount).await?;
    tokio::time::sleep(Duration::from_millis(20)).await;
    ensure(returned == snapshot, || {
        "a buffer returned to the caller after the cancel changed once the cancelled op completed"
            .to_string()
    })?;
    if c.write {
        let bytes = std::fs::read(mount.backing_path(name)).map_err(|e| e.to_string())?;
        check_cancelled_write(&bytes, c, &finished, answer)?;
    }
    let (result, buf) = file.read_at(vec![0; 16], 0).await;
    let n = result.map_err(|e| format!("the engine failed after a cancel: {e}"))?;
    ensure(
        n > 0 && n <= 16 && buf[..n].iter().all(|b| *b == OLD || *b == NEW),
        || {
            format!("after the cancel, read_at of 16 bytes at 0 returned {n} bytes that are not the file's")
        },
    )?;
    file.close().await.map_err(|e| e.to_string())?;
    plain.close().await.map_err(|e| e.to_string())?;
    no_fd_leaked(&before, baseline).await
}

/// Waits up to 5 s for the engine and slowfs to have nothing in flight after
/// the release.
async fn drained<E: Engine>(engine: &E, mount: &slowfs::fixture::SlowMount) -> Result<(), String> {
    let mut drained = false;
    for _ in 0..500 {
        if engine.in_flight() == 0 && mount.waiting() == 0 {
            drained = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    ensure(drained, || {
        format!(
            "{} operation(s) still in flight 5 s after release",
            engine.in_flight()
        )
    })?;
    Ok(())
}

/// The file after a cancelled write of `c.len` bytes at 0: its size kept,
/// each byte of the range old or new and nothing outside it changed, what a
/// write that `finished` before the cancel reported in it, and no ghost
/// write after an answer `cancelled`.
fn check_cancelled_write(
    bytes: &[u8],
    c: &Case,
    finished: &Option<(std::io::Result<usize>, Vec<u8>)>,
    answer: Option<CancelAnswer>,
) -> Result<(), String> {
    ensure(bytes.len() == FILE, || {
        format!("the file changed size to {}", bytes.len())
    })?;
    ensure(
        bytes[..c.len].iter().all(|b| *b == OLD || *b == NEW),
        || "a byte of the cancelled write's range is neither old nor new".into(),
    )?;
    ensure(bytes[c.len..].iter().all(|b| *b == OLD), || {
        "bytes outside the cancelled write's range changed".into()
    })?;
    if let Some((Ok(n), _)) = &finished {
        ensure(bytes[..(*n).min(c.len)].iter().all(|b| *b == NEW), || {
            format!("write_at reported {n} bytes written (it finished before the cancel), and they are not in the file: the engine does not do the I/O it reports")
        })?;
    }
    ensure(
        answer != Some(CancelAnswer::Cancelled) || bytes[..c.len].iter().all(|b| *b == OLD),
        || {
            "ghost write: the engine answered the write `cancelled`, then its data landed in the file (the operation kept running after the cancel returned)".into()
        },
    )?;
    Ok(())
}

/// No fd of this process is left open beyond the case's `baseline` (waited
/// for up to 2 s: an engine may close asynchronously).
async fn no_fd_leaked(before: &[String], baseline: usize) -> Result<(), String> {
    for _ in 0..200 {
        if open_fds() <= baseline {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let now = fds();
    let new: Vec<&String> = now.iter().filter(|f| !before.contains(f)).collect();
    Err(format!(
        "fd leaked: {} open, {baseline} before the case; new: {new:?}",
        now.len()
    ))
}

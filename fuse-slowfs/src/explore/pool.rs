//! The checker pool: `jobs` worker threads, each with its own checker and
//! scratch directory, taking states from a short queue and answering on a
//! channel. Apart from the run's loop, which decides what to hand out and
//! when to stop.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use slowfs_faults::crash::search::Candidate;

use super::{Checker, ExploreConfig, Judgement, StateRef};

/// How a worker writes a state out for the checker: a tree as a directory,
/// or (`--fs`) a block-level image, the base plus the state's writes.
pub(super) type StateWriter<T> = Arc<dyn Fn(&Candidate<T>, &Path) -> io::Result<()> + Send + Sync>;

/// A state for a worker.
pub(super) struct Task<T> {
    pub(super) candidate: Candidate<T>,
}

/// A worker's answer about a state.
pub(super) enum WorkerAnswer<T> {
    Judged(Candidate<T>, Judgement),
    /// The checker could not run at all (a bad command): the run stops.
    CheckerBroken(io::Error),
    /// Explore's own temporary space failed, also after retrying.
    Scratch(io::Error),
}

/// The workers, their queue and their answers.
pub(super) struct Pool<T> {
    tasks: Option<SyncSender<Task<T>>>,
    answers: Receiver<WorkerAnswer<T>>,
    workers: Vec<JoinHandle<()>>,
    /// The workers' directories, removed when the pool is.
    _scratch: super::scratch::Scratch,
}

impl<T: Clone + Send + 'static> Pool<T> {
    /// `config.jobs` workers checking the states of a log of `ops`
    /// operations, each written out by `write`.
    pub(super) fn start(
        config: &ExploreConfig,
        write: StateWriter<T>,
        ops: usize,
    ) -> io::Result<Pool<T>> {
        let scratch = super::scratch::Scratch::new("slowfs-states-")?;
        let jobs = config.jobs.max(1);
        let timeout = Duration::from_millis(config.settings.timeout_ms);
        let (task_tx, task_rx) = mpsc::sync_channel::<Task<T>>(jobs);
        let task_rx = Arc::new(Mutex::new(task_rx));
        let (out_tx, out_rx) = mpsc::channel::<WorkerAnswer<T>>();
        let mut workers = Vec::new();
        for worker in 0..jobs {
            let dir = scratch.path().join(format!("worker-{worker}"));
            std::fs::create_dir(&dir)?;
            let checker = Checker::new(
                &config.settings.check,
                config.settings.persistent,
                timeout,
                &dir,
                &config.running,
            )?;
            let (task_rx, out_tx, stop, write) = (
                Arc::clone(&task_rx),
                out_tx.clone(),
                Arc::clone(&config.stop),
                Arc::clone(&write),
            );
            workers.push(std::thread::spawn(move || {
                work(
                    checker,
                    &task_rx,
                    &out_tx,
                    &stop,
                    &write,
                    &dir.join("state"),
                    ops,
                )
            }));
        }
        // Only the workers hold the receiver: when they have all stopped, a
        // send fails instead of waiting forever.
        Ok(Pool {
            tasks: Some(task_tx),
            answers: out_rx,
            workers,
            _scratch: scratch,
        })
    }

    /// Queues `task` if a worker has room for it; see [`SyncSender::try_send`].
    pub(super) fn try_send(&self, task: Task<T>) -> Result<(), TrySendError<Task<T>>> {
        match &self.tasks {
            Some(tasks) => tasks.try_send(task),
            None => Err(TrySendError::Disconnected(task)),
        }
    }

    /// The answers received so far, without waiting.
    pub(super) fn answers(&self) -> mpsc::TryIter<'_, WorkerAnswer<T>> {
        self.answers.try_iter()
    }

    /// Closes the queue and waits for every worker to end; their last
    /// answers stay to be read.
    pub(super) fn finish(&mut self) {
        self.tasks = None;
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

/// A worker: checks states until the queue closes, a stop, or its checker
/// or scratch space fails.
fn work<T: Clone>(
    mut checker: Checker,
    tasks: &Mutex<Receiver<Task<T>>>,
    answers: &mpsc::Sender<WorkerAnswer<T>>,
    stop: &AtomicBool,
    write: &StateWriter<T>,
    state: &Path,
    ops: usize,
) {
    loop {
        let task = tasks.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok(task) = task else { return };
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let outcome = check_one(&mut checker, write, state, &task.candidate, ops);
        // A checker stopped by an interrupt said nothing about its state.
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let broken = !matches!(outcome, WorkerAnswer::Judged(..));
        let _ = answers.send(outcome);
        if broken {
            return;
        }
    }
}

/// Writes a state and runs the checker on it, retrying what can be transient
/// in explore's own space (a full or failing temp directory) a few times.
fn check_one<T: Clone>(
    checker: &mut Checker,
    write: &StateWriter<T>,
    dir: &Path,
    candidate: &Candidate<T>,
    ops: usize,
) -> WorkerAnswer<T> {
    let mut last = None;
    for wait_ms in [0, 200, 1000, 3000] {
        std::thread::sleep(Duration::from_millis(wait_ms));
        let _ = std::fs::remove_dir_all(dir);
        if let Err(e) = write(candidate, dir) {
            last = Some(e);
            continue;
        }
        let verdict = checker.judge(&StateRef {
            dir,
            crash_point: candidate.point,
            ops,
        });
        let _ = std::fs::remove_dir_all(dir);
        return match verdict {
            Ok(verdict) => WorkerAnswer::Judged(candidate.clone(), verdict),
            Err(e) => WorkerAnswer::CheckerBroken(e),
        };
    }
    let e = last.expect("a failed attempt");
    WorkerAnswer::Scratch(io::Error::new(
        e.kind(),
        format!(
            "writing a state into {}: {e} (tried 4 times)",
            dir.display()
        ),
    ))
}

//! The driver thread: owns the ring, submits batches in one `io_uring_enter`,
//! reaps completions and hands them to waiting futures through channels, so the
//! tokio runtime never blocks on the ring.
//!
//! Requests reach the thread over a channel plus an eventfd that the ring itself
//! polls: a new request wakes the thread even while it waits for completions.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

use io_uring::{opcode, types, IoUring, Probe};
use tokio::sync::oneshot;

use super::op::{Completion, InFlight, Lifecycle, OpKind, UringOp};

/// `user_data` of the eventfd poll.
const WAKE: u64 = u64::MAX;
/// `user_data` of cancel requests (their completions carry nothing we need).
const CANCEL: u64 = u64::MAX - 1;

/// Ring settings.
#[derive(Debug, Clone, Copy)]
pub struct UringConfig {
    /// Submission queue entries.
    pub entries: u32,
    /// Cap on io-wq workers `[bounded, unbounded]` (IORING_REGISTER_IOWQ_MAX_WORKERS).
    /// Reads of FUSE files cannot be done inline and are punted to bounded io-wq
    /// workers, whose default cap (about 4 per CPU) caps concurrency; raise it to
    /// let throughput grow with the number of requests in flight.
    pub iowq_max_workers: Option<[u32; 2]>,
}

impl Default for UringConfig {
    fn default() -> Self {
        UringConfig {
            entries: 256,
            iowq_max_workers: Some([256, 0]),
        }
    }
}

enum Message {
    Submit(Vec<(u64, OpKind, oneshot::Sender<Completion>)>),
    Cancel(u64),
    Shutdown,
}

/// Handle to the driver thread.
#[derive(Debug)]
pub(super) struct Driver {
    tx: mpsc::Sender<Message>,
    wake: OwnedFd,
    /// Set by the driver thread while it waits in the ring: only then does a
    /// new message need the eventfd (a syscall) to wake it; while it works it
    /// drains the channel anyway.
    sleeping: Arc<AtomicBool>,
    next_id: AtomicU64,
    in_flight: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Message")
    }
}

/// Opcodes the backend uses; missing ones are reported at start, not at first use.
const REQUIRED: &[(u8, &str)] = &[
    (opcode::Read::CODE, "READ"),
    (opcode::Write::CODE, "WRITE"),
    (opcode::Fsync::CODE, "FSYNC"),
    (opcode::AsyncCancel::CODE, "ASYNC_CANCEL"),
    (opcode::PollAdd::CODE, "POLL_ADD"),
];

impl Driver {
    /// Sets up a ring, checks the kernel's opcodes, starts the thread.
    pub(super) fn start(config: UringConfig) -> io::Result<Arc<Driver>> {
        let ring = IoUring::new(config.entries).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("io_uring_setup failed: {e} (io_uring disabled by the kernel or a seccomp policy? the threadpool engine works without it)"),
            )
        })?;
        let mut probe = Probe::new();
        ring.submitter().register_probe(&mut probe)?;
        let missing: Vec<&str> = REQUIRED
            .iter()
            .filter(|(code, _)| !probe.is_supported(*code))
            .map(|(_, name)| *name)
            .collect();
        if !missing.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "this kernel's io_uring lacks {} (needs Linux 5.6+); use the threadpool engine",
                    missing.join(", ")
                ),
            ));
        }
        if let Some(mut max) = config.iowq_max_workers {
            ring.submitter().register_iowq_max_workers(&mut max)?;
        }
        // SAFETY: eventfd returns a new fd or -1.
        let wake = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if wake < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh fd we own.
        let wake = unsafe { OwnedFd::from_raw_fd(wake) };
        let (tx, rx) = mpsc::channel();
        let in_flight = Arc::new(AtomicUsize::new(0));
        let sleeping = Arc::new(AtomicBool::new(false));
        let thread = Reactor {
            ring,
            rx,
            sleeping: Arc::clone(&sleeping),
            // The thread's own copy: it may outlive `Driver` while ops drain.
            wake: wake.try_clone()?,
            ops: HashMap::new(),
            in_flight: Arc::clone(&in_flight),
            shutting_down: false,
        };
        let driver = Arc::new(Driver {
            tx,
            wake,
            sleeping,
            next_id: AtomicU64::new(0),
            in_flight,
        });
        std::thread::Builder::new()
            .name("uring-driver".into())
            .spawn(move || thread.run())?;
        Ok(driver)
    }

    /// Submits operations together (one `io_uring_enter` for the batch).
    pub(super) fn submit(self: &Arc<Self>, ops: Vec<OpKind>) -> Vec<UringOp> {
        let mut batch = Vec::with_capacity(ops.len());
        let mut futures = Vec::with_capacity(ops.len());
        for kind in ops {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let (tx, rx) = oneshot::channel();
            batch.push((id, kind, tx));
            futures.push(UringOp {
                id,
                rx,
                driver: Arc::clone(self),
                finished: false,
            });
        }
        self.in_flight.fetch_add(batch.len(), Ordering::SeqCst);
        self.send(Message::Submit(batch));
        futures
    }

    /// Asks the kernel to cancel an operation whose caller went away.
    pub(super) fn cancel(&self, id: u64) {
        self.send(Message::Cancel(id));
    }

    /// Operations submitted and not yet completed by the kernel.
    pub(super) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    fn send(&self, message: Message) {
        let _ = self.tx.send(message);
        // Pairs with the driver's fence between announcing its sleep and its
        // last look at the channel: either it sees this message, or this sees
        // it asleep and wakes it.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) {
            let one: u64 = 1;
            // SAFETY: writing 8 bytes from a valid u64 to our eventfd.
            unsafe { libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The thread finishes what the kernel still holds, then exits; never joined,
        // so dropping an engine never waits on a hung operation.
        self.send(Message::Shutdown);
    }
}

/// The driver thread's state.
struct Reactor {
    ring: IoUring,
    rx: mpsc::Receiver<Message>,
    sleeping: Arc<AtomicBool>,
    wake: OwnedFd,
    ops: HashMap<u64, InFlight>,
    in_flight: Arc<AtomicUsize>,
    shutting_down: bool,
}

impl Reactor {
    fn run(mut self) {
        let wake_fd = self.wake.as_raw_fd();
        self.arm_wake(wake_fd);
        loop {
            while let Ok(message) = self.rx.try_recv() {
                self.handle(message);
            }
            if self.shutting_down && self.ops.is_empty() {
                return;
            }
            // Completions already there (reads of cached data complete inside
            // the submit): reap them without sleeping.
            let _ = self.ring.submit();
            if !self.ring.completion().is_empty() {
                self.reap(wake_fd);
                continue;
            }
            self.sleeping.store(true, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            // A message sent before the flag was seen: handle it first.
            match self.rx.try_recv() {
                Ok(message) => {
                    self.sleeping.store(false, Ordering::SeqCst);
                    self.handle(message);
                    continue;
                }
                Err(mpsc::TryRecvError::Empty) => {}
                Err(mpsc::TryRecvError::Disconnected) => {}
            }
            if let Err(e) = self.ring.submit_and_wait(1) {
                if e.raw_os_error() != Some(libc::EINTR) && e.raw_os_error() != Some(libc::EBUSY) {
                    eprintln!("uring driver: io_uring_enter failed: {e}");
                }
            }
            self.sleeping.store(false, Ordering::SeqCst);
            self.reap(wake_fd);
        }
    }

    fn handle(&mut self, message: Message) {
        match message {
            Message::Submit(batch) => {
                for (id, mut kind, tx) in batch {
                    let entry = kind.entry(id);
                    self.ops.insert(
                        id,
                        InFlight {
                            kind,
                            lifecycle: Lifecycle::Submitted(tx),
                        },
                    );
                    self.push(&entry);
                }
            }
            Message::Cancel(id) => {
                if let Some(op) = self.ops.get_mut(&id) {
                    op.lifecycle = Lifecycle::Ignored;
                    let cancel = opcode::AsyncCancel::new(id).build().user_data(CANCEL);
                    self.push(&cancel);
                }
            }
            Message::Shutdown => {
                self.shutting_down = true;
                let ids: Vec<u64> = self.ops.keys().copied().collect();
                for id in ids {
                    self.handle(Message::Cancel(id));
                }
            }
        }
    }

    fn push(&mut self, entry: &io_uring::squeue::Entry) {
        loop {
            // SAFETY: every resource an entry points at is owned by `self.ops` (or is
            // the eventfd) until its completion is reaped.
            if unsafe { self.ring.submission().push(entry) }.is_ok() {
                return;
            }
            // Full: hand what is queued to the kernel and retry.
            let _ = self.ring.submit();
        }
    }

    fn arm_wake(&mut self, fd: i32) {
        let poll = opcode::PollAdd::new(types::Fd(fd), libc::POLLIN as u32)
            .build()
            .user_data(WAKE);
        self.push(&poll);
    }

    fn reap(&mut self, wake_fd: i32) {
        let completions: Vec<(u64, i32)> = self
            .ring
            .completion()
            .map(|cqe| (cqe.user_data(), cqe.result()))
            .collect();
        for (user_data, result) in completions {
            match user_data {
                WAKE => {
                    let mut counter = 0u64;
                    // SAFETY: reading 8 bytes into a valid u64 from our eventfd.
                    unsafe { libc::read(wake_fd, (&mut counter as *mut u64).cast(), 8) };
                    if !self.shutting_down {
                        self.arm_wake(wake_fd);
                    }
                }
                CANCEL => {}
                id => {
                    let Some(op) = self.ops.remove(&id) else {
                        continue;
                    };
                    self.in_flight.fetch_sub(1, Ordering::SeqCst);
                    let buf = op.kind.into_buf();
                    match op.lifecycle {
                        Lifecycle::Submitted(tx) => {
                            let _ = tx.send(Completion { result, buf });
                        }
                        // The kernel is done with it: now the buffer may go.
                        Lifecycle::Ignored => drop(buf),
                    }
                }
            }
        }
    }
}

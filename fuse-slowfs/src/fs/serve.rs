//! Serving one request: [`Inner::serve`] asks the fault plan about it (an
//! [`Ask`]), then runs its job now or parks it with the scheduler, and
//! [`Done`] records it in the stats before the reply goes out.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fuser::Errno;
use slowfs_faults::Op;

use super::nfs::write_behind;
use super::{contain, Inner};
use crate::scheduler::Fate;
use crate::stats::RequestOutcome;

impl Inner {
    /// [`serve`](Self::serve) for the common request: `op` on inode `ino`,
    /// moving no data.
    pub(super) fn serve_on<R: AnyReply>(
        self: &Arc<Self>,
        req: &fuser::Request,
        op: Op,
        ino: fuser::INodeNo,
        reply: R,
        job: impl FnOnce(&Arc<Inner>, Done<R>, slowfs_faults::Effects, &[u8]) + Send + 'static,
    ) {
        let path = self.path_for(op, ino.0);
        let ask = Ask::new(req, op, &path).carrying(Carry::Gathered(ino.0));
        self.serve(ask, &[], reply, job)
    }

    /// Serves one request: asks the plan, then runs `job` now or parks it. `data` is
    /// a write's payload (empty otherwise); it is copied only if the request must wait.
    pub(super) fn serve<R: AnyReply>(
        self: &Arc<Self>,
        Ask {
            caller,
            op,
            path,
            bytes,
            write_back,
            carry,
            local,
        }: Ask,
        data: &[u8],
        reply: R,
        job: impl FnOnce(&Arc<Inner>, Done<R>, slowfs_faults::Effects, &[u8]) + Send + 'static,
    ) {
        let arrived = Instant::now();
        let own_decision = !matches!(carry, Carry::Overflow(..)) && !local;
        let mut verdict = if own_decision {
            self.plan.decide(op, path, bytes)
        } else {
            slowfs_faults::Decision::default()
        };
        if write_back {
            verdict = verdict.for_write_back();
        }
        let rpcs = self.carried_writes(carry);
        for rpc in &rpcs {
            // The request waits for the WRITEs it sends (their delays,
            // throttles and hangs), as a close or fsync waits for write-back.
            let (delay, hang) = rpc.wait();
            verdict.delay += delay;
            verdict.hang = match (verdict.hang, hang) {
                (Some(a), Some(b)) => Some(a.longer(b)),
                (a, b) => a.or(b),
            };
        }
        let done = Done {
            reply,
            op,
            caller,
            arrived,
            injected: crate::stats::Injected::of(&verdict),
            carried: Duration::ZERO,
        };
        if verdict.crash {
            // Power loss at this request: it never happens, and nothing after it sees
            // anything but the durable state.
            self.crash_now();
            return done.respond(self, Err::<(), _>(Errno::EIO), |_, ()| {});
        }
        let error = verdict.error.map(Errno::from_i32);
        let effects = verdict.effects;
        let panic_here = contain::test_panic_path() == Some(path);
        let finish = move |inner: &Arc<Inner>, data: &[u8], fate: Fate| {
            if panic_here {
                panic!("SLOWFS_TEST_PANIC_PATH: a forced panic in a {op:?} request");
            }
            let mut done = done;
            for rpc in rpcs {
                done.carried += inner.send_carried(rpc, fate);
            }
            let fate = if own_decision { fate } else { Fate::Run };
            match (fate, error) {
                (Fate::Interrupted, _) => {
                    done.injected.interrupted = true;
                    done.respond(inner, Err::<(), _>(Errno::EINTR), |_, ()| {})
                }
                (Fate::GaveUp, _) => {
                    // A soft mount's timeout: the hang became an error.
                    done.injected.add(crate::stats::FaultKind::Failed);
                    let errno = inner.soft_timeout_errno();
                    done.respond(inner, Err::<(), _>(errno), |_, ()| {})
                }
                (Fate::Run, Some(errno)) => done.respond(inner, Err::<(), _>(errno), |_, ()| {}),
                (Fate::Run, None) => job(inner, done, effects, data),
            }
        };
        if verdict.delay.is_zero() && verdict.hang.is_none() {
            finish(self, data, Fate::Run);
        } else {
            let inner = Arc::clone(self);
            let data = data.to_vec();
            // A delay counts from the request's arrival, not from now.
            self.scheduler.park(
                arrived + verdict.delay,
                verdict.hang,
                verdict.delay,
                caller,
                move |fate| finish(&inner, &data, fate),
            );
        }
    }
}

/// What a request asks the fault plan about.
pub(crate) struct Ask<'a> {
    /// The requesting thread (FUSE's `pid`): its interruption ends a parked request.
    caller: u32,
    op: Op,
    /// Mount-relative path, for path globs.
    path: &'a str,
    /// Bytes the request moves, for throttles and quotas.
    bytes: u64,
    /// The kernel's own write-back of cached pages, not a caller's write.
    write_back: bool,
    /// Under `--cache nfs`: gathered writes this request sends first.
    carry: Carry,
    /// Under `--cache nfs`: the client answers it without an RPC of its own
    /// (only what it carries is sent), so its op's rules do not apply.
    local: bool,
}

/// Gathered writes a request sends as a WRITE before it runs (see
/// [`write_behind`]).
pub(super) enum Carry {
    /// None.
    Nothing,
    /// Whatever inode `ino` has gathered, taken when the request arrives.
    Gathered(u64),
    /// Whatever either inode has gathered (copy_file_range: its source and
    /// its destination).
    Both(u64, u64),
    /// This, of inode `ino`, taken by a write(2) that did not fit: the WRITE
    /// is all the rules see of that request, and its caller is answered that
    /// its data was taken (an error comes back at close or fsync).
    Overflow(u64, write_behind::Pending),
}

impl<'a> Ask<'a> {
    /// `req` asks to do `op` on `path`, moving no data.
    pub(crate) fn new(req: &fuser::Request, op: Op, path: &'a str) -> Ask<'a> {
        Ask {
            caller: req.pid(),
            op,
            path,
            bytes: 0,
            write_back: false,
            carry: Carry::Nothing,
            local: false,
        }
    }

    /// The same request, answered by the NFS client without an RPC of its
    /// own when `local`.
    pub(super) fn local(self, local: bool) -> Ask<'a> {
        Ask { local, ..self }
    }

    /// The same request, sending `carry` first.
    pub(super) fn carrying(self, carry: Carry) -> Ask<'a> {
        Ask { carry, ..self }
    }

    /// The same request, moving `bytes`.
    pub(crate) fn moving(self, bytes: u64) -> Ask<'a> {
        Ask { bytes, ..self }
    }

    /// The same request, marked as the kernel's write-back when it is one
    /// (see [`slowfs_faults::Decision::for_write_back`]).
    pub(crate) fn write_back(self, write_back: bool) -> Ask<'a> {
        Ask { write_back, ..self }
    }
}

/// A request's reply, still to be sent, with what the stats need to know about it.
/// Stats are recorded before the reply goes out, so that a caller whose syscall has
/// returned always finds its request counted.
pub(crate) struct Done<R> {
    pub(super) reply: R,
    op: Op,
    /// The requesting thread.
    caller: u32,
    arrived: Instant,
    /// What the rules did to it.
    injected: crate::stats::Injected,
    /// The time of the gathered WRITE it sent first (counted as a write's).
    carried: Duration,
}

impl<R: AnyReply> Done<R> {
    /// Records the request and hands back the reply to send.
    pub(crate) fn record(self, inner: &Inner, outcome: RequestOutcome) -> R {
        let latency = self.arrived.elapsed();
        let own = latency.saturating_sub(self.carried);
        inner
            .stats
            .record(self.op, latency, own, outcome, &self.injected);
        inner
            .stats
            .record_caller(self.caller, self.op, latency, self.injected.any());
        self.reply
    }

    /// Replies with `send` on success, or with the errno.
    pub(crate) fn respond<T>(
        self,
        inner: &Inner,
        result: Result<T, Errno>,
        send: impl FnOnce(R, T),
    ) {
        self.respond_moved(inner, result, |_| 0, send);
    }

    /// As [`Done::respond`], counting the bytes `moved` says the value carries.
    pub(crate) fn respond_moved<T>(
        self,
        inner: &Inner,
        result: Result<T, Errno>,
        moved: impl FnOnce(&T) -> u64,
        send: impl FnOnce(R, T),
    ) {
        match result {
            Ok(value) => {
                let bytes = moved(&value);
                send(
                    self.record(
                        inner,
                        RequestOutcome {
                            bytes,
                            failed: false,
                        },
                    ),
                    value,
                );
            }
            Err(errno) => self
                .record(
                    inner,
                    RequestOutcome {
                        bytes: 0,
                        failed: true,
                    },
                )
                .error(errno),
        }
    }
}

/// Any FUSE reply, as far as failing it goes.
pub(crate) trait AnyReply: Send + 'static {
    fn error(self, errno: Errno);
}

macro_rules! any_reply {
    ($($t:ty),*) => {$(
        impl AnyReply for $t {
            fn error(self, errno: Errno) {
                <$t>::error(self, errno)
            }
        }
    )*};
}

any_reply!(
    fuser::ReplyEmpty,
    fuser::ReplyLock,
    fuser::ReplyData,
    fuser::ReplyEntry,
    fuser::ReplyAttr,
    fuser::ReplyOpen,
    fuser::ReplyWrite,
    fuser::ReplyStatfs,
    fuser::ReplyCreate,
    fuser::ReplyDirectory,
    fuser::ReplyDirectoryPlus,
    fuser::ReplyXattr,
    fuser::ReplyLseek
);

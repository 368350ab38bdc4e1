//! The mount as its control socket sees it ([`Controls`]): the rules, the
//! counters, parked and hung requests, crashes and the durability report, and
//! nothing else of [`Inner`].

use std::sync::Arc;
use std::time::Duration;

use slowfs_faults::{FaultPlan, Rule};

use super::{DurabilityReport, Inner};
use crate::stats::StatsReport;

/// What `slowfs ctl` may do to a mount.
#[derive(Debug, Clone)]
pub struct Controls {
    inner: Arc<Inner>,
}

impl Controls {
    /// The controls of the mount whose state is `inner`.
    pub(crate) fn of(inner: Arc<Inner>) -> Controls {
        Controls { inner }
    }

    /// The live rules (their report, clearing them).
    pub fn plan(&self) -> &FaultPlan {
        &self.inner.plan
    }

    /// Adds a rule at runtime (see [`Inner::add_rule`]); its id.
    pub fn add_rule(&self, rule: Rule) -> u64 {
        self.inner.add_rule(rule)
    }

    /// Counters so far, with the requests parked and hung right now.
    pub fn stats(&self) -> StatsReport {
        let mut report = self.inner.stats.report(self.inner.plan.report());
        report.parked = self.inner.scheduler.waiting() as u64;
        report.hung = self.inner.scheduler.hung() as u64;
        report
    }

    /// Whether the mount has the strict crash model (which `crash`, `durable`
    /// and rules on what is durable need).
    pub fn has_crash_model(&self) -> bool {
        self.inner.has_crash_model()
    }

    /// Whether the mount is an NFS client (`--cache nfs`), which cannot have one.
    pub fn is_nfs_client(&self) -> bool {
        self.inner.is_nfs_client()
    }

    /// File handles open in kernel passthrough (data rules skip them).
    pub fn passthrough_handles(&self) -> usize {
        self.inner.passthrough_handles()
    }

    /// Power loss now; false without a crash model.
    pub fn crash(&self) -> bool {
        self.inner.crash_now()
    }

    /// What a crash now would lose; `None` without a crash model.
    pub fn durability(&self) -> Option<DurabilityReport> {
        self.inner.durability_report()
    }

    /// Releases every hung request; how many there were.
    pub fn release(&self) -> usize {
        self.inner.scheduler.release()
    }

    /// Requests parked right now (delayed, hung, or an NFS lock wait).
    pub fn waiting(&self) -> usize {
        self.inner.scheduler.waiting()
    }

    /// Ends every wait (parked requests answer at once), waiting up to
    /// `timeout` for them to finish.
    pub fn drain(&self, timeout: Duration) {
        self.inner.scheduler.drain(timeout)
    }
}

//! What a fault rule is: which requests it matches, what it does, and when it fires.

use std::fmt;
use std::time::Duration;

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

use crate::delay::{DelayDist, Spike};
use crate::errno::errno_name;
use crate::op::{Op, OpSet};
use crate::units::{DisplayDuration, DisplaySize};

/// One fault rule: `OPS [path=GLOB] ACTION[=VALUE] [p=P] [after=N] [every=N] ...`.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// The operations it applies to.
    pub ops: OpSet,
    /// Only requests on paths matching this glob (relative to the mount root).
    pub path: Option<PathGlob>,
    /// What happens to a request the rule fires on.
    pub action: Action,
    /// When, among matching requests, the rule fires.
    pub when: Trigger,
}

impl Rule {
    /// Whether the rule applies to this operation on this path (before its trigger is consulted).
    pub fn matches(&self, op: Op, path: &str) -> bool {
        self.ops.contains(op) && self.path.as_ref().is_none_or(|glob| glob.is_match(path))
    }

    /// Whether the rule could ever shorten, fail, delay or hang a read or write:
    /// files it may touch must bypass the page cache so the caller sees it.
    pub fn touches_data_path(&self) -> bool {
        (self.ops.contains(Op::Read) || self.ops.contains(Op::Write)) && self.action.is_live()
    }
}

/// What a rule does to a request it fires on.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Hold the request for a drawn delay, plus an occasional spike.
    Delay {
        /// The usual delay.
        dist: DelayDist,
        /// A rare extra delay.
        spike: Option<Spike>,
    },
    /// Fail the request with this errno.
    Error(i32),
    /// Let a read or write move between `min` and `max` bytes (never more than asked).
    Short {
        /// Fewest bytes moved.
        min: u64,
        /// Most bytes moved.
        max: u64,
    },
    /// A token bucket on bytes moved, shared by every request the rule fires on.
    Throttle {
        /// Bytes per second.
        rate: u64,
        /// Bucket size in bytes; defaults to 100 ms of the rate.
        burst: Option<u64>,
    },
    /// A token bucket on requests, one token each.
    Iops {
        /// Requests per second.
        rate: u64,
        /// Bucket size in requests; defaults to 100 ms of the rate (at least one).
        burst: Option<u64>,
    },
    /// Hold the request until released (`slowfs ctl MNT release`), or for at most `timeout`.
    Hang {
        /// Release by itself after this long.
        timeout: Option<Duration>,
    },
    /// Power loss at this request: everything not yet durable is gone.
    Crash,
    /// A failed fsync with Linux's write-back error semantics (`fsync error=EIO
    /// drop`): when the file has data not yet durable, the fsync fails with
    /// `errno`, that data is dropped from what a crash can keep (the kernel marks
    /// the pages clean), every other open file description of the file reports
    /// the error once at its next fsync (errseq), and a retried fsync succeeds.
    /// With nothing to write back the fsync succeeds. Needs the crash model.
    FsyncFail {
        /// The errno the failing fsync returns.
        errno: i32,
        /// `drop=evict`: the pages are evicted too, so later reads see the
        /// durable content instead of the dropped writes.
        evict: bool,
    },
    /// Silent corruption of read data (`read corrupt=bitflip:N|zero|random`): one
    /// 512-byte sector of what a read returns, chosen and filled from the rule's
    /// seeded RNG; the backing file never changes.
    Corrupt(Corruption),
    /// A read returns the durable content (what a crash now would keep) instead
    /// of the latest writes (`read stale`). Needs the crash model.
    Stale,
    /// A write is acknowledged in full and never applied (`write lose`).
    Lose,
}

/// How `corrupt=` damages a sector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Corruption {
    /// Flip this many bits (`bitflip:N`, at least one).
    BitFlip(u32),
    /// All zeros (`zero`): a sector that was never written, or lost.
    Zero,
    /// Random bytes (`random`): garbage from a bad controller or a misdirected write.
    Random,
}

/// The sector size corruption works in.
pub const SECTOR: u64 = 512;

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Corruption::BitFlip(n) => write!(f, "bitflip:{n}"),
            Corruption::Zero => write!(f, "zero"),
            Corruption::Random => write!(f, "random"),
        }
    }
}

impl Corruption {
    /// Parses `bitflip:N`, `bitflip` (one bit), `zero` or `random`.
    pub fn parse(text: &str) -> Result<Corruption, String> {
        let expected = "expected bitflip:N, zero or random";
        match text.split_once(':') {
            None if text == "zero" => Ok(Corruption::Zero),
            None if text == "random" => Ok(Corruption::Random),
            None if text == "bitflip" => Ok(Corruption::BitFlip(1)),
            Some(("bitflip", n)) => match n.parse::<u32>() {
                Ok(n) if (1..=SECTOR as u32 * 8).contains(&n) => Ok(Corruption::BitFlip(n)),
                _ => Err(format!(
                    "bitflip needs a count of bits from 1 to {} (one sector), found '{n}'",
                    SECTOR * 8
                )),
            },
            _ => Err(format!("unknown corruption '{text}' ({expected})")),
        }
    }

    /// Damages one sector of `data`, which starts at file offset `offset`: the
    /// sector and its damage are drawn from `seed`, so a seed reproduces them.
    pub fn apply(self, data: &mut [u8], offset: u64, seed: u64) {
        use rand::{Rng, SeedableRng};
        if data.is_empty() {
            return;
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        // Whole file sectors overlapping the data; pick one.
        let first = offset / SECTOR;
        let last = (offset + data.len() as u64 - 1) / SECTOR;
        let sector = rng.gen_range(first..=last);
        let start = (sector * SECTOR).saturating_sub(offset) as usize;
        let end = (((sector + 1) * SECTOR - offset) as usize).min(data.len());
        let span = &mut data[start..end];
        match self {
            Corruption::Zero => span.fill(0),
            Corruption::Random => rng.fill(span),
            Corruption::BitFlip(n) => {
                let bits = span.len() * 8;
                let mut flipped = std::collections::BTreeSet::new();
                while flipped.len() < (n as usize).min(bits) {
                    flipped.insert(rng.gen_range(0..bits));
                }
                for bit in flipped {
                    span[bit / 8] ^= 1 << (bit % 8);
                }
            }
        }
    }
}

impl Action {
    /// The keyword that names this action in a rule string.
    pub fn keyword(&self) -> &'static str {
        match self {
            Action::Delay { .. } => "delay",
            Action::Error(_) => "error",
            Action::Short { .. } => "short",
            Action::Throttle { .. } => "throttle",
            Action::Iops { .. } => "iops",
            Action::Hang { .. } => "hang",
            Action::Crash => "crash",
            Action::FsyncFail { .. } => "error",
            Action::Corrupt(_) => "corrupt",
            Action::Stale => "stale",
            Action::Lose => "lose",
        }
    }

    /// Whether the action works on the durability model, so the mount needs
    /// `--crash-model strict`.
    pub fn needs_crash_model(&self) -> bool {
        matches!(
            self,
            Action::Crash | Action::Stale | Action::FsyncFail { .. }
        )
    }

    /// Whether the action changes what a caller observes of a request.
    fn is_live(&self) -> bool {
        !matches!(self, Action::Delay { dist: DelayDist::Fixed(d), spike: None } if d.is_zero())
    }
}

/// When a rule fires among the requests it matches. All given conditions must hold.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trigger {
    /// Fire with this probability (`p=0.1`).
    pub p: Option<f64>,
    /// Skip the first N matching requests (`after=N`).
    pub after: Option<u64>,
    /// Fire on every Nth matching request (`every=N`).
    pub every: Option<u64>,
    /// Fire only once matching requests have moved more than this many bytes
    /// (`after_bytes=64MiB`): a quota.
    pub after_bytes: Option<u64>,
}

/// A path glob, kept with its text so rules print back as written.
#[derive(Debug, Clone)]
pub struct PathGlob {
    text: String,
    glob: Glob,
    /// Built on first use: a plan matches many globs at once through one
    /// `GlobSet`, and a compiled matcher per rule costs kilobytes.
    matcher: std::sync::OnceLock<GlobSet>,
}

impl PathGlob {
    /// Compiles a glob where `*` stays within one path component and `**`
    /// crosses them. A glob whose matcher would exceed the automaton's size
    /// limit (a brace list of thousands of names) is an error here, never later.
    pub fn new(text: &str) -> Result<PathGlob, globset::Error> {
        let glob: Glob = GlobBuilder::new(text)
            .literal_separator(true)
            .backslash_escape(true)
            .build()?;
        // Built once to refuse what cannot be, then dropped: most globs are
        // only ever matched through a plan's set.
        matcher_of(&glob)?;
        Ok(PathGlob {
            text: text.to_string(),
            matcher: std::sync::OnceLock::new(),
            glob,
        })
    }

    /// Whether a mount-relative path (`dir/file.tmp`, no leading slash) matches.
    pub fn is_match(&self, path: &str) -> bool {
        self.matcher
            .get_or_init(|| matcher_of(&self.glob).unwrap_or_else(|_| GlobSet::empty()))
            .is_match(path)
    }

    /// The glob as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The compiled glob (for matching many at once in a `GlobSet`).
    pub fn glob(&self) -> &Glob {
        &self.glob
    }
}

/// One glob's matcher; fallible, unlike `Glob::compile_matcher`, which panics
/// on a glob too large for the automaton.
fn matcher_of(glob: &Glob) -> Result<GlobSet, globset::Error> {
    GlobSetBuilder::new().add(glob.clone()).build()
}

impl PartialEq for PathGlob {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.ops)?;
        if let Some(path) = &self.path {
            write!(f, " path={}", crate::parse::glob_word(path.as_str()))?;
        }
        match &self.action {
            Action::Delay { dist, spike } => {
                write!(f, " delay={dist}")?;
                if let Some(spike) = spike {
                    write!(f, " spike={spike}")?;
                }
            }
            Action::Error(errno) => write!(f, " error={}", errno_name(*errno))?,
            Action::Short { min: 0, max: 0 } => write!(f, " short=0!")?,
            Action::Short { min, max } => write!(f, " short={min}..{max}")?,
            Action::Throttle { rate, burst } => {
                write!(f, " throttle={}/s", DisplaySize(*rate))?;
                if let Some(burst) = burst {
                    write!(f, " burst={}", DisplaySize(*burst))?;
                }
            }
            Action::Iops { rate, burst } => {
                write!(f, " iops={rate}")?;
                if let Some(burst) = burst {
                    write!(f, " burst={burst}")?;
                }
            }
            Action::Hang { timeout: None } => write!(f, " hang")?,
            Action::Hang { timeout: Some(t) } => write!(f, " hang={}", DisplayDuration(*t))?,
            Action::Crash => write!(f, " crash")?,
            Action::FsyncFail { errno, evict } => {
                write!(f, " error={} drop", errno_name(*errno))?;
                if *evict {
                    write!(f, "=evict")?;
                }
            }
            Action::Corrupt(how) => write!(f, " corrupt={how}")?,
            Action::Stale => write!(f, " stale")?,
            Action::Lose => write!(f, " lose")?,
        }
        let Trigger {
            p,
            after,
            every,
            after_bytes,
        } = &self.when;
        if let Some(p) = p {
            write!(f, " p={p}")?;
        }
        if let Some(after) = after {
            write!(f, " after={after}")?;
        }
        if let Some(every) = every {
            write!(f, " every={every}")?;
        }
        if let Some(bytes) = after_bytes {
            write!(f, " after_bytes={}", DisplaySize(*bytes))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_cross_directories_only_with_double_star() {
        let tmp = PathGlob::new("**/*.tmp").unwrap();
        assert!(tmp.is_match("a.tmp"));
        assert!(tmp.is_match("x/y/a.tmp"));
        assert!(!tmp.is_match("x/a.tmpl"));
        let logs = PathGlob::new("logs/**").unwrap();
        assert!(logs.is_match("logs/a/b.log"));
        assert!(!logs.is_match("other/logs.txt"));
        let top = PathGlob::new("*.db").unwrap();
        assert!(top.is_match("a.db"));
        assert!(!top.is_match("dir/a.db"), "* must not cross '/'");
    }
}

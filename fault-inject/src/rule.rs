//! What a fault rule is: which requests it matches, what it does, and when it fires.

use std::fmt;
use std::time::Duration;

use globset::{Glob, GlobBuilder, GlobMatcher};

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
        }
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
    matcher: GlobMatcher,
}

impl PathGlob {
    /// Compiles a glob where `*` stays within one path component and `**` crosses them.
    pub fn new(text: &str) -> Result<PathGlob, globset::Error> {
        let glob: Glob = GlobBuilder::new(text)
            .literal_separator(true)
            .backslash_escape(true)
            .build()?;
        Ok(PathGlob {
            text: text.to_string(),
            matcher: glob.compile_matcher(),
        })
    }

    /// Whether a mount-relative path (`dir/file.tmp`, no leading slash) matches.
    pub fn is_match(&self, path: &str) -> bool {
        self.matcher.is_match(path)
    }

    /// The glob as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
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
            write!(f, " path={}", path.as_str())?;
        }
        match &self.action {
            Action::Delay { dist, spike } => {
                write!(f, " delay={dist}")?;
                if let Some(spike) = spike {
                    write!(f, " spike={spike}")?;
                }
            }
            Action::Error(errno) => write!(f, " error={}", errno_name(*errno))?,
            Action::Short { min: 0, max: 0 } => write!(f, " short=0")?,
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

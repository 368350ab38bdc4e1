//! Parsing rule strings (`--set`, `slowfs ctl set`, TOML `rules = [...]`).
//!
//! Grammar: `OPS [path=GLOB] ACTION[=VALUE] [p=P] [after=N] [every=N]
//! [after_bytes=SIZE] [burst=N] [spike=P:DURATION]`, words separated by spaces
//! (spaces inside parentheses are allowed: `delay=normal(10ms, 2ms)`).

use std::fmt;

use crate::delay::{DelayDist, Spike};
use crate::errno::{errno_from_name, known_errno_names};
use crate::op::{Op, OpSet};
use crate::rule::{Action, Corruption, PathGlob, Rule, Trigger};
use crate::units::{parse_rate, parse_size, probability};

/// A rule that did not parse: which rule, where in it, and what was expected.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleError {
    /// The rule text as given.
    pub rule: String,
    /// Byte offset of the offending word in `rule`.
    pub offset: usize,
    /// What went wrong.
    pub kind: ErrorKind,
}

/// The ways a rule string can be wrong. Each message says how to fix it.
#[derive(Debug, Clone, PartialEq)]
pub enum ErrorKind {
    /// The rule is blank.
    Empty,
    /// The first word names an operation that does not exist.
    UnknownOp(String),
    /// A word is not a known key.
    UnknownKey(String),
    /// A key that needs a value has none (`delay` instead of `delay=20ms`).
    MissingValue(&'static str),
    /// A value did not parse; the message says what was expected.
    BadValue {
        /// The key whose value is wrong.
        key: String,
        /// What was wrong and what was expected.
        reason: String,
    },
    /// No action (delay, error, short, throttle, iops, hang, crash) was given.
    MissingAction,
    /// A second action was given; a rule has exactly one.
    SecondAction {
        /// The action already given.
        first: &'static str,
    },
    /// A key was given twice.
    Repeated(String),
    /// An action given for operations it cannot apply to (`write corrupt=zero`).
    WrongOps {
        /// The action.
        action: &'static str,
        /// The operations it works on.
        applies_to: &'static str,
        /// How the rule should start.
        fix: &'static str,
    },
    /// A modifier that belongs to another action (`burst` without throttle/iops).
    Misplaced {
        /// The modifier.
        key: &'static str,
        /// The actions it belongs to.
        belongs_to: &'static str,
    },
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Empty => write!(f, "empty rule (expected e.g. \"fsync delay=250ms\")"),
            ErrorKind::UnknownOp(op) => {
                let names: Vec<&str> = Op::ALL.iter().map(|op| op.name()).collect();
                write!(
                    f,
                    "unknown operation '{op}' (expected '*' or a comma-separated list of: {})",
                    names.join(" ")
                )
            }
            ErrorKind::UnknownKey(key) => write!(
                f,
                "unknown word '{key}' (expected path=, an action (delay= error= short= \
                 throttle= iops= hang crash corrupt= stale lose) or a condition (p= after= \
                 every= after_bytes=))"
            ),
            ErrorKind::MissingValue(key) => write!(f, "'{key}' needs a value ({})", example(key)),
            ErrorKind::BadValue { key, reason } => write!(f, "bad value for '{key}': {reason}"),
            ErrorKind::MissingAction => write!(
                f,
                "no action (add one of delay=20ms, error=EIO, short=1..512, throttle=4MiB/s, \
                 iops=100, hang, crash, corrupt=bitflip:1, stale, lose)"
            ),
            ErrorKind::SecondAction { first } => write!(
                f,
                "a rule has one action and this one already has '{first}' (write a second rule)"
            ),
            ErrorKind::Repeated(key) => write!(f, "'{key}' is given twice"),
            ErrorKind::WrongOps {
                action,
                applies_to,
                fix,
            } => write!(
                f,
                "'{action}' only applies to {applies_to} (start the rule with '{fix}')"
            ),
            ErrorKind::Misplaced { key, belongs_to } => {
                write!(f, "'{key}' only goes with {belongs_to}")
            }
        }
    }
}

fn example(key: &str) -> &'static str {
    match key {
        "delay" => "e.g. delay=20ms, delay=5ms..20ms, delay=lognormal(2ms,0.5)",
        "error" => "e.g. error=EIO or error=ENOSPC",
        "short" => "e.g. short=1..512",
        "throttle" => "e.g. throttle=10MiB/s",
        "iops" => "e.g. iops=100",
        "path" => "e.g. path=**/*.tmp",
        "p" => "e.g. p=0.1",
        "after" | "every" => "a whole number, e.g. after=3",
        "after_bytes" => "e.g. after_bytes=64MiB",
        "burst" => "e.g. burst=1MiB",
        "spike" => "e.g. spike=0.001:200ms",
        "corrupt" => "bitflip:N, zero or random, e.g. corrupt=bitflip:1",
        _ => "see `slowfs --help`",
    }
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A rule of hundreds of kilobytes (a generated glob) is shown as the
        // part around the error, not whole.
        let offset = self.offset.min(self.rule.len());
        let chars: Vec<char> = self.rule.chars().collect();
        let at = self.rule[..offset].chars().count();
        let (from, to) = (at.saturating_sub(60), (at + 60).min(chars.len()));
        let shown: String = chars[from..to].iter().collect();
        let (before, after) = (
            if from > 0 { "..." } else { "" },
            if to < chars.len() { "..." } else { "" },
        );
        if chars.len() > 120 {
            writeln!(f, "in a rule of {} characters: {}", chars.len(), self.kind)?;
        } else {
            writeln!(f, "in rule \"{}\": {}", self.rule, self.kind)?;
        }
        writeln!(f, "    {before}{shown}{after}")?;
        write!(f, "    {}^", " ".repeat(before.len() + at - from))
    }
}

impl std::error::Error for RuleError {}

/// Splits a rule into words at spaces outside parentheses, with each word's byte offset.
/// Splits a rule into words at whitespace, except inside parentheses
/// (`lognormal(2ms, 0.5)`), after a backslash (`path=my\ file`) and inside
/// quotes (`path="my file"`).
fn words(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut start: Option<usize> = None;
    for (i, c) in text.char_indices() {
        let split = if escaped {
            escaped = false;
            false
        } else {
            match (c, quote) {
                ('\\', _) => escaped = true,
                (q, Some(open)) if q == open => quote = None,
                (_, Some(_)) => {}
                ('"' | '\'', None) => quote = Some(c),
                ('(', None) => depth += 1,
                (')', None) => depth -= 1,
                _ => {}
            }
            c.is_whitespace() && depth <= 0 && quote.is_none()
        };
        if split {
            if let Some(s) = start.take() {
                out.push((s, &text[s..i]));
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        out.push((s, &text[s..]));
    }
    out
}

/// A glob as written in a rule: quotes around it removed (`"my file"`), and a
/// backslash before a space dropped (globs escape other characters themselves).
fn unquote_glob(value: &str) -> String {
    let bytes = value.as_bytes();
    if bytes.len() >= 2
        && (bytes[0] == b'"' || bytes[0] == b'\'')
        && bytes[bytes.len() - 1] == bytes[0]
    {
        return value[1..value.len() - 1].to_string();
    }
    value.replace("\\ ", " ")
}

/// The glob as one word of a rule that reads back as the same glob: bare
/// where it can be, else quoted or with its spaces escaped (a quote or a
/// parenthesis in a bare glob would change how the rule splits into words).
pub(crate) fn glob_word(glob: &str) -> String {
    let candidates = [
        glob.to_string(),
        format!("\"{glob}\""),
        format!("'{glob}'"),
        glob.replace(' ', "\\ "),
    ];
    let reads_back = |word: &String| {
        // Followed by another word, as in a rule: an open quote would swallow it.
        let text = format!("path={word} next");
        matches!(words(&text).as_slice(), [(0, w), (_, "next")] if w.len() == 5 + word.len())
            && unquote_glob(word) == glob
    };
    candidates
        .iter()
        .find(|word| reads_back(word))
        .unwrap_or(&candidates[1])
        .clone()
}

fn count(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("expected a whole number, found '{text}'")),
    }
}

fn byte_range(text: &str) -> Result<(u64, u64), String> {
    if text == "0!" {
        // Asked for in so many words: every matching read/write moves nothing.
        return Ok((0, 0));
    }
    if text == "0" || parse_size(text).is_ok_and(|n| n == 0) {
        return Err(
            "short=0 turns a correct program into a wrong one: every read returns \
             0 bytes, a silent false end of file, and every write moves nothing, so write \
             loops spin forever. For slow progress write short=1..512; to fail writes, \
             error=ENOSPC; if 0-byte transfers are what you want to test, write short=0!"
                .into(),
        );
    }
    let (lo, hi) = text
        .split_once("..")
        .ok_or_else(|| format!("expected a byte range like 1..512, found '{text}'"))?;
    let (lo, hi) = (parse_size(lo)?, parse_size(hi)?);
    if lo == 0 {
        return Err(format!(
            "range '{text}' starts at 0: a 0-byte read means end of file and a 0-byte \
             write makes write loops spin (write e.g. 1..{}; to make every read or write move \
             nothing on purpose, write short=0!)",
            hi.max(1)
        ));
    }
    if lo > hi {
        return Err(format!(
            "range '{text}' runs backwards (write the smaller bound first)"
        ));
    }
    Ok((lo, hi))
}

fn parse_ops(word: &str) -> Result<OpSet, ErrorKind> {
    if word == "*" {
        return Ok(OpSet::all());
    }
    let mut set = OpSet::default();
    for name in word.split(',') {
        let op = Op::from_name(name).ok_or_else(|| ErrorKind::UnknownOp(name.to_string()))?;
        set.insert(op);
    }
    Ok(set)
}

/// A rule being assembled from its words.
#[derive(Default)]
struct Builder {
    path: Option<PathGlob>,
    action: Option<Action>,
    when: Trigger,
    burst: Option<(usize, String)>,
    spike: Option<(usize, Spike)>,
    /// `drop` / `drop=evict` after `error=` (Linux write-back error semantics).
    drop: Option<(usize, bool)>,
    seen: Vec<String>,
}

impl Builder {
    fn word(&mut self, key: &str, value: Option<&str>) -> Result<(), ErrorKind> {
        if self.seen.iter().any(|k| k == key) {
            return Err(ErrorKind::Repeated(key.to_string()));
        }
        let known_key = Self::canonical(key).ok_or_else(|| ErrorKind::UnknownKey(key.into()))?;
        self.seen.push(key.to_string());
        let bad = |reason: String| ErrorKind::BadValue {
            key: key.to_string(),
            reason,
        };
        // These take no value (or, for hang, a timeout; for drop, `evict`).
        if value.is_none() && !matches!(known_key, "hang" | "crash" | "stale" | "lose" | "drop") {
            return Err(ErrorKind::MissingValue(known_key));
        }
        let value = value.unwrap_or("");
        let action = match known_key {
            "path" => {
                let value = &unquote_glob(value);
                if value.trim_start_matches('/').is_empty() {
                    return Err(bad(
                        "empty glob (to match every path, leave out path=; for the mount's \
                         top directory only, write path=*)"
                            .into(),
                    ));
                }
                let glob = PathGlob::new(value.trim_start_matches('/')).map_err(|e| {
                    bad(match e.kind() {
                        // The glob parsed, but its automaton is over the size limit.
                        globset::ErrorKind::Regex(cause) => format!(
                            "the glob is too large to match ({cause}: over the matcher's size \
                             limit); use a shorter one, e.g. a pattern such as name* instead of a \
                             list of every name"
                        ),
                        kind => format!("{kind} (escape special characters with '\\')"),
                    })
                })?;
                self.path = Some(glob);
                return Ok(());
            }
            "p" => {
                self.when.p = Some(probability(value).map_err(bad)?);
                return Ok(());
            }
            "after" => {
                self.when.after = Some(
                    value
                        .parse()
                        .map_err(|_| bad(format!("expected a whole number, found '{value}'")))?,
                );
                return Ok(());
            }
            "every" => {
                self.when.every = Some(count(value).map_err(bad)?);
                return Ok(());
            }
            "after_bytes" => {
                self.when.after_bytes = Some(parse_size(value).map_err(bad)?);
                return Ok(());
            }
            "burst" => {
                self.burst = Some((0, value.to_string()));
                return Ok(());
            }
            "spike" => {
                self.spike = Some((0, Spike::parse(value).map_err(bad)?));
                return Ok(());
            }
            "drop" => {
                let evict = match value {
                    "" => false,
                    "evict" => true,
                    other => {
                        return Err(bad(format!(
                            "expected drop or drop=evict (also forget the pages), found '{other}'"
                        )))
                    }
                };
                self.drop = Some((0, evict));
                return Ok(());
            }
            "corrupt" => Action::Corrupt(Corruption::parse(value).map_err(bad)?),
            "stale" => Action::Stale,
            "lose" => Action::Lose,
            "delay" => Action::Delay {
                dist: DelayDist::parse(value).map_err(bad)?,
                spike: None,
            },
            "error" => Action::Error(errno_from_name(value).ok_or_else(|| {
                let names: Vec<&str> = known_errno_names().collect();
                bad(format!(
                    "unknown errno '{value}' (expected one of {})",
                    names.join(" ")
                ))
            })?),
            "short" => {
                let (min, max) = byte_range(value).map_err(bad)?;
                Action::Short { min, max }
            }
            "throttle" => Action::Throttle {
                rate: parse_rate(value).map_err(bad)?,
                burst: None,
            },
            "iops" => Action::Iops {
                rate: count(value).map_err(bad)?,
                burst: None,
            },
            "hang" => Action::Hang {
                timeout: match value {
                    "" => None,
                    v => Some(crate::delay::rule_duration(v).map_err(bad)?),
                },
            },
            "crash" => Action::Crash,
            _ => unreachable!("every canonical key is handled"),
        };
        if let Some(first) = &self.action {
            return Err(ErrorKind::SecondAction {
                first: first.keyword(),
            });
        }
        self.action = Some(action);
        Ok(())
    }

    fn canonical(key: &str) -> Option<&'static str> {
        [
            "path",
            "p",
            "after",
            "every",
            "after_bytes",
            "burst",
            "spike",
            "delay",
            "error",
            "short",
            "throttle",
            "iops",
            "hang",
            "crash",
            "corrupt",
            "stale",
            "lose",
            "drop",
        ]
        .into_iter()
        .find(|k| *k == key)
    }

    fn finish(mut self, ops: OpSet) -> Result<Rule, (usize, ErrorKind)> {
        let mut action = self
            .action
            .take()
            .ok_or((usize::MAX, ErrorKind::MissingAction))?;
        if let Some((offset, text)) = self.burst {
            let bad = |reason| {
                (
                    offset,
                    ErrorKind::BadValue {
                        key: "burst".into(),
                        reason,
                    },
                )
            };
            match &mut action {
                Action::Throttle { burst, .. } => *burst = Some(parse_size(&text).map_err(bad)?),
                Action::Iops { burst, .. } => *burst = Some(count(&text).map_err(bad)?),
                _ => {
                    return Err((
                        offset,
                        ErrorKind::Misplaced {
                            key: "burst",
                            belongs_to: "throttle= or iops=",
                        },
                    ))
                }
            }
        }
        if let Some((offset, new_spike)) = self.spike {
            match &mut action {
                Action::Delay { spike, .. } => *spike = Some(new_spike),
                _ => {
                    return Err((
                        offset,
                        ErrorKind::Misplaced {
                            key: "spike",
                            belongs_to: "delay=",
                        },
                    ))
                }
            }
        }
        if let Some((offset, evict)) = self.drop {
            match action {
                Action::Error(errno) => action = Action::FsyncFail { errno, evict },
                _ => {
                    return Err((
                        offset,
                        ErrorKind::Misplaced {
                            key: "drop",
                            belongs_to: "error= on fsync (e.g. \"fsync error=EIO drop\")",
                        },
                    ))
                }
            }
        }
        let only = |allowed: &[Op]| ops.iter().all(|op| allowed.contains(&op));
        let wrong = |action, applies_to, fix| {
            Err((
                0,
                ErrorKind::WrongOps {
                    action,
                    applies_to,
                    fix,
                },
            ))
        };
        match action {
            Action::Corrupt(_) if !only(&[Op::Read]) => {
                return wrong("corrupt", "read data", "read corrupt=...")
            }
            Action::Stale if !only(&[Op::Read]) => return wrong("stale", "reads", "read stale"),
            Action::Lose if !only(&[Op::Write]) => return wrong("lose", "writes", "write lose"),
            Action::FsyncFail { .. } if !only(&[Op::Fsync, Op::Fdatasync]) => {
                return wrong(
                    "error= drop",
                    "fsync and fdatasync",
                    "fsync,fdatasync error=EIO drop",
                )
            }
            _ => {}
        }
        Ok(Rule {
            ops,
            path: self.path,
            action,
            when: self.when,
        })
    }
}

/// Parses one rule string such as `"write path=**/*.tmp error=ENOSPC p=0.1"`.
///
/// ```
/// let rule = slowfs_faults::parse_rule("read,write delay=5ms..20ms p=0.5").unwrap();
/// assert_eq!(rule.to_string(), "read,write delay=5ms..20ms p=0.5");
///
/// let err = slowfs_faults::parse_rule("write short=9..1").unwrap_err();
/// assert!(err.to_string().contains("runs backwards"));
/// ```
pub fn parse_rule(text: &str) -> Result<Rule, RuleError> {
    parse_words(text, &words(text))
}

/// Parses a rule from pre-split `(offset, word)` pairs of `text`; shared with the TOML loader.
pub(crate) fn parse_words(text: &str, words: &[(usize, &str)]) -> Result<Rule, RuleError> {
    let error = |offset: usize, kind| RuleError {
        rule: text.to_string(),
        offset,
        kind,
    };
    let Some(&(ops_offset, ops_word)) = words.first() else {
        return Err(error(0, ErrorKind::Empty));
    };
    let ops = parse_ops(ops_word).map_err(|kind| error(ops_offset, kind))?;
    let mut builder = Builder::default();
    for &(offset, word) in &words[1..] {
        let (key, value) = match word.split_once('=') {
            Some((key, value)) => (key, Some(value)),
            None => (word, None),
        };
        let before = (
            builder.burst.is_some(),
            builder.spike.is_some(),
            builder.drop.is_some(),
        );
        builder
            .word(key, value)
            .map_err(|kind| error(offset, kind))?;
        // Remember where modifiers stood, to point at them if they turn out misplaced.
        if !before.0 {
            if let Some(burst) = &mut builder.burst {
                burst.0 = offset;
            }
        }
        if !before.1 {
            if let Some(spike) = &mut builder.spike {
                spike.0 = offset;
            }
        }
        if !before.2 {
            if let Some(drop) = &mut builder.drop {
                drop.0 = offset;
            }
        }
    }
    builder.finish(ops).map_err(|(offset, kind)| {
        let offset = if offset == usize::MAX {
            text.trim_end().len()
        } else {
            offset
        };
        error(offset, kind)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn examples_from_the_docs_parse() {
        for text in [
            "fsync delay=250ms",
            "read,write delay=5ms..20ms",
            "write short=1..512",
            "write path=**/*.tmp error=ENOSPC p=0.1",
            "* throttle=4MiB/s",
            "read hang",
            "read hang=5s",
            "rename crash after=2",
            "read delay=lognormal(2ms,0.5) spike=0.001:200ms",
            "read,write iops=100 burst=10",
            "fsync error=EIO drop",
            "fsync,fdatasync path=*.db error=EIO drop=evict after=1",
            "read corrupt=bitflip:3 p=0.01",
            "read path=**/*.bin corrupt=zero",
            "read corrupt=random every=10",
            "read stale",
            "write lose after=5",
        ] {
            let rule = parse_rule(text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(parse_rule(&rule.to_string()).unwrap(), rule, "{text}");
        }
    }

    #[test]
    fn globs_with_quotes_or_parentheses_print_back_as_one_word() {
        // Found by the rule fuzz: path="'" printed bare opened a quote.
        for text in [
            r#"read path="'" delay=1ms"#,
            r#"read path='"' delay=1ms"#,
            r#"read path="a(b" delay=1ms"#,
            r#"read path="x' y" delay=1ms"#,
            r#"read path=a'b"c' delay=1ms"#,
        ] {
            let rule = parse_rule(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let printed = rule.to_string();
            let again = parse_rule(&printed).unwrap_or_else(|e| panic!("{printed}: {e}"));
            assert_eq!(again, rule, "{text} printed as {printed}");
        }
    }

    #[test]
    fn globs_with_spaces_parse_escaped_or_quoted_and_print_back() {
        for text in [
            r"read path=f\ ü error=EIO",
            r#"read path="f ü" error=EIO"#,
            "read path='f ü' error=EIO",
        ] {
            let rule = parse_rule(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            let glob = rule.path.as_ref().unwrap();
            assert!(glob.is_match("f ü"), "{text}");
            assert!(!glob.is_match("f"), "{text}");
            assert_eq!(rule.to_string(), r#"read path="f ü" error=EIO"#);
            assert_eq!(parse_rule(&rule.to_string()).unwrap(), rule);
        }
    }

    #[test]
    fn storage_that_lies_is_refused_where_it_cannot_apply() {
        for (text, says) in [
            (
                "write corrupt=zero",
                "start the rule with 'read corrupt=...'",
            ),
            ("* stale", "'stale' only applies to reads"),
            ("read,write lose", "start the rule with 'write lose'"),
            ("write error=EIO drop", "fsync,fdatasync error=EIO drop"),
            ("fsync delay=1ms drop", "'drop' only goes with error="),
            ("fsync error=EIO drop=now", "drop=evict"),
            ("read corrupt=bitflip:0", "from 1 to 4096"),
            ("read corrupt=shred", "expected bitflip:N, zero or random"),
        ] {
            let err = parse_rule(text).unwrap_err().to_string();
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn absurd_values_are_refused_with_the_fix() {
        for (text, offset, says) in [
            ("write short=0..0", 6, "write short=0!)"),
            ("write short=0", 6, "write loops spin forever"),
            ("read short=0", 5, "silent false end of file"),
            ("read path= error=EIO", 5, "leave out path="),
            (
                "read delay=lognormal(2ms,1e308)",
                5,
                "between 0 and 3, found 1e308",
            ),
            ("read delay=2d", 5, "longer than a day"),
            ("read delay=1ms spike=1:100000d", 15, "longer than a day"),
            ("read delay=1ms..3d", 5, "longer than a day"),
            ("read delay=normal(1ms,2d)", 5, "longer than a day"),
            ("read hang=25h", 5, "longer than a day"),
            ("read delay=2w", 5, "m (minutes), h, d"),
        ] {
            let err = parse_rule(text).unwrap_err();
            assert_eq!(err.offset, offset, "{err}");
            assert!(err.to_string().contains(says), "{err}");
        }
        for (text, secs) in [
            ("read delay=24h", 86_400),
            ("read delay=1d", 86_400),
            ("read delay=250m", 15_000),
            ("read delay=2min", 120),
        ] {
            let rule = parse_rule(text).unwrap_or_else(|e| panic!("{e}"));
            let Action::Delay { dist, .. } = rule.action else {
                panic!("{text}");
            };
            assert_eq!(dist, DelayDist::Fixed(Duration::from_secs(secs)), "{text}");
        }
    }

    #[test]
    fn spaces_inside_parentheses_are_one_word() {
        let rule = parse_rule("read delay=normal(10ms, 2ms)").unwrap();
        assert_eq!(
            rule.action,
            Action::Delay {
                dist: DelayDist::Normal {
                    mean: Duration::from_millis(10),
                    sd: Duration::from_millis(2)
                },
                spike: None
            }
        );
    }

    #[test]
    fn errors_point_at_the_word_and_say_the_fix() {
        let err = parse_rule("read,wirte delay=1ms").unwrap_err();
        assert_eq!(err.offset, 0);
        assert!(matches!(err.kind, ErrorKind::UnknownOp(ref op) if op == "wirte"));

        let err = parse_rule("read delay=1ms error=EIO").unwrap_err();
        assert_eq!(err.offset, 15);
        assert!(err.to_string().contains("write a second rule"), "{err}");

        let err = parse_rule("read delay").unwrap_err();
        assert!(err.to_string().contains("delay=20ms"), "{err}");

        let err = parse_rule("read p=0.5").unwrap_err();
        assert_eq!(err.kind, ErrorKind::MissingAction);

        let err = parse_rule("read error=EWHAT").unwrap_err();
        assert!(err.to_string().contains("ENOSPC"), "{err}");

        let err = parse_rule("read delay=1ms burst=5").unwrap_err();
        assert_eq!(err.offset, 15);

        let err = parse_rule("   ").unwrap_err();
        assert_eq!(err.kind, ErrorKind::Empty);

        let rendered = parse_rule("write short=9..1").unwrap_err().to_string();
        assert!(rendered.ends_with("          ^"), "{rendered}");
    }
}

//! Violations grouped for a person to read in one screen: one group per cause
//! (the checker's whole message, normalised), the patterns of lost operations
//! in it, and its smallest example showing only what matters.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::text::{describe, kept_spec, paths_of, ranges};
use crate::durability::{Keep, Kept, Log, NodeId};

/// A crash state the checker rejected.
#[derive(Debug, Clone)]
pub struct Violation {
    /// Crash after this many operations.
    pub point: usize,
    /// The pending operations kept, and how much of each.
    pub kept: Kept,
    /// The pending operations at that point.
    pub pending: Vec<usize>,
    /// What the checker printed.
    pub output: String,
    /// The checker's exit status (-1: a persistent checker's answer).
    pub status: i32,
}

impl Violation {
    /// The state as `--state` spells it.
    pub fn state(&self) -> String {
        format!("{}/{}", self.point, kept_spec(&self.kept))
    }

    /// Pending operations the state did not keep whole: (index, what is
    /// left of it: nothing, a torn prefix, its size only).
    pub fn lost(&self) -> impl Iterator<Item = (usize, Option<Keep>)> + '_ {
        self.pending
            .iter()
            .filter_map(|&i| match self.kept.get(&i) {
                Some(Keep::Whole) => None,
                Some(keep) => Some((i, Some(*keep))),
                None => Some((i, None)),
            })
    }
}

/// How the message of a state whose checker was killed for time begins
/// (after [`normalise`] too): no answer about the state, not a state.
pub const CHECKER_TIMED_OUT: &str = "checker timed out after";

/// Whether `message` is a checker's timeout ([`CHECKER_TIMED_OUT`]).
pub fn is_checker_timeout(message: &str) -> bool {
    message.starts_with(CHECKER_TIMED_OUT)
}

/// Violations with one cause.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    /// The checker's message, normalised (numbers, hashes, temp names masked).
    pub message: String,
    /// How many violations.
    pub count: usize,
    /// Their crash points, as ranges.
    pub points: String,
    /// Patterns of lost operations (path names, numbers masked), most common
    /// first, with counts (at most 5).
    pub patterns: Vec<(String, usize)>,
    /// A few examples, smallest first (fewest lost operations, earliest point).
    pub examples: Vec<Example>,
    /// The persistence models under which at least one of its states can
    /// happen ([`super::models`]); `strict` always.
    #[serde(default)]
    pub models: Vec<String>,
    /// The models under which none of its states can happen, but at least
    /// one is ruled out only by an approximate rule ([`super::labels`]):
    /// unknown there, not never.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<String>,
}

/// One violation as a person reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Example {
    /// `CRASH_POINT/KEPT` for `--replay`.
    pub state: String,
    /// Crash after this many operations.
    pub point: usize,
    /// What was lost: each dropped or torn operation that touched a path not
    /// ignored, described.
    pub lost: Vec<String>,
    /// Pending operations kept whole (not listed).
    pub kept: usize,
    /// The checker's output (at most 20 lines).
    pub output: String,
}

/// How many examples a group keeps.
pub const EXAMPLES_PER_GROUP: usize = 3;
/// How many patterns of lost operations a group counts separately.
const PATTERNS_KEPT: usize = 50;

/// Groups violations by cause as they come, keeping per group only counts,
/// crash points and its best examples: memory grows with the causes, not with
/// the violations (a run can find 100,000 of them).
pub struct Grouper<'a> {
    log: &'a Log,
    facts: super::models::ModelFacts,
    names: HashMap<NodeId, String>,
    ignored: globset::GlobSet,
    annotate: Option<Annotate>,
    tally: Tally,
}

/// Says more about an operation than its path and bytes (e.g. what the
/// blocks of a block device's write hold); shown after its description.
pub type Annotate = Box<dyn Fn(&crate::durability::LogOp) -> Option<String> + Send + Sync>;

/// What a [`Grouper`] has taken in, in a form that travels (JSON) and adds
/// up: the tallies of the shards of one run [`merge`](Tally::merge) into the
/// unsharded run's (exactly, while a group has at most 50 patterns).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    groups: BTreeMap<String, Building>,
    total: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Building {
    count: usize,
    points: std::collections::BTreeSet<usize>,
    patterns: BTreeMap<String, usize>,
    /// The smallest examples, by rank.
    examples: Vec<(Rank, Example)>,
    /// The models under which some violation of the group can happen.
    #[serde(default)]
    models: std::collections::BTreeSet<super::models::FsModel>,
    /// The models some violation of the group is unknown on.
    #[serde(default)]
    unknown: std::collections::BTreeSet<super::models::FsModel>,
}

/// Smaller is a better example: fewer lost operations, an earlier point, then
/// the state's spelling (so that the order of arrival never matters).
type Rank = (usize, usize, String);

impl Building {
    fn offer(&mut self, rank: Rank, example: impl FnOnce() -> Example) {
        if self.examples.len() < EXAMPLES_PER_GROUP
            || self.examples.last().is_some_and(|(worst, _)| rank < *worst)
        {
            self.examples.push((rank, example()));
            self.examples.sort_by(|a, b| a.0.cmp(&b.0));
            self.examples.dedup_by(|a, b| a.0 == b.0);
            self.examples.truncate(EXAMPLES_PER_GROUP);
        }
    }

    fn count_pattern(&mut self, pattern: String, count: usize) {
        if self.patterns.len() < PATTERNS_KEPT || self.patterns.contains_key(&pattern) {
            *self.patterns.entry(pattern).or_default() += count;
        }
    }
}

impl Tally {
    /// Violations taken in.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Adds another tally of the same run's states (another shard's).
    pub fn merge(&mut self, other: Tally) {
        self.total += other.total;
        for (message, theirs) in other.groups {
            let Some(ours) = self.groups.get_mut(&message) else {
                self.groups.insert(message, theirs);
                continue;
            };
            ours.count += theirs.count;
            ours.points.extend(theirs.points);
            for (pattern, count) in theirs.patterns {
                ours.count_pattern(pattern, count);
            }
            for (rank, example) in theirs.examples {
                ours.offer(rank, || example);
            }
            ours.models.extend(theirs.models);
            ours.unknown.extend(theirs.unknown);
        }
    }

    /// The groups, largest first.
    pub fn groups(&self) -> Vec<Group> {
        let mut groups: Vec<Group> = self
            .groups
            .iter()
            .map(|(message, g)| {
                let mut patterns: Vec<(String, usize)> =
                    g.patterns.iter().map(|(p, n)| (p.clone(), *n)).collect();
                patterns.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                patterns.truncate(5);
                let points: Vec<usize> = g.points.iter().copied().collect();
                Group {
                    message: message.clone(),
                    count: g.count,
                    points: ranges(&points),
                    patterns,
                    examples: g.examples.iter().map(|(_, e)| e.clone()).collect(),
                    models: g.models.iter().map(|m| m.name().to_string()).collect(),
                    unknown: g
                        .unknown
                        .difference(&g.models)
                        .map(|m| m.name().to_string())
                        .collect(),
                }
            })
            .collect();
        groups.sort_by(|a, b| b.count.cmp(&a.count).then(a.message.cmp(&b.message)));
        groups
    }
}

impl<'a> Grouper<'a> {
    /// A grouper for violations of `log`'s crash states; `ignored` says which
    /// paths were left out of the states (operations only on those are not
    /// shown as lost).
    pub fn new(log: &'a Log, ignored: globset::GlobSet) -> Grouper<'a> {
        Grouper {
            log,
            facts: super::models::ModelFacts::new(log),
            names: super::text::node_names(log),
            ignored,
            annotate: None,
            tally: Tally::default(),
        }
    }

    /// Lost operations described with `annotate`'s words after each.
    pub fn annotating(mut self, annotate: Annotate) -> Grouper<'a> {
        self.annotate = Some(annotate);
        self
    }

    /// Violations taken in so far.
    pub fn total(&self) -> usize {
        self.tally.total
    }

    /// Takes in one violation.
    pub fn add(&mut self, v: &Violation) {
        self.tally.total += 1;
        let lost = lost_ops(
            self.log,
            v,
            &self.names,
            &self.ignored,
            self.annotate.as_ref(),
        );
        let mut pattern: Vec<String> = lost.iter().map(|l| normalise(strip_index(l))).collect();
        pattern.sort();
        pattern.dedup();
        let group = self
            .tally
            .groups
            .entry(normalise(&v.output))
            .or_insert_with(|| Building {
                count: 0,
                points: Default::default(),
                patterns: BTreeMap::new(),
                examples: Vec::new(),
                models: Default::default(),
                unknown: Default::default(),
            });
        group.count += 1;
        let labels = self.facts.labels(self.log, v.point, &v.pending, &v.kept);
        group.models.extend(labels.can);
        group.unknown.extend(labels.unknown);
        group.points.insert(v.point);
        group.count_pattern(pattern.join("; "), 1);
        let rank = (v.lost().count(), v.point, v.state());
        group.offer(rank, || Example {
            state: v.state(),
            point: v.point,
            kept: v.pending.len() - v.lost().count(),
            lost,
            output: v.output.lines().take(20).collect::<Vec<_>>().join("\n"),
        });
    }

    /// What was taken in, to merge with other shards' or to group.
    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// The groups, largest first.
    pub fn groups(&self) -> Vec<Group> {
        self.tally.groups()
    }
}

/// `op 12 lost: write db` -> `lost: write db` (patterns compare kinds of loss).
fn strip_index(lost: &str) -> &str {
    lost.split_once(' ')
        .and_then(|(_, rest)| rest.split_once(' '))
        .map_or(lost, |(_, rest)| rest)
}

/// Groups violations by cause (see [`Grouper`]).
pub fn group(log: &Log, violations: &[Violation], ignored: &globset::GlobSet) -> Vec<Group> {
    let mut grouper = Grouper::new(log, ignored.clone());
    for v in violations {
        grouper.add(v);
    }
    grouper.groups()
}

/// The operations a violation's state lost, described, leaving out those that
/// touch only ignored paths.
fn lost_ops(
    log: &Log,
    v: &Violation,
    names: &HashMap<NodeId, String>,
    ignored: &globset::GlobSet,
    annotate: Option<&Annotate>,
) -> Vec<String> {
    v.lost()
        .filter(|(i, _)| {
            let paths = paths_of(&log.ops()[*i], names);
            paths.is_empty() || paths.iter().any(|p| !ignored.is_match(p))
        })
        .map(|(i, left)| {
            let op = &log.ops()[i];
            let mut what = describe(op, names);
            if let Some(note) = annotate.and_then(|a| a(op)) {
                what = format!("{what}: {note}");
            }
            match left {
                Some(Keep::Torn(bytes)) => format!("op {i} torn after {bytes} bytes: {what}"),
                Some(Keep::TornTail(bytes)) => {
                    format!("op {i} torn, its first {bytes} bytes lost: {what}")
                }
                Some(Keep::SizeOnly) => format!("op {i} kept its size, not its data: {what}"),
                Some(Keep::Whole) | None => format!("op {i} lost: {what}"),
            }
        })
        .collect()
}

/// A checker message made comparable: every line normalised (words with a
/// digit, long hex words and temp-looking names become `#`, runs of masked
/// items collapse), identical lines once, joined with ` / `.
///
/// ```
/// use slowfs_faults::crash::report::normalise;
/// assert_eq!(normalise("row 17 missing"), normalise("row 18 missing"));
/// assert_eq!(
///     normalise("missing blob 3f2a9c1d\nmissing blob 77aa01bb"),
///     "missing blob #"
/// );
/// assert_eq!(normalise("lost: a1, b2, c3"), normalise("lost: x9"));
/// assert_ne!(normalise("notice: unborn branch\nmissing blob 3f"), normalise("notice: unborn branch"));
/// ```
pub fn normalise(message: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    for line in message.lines().map(normalise_line) {
        if !line.is_empty() && !lines.contains(&line) {
            lines.push(line);
        }
        if lines.len() >= 12 {
            break;
        }
    }
    lines.join(" / ")
}

fn normalise_line(line: &str) -> String {
    let mut out = String::new();
    let mut word = String::new();
    let masked = |word: &str| {
        word.chars().any(|c| c.is_ascii_digit())
            || (word.len() >= 8 && word.chars().all(|c| c.is_ascii_hexdigit()))
            || word.starts_with("tmp")
    };
    let flush = |word: &mut String, out: &mut String| {
        if !word.is_empty() {
            out.push_str(if masked(word) { "#" } else { word });
        }
        word.clear();
    };
    for c in line.trim().chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    collapse_runs(&out)
}

/// `#, #, #` -> `#`, and `# #` -> `#`: lists of varying length are one cause.
fn collapse_runs(text: &str) -> String {
    let mut out = String::new();
    let mut pending_sep = String::new();
    let mut last_was_mask = false;
    for c in text.chars() {
        if c == '#' {
            if last_was_mask && pending_sep.chars().all(|s| ", ;|".contains(s)) {
                pending_sep.clear();
                continue;
            }
            out.push_str(&pending_sep);
            pending_sep.clear();
            out.push('#');
            last_was_mask = true;
        } else if last_was_mask && ", ;|".contains(c) {
            pending_sep.push(c);
        } else {
            out.push_str(&pending_sep);
            pending_sep.clear();
            out.push(c);
            last_was_mask = false;
        }
    }
    out.push_str(&pending_sep);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durability::LogBuilder;

    #[test]
    fn one_cause_is_one_group_and_examples_show_only_losses() {
        let log = LogBuilder::new()
            .create("db", 2)
            .create("db-shm", 3)
            .write(2, 0, [1; 10])
            .build();
        let v = |point, kept: Kept, output: &str| Violation {
            point,
            kept,
            pending: log.pending(point),
            output: output.into(),
            status: 1,
        };
        let violations = vec![
            v(
                3,
                Kept::from([(0, Keep::Whole)]),
                "row 17 missing in tmpa8f3",
            ),
            v(3, Kept::new(), "row 18 missing in tmpzz91"),
            v(2, Kept::new(), "bad header"),
        ];
        let mut ignored = globset::GlobSetBuilder::new();
        ignored.add(globset::Glob::new("*-shm").unwrap());
        let groups = group(&log, &violations, &ignored.build().unwrap());
        assert_eq!(groups.len(), 2, "{groups:#?}");
        assert_eq!(groups[0].count, 2);
        let smallest = &groups[0].examples[0];
        // op 1 (db-shm) is ignored: not shown; op 0 kept whole: not shown.
        assert_eq!(smallest.lost, ["op 2 lost: write db [0..10)"]);
        assert_eq!(smallest.kept, 1);
    }

    /// Shards' tallies merge into the unsharded run's whatever the split and
    /// the order of arrival.
    #[test]
    fn tallies_of_shards_merge_into_the_whole_runs() {
        let log = LogBuilder::new()
            .create("a", 2)
            .create("b", 3)
            .create("c", 4)
            .build();
        let all: Vec<Violation> = (0..=3)
            .flat_map(|point| {
                let pending = log.pending(point);
                (0..4).map(move |n| Violation {
                    point,
                    kept: pending
                        .iter()
                        .take(n % 2)
                        .map(|&i| (i, Keep::Whole))
                        .collect(),
                    pending: pending.clone(),
                    output: format!("missing {}", ["a", "b"][n % 2]),
                    status: 1,
                })
            })
            .collect();
        let none = globset::GlobSet::empty();
        let mut whole = Grouper::new(&log, none.clone());
        all.iter().rev().for_each(|v| whole.add(v));
        for shards in 1..=4 {
            let mut merged = Tally::default();
            for k in 0..shards {
                let mut shard = Grouper::new(&log, none.clone());
                for v in all.iter().skip(k).step_by(shards) {
                    shard.add(v);
                }
                merged.merge(shard.tally().clone());
            }
            assert_eq!(merged.groups(), whole.groups(), "{shards} shards");
            assert_eq!(merged.total(), all.len());
        }
    }
}

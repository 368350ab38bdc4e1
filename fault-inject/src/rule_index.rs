//! Which rules can apply to a request, found without trying every rule.
//!
//! Per operation, the rules with no path glob. Then the path globs, each
//! distinct glob once, in two kinds:
//! - a glob that starts with literal text (`logs/*.txt`, `dir7/**/*.db`) is
//!   filed under that text and tried only on paths that start with it; its
//!   matcher is compiled the first time such a path comes, so 10,000 rules on
//!   other directories cost a few hundred bytes each and nothing per request;
//! - the others (`**/*.db`, `*.tmp`) are matched together, in `GlobSet`s of at
//!   most [`CHUNK`] globs, built when the rules are accepted: a set too large
//!   for the matcher's automaton is split until each part builds (each glob
//!   alone builds: [`crate::PathGlob::new`] checks), so rules that parse one by
//!   one can always be used together, and nothing is compiled inside a request
//!   except the one glob that request needs.

use std::collections::HashMap;
use std::sync::Arc;

use globset::{GlobSet, GlobSetBuilder};

use crate::op::Op;
use crate::rule::{PathGlob, Rule};

/// Most globs matched together in one `GlobSet`.
const CHUNK: usize = 256;

/// The index of one list of rules.
#[derive(Debug)]
pub(crate) struct RuleIndex {
    /// Per operation (`Op as usize`), positions of the rules with no path glob.
    everywhere: Vec<Vec<usize>>,
    /// Per operation, whether any rule names it.
    named: Vec<bool>,
    /// Every distinct path glob, with the positions of the rules using it.
    globs: Vec<(PathGlob, Vec<usize>)>,
    /// Globs (indices into `globs`) by their literal leading text.
    by_prefix: HashMap<String, Vec<usize>>,
    /// The lengths of those texts, for looking a path's prefixes up.
    prefix_lengths: Vec<usize>,
    /// The other globs, matched together: each set with the indices (into
    /// `globs`) of its members.
    unanchored: Vec<(Arc<GlobSet>, Vec<usize>)>,
}

impl RuleIndex {
    /// Indexes `rules` (in order).
    pub(crate) fn new<'a>(rules: impl IntoIterator<Item = &'a Rule>) -> RuleIndex {
        let mut everywhere = vec![Vec::new(); Op::ALL.len()];
        let mut named = vec![false; Op::ALL.len()];
        let mut slot_of: HashMap<String, usize> = HashMap::new();
        let mut globs: Vec<(PathGlob, Vec<usize>)> = Vec::new();
        for (i, rule) in rules.into_iter().enumerate() {
            for &op in Op::ALL {
                named[op as usize] |= rule.ops.contains(op);
            }
            match &rule.path {
                None => {
                    for &op in Op::ALL {
                        if rule.ops.contains(op) {
                            everywhere[op as usize].push(i);
                        }
                    }
                }
                Some(path) => {
                    let slot = *slot_of.entry(path.as_str().to_string()).or_insert_with(|| {
                        globs.push((path.clone(), Vec::new()));
                        globs.len() - 1
                    });
                    globs[slot].1.push(i);
                }
            }
        }
        let mut by_prefix: HashMap<String, Vec<usize>> = HashMap::new();
        let mut loose = Vec::new();
        for (slot, (glob, _)) in globs.iter().enumerate() {
            match literal_prefix(glob.as_str()) {
                "" => loose.push(slot),
                prefix => by_prefix.entry(prefix.to_string()).or_default().push(slot),
            }
        }
        let mut prefix_lengths: Vec<usize> = by_prefix.keys().map(String::len).collect();
        prefix_lengths.sort_unstable();
        prefix_lengths.dedup();
        let unanchored = loose
            .chunks(CHUNK)
            .flat_map(|chunk| build_sets(&globs, chunk))
            .collect();
        RuleIndex {
            everywhere,
            named,
            globs,
            by_prefix,
            prefix_lengths,
            unanchored,
        }
    }

    /// Whether any rule names `op`.
    pub(crate) fn names(&self, op: Op) -> bool {
        self.named[op as usize]
    }

    /// Positions of the rules that name `op` and match `path`, in order;
    /// `names_op(i)` tells whether the rule at position `i` names `op`.
    pub(crate) fn matching(
        &self,
        op: Op,
        path: &str,
        names_op: impl Fn(usize) -> bool,
    ) -> Vec<usize> {
        let mut found = self.everywhere[op as usize].clone();
        if self.globs.is_empty() {
            return found;
        }
        let before = found.len();
        let mut take = |slot: usize| {
            found.extend(self.globs[slot].1.iter().copied().filter(|&i| names_op(i)));
        };
        for &len in &self.prefix_lengths {
            // Not a character boundary of this path, or past its end.
            let Some(prefix) = path.get(..len) else {
                continue;
            };
            for &slot in self.by_prefix.get(prefix).into_iter().flatten() {
                if self.globs[slot].0.is_match(path) {
                    take(slot);
                }
            }
        }
        for (set, members) in &self.unanchored {
            for member in set.matches(path) {
                take(members[member]);
            }
        }
        if found.len() > before {
            found.sort_unstable();
        }
        found
    }
}

/// The literal text a glob starts with (up to its first special character);
/// every path it matches starts with it.
fn literal_prefix(glob: &str) -> &str {
    let end = glob.find(['*', '?', '[', '{', '\\']).unwrap_or(glob.len());
    &glob[..end]
}

/// `GlobSet`s of the globs at `members`: one, or, where the automaton's size
/// limit refuses that, halves, down to single globs (which always build).
fn build_sets(
    globs: &[(PathGlob, Vec<usize>)],
    members: &[usize],
) -> Vec<(Arc<GlobSet>, Vec<usize>)> {
    let mut builder = GlobSetBuilder::new();
    for &slot in members {
        builder.add(globs[slot].0.glob().clone());
    }
    match builder.build() {
        Ok(set) => vec![(Arc::new(set), members.to_vec())],
        Err(_) if members.len() > 1 => {
            let (left, right) = members.split_at(members.len() / 2);
            let mut sets = build_sets(globs, left);
            sets.extend(build_sets(globs, right));
            sets
        }
        // A glob that built alone when its rule was parsed: match nothing
        // rather than fail a request (not reached).
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_rule;

    fn rules(texts: &[String]) -> Vec<Rule> {
        texts.iter().map(|t| parse_rule(t).unwrap()).collect()
    }

    fn matching(list: &[Rule], op: Op, path: &str) -> Vec<usize> {
        RuleIndex::new(list).matching(op, path, |i| list[i].ops.contains(op))
    }

    #[test]
    fn matches_by_op_and_glob_in_rule_order() {
        let list = rules(&[
            "read path=**/*.db delay=1ms".into(),
            "write delay=1ms".into(),
            "read,write path=**/*.db delay=2ms".into(),
            "read path=logs/** delay=1ms".into(),
            "read path=logs/x.* delay=1ms".into(),
            "read path=log delay=1ms".into(),
        ]);
        assert_eq!(matching(&list, Op::Read, "a/x.db"), [0, 2]);
        assert_eq!(matching(&list, Op::Write, "a/x.db"), [1, 2]);
        assert_eq!(matching(&list, Op::Read, "logs/x.db"), [0, 2, 3, 4]);
        assert_eq!(matching(&list, Op::Read, "log"), [5]);
        assert!(matching(&list, Op::Read, "lo").is_empty());
        assert!(matching(&list, Op::Fsync, "a/x.db").is_empty());
    }

    #[test]
    fn the_literal_prefix_stops_at_the_first_special_character() {
        assert_eq!(literal_prefix("dir7/**/*.db"), "dir7/");
        assert_eq!(literal_prefix("**/*.db"), "");
        assert_eq!(literal_prefix("a{b,c}"), "a");
        assert_eq!(literal_prefix("my\\ file"), "my");
        assert_eq!(literal_prefix("plain"), "plain");
    }

    /// Thousands of globs that each compile, but together exceed the
    /// automaton's limit: split into sets that build, and each still matches
    /// what it matched alone (they used to panic every worker at the first
    /// request).
    #[test]
    fn globs_too_large_for_one_set_are_split_and_all_still_match() {
        let texts: Vec<String> = (0..6000)
            .map(|n| format!("read path=**/[!.]*{n}?/**/*.{{db,log,tmp}} delay=1ms"))
            .collect();
        let list = rules(&texts);
        let index = RuleIndex::new(&list);
        assert!(index.unanchored.len() >= 6000 / CHUNK);
        let names = |i: usize| list[i].ops.contains(Op::Read);
        // `[!.]*1?` matches a4321z too, as do 21 and 321.
        assert_eq!(
            index.matching(Op::Read, "x/a4321z/b/c.log", names),
            [1, 21, 321, 4321]
        );
        assert!(index.matching(Op::Read, "x/.4321z/c.log", names).is_empty());
    }

    #[test]
    fn ten_thousand_rules_on_other_directories_compile_nothing_for_a_request() {
        let texts: Vec<String> = (0..10_000)
            .map(|n| format!("read,write,getattr path=dir{n}/**/*.db delay=1ms"))
            .collect();
        let list = rules(&texts);
        let index = RuleIndex::new(&list);
        assert!(index.unanchored.is_empty());
        let names = |i: usize| list[i].ops.contains(Op::Read);
        assert!(index.matching(Op::Read, "elsewhere/x.db", names).is_empty());
        assert_eq!(index.matching(Op::Read, "dir17/a/b.db", names), [17]);
        // dir1, dir17 and dir170... share leading text: only real matches count.
        assert_eq!(index.matching(Op::Read, "dir170/b.db", names), [170]);
    }
}

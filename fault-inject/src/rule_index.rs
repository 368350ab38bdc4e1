//! Which rules can apply to a request: per operation the rules without a path
//! glob, and every distinct path glob once in one `GlobSet` shared by all
//! operations, so a request is matched against all the rules in one pass (10,000
//! rules on other paths or operations cost next to nothing).
//!
//! The set is built where rules are accepted (a plan's creation, `ctl set`,
//! `slowfs check`), never inside a request: globs that compile one by one can
//! still be too large together for the matcher's automaton, and that is an
//! error for the person adding the rules, not a panic in a file system call.

use std::collections::HashMap;
use std::fmt;

use crate::op::Op;
use crate::rule::Rule;

/// The index of one list of rules.
#[derive(Debug)]
pub(crate) struct RuleIndex {
    /// Per operation (`Op as usize`), positions of the rules with no path glob.
    everywhere: Vec<Vec<usize>>,
    /// Every distinct path glob.
    globs: globset::GlobSet,
    /// For each glob of `globs`, the positions of the rules that use it.
    by_glob: Vec<Vec<usize>>,
    /// Per operation, whether any rule names it.
    named: Vec<bool>,
}

/// Rules whose path globs cannot be matched together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSetError {
    /// Distinct path globs in the rejected set.
    pub globs: usize,
    /// The matcher's complaint.
    pub cause: String,
}

impl fmt::Display for RuleSetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the rules' {} distinct path glob(s) are too large to match together ({}); \
             nothing was changed. Use fewer or simpler globs: one rule with \
             `path=**/*.{{db,log}}` instead of one rule per directory, or a glob \
             without long {{a,b,...}} lists",
            self.globs, self.cause
        )
    }
}

impl std::error::Error for RuleSetError {}

impl RuleIndex {
    /// Indexes `rules` (in order); fails when their globs cannot be matched together.
    pub(crate) fn new<'a>(
        rules: impl IntoIterator<Item = &'a Rule>,
    ) -> Result<RuleIndex, RuleSetError> {
        let mut everywhere = vec![Vec::new(); Op::ALL.len()];
        let mut named = vec![false; Op::ALL.len()];
        let mut slot_of: HashMap<&str, usize> = HashMap::new();
        let mut by_glob: Vec<Vec<usize>> = Vec::new();
        let mut builder = globset::GlobSetBuilder::new();
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
                    let slot = *slot_of.entry(path.as_str()).or_insert_with(|| {
                        builder.add(path.glob().clone());
                        by_glob.push(Vec::new());
                        by_glob.len() - 1
                    });
                    by_glob[slot].push(i);
                }
            }
        }
        let globs = builder.build().map_err(|e| RuleSetError {
            globs: by_glob.len(),
            cause: e.to_string(),
        })?;
        Ok(RuleIndex {
            everywhere,
            globs,
            by_glob,
            named,
        })
    }

    /// Whether any rule names `op`.
    pub(crate) fn names(&self, op: Op) -> bool {
        self.named[op as usize]
    }

    /// Positions of the rules that name `op` and match `path`, in order; `ops`
    /// tells whether the rule at a position names `op`.
    pub(crate) fn matching(
        &self,
        op: Op,
        path: &str,
        names_op: impl Fn(usize) -> bool,
    ) -> Vec<usize> {
        let mut found = self.everywhere[op as usize].clone();
        if !self.by_glob.is_empty() {
            let before = found.len();
            for slot in self.globs.matches(path) {
                found.extend(self.by_glob[slot].iter().copied().filter(|&i| names_op(i)));
            }
            if found.len() > before {
                found.sort_unstable();
            }
        }
        found
    }
}

/// Checks that `rules` can be used together in one mount (their path globs
/// build one matcher): what `slowfs check`, `--set` and config files run before
/// a mount starts.
pub fn check_rules(rules: &[Rule]) -> Result<(), RuleSetError> {
    RuleIndex::new(rules).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_rule;

    fn rules(texts: &[&str]) -> Vec<Rule> {
        texts.iter().map(|t| parse_rule(t).unwrap()).collect()
    }

    #[test]
    fn matches_by_op_and_glob_in_rule_order() {
        let list = rules(&[
            "read path=**/*.db delay=1ms",
            "write delay=1ms",
            "read,write path=**/*.db delay=2ms",
            "read path=logs/** delay=1ms",
        ]);
        let index = RuleIndex::new(&list).unwrap();
        let list = &list;
        let names = |op| move |i: usize| list[i].ops.contains(op);
        assert_eq!(index.matching(Op::Read, "a/x.db", names(Op::Read)), [0, 2]);
        assert_eq!(
            index.matching(Op::Write, "a/x.db", names(Op::Write)),
            [1, 2]
        );
        assert_eq!(
            index.matching(Op::Read, "logs/x.db", names(Op::Read)),
            [0, 2, 3]
        );
        assert!(index
            .matching(Op::Fsync, "a/x.db", names(Op::Fsync))
            .is_empty());
    }

    #[test]
    fn globs_too_large_together_are_an_error_not_a_panic() {
        // Each of these compiles alone; thousands together exceed the automaton's limit.
        let many: Vec<String> = (0..6000)
            .map(|n| format!("read path=**/[!.]*{n}?/**/*.{{db,log,tmp}} delay=1ms"))
            .collect();
        let list: Vec<Rule> = many.iter().map(|t| parse_rule(t).unwrap()).collect();
        let err = check_rules(&list).unwrap_err();
        assert_eq!(err.globs, 6000);
        assert!(err.to_string().contains("nothing was changed"), "{err}");
    }
}

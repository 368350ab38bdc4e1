//! Known findings about third-party engines, like xfstests' exclude lists: a cell
//! that matches its expectation is reported as expected; one that differs (a new
//! failure, or a known failure now passing) changes the exit code and says so.
//!
//! ```toml
//! [[expect]]
//! engine = "tokio-fs"        # the engine's name as the matrix shows it
//! suite = "positioned"       # a suite (`slowfs-conformance list`)
//! status = "fail"            # pass, fail, unsupported, caught, inconclusive, timeout,
//!                            # or several: "fail|pass" for a timing-dependent finding
//! why = "tokio::fs has no pread: positioned reads are seek + read, which move the cursor"
//! ```
//!
//! An unknown suite or status is an error (exit 2), so a typo cannot hide a cell.

use std::path::Path;

use serde::Deserialize;

/// One known finding.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Expectation {
    /// The engine.
    pub engine: String,
    /// The suite.
    pub suite: String,
    /// The status the cell is expected to have (one of [`STATUSES`]), or
    /// several separated by `|` for a finding that depends on timing.
    pub status: String,
    /// Why (and a link to the library's issue, if any).
    pub why: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    expect: Vec<Expectation>,
}

/// The expectations shipped with the suites (for the built-in engines).
pub const BUILT_IN: &str = include_str!("../expectations.toml");

/// The statuses a cell can have, as expectations files spell them.
pub const STATUSES: &[&str] = &[
    "pass",
    "fail",
    "unsupported",
    "caught",
    "inconclusive",
    "timeout",
];

/// Parses expectations from TOML text. A suite or status that does not exist
/// is an error naming the known ones (a typo must not silently expect nothing).
pub fn parse(name: &str, text: &str) -> Result<Vec<Expectation>, String> {
    let expect = toml::from_str::<File>(text)
        .map(|f| f.expect)
        .map_err(|e| format!("{name}: {e}"))?;
    for (i, e) in expect.iter().enumerate() {
        let at = || format!("{name}: [[expect]] #{} ({} x {})", i + 1, e.engine, e.suite);
        if crate::Suite::from_name(&e.suite).is_none() {
            return Err(format!(
                "{}: unknown suite '{}' (known: {})",
                at(),
                e.suite,
                crate::Suite::ALL
                    .iter()
                    .map(|s| s.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        for status in e.status.split('|').map(str::trim) {
            if !STATUSES.contains(&status) {
                return Err(format!(
                    "{}: unknown status '{status}' (known: {}; several as \"fail|pass\")",
                    at(),
                    STATUSES.join(", ")
                ));
            }
        }
        if e.engine.trim().is_empty() {
            return Err(format!("{}: `engine` is empty", at()));
        }
    }
    Ok(expect)
}

/// Reads an expectations file.
pub fn load(path: &Path) -> Result<Vec<Expectation>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&path.display().to_string(), &text)
}

/// The expectation for one cell, if any.
pub fn find<'a>(
    expectations: &'a [Expectation],
    engine: &str,
    suite: &str,
) -> Option<&'a Expectation> {
    expectations
        .iter()
        .find(|e| e.engine == engine && e.suite == suite)
}

//! Known findings about third-party engines, like xfstests' exclude lists: a cell
//! that matches its expectation is reported as expected; one that differs (a new
//! failure, or a known failure now passing) changes the exit code and says so.
//!
//! ```toml
//! [[expect]]
//! engine = "tokio-fs"
//! suite = "positioned"
//! status = "fail"
//! why = "tokio::fs has no pread: positioned reads are seek + read, which move the cursor"
//! ```

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
    /// The status the cell is expected to have (`fail`, `unsupported`, `pass`), or
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

/// Parses expectations from TOML text.
pub fn parse(name: &str, text: &str) -> Result<Vec<Expectation>, String> {
    toml::from_str::<File>(text)
        .map(|f| f.expect)
        .map_err(|e| format!("{name}: {e}"))
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

//! Crash-state exploration as a library, no I/O: the model of what a crash
//! keeps is in [`crate::durability`] (a [`Log`](crate::durability::Log) of
//! operations over a tree); this module enumerates and searches its crash
//! states and reports what a checker rejected.
//!
//! * [`points`]: the crash points of a log, walked in O(1) per operation;
//! * [`states`]: the crash states of one point (the one enumerator);
//! * [`search`]: which state to check next, each distinct state once, bounded
//!   memory, over any [`search::StateSpace`];
//! * [`trees`]: the space of a log's file trees;
//! * [`blocks`]: the space of a block device (an image's writes and flushes);
//! * [`coverage`]: what a search covered, per point and in sum;
//! * [`labels`]: can, unknown or never per model (approximate rules never
//!   make a "never");
//! * [`report`]: violations grouped by cause, with their smallest examples;
//! * [`oracle`]: a model run's groups judged against a real filesystem's;
//! * [`text`]: operations with path names, the `CRASH_POINT/KEPT` spelling.
//!
//! ```
//! use slowfs_faults::crash::search::Search;
//! use slowfs_faults::crash::trees::{TreeConfig, TreeSpace};
//! use slowfs_faults::durability::{Log, LogOp, NodeKind, Tree};
//!
//! let mut log = Log::new(Tree::empty(1));
//! log.push(LogOp::Create { dir: 1, name: "f".into(), node: 2, kind: NodeKind::File });
//! log.push(LogOp::Write { node: 2, offset: 0, data: b"new".to_vec() });
//! let space = TreeSpace::new(&log, TreeConfig::all(log.ops().len()));
//! let mut search = Search::new(space, 1);
//! let mut states = 0;
//! for candidate in search.by_ref() {
//!     // check candidate.state, a Tree; a rejected one becomes a report::Violation
//!     states += 1;
//! }
//! assert!(search.summary().complete());
//! // no file; an empty file; the file with its data (its data without the
//! // entry looks like no file: checked once)
//! assert_eq!(states, 3);
//! ```

pub mod blocks;
pub mod coverage;
pub mod labels;
mod log_tree;
pub mod models;
pub mod oracle;
pub mod points;
pub mod report;
pub mod search;
pub mod states;
pub mod text;
pub mod trees;

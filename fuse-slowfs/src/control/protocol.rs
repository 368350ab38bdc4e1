//! What goes over the socket: the commands, one JSON object per line, and
//! the acknowledgement each gets.

use serde::{Deserialize, Serialize};

/// A request to a running mount. Its doc comments are also the help of
/// `slowfs ctl MNT COMMAND` (the CLI parses straight into it).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "cli", derive(clap::Subcommand))]
#[serde(tag = "cmd", rename_all = "snake_case")]
pub enum Command {
    /// Per-operation counts, bytes, latency (p50/p99/max) and rule hits.
    Stats,
    /// Add a rule, e.g. `slowfs ctl /mnt/slow set "read delay=50ms"`.
    Set {
        /// The rule string (the syntax of `slowfs mount --set`).
        rule: String,
    },
    /// Remove rule ID (see `rules`), or every rule.
    Clear {
        /// The rule id; all rules if omitted.
        id: Option<u64>,
    },
    /// List the rules in force with their ids and hit counts.
    Rules,
    /// Release every request held by a `hang` rule.
    Release,
    /// Power loss now (mounts started with --crash-model strict): the tree
    /// becomes its durable state; handles opened before fail with EIO.
    Crash,
    /// What a crash now would lose: operations not yet durable, paths at risk.
    Durable,
    /// Who serves this mount: process id, mountpoint, whether its session ended.
    Info,
    /// Release every parked request and unmount; the daemon then exits (what
    /// `slowfs umount` asks).
    #[cfg_attr(feature = "cli", command(hide = true))]
    Shutdown,
}

/// Most bytes one request line may have: a longer one is refused unread.
pub const MAX_LINE: usize = 1 << 20;
/// Most connections served at once: more get an error reply and are closed.
pub const MAX_CONNECTIONS: usize = 64;

/// The acknowledgement of a request.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Response {
    /// Whether the command was carried out.
    pub ok: bool,
    /// What happened, for people.
    pub message: String,
    /// Structured result (stats, rules), if any.
    #[serde(default)]
    pub data: serde_json::Value,
}

impl Response {
    pub(super) fn ok(message: impl Into<String>, data: serde_json::Value) -> Response {
        Response {
            ok: true,
            message: message.into(),
            data,
        }
    }

    pub(super) fn fail(message: impl Into<String>) -> Response {
        Response {
            ok: false,
            message: message.into(),
            data: serde_json::Value::Null,
        }
    }
}

//! What an engine can do, as a closed set: a suite asks for capabilities by
//! value, and a driver's handshake or an expectations file that names one that
//! does not exist is an error, never a silently ignored string.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// One operation (or property) an engine may have.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    /// `open`.
    Open,
    /// `close`.
    Close,
    /// A read at the file's cursor (`read(2)`).
    Read,
    /// A positioned read.
    ReadAt,
    /// A positioned write.
    WriteAt,
    /// Batches of reads (the positioned suite tests them).
    ReadMany,
    /// Batches of writes.
    WriteMany,
    /// `fsync`.
    Fsync,
    /// `fdatasync`.
    Fdatasync,
    /// Truncate or extend.
    SetLen,
    /// The file's size.
    Metadata,
    /// Rename, replacing the destination.
    Rename,
    /// Copy a whole file.
    Copy,
    /// Remove a file.
    RemoveFile,
    /// Create a directory.
    CreateDir,
    /// fsync a directory.
    SyncDir,
    /// Dropping an operation's future (or a driver's `cancel`) stops it.
    Cancel,
    /// The engine's own event-loop lag can be measured.
    Lag,
    /// `read_at`/`write_at` are real positioned I/O (not seek + read/write).
    Positioned,
    /// Files can be opened in append mode, where every write goes to the end.
    Append,
}

impl Capability {
    /// Every capability, in the order the docs list them.
    pub const ALL: &'static [Capability] = &[
        Capability::Open,
        Capability::Close,
        Capability::Read,
        Capability::ReadAt,
        Capability::WriteAt,
        Capability::ReadMany,
        Capability::WriteMany,
        Capability::Fsync,
        Capability::Fdatasync,
        Capability::SetLen,
        Capability::Metadata,
        Capability::Rename,
        Capability::Copy,
        Capability::RemoveFile,
        Capability::CreateDir,
        Capability::SyncDir,
        Capability::Cancel,
        Capability::Lag,
        Capability::Positioned,
        Capability::Append,
    ];

    /// The name used in handshakes and expectations files.
    pub fn name(self) -> &'static str {
        match self {
            Capability::Open => "open",
            Capability::Close => "close",
            Capability::Read => "read",
            Capability::ReadAt => "read_at",
            Capability::WriteAt => "write_at",
            Capability::ReadMany => "read_many",
            Capability::WriteMany => "write_many",
            Capability::Fsync => "fsync",
            Capability::Fdatasync => "fdatasync",
            Capability::SetLen => "set_len",
            Capability::Metadata => "metadata",
            Capability::Rename => "rename",
            Capability::Copy => "copy",
            Capability::RemoveFile => "remove_file",
            Capability::CreateDir => "create_dir",
            Capability::SyncDir => "sync_dir",
            Capability::Cancel => "cancel",
            Capability::Lag => "lag",
            Capability::Positioned => "positioned",
            Capability::Append => "append",
        }
    }

    /// Every name, comma-separated (for error messages).
    pub fn known_names() -> String {
        Capability::ALL
            .iter()
            .map(|c| c.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A capability name that is not one of [`Capability::ALL`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownCapability(pub String);

impl fmt::Display for UnknownCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown capability '{}' (known: {})",
            self.0,
            Capability::known_names()
        )
    }
}

impl std::error::Error for UnknownCapability {}

impl FromStr for Capability {
    type Err = UnknownCapability;

    /// ```
    /// use slowfs_harness::Capability;
    /// assert_eq!("write_at".parse::<Capability>(), Ok(Capability::WriteAt));
    /// let typo = "writeat".parse::<Capability>().unwrap_err();
    /// assert!(typo.to_string().contains("known: open, close"));
    /// ```
    fn from_str(name: &str) -> Result<Capability, UnknownCapability> {
        Capability::ALL
            .iter()
            .copied()
            .find(|c| c.name() == name)
            .ok_or_else(|| UnknownCapability(name.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back() {
        for &cap in Capability::ALL {
            assert_eq!(cap.name().parse::<Capability>(), Ok(cap));
            let json = serde_json::to_string(&cap).unwrap();
            assert_eq!(json, format!("\"{}\"", cap.name()));
        }
    }
}

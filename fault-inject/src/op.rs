//! The filesystem operations a rule can name.

use std::fmt;

macro_rules! ops {
    ($($variant:ident => $name:literal),* $(,)?) => {
        /// One kind of filesystem request, as a rule names it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[allow(missing_docs)]
        pub enum Op { $($variant),* }

        impl Op {
            /// Every operation, in declaration order.
            pub const ALL: &'static [Op] = &[$(Op::$variant),*];

            /// The name used in rule strings (`fsync`, `copy_file_range`, ...).
            pub fn name(self) -> &'static str {
                match self { $(Op::$variant => $name),* }
            }

            /// Looks an operation up by its rule-string name.
            pub fn from_name(name: &str) -> Option<Op> {
                match name { $($name => Some(Op::$variant),)* _ => None }
            }
        }
    };
}

ops! {
    Lookup => "lookup",
    Getattr => "getattr",
    Setattr => "setattr",
    Open => "open",
    Create => "create",
    Read => "read",
    Write => "write",
    Flush => "flush",
    Fsync => "fsync",
    Fdatasync => "fdatasync",
    Fsyncdir => "fsyncdir",
    Release => "release",
    Mkdir => "mkdir",
    Mknod => "mknod",
    Rmdir => "rmdir",
    Unlink => "unlink",
    Rename => "rename",
    Link => "link",
    Symlink => "symlink",
    Readlink => "readlink",
    Opendir => "opendir",
    Readdir => "readdir",
    Releasedir => "releasedir",
    Statfs => "statfs",
    Access => "access",
    Fallocate => "fallocate",
    Lseek => "lseek",
    CopyFileRange => "copy_file_range",
    Xattr => "xattr",
    Lock => "lock",
}

impl Op {
    /// Operations that move file data and so can be shortened or throttled by bytes.
    pub fn moves_data(self) -> bool {
        matches!(self, Op::Read | Op::Write | Op::CopyFileRange)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of operations, as named by the first word of a rule (`read,write` or `*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct OpSet(u64);

impl OpSet {
    /// Every operation (`*`).
    pub fn all() -> OpSet {
        OpSet::from_ops(Op::ALL.iter().copied())
    }

    /// A set holding exactly these operations.
    pub fn from_ops(ops: impl IntoIterator<Item = Op>) -> OpSet {
        let mut set = OpSet(0);
        for op in ops {
            set.insert(op);
        }
        set
    }

    /// Adds one operation.
    pub fn insert(&mut self, op: Op) {
        self.0 |= 1 << op as u32;
    }

    /// Whether the set holds `op`.
    pub fn contains(self, op: Op) -> bool {
        self.0 & (1 << op as u32) != 0
    }

    /// Whether the set holds no operation.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether the set holds every operation.
    pub fn is_all(self) -> bool {
        self == OpSet::all()
    }

    /// The operations in the set, in declaration order.
    pub fn iter(self) -> impl Iterator<Item = Op> {
        Op::ALL.iter().copied().filter(move |op| self.contains(*op))
    }
}

impl fmt::Display for OpSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_all() {
            return f.write_str("*");
        }
        let names: Vec<&str> = self.iter().map(Op::name).collect();
        f.write_str(&names.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for op in Op::ALL {
            assert_eq!(Op::from_name(op.name()), Some(*op));
        }
        assert!(Op::ALL.len() < 64, "OpSet is a u64 bitmask");
    }

    #[test]
    fn set_display_lists_members_or_star() {
        let set = OpSet::from_ops([Op::Write, Op::Read]);
        assert_eq!(set.to_string(), "read,write");
        assert_eq!(OpSet::all().to_string(), "*");
    }
}

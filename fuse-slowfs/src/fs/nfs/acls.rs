//! Extended attributes as a v3 client sends them: ACLs over the NFSACL side
//! protocol, cached per file.
//!
//! NFSv3 has no xattrs of its own; the Linux client serves the POSIX ACL
//! names (`system.posix_acl_access`, `system.posix_acl_default`) through
//! NFSACL's GETACL, which fetches both ACLs of a file at once and caches
//! them in the inode until its attributes show a change (`nfs3_get_acl`,
//! `nfs3_listxattr` -> `nfs3_list_one_acl`, fs/nfs/nfs3acl.c; the cache goes
//! with `nfs_zap_acl_cache` when `nfs_update_inode` sees the file change).
//! `user.*` names are v4.2's GETXATTR and SETXATTR (RFC 8276; Linux sends
//! only that namespace: `nfs4_xattr_nfs4_user_handler`), cached per name
//! until the file changes as `nfs4_xattr_cache_get` does.
//! Other names (`security.*` asked by `ls -l`, `trusted.*`) never leave the
//! client. So `ls -l` sends one GETACL per file, the first time; a set or
//! remove is always sent.
//!
//! Here each xattr request is still served by the backing file; what this
//! decides is whether it is an RPC the rules see, or answered locally.

use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::sync::Mutex;

use crate::client_cache::Version;
use crate::fs::{sys, Inner};

/// What the client holds of each file's xattrs: the version it fetched
/// them at, and which (the ACLs under one key: GETACL brings both; a
/// listing under the empty name).
#[derive(Debug, Default)]
pub(in crate::fs) struct AclCache {
    fetched: Mutex<HashMap<u64, (Version, HashSet<OsString>)>>,
}

/// An xattr request, as the client's cache sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::fs) enum XattrRequest<'a> {
    /// getxattr of one name.
    Get(&'a OsStr),
    /// listxattr (the client lists the ACLs it finds, fetching them).
    List,
    /// setxattr or removexattr of one name.
    Change(&'a OsStr),
}

/// Whether `name` is one of the ACLs NFSACL carries.
fn is_acl(name: &OsStr) -> bool {
    name.as_bytes().starts_with(b"system.posix_acl_")
}

/// Whether the client sends a request about `name` to the server at all.
fn is_sent(name: &OsStr) -> bool {
    is_acl(name) || name.as_bytes().starts_with(b"user.")
}

impl XattrRequest<'_> {
    /// What the cache keeps the answer under; `None`: never sent.
    fn key(self) -> Option<OsString> {
        match self {
            XattrRequest::List => Some(OsString::new()),
            XattrRequest::Get(name) if is_acl(name) => Some("system.posix_acl".into()),
            XattrRequest::Get(name) if is_sent(name) => Some(name.to_os_string()),
            XattrRequest::Get(_) | XattrRequest::Change(_) => None,
        }
    }
}

impl Inner {
    /// Under `--cache nfs`: whether the xattr `request` on `ino` is answered
    /// by the client without an RPC (held in its cache at the file's current
    /// version, or a name it never sends). A change of a name it sends drops
    /// what it holds of the file. Elsewhere every request is one.
    pub(in crate::fs) fn xattr_is_local(&self, ino: u64, request: XattrRequest) -> bool {
        let Some(nfs) = self.nfs() else {
            return false;
        };
        if let XattrRequest::Change(name) = request {
            if !is_sent(name) {
                return true;
            }
            nfs.acls.fetched.lock().unwrap().remove(&ino);
            return false;
        }
        let Some(key) = request.key() else {
            return true;
        };
        let version = self.version_now(ino);
        let fetched = nfs.acls.fetched.lock().unwrap();
        fetched
            .get(&ino)
            .is_some_and(|(at, keys)| Some(*at) == version && keys.contains(&key))
    }

    /// Under `--cache nfs`: the server answered `request` on `ino` (with the
    /// xattr, or that there is none): the client holds the answer now.
    pub(in crate::fs) fn xattr_fetched(&self, ino: u64, request: XattrRequest) {
        let (Some(nfs), Some(key)) = (self.nfs(), request.key()) else {
            return;
        };
        let Some(version) = self.version_now(ino) else {
            return;
        };
        let mut fetched = nfs.acls.fetched.lock().unwrap();
        let entry = fetched
            .entry(ino)
            .or_insert_with(|| (version, HashSet::new()));
        if entry.0 != version {
            *entry = (version, HashSet::new());
        }
        entry.1.insert(key);
    }

    /// The file's version on the server now.
    fn version_now(&self, ino: u64) -> Option<Version> {
        let inode = self.inodes.get(fuser::INodeNo(ino)).ok()?;
        sys::stat_fd(inode.raw()).ok().map(|st| Version::of(&st))
    }
}

impl AclCache {
    /// The kernel forgot `ino`.
    pub(in crate::fs) fn forget(&self, ino: u64) {
        self.fetched.lock().unwrap().remove(&ino);
    }
}

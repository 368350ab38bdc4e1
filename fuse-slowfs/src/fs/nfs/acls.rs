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
//! only that namespace: `nfs4_xattr_nfs4_user_handler`), each an RPC here.
//! Other names (`security.*` asked by `ls -l`, `trusted.*`) never leave the
//! client. So `ls -l` sends one GETACL per file, the first time; a set or
//! remove is always sent.
//!
//! Here each xattr request is still served by the backing file; what this
//! decides is whether it is an RPC the rules see, or answered locally.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::Mutex;

use crate::client_cache::Version;
use crate::fs::{sys, Inner};

/// The files whose ACLs this client holds, at the version it fetched them.
#[derive(Debug, Default)]
pub(in crate::fs) struct AclCache {
    fetched: Mutex<HashMap<u64, Version>>,
}

/// What an xattr request does to the client's ACL cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::fs) enum XattrRequest<'a> {
    /// getxattr of one name.
    Get(&'a OsStr),
    /// listxattr (the client lists the ACLs it finds, fetching them).
    List,
    /// setxattr or removexattr.
    Change,
}

/// Whether `name` is one of the ACLs NFSACL carries.
fn is_acl(name: &OsStr) -> bool {
    name.as_bytes().starts_with(b"system.posix_acl_")
}

/// Whether the client sends a query of `name` to the server at all.
fn is_sent(name: &OsStr) -> bool {
    is_acl(name) || name.as_bytes().starts_with(b"user.")
}

impl Inner {
    /// Under `--cache nfs`: whether the xattr `request` on `ino` is answered
    /// by the client without an RPC (a cached ACL, a name it never sends).
    /// Elsewhere every request is one.
    pub(in crate::fs) fn xattr_is_local(&self, ino: u64, request: XattrRequest) -> bool {
        let Some(nfs) = self.nfs() else {
            return false;
        };
        let mut fetched = nfs.acls.fetched.lock().unwrap();
        match request {
            XattrRequest::Change => {
                fetched.remove(&ino);
                false
            }
            XattrRequest::Get(name) if !is_sent(name) => true,
            XattrRequest::Get(name) if !is_acl(name) => false,
            XattrRequest::Get(_) | XattrRequest::List => {
                let Some(version) = self
                    .inodes
                    .get(fuser::INodeNo(ino))
                    .ok()
                    .and_then(|inode| sys::stat_fd(inode.raw()).ok())
                    .map(|st| Version::of(&st))
                else {
                    return false;
                };
                // A GETACL unless the ACLs were fetched at this version.
                fetched.insert(ino, version) == Some(version)
            }
        }
    }
}

impl AclCache {
    /// The kernel forgot `ino`.
    pub(in crate::fs) fn forget(&self, ino: u64) {
        self.fetched.lock().unwrap().remove(&ino);
    }
}

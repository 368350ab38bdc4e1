//! A directory tree of nodes by id, and how one operation changes it: the
//! state a crash leaves is a tree, built by applying operations to another.
//! Apart from the log, which decides which operations to apply.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use super::base64_bytes;
use super::ops::{LogOp, NodeId};

/// A node of a [`Tree`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Node {
    /// A file's bytes.
    File(#[serde(with = "base64_bytes")] Vec<u8>),
    /// A directory's entries.
    Dir(BTreeMap<String, NodeId>),
    /// A symlink's target.
    Symlink(String),
}

impl Node {
    /// A file's bytes.
    pub fn data(&self) -> Option<&[u8]> {
        match self {
            Node::File(data) => Some(data),
            _ => None,
        }
    }
}

/// A directory tree: nodes by id, and the root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tree {
    /// Every node, reachable or not.
    pub nodes: HashMap<NodeId, Node>,
    /// The root directory.
    pub root: NodeId,
}

impl Tree {
    /// An empty root directory.
    pub fn empty(root: NodeId) -> Tree {
        Tree {
            nodes: HashMap::from([(root, Node::Dir(BTreeMap::new()))]),
            root,
        }
    }

    /// The node at a `/`-separated path from the root.
    pub fn lookup(&self, path: &str) -> Option<&Node> {
        self.nodes.get(&self.lookup_id(path)?)
    }

    /// The id of the node at a `/`-separated path from the root.
    pub fn lookup_id(&self, path: &str) -> Option<NodeId> {
        let mut id = self.root;
        for part in path.split('/').filter(|p| !p.is_empty()) {
            let Some(Node::Dir(entries)) = self.nodes.get(&id) else {
                return None;
            };
            id = *entries.get(part)?;
        }
        Some(id)
    }

    fn dir_mut(&mut self, dir: NodeId) -> Option<&mut BTreeMap<String, NodeId>> {
        match self.nodes.get_mut(&dir) {
            Some(Node::Dir(entries)) => Some(entries),
            _ => None,
        }
    }

    fn file_mut(&mut self, node: NodeId) -> &mut Vec<u8> {
        let entry = self
            .nodes
            .entry(node)
            .or_insert_with(|| Node::File(Vec::new()));
        if !matches!(entry, Node::File(_)) {
            *entry = Node::File(Vec::new());
        }
        match entry {
            Node::File(data) => data,
            _ => unreachable!("just made a file"),
        }
    }

    /// Applies one operation to the tree's shape only: names, directories,
    /// symlinks and which nodes are files, but no file content (a write makes
    /// its node a file and stores nothing). For passes over a log that look at
    /// names, not data: a block device's image written near its end would
    /// otherwise be held whole in memory (a 1 GiB image, 1 GiB).
    pub fn apply_shape(&mut self, op: &LogOp) {
        match op {
            LogOp::Write { node, .. }
            | LogOp::SetLen { node, .. }
            | LogOp::TruncateZeroing { node, .. }
            | LogOp::WriteInPlace { node, .. }
            | LogOp::GrowStale { node, .. }
            | LogOp::GrowZeroing { node, .. } => {
                self.file_mut(*node);
            }
            op => self.apply(op),
        }
    }

    /// Applies one operation; operations on missing names or nodes do nothing
    /// (a kept op may refer to something a dropped op would have made).
    pub fn apply(&mut self, op: &LogOp) {
        match op {
            LogOp::Write { node, offset, data } => {
                let file = self.file_mut(*node);
                let end = *offset as usize + data.len();
                if file.len() < end {
                    file.resize(end, 0);
                }
                file[*offset as usize..end].copy_from_slice(data);
            }
            LogOp::SetLen { node, len } => self.file_mut(*node).resize(*len as usize, 0),
            LogOp::TruncateZeroing { node, offset, len }
            | LogOp::GrowZeroing { node, offset, len } => {
                let file = self.file_mut(*node);
                let end = ((offset + len) as usize).min(file.len());
                if let Some(zeroed) = file.get_mut(*offset as usize..end) {
                    zeroed.fill(0);
                }
            }
            LogOp::WriteInPlace { node, offset, data }
            | LogOp::GrowStale { node, offset, data } => {
                let file = self.file_mut(*node);
                let start = (*offset as usize).min(file.len());
                let end = (*offset as usize + data.len()).min(file.len());
                file[start..end].copy_from_slice(&data[..end - start]);
            }
            LogOp::Create {
                dir,
                name,
                node,
                kind,
            } => {
                let fresh = kind.fresh();
                if self.dir_mut(*dir).is_some() {
                    // A node that already has content here got it from a later fsync
                    // (made durable before this entry): creating it must not empty it.
                    self.nodes.entry(*node).or_insert(fresh);
                    self.dir_mut(*dir)
                        .expect("checked")
                        .insert(name.clone(), *node);
                }
            }
            LogOp::Link { dir, name, node } => {
                if self.nodes.contains_key(node) {
                    if let Some(entries) = self.dir_mut(*dir) {
                        entries.insert(name.clone(), *node);
                    }
                }
            }
            LogOp::Remove { dir, name } => {
                if let Some(entries) = self.dir_mut(*dir) {
                    entries.remove(name);
                }
            }
            LogOp::Rename { .. } => self.rename_sides(op, true, true),
            LogOp::Fsync { .. } | LogOp::FsyncDir { .. } | LogOp::Sync => {}
        }
    }

    /// Applies the source side (`from`: the old name goes, or gets the exchanged
    /// node) and/or the destination side (`to`: the new name points at the node) of
    /// a rename. A crash may keep one side and not the other: each parent's entries
    /// become durable with that parent's fsync.
    pub(super) fn rename_sides(&mut self, op: &LogOp, from: bool, to: bool) {
        let LogOp::Rename {
            from_dir,
            from_name,
            to_dir,
            to_name,
            node,
            exchanged,
        } = op
        else {
            return;
        };
        if from_dir == to_dir && from_name == to_name {
            return;
        }
        if to {
            if let Some(entries) = self.dir_mut(*to_dir) {
                entries.insert(to_name.clone(), *node);
            }
        }
        if from {
            if let Some(entries) = self.dir_mut(*from_dir) {
                match exchanged {
                    Some(other) => {
                        entries.insert(from_name.clone(), *other);
                    }
                    None => {
                        if entries.get(from_name) == Some(node) {
                            entries.remove(from_name);
                        }
                    }
                }
            }
        }
    }

    /// As the durable tree, takes in what `op` (just applied to `volatile`, the
    /// no-crash tree) makes durable: a file's content at its fsync, a
    /// directory's entries at its fsync, everything at a sync. A created node
    /// exists from its creation, with no durable content of its own yet.
    pub(crate) fn absorb(&mut self, volatile: &Tree, op: &LogOp) {
        if let LogOp::Create { node, kind, .. } = op {
            // Reachable only through durable (or kept) entries.
            self.nodes.entry(*node).or_insert_with(|| kind.fresh());
        }
        match op {
            LogOp::Fsync { node, .. } => {
                if let Some(n @ Node::File(_)) = volatile.nodes.get(node) {
                    self.nodes.insert(*node, n.clone());
                }
            }
            LogOp::FsyncDir { dir } => {
                if let Some(Node::Dir(entries)) = volatile.nodes.get(dir).cloned() {
                    for child in entries.values() {
                        // A child new to the durable tree exists with no durable
                        // content of its own yet: an empty file or directory, or
                        // the symlink.
                        if !self.nodes.contains_key(child) {
                            let fresh = match volatile.nodes.get(child) {
                                Some(Node::Dir(_)) => Node::Dir(BTreeMap::new()),
                                Some(Node::Symlink(t)) => Node::Symlink(t.clone()),
                                _ => Node::File(Vec::new()),
                            };
                            self.nodes.insert(*child, fresh);
                        }
                    }
                    self.nodes.insert(*dir, Node::Dir(entries));
                }
            }
            LogOp::Sync => *self = volatile.clone(),
            _ => {}
        }
    }

    /// The tree without the entries whose path matches `ignore` (files an
    /// application discards on open, such as SQLite's `-shm`).
    pub fn without(mut self, ignore: &globset::GlobSet) -> Tree {
        if ignore.is_empty() {
            return self;
        }
        let doomed: Vec<String> = self
            .walk()
            .into_iter()
            .map(|(path, _)| path)
            .filter(|path| ignore.is_match(path))
            .collect();
        for path in doomed {
            let (dir, name) = match path.rsplit_once('/') {
                Some((dir, name)) => (self.lookup_id(dir), name),
                None => (Some(self.root), path.as_str()),
            };
            if let Some(Node::Dir(entries)) = dir.and_then(|d| self.nodes.get_mut(&d)) {
                entries.remove(name);
            }
        }
        self
    }

    /// The paths whose node differs between this tree and `other`, or that
    /// only one of them has: what a crash from `other` to this tree changes.
    pub fn differences(&self, other: &Tree) -> Vec<String> {
        let (a, b) = (self.walk(), other.walk());
        let mut changed: Vec<String> = b
            .iter()
            .filter(|(path, node)| !a.iter().any(|(p, n)| p == path && n == node))
            .map(|(path, _)| path.clone())
            .chain(
                a.iter()
                    .filter(|(p, _)| !b.iter().any(|(q, _)| q == p))
                    .map(|(p, _)| p.clone()),
            )
            .collect();
        changed.sort();
        changed.dedup();
        changed
    }

    /// Every reachable path with its node, depth first, sorted.
    pub fn walk(&self) -> Vec<(String, &Node)> {
        let mut out = Vec::new();
        let mut stack = vec![(String::new(), self.root, 0usize)];
        let mut seen = BTreeSet::new();
        while let Some((path, id, depth)) = stack.pop() {
            let Some(node) = self.nodes.get(&id) else {
                continue;
            };
            if !path.is_empty() {
                out.push((path.clone(), node));
            }
            if let Node::Dir(entries) = node {
                if depth > 64 || !seen.insert(id) {
                    continue; // a directory cycle from an odd subset: stop
                }
                for (name, child) in entries.iter().rev() {
                    let child_path = if path.is_empty() {
                        name.clone()
                    } else {
                        format!("{path}/{name}")
                    };
                    stack.push((child_path, *child, depth + 1));
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// A fingerprint of what is reachable, to check each distinct state once.
    pub fn fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for (path, node) in self.walk() {
            path.hash(&mut hasher);
            match node {
                Node::File(data) => (0u8, data).hash(&mut hasher),
                Node::Dir(_) => 1u8.hash(&mut hasher),
                Node::Symlink(t) => (2u8, t).hash(&mut hasher),
            }
        }
        hasher.finish()
    }
}

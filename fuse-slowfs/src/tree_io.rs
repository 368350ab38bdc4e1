//! Crash-model trees to and from real directories.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use slowfs_faults::durability::{Node, Tree};

/// Reads a directory tree into the model, nodes keyed by inode number.
pub fn scan(root: &Path) -> io::Result<Tree> {
    let root_ino = std::fs::metadata(root)?.ino();
    let mut tree = Tree {
        nodes: HashMap::new(),
        root: root_ino,
    };
    scan_dir(root, root_ino, &mut tree)?;
    Ok(tree)
}

fn scan_dir(path: &Path, ino: u64, tree: &mut Tree) -> io::Result<()> {
    let mut entries = BTreeMap::new();
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        let name = entry.file_name().to_string_lossy().into_owned();
        entries.insert(name, meta.ino());
        if tree.nodes.contains_key(&meta.ino()) {
            continue; // a hard link seen already
        }
        if meta.is_dir() {
            scan_dir(&entry.path(), meta.ino(), tree)?;
        } else if meta.file_type().is_symlink() {
            let target = std::fs::read_link(entry.path())?;
            tree.nodes.insert(
                meta.ino(),
                Node::Symlink(target.to_string_lossy().into_owned()),
            );
        } else if meta.is_file() {
            tree.nodes
                .insert(meta.ino(), Node::File(std::fs::read(entry.path())?));
        } else {
            tree.nodes.insert(meta.ino(), Node::File(Vec::new()));
        }
    }
    tree.nodes.insert(ino, Node::Dir(entries));
    Ok(())
}

/// Writes the reachable part of a tree into `dir` (created if missing; must be empty).
pub fn materialize(tree: &Tree, dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut written: HashMap<u64, PathBuf> = HashMap::new();
    for (path, node) in tree.walk() {
        let target = dir.join(&path);
        match node {
            Node::Dir(_) => std::fs::create_dir(&target)?,
            Node::Symlink(to) => std::os::unix::fs::symlink(to, &target)?,
            Node::File(data) => {
                let id = tree.lookup_id(&path);
                match id.and_then(|id| written.get(&id)) {
                    Some(first) => std::fs::hard_link(first, &target)?,
                    None => {
                        std::fs::write(&target, data)?;
                        if let Some(id) = id {
                            written.insert(id, target);
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

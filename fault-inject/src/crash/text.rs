//! Text forms of the crash model: operations described with path names, and
//! the `CRASH_POINT/OP,OP:BYTES` spelling of a crash state.

use std::collections::HashMap;

use crate::durability::{Keep, Kept, Log, LogOp, NodeId};

/// A name for every node that ever had one: its path in the initial tree, or
/// the path it was first given (created, linked or renamed to). One pass over
/// the log, any length.
pub fn node_names(log: &Log) -> HashMap<NodeId, String> {
    let mut names = HashMap::new();
    let initial = log.initial();
    names.insert(initial.root, String::new());
    for (path, _) in initial.walk() {
        if let Some(id) = initial.lookup_id(&path) {
            names.entry(id).or_insert(path);
        }
    }
    let join = |names: &HashMap<NodeId, String>, dir: &NodeId, name: &str| match names.get(dir) {
        Some(d) if !d.is_empty() => format!("{d}/{name}"),
        Some(_) => name.to_string(),
        None => format!("#{dir}/{name}"),
    };
    for op in log.ops() {
        let (dir, name, node) = match op {
            LogOp::Create {
                dir, name, node, ..
            }
            | LogOp::Link { dir, name, node } => (dir, name, node),
            LogOp::Rename {
                to_dir,
                to_name,
                node,
                ..
            } => (to_dir, to_name, node),
            _ => continue,
        };
        if !names.contains_key(node) {
            let path = join(&names, dir, name);
            names.insert(*node, path);
        }
    }
    names
}

/// One operation, with path names (from [`node_names`]).
pub fn describe(op: &LogOp, names: &HashMap<NodeId, String>) -> String {
    let name = |id: &NodeId| names.get(id).cloned().unwrap_or_else(|| format!("#{id}"));
    let entry = |dir: &NodeId, n: &str| {
        let d = name(dir);
        if d.is_empty() {
            n.to_string()
        } else {
            format!("{d}/{n}")
        }
    };
    match op {
        LogOp::Write { node, offset, data } => format!(
            "write {} [{offset}..{})",
            name(node),
            offset + data.len() as u64
        ),
        LogOp::SetLen { node, len } => format!("truncate {} to {len}", name(node)),
        LogOp::TruncateZeroing { node, offset, len } => format!(
            "truncate {}'s zeroing of [{offset}..{})",
            name(node),
            offset + len
        ),
        LogOp::WriteInPlace { node, offset, data } => format!(
            "write {} [{offset}..{}) in place, below its old size",
            name(node),
            offset + data.len() as u64
        ),
        LogOp::GrowStale { node, offset, data } => format!(
            "grow {} over [{offset}..{}), the old bytes a truncate left on the disk",
            name(node),
            offset + data.len() as u64
        ),
        LogOp::GrowZeroing { node, offset, len } => format!(
            "grow {}'s zeroing of [{offset}..{})",
            name(node),
            offset + len
        ),
        LogOp::Create {
            dir, name: n, kind, ..
        } => format!("create {} ({kind:?})", entry(dir, n)),
        LogOp::Link { dir, name: n, node } => format!("link {} -> {}", entry(dir, n), name(node)),
        LogOp::Remove { dir, name: n } => format!("remove {}", entry(dir, n)),
        LogOp::Rename {
            from_dir,
            from_name,
            to_dir,
            to_name,
            exchanged,
            ..
        } => format!(
            "{} {} -> {}",
            if exchanged.is_some() {
                "exchange"
            } else {
                "rename"
            },
            entry(from_dir, from_name),
            entry(to_dir, to_name)
        ),
        LogOp::Fsync { node, .. } => format!("fsync {}", name(node)),
        LogOp::FsyncDir { dir } => format!(
            "fsync dir {}",
            if name(dir).is_empty() {
                "/".into()
            } else {
                name(dir)
            }
        ),
        LogOp::Sync => "sync".into(),
    }
}

/// The paths an operation touches (for telling ignored files apart).
pub fn paths_of(op: &LogOp, names: &HashMap<NodeId, String>) -> Vec<String> {
    let name = |id: &NodeId| names.get(id).cloned().unwrap_or_default();
    let entry = |dir: &NodeId, n: &str| {
        let d = name(dir);
        if d.is_empty() {
            n.to_string()
        } else {
            format!("{d}/{n}")
        }
    };
    match op {
        LogOp::Write { node, .. }
        | LogOp::SetLen { node, .. }
        | LogOp::TruncateZeroing { node, .. }
        | LogOp::WriteInPlace { node, .. }
        | LogOp::GrowStale { node, .. }
        | LogOp::GrowZeroing { node, .. }
        | LogOp::Fsync { node, .. } => vec![name(node)],
        LogOp::Create { dir, name: n, .. }
        | LogOp::Link { dir, name: n, .. }
        | LogOp::Remove { dir, name: n } => vec![entry(dir, n)],
        LogOp::Rename {
            from_dir,
            from_name,
            to_dir,
            to_name,
            ..
        } => vec![entry(from_dir, from_name), entry(to_dir, to_name)],
        LogOp::FsyncDir { dir } => vec![name(dir)],
        LogOp::Sync => Vec::new(),
    }
}

/// A kept set as `i,j,k:BYTES` (for `--state`).
pub fn kept_spec(kept: &Kept) -> String {
    kept.iter()
        .map(|(i, keep)| match keep {
            Keep::Whole => i.to_string(),
            Keep::Torn(bytes) => format!("{i}:{bytes}"),
            Keep::TornTail(bytes) => format!("{i}:{bytes}.."),
            Keep::SizeOnly => format!("{i}:size"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses `K` or `K/i,j,k:BYTES,l:BYTES..,m:size` (crash point, then the
/// pending ops kept: whole, its first BYTES, its bytes from BYTES on, or
/// only the size a write reached).
///
/// ```
/// use slowfs_faults::crash::text::{kept_spec, parse_state};
/// let (point, kept) = parse_state("12/3,5:4096,6:1024..,7:size").unwrap();
/// assert_eq!((point, kept_spec(&kept)), (12, "3,5:4096,6:1024..,7:size".to_string()));
/// assert!(parse_state("x/1").unwrap_err().contains("CRASH_POINT"));
/// ```
pub fn parse_state(spec: &str) -> Result<(usize, Kept), String> {
    let (point, kept) = spec.split_once('/').unwrap_or((spec, ""));
    let point = point.parse().map_err(|_| {
        format!("bad state '{spec}': expected CRASH_POINT or CRASH_POINT/OP,OP:BYTES,...")
    })?;
    let mut out = Kept::new();
    for part in kept.split(',').filter(|p| !p.is_empty()) {
        let (i, keep) = match part.split_once(':') {
            Some((i, "size")) => (i, Keep::SizeOnly),
            Some((i, bytes)) => {
                let bad = |_| {
                    format!(
                        "bad torn size in '{part}' (BYTES for the write's first BYTES, BYTES.. \
                         for the rest after them, or `size` for the size only)"
                    )
                };
                match bytes.strip_suffix("..") {
                    Some(from) => (i, Keep::TornTail(from.parse().map_err(bad)?)),
                    None => (i, Keep::Torn(bytes.parse().map_err(bad)?)),
                }
            }
            None => (part, Keep::Whole),
        };
        out.insert(
            i.parse()
                .map_err(|_| format!("bad op index '{i}' in '{spec}'"))?,
            keep,
        );
    }
    Ok((point, out))
}

/// `3, 5..9, 12` from points in any order (at most 12 runs, then a count).
pub fn ranges(points: &[usize]) -> String {
    let mut points = points.to_vec();
    points.sort_unstable();
    points.dedup();
    let mut out = Vec::new();
    let mut i = 0;
    while i < points.len() {
        let mut j = i;
        while j + 1 < points.len() && points[j + 1] == points[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            points[i].to_string()
        } else {
            format!("{}..{}", points[i], points[j])
        });
        i = j + 1;
    }
    if out.len() > 12 {
        let more = out.len() - 12;
        out.truncate(12);
        out.push(format!("and {more} more"));
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::durability::LogBuilder;

    #[test]
    fn nodes_created_late_in_a_long_log_have_names() {
        let mut log = LogBuilder::new();
        for i in 0..200u64 {
            log.create(&format!("f{i}"), 100 + i);
        }
        let log = log.mkdir("d", 9).create_in(9, "late", 10).build();
        let names = node_names(&log);
        assert_eq!(names[&299], "f199");
        assert_eq!(names[&10], "d/late");
        assert_eq!(
            describe(
                &LogOp::Fsync {
                    node: 10,
                    datasync: false
                },
                &names
            ),
            "fsync d/late"
        );
    }
}

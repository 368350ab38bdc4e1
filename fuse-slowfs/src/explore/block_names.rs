//! What the blocks an `--fs` run wrote hold, so that a violation's dropped
//! writes read "config.json" or "the journal" instead of a byte range of the
//! image. Asked of each filesystem's own debugger on the image the workload
//! left (unmounted, read-only, no root needed): `debugfs icheck/ncheck` for
//! ext4, `xfs_db blockget/blockuse` for XFS. btrfs maps files to logical
//! addresses through its chunk tree, so there only the chunk a block lies in
//! is named (data, metadata, system) and the superblock copies.
//!
//! A block is named by what it holds at the end of the workload: a block a
//! deleted temporary file wrote and another file reused carries the later
//! name. A debugger that is missing or fails leaves the writes unnamed (the
//! byte ranges are still shown); it never stops the run.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::Path;
use std::process::Command;

use super::realfs::RealFs;

/// Byte ranges of an image, each with what it holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BlockNames {
    /// Start offset -> (end offset, what it holds); ranges do not overlap.
    spans: BTreeMap<u64, (u64, String)>,
}

/// More blocks than this are not named one by one (the debuggers take
/// seconds per ten thousand); the writes are then shown as byte ranges.
const MAX_BLOCKS: usize = 200_000;

impl BlockNames {
    /// Names the blocks of `image` (a `fs` filesystem) that `written` (byte
    /// ranges) touch.
    pub fn read(fs: RealFs, image: &Path, written: &[(u64, u64)]) -> io::Result<BlockNames> {
        match fs {
            RealFs::Ext4 => ext4(image, written),
            RealFs::Xfs => xfs(image, written),
            RealFs::Btrfs => btrfs(image),
        }
    }

    /// What `start..end` holds: its distinct names in offset order (at most
    /// three, then how many more), or `None` when nothing there is named.
    pub fn describe(&self, start: u64, end: u64) -> Option<String> {
        let mut names: Vec<&str> = Vec::new();
        // The span that starts before `start` may reach into the range.
        let before = self.spans.range(..start).next_back();
        let inside = self.spans.range(start..end);
        for (_, (span_end, name)) in before.into_iter().chain(inside) {
            if *span_end > start && !names.contains(&name.as_str()) {
                names.push(name);
            }
        }
        match names.len() {
            0 => None,
            1..=3 => Some(names.join(", ")),
            n => Some(format!("{} and {} more", names[..3].join(", "), n - 3)),
        }
    }

    /// Adds `start..end` holding `name`, joined to the span before it when
    /// that one ends there with the same name.
    fn add(&mut self, start: u64, end: u64, name: String) {
        if let Some((_, (last_end, last_name))) = self.spans.range_mut(..start).next_back() {
            if *last_end == start && *last_name == name {
                *last_end = end;
                return;
            }
        }
        self.spans.insert(start, (end, name));
    }
}

/// The blocks of size `block` that `written` touches, or an error when
/// there are too many to name.
fn blocks_of(written: &[(u64, u64)], block: u64) -> io::Result<BTreeSet<u64>> {
    let mut blocks = BTreeSet::new();
    for &(start, end) in written {
        if end > start {
            blocks.extend(start / block..=(end - 1) / block);
        }
        if blocks.len() > MAX_BLOCKS {
            return Err(io::Error::other(format!(
                "the workload wrote more than {MAX_BLOCKS} blocks: not named one by one"
            )));
        }
    }
    Ok(blocks)
}

/// Runs a debugger and returns its standard output, or an error with its
/// complaint.
fn output_of(command: &mut Command) -> io::Result<String> {
    let out = command.output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{command:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `name: value` or `name = value` lines of a tool's output.
fn field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once([':', '='])?;
        (key.trim() == name).then(|| value.trim().parse().ok())?
    })
}

/// ext4: `debugfs icheck` says which inode owns each block, `ncheck` names
/// the inodes; inode 8 is the journal, blocks no inode owns are metadata
/// (superblock, group descriptors, bitmaps, inode tables).
fn ext4(image: &Path, written: &[(u64, u64)]) -> io::Result<BlockNames> {
    let header = output_of(Command::new("dumpe2fs").arg("-h").arg(image))?;
    let block = field(&header, "Block size")
        .ok_or_else(|| io::Error::other("dumpe2fs -h printed no block size"))?;
    let blocks = blocks_of(written, block)?;
    let owners = debugfs_pairs(
        image,
        "icheck",
        &blocks.iter().map(u64::to_string).collect::<Vec<_>>(),
    )?;
    let inodes: BTreeSet<&str> = owners.values().map(String::as_str).collect();
    let paths = debugfs_pairs(
        image,
        "ncheck",
        &inodes.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
    )?;
    let mut names = BlockNames::default();
    for b in blocks {
        let owner = owners.get(&b.to_string()).map(String::as_str);
        let name = match owner.map(|i| (i, i.parse::<u64>().unwrap_or(0))) {
            None => "metadata".to_string(),
            Some((_, 2)) => "the root directory".to_string(),
            Some((_, 7)) => "reserved group descriptors".to_string(),
            Some((_, 8)) => "the journal".to_string(),
            Some((_, ino)) if ino < 11 => format!("reserved inode {ino}"),
            Some((ino, _)) => match paths.get(ino) {
                Some(path) => path.trim_start_matches('/').to_string(),
                None => format!("inode {ino}"),
            },
        };
        names.add(b * block, (b + 1) * block, name);
    }
    Ok(names)
}

/// `debugfs -f` running `command ARGS` (in lines of 500 arguments) on
/// `image`: the answer's `key<TAB>value` lines (the first value per key).
fn debugfs_pairs(
    image: &Path,
    command: &str,
    args: &[String],
) -> io::Result<BTreeMap<String, String>> {
    let mut pairs = BTreeMap::new();
    if args.is_empty() {
        return Ok(pairs);
    }
    let mut script = tempfile::NamedTempFile::new()?;
    for chunk in args.chunks(500) {
        use std::io::Write;
        writeln!(script, "{command} {}", chunk.join(" "))?;
    }
    let out = output_of(
        Command::new("debugfs")
            .arg("-f")
            .arg(script.path())
            .arg(image),
    )?;
    for line in out.lines() {
        if let Some((key, value)) = line.split_once('\t') {
            if key.trim().parse::<u64>().is_ok() && !value.starts_with('<') {
                pairs
                    .entry(key.trim().to_string())
                    .or_insert_with(|| value.to_string());
            }
        }
    }
    Ok(pairs)
}

/// XFS: after `blockget -n`, `blockuse -n` says each block's type (data,
/// dir, log, inode, a btree, free) and, for a file's blocks, its path. XFS
/// numbers blocks per allocation group: `agno << agblklog | agbno`.
fn xfs(image: &Path, written: &[(u64, u64)]) -> io::Result<BlockNames> {
    let sb = output_of(
        Command::new("xfs_db")
            .args(["-r", "-c", "sb 0", "-c", "p blocksize agblocks agblklog"])
            .arg(image),
    )?;
    let geometry = |name| {
        field(&sb, name).ok_or_else(|| io::Error::other(format!("xfs_db printed no {name}")))
    };
    let (block, ag_blocks, ag_log) = (
        geometry("blocksize")?,
        geometry("agblocks")?,
        geometry("agblklog")?,
    );
    let blocks = blocks_of(written, block)?;
    // Runs of consecutive blocks within one allocation group: one
    // `fsblock` + `blockuse -c` each.
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for b in blocks {
        match runs.last_mut() {
            Some((start, len)) if *start + *len == b && b % ag_blocks != 0 => *len += 1,
            _ => runs.push((b, 1)),
        }
    }
    let mut command = Command::new("xfs_db");
    command.args(["-r", "-c", "blockget -n"]);
    for (start, len) in &runs {
        let fsblock = ((start / ag_blocks) << ag_log) | (start % ag_blocks);
        command.arg("-c").arg(format!("fsblock {fsblock}"));
        command.arg("-c").arg(format!("blockuse -n -c {len}"));
    }
    let out = output_of(command.arg(image))?;
    let mut names = BlockNames::default();
    for line in out.lines() {
        // block 10 (0/10) type data inode 131 config.json
        let Some((ag, rest)) = line
            .strip_prefix("block ")
            .and_then(|l| l.split_once(" ("))
            .and_then(|(_, l)| l.split_once(") type "))
        else {
            continue;
        };
        let Some((agno, agbno)) = ag.split_once('/') else {
            continue;
        };
        let (Ok(agno), Ok(agbno)) = (agno.parse::<u64>(), agbno.parse::<u64>()) else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let kind = words.next().unwrap_or("?");
        let rest: Vec<&str> = words.collect();
        let name = match (kind, rest.as_slice()) {
            ("log", _) => "the log".to_string(),
            ("free1" | "free2", _) => "free space (freed by the end)".to_string(),
            (_, ["inode", _, path, ..]) => path.to_string(),
            (_, ["inode", ino]) => format!("inode {ino}"),
            ("sb" | "agf" | "agi" | "agfl", _) => "allocation group headers".to_string(),
            ("inode", _) => "inodes".to_string(),
            (kind, _) => format!("metadata ({kind})"),
        };
        let linear = agno * ag_blocks + agbno;
        names.add(linear * block, (linear + 1) * block, name);
    }
    Ok(names)
}

/// btrfs: the chunk tree's chunks (data, metadata, system) by their
/// physical stripes, and the superblock copies.
fn btrfs(image: &Path) -> io::Result<BlockNames> {
    let out = output_of(
        Command::new("btrfs")
            .args(["inspect-internal", "dump-tree", "-t", "chunk"])
            .arg(image),
    )?;
    let mut spans: Vec<(u64, u64, String)> = Vec::new();
    let mut chunk: Option<(u64, String)> = None;
    for line in out.lines().map(str::trim) {
        // length 8388608 owner 2 stripe_len 65536 type DATA|single
        if let Some(rest) = line.strip_prefix("length ") {
            let length = rest.split_whitespace().next().and_then(|l| l.parse().ok());
            let kind =
                rest.split_once(" type ")
                    .map(|(_, t)| match t.split('|').next().unwrap_or("") {
                        "DATA" => "data".to_string(),
                        "METADATA" => "metadata".to_string(),
                        "SYSTEM" => "the chunk tree (system)".to_string(),
                        other => other.to_lowercase(),
                    });
            chunk = length.zip(kind);
        } else if let (Some(rest), Some((length, kind))) =
            (line.strip_prefix("stripe "), chunk.as_ref())
        {
            // stripe 0 devid 1 offset 13631488
            if let Some(offset) = rest
                .split_once(" offset ")
                .and_then(|(_, o)| o.trim().parse::<u64>().ok())
            {
                spans.push((offset, offset + length, kind.clone()));
            }
        }
    }
    // The primary superblock and its mirrors (btrfs(5)).
    for at in [64 << 10, 64 << 20, 256 << 30] {
        spans.push((at, at + 4096, "the superblock".to_string()));
    }
    spans.sort();
    let mut names = BlockNames::default();
    for (start, end, name) in spans {
        names.add(start, end, name);
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_described_by_the_names_it_overlaps_in_order() {
        let mut names = BlockNames::default();
        names.add(0, 4096, "metadata".into());
        names.add(4096, 8192, "config.json".into());
        names.add(8192, 12288, "config.json".into());
        names.add(12288, 16384, "the journal".into());
        assert_eq!(names.spans.len(), 3, "adjacent equal names join");
        assert_eq!(names.describe(5000, 9000).as_deref(), Some("config.json"));
        assert_eq!(
            names.describe(0, 16384).as_deref(),
            Some("metadata, config.json, the journal")
        );
        assert_eq!(names.describe(16384, 20000), None);
        names.add(16384, 20480, "a".into());
        names.add(20480, 24576, "b".into());
        assert_eq!(
            names.describe(0, 24576).as_deref(),
            Some("metadata, config.json, the journal and 2 more")
        );
    }

    #[test]
    fn fields_are_read_from_either_spelling() {
        assert_eq!(
            field("Block size:               1024\n", "Block size"),
            Some(1024)
        );
        assert_eq!(
            field("agblocks = 19200\nagblklog = 15\n", "agblklog"),
            Some(15)
        );
        assert_eq!(field("x = y\n", "x"), None);
    }
}

//! `errors`: injected errnos reach the caller of the operation that hit them, and
//! a write is never claimed durable when its data did not land: after a
//! successful `fsync`, every byte a `write_at` reported written is in the file
//! (or, where a later write covers it, that write's byte: a failed write may
//! have landed in part).
//!
//! And an fsync that fails the way Linux fails one (`fsync error=EIO drop`: the
//! unsynced data is dropped, a retried fsync succeeds) must reach the caller: an
//! engine that retries it and reports success has told its caller that data is
//! durable which a crash then loses — the suite crashes the mount to show it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use proptest::prelude::*;
use slowfs_harness::{Engine, EngineFile, OpenOptions};

use super::{ensure, mount};
use crate::proptest_run::check;
use crate::{Outcome, SuiteConfig};

const ERRNOS: [(&str, i32); 3] = [
    ("EIO", libc::EIO),
    ("ENOSPC", libc::ENOSPC),
    ("EDQUOT", libc::EDQUOT),
];

/// Runs the suite.
pub fn run<E: Engine>(engine: Arc<E>, config: &SuiteConfig) -> Outcome {
    let mut rules: Vec<String> = ERRNOS
        .iter()
        .flat_map(|(name, _)| {
            [
                format!("write path=w-{name}-* error={name}"),
                format!("read path=r-{name}-* error={name}"),
                format!("fsync path=s-{name}-* error={name}"),
            ]
        })
        .collect();
    // Writes to flaky-* fail at random: the durability-after-failure property.
    rules.push("write path=flaky-* error=ENOSPC p=0.3".into());
    let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
    let mount = match mount(config, &rules) {
        Ok(m) => m,
        Err(verdict) => return crate::outcome(verdict, 0),
    };
    // Write-back failures need the crash model: a second, strict mount.
    let strict = match slowfs::fixture::SlowMount::strict(config.seed, &[]) {
        Ok(m) => m,
        Err(e) => {
            return crate::outcome(
                crate::Verdict::Fail {
                    reason: format!("cannot mount slowfs with the crash model: {e}"),
                    trace: String::new(),
                },
                0,
            )
        }
    };
    let rt = crate::runtime();
    let case = AtomicU64::new(0);
    check(
        config.seed,
        config.cases,
        (
            0usize..3,
            prop::collection::vec((0u64..30_000, 1usize..5000, any::<u8>()), 1..8),
        ),
        |(errno, writes)| {
            format!(
                "  {} on write/read/fsync; then writes {writes:?} with 30% ENOSPC, fsync; then write, fsync, write, fsync failing with write-back semantics (EIO, data dropped), crash",
                ERRNOS[*errno].0
            )
        },
        |(errno, writes)| {
            let n = case.fetch_add(1, Ordering::Relaxed);
            let (name, code) = ERRNOS[*errno];
            rt.block_on(async {
                let expect = |what: &str, result: std::io::Result<usize>| {
                    ensure(result.as_ref().err().and_then(|e| e.raw_os_error()) == Some(code), || {
                        format!("{what} on a file whose {what}s fail with {name} returned {result:?}")
                    })
                };
                let rw = OpenOptions::read_write_create();
                let file = engine.open(&mount.path(&format!("w-{name}-{n}")), &rw).await.map_err(|e| e.to_string())?;
                expect("write", file.write_at(vec![1; 100], 0).await.0)?;
                std::fs::write(mount.backing_path(&format!("r-{name}-{n}")), b"data").map_err(|e| e.to_string())?;
                let file = engine.open(&mount.path(&format!("r-{name}-{n}")), &rw).await.map_err(|e| e.to_string())?;
                expect("read", file.read_at(vec![0; 4], 0).await.0)?;
                let file = engine.open(&mount.path(&format!("s-{name}-{n}")), &rw).await.map_err(|e| e.to_string())?;
                let _ = file.write_at(vec![1; 10], 0).await;
                expect("fsync", file.fsync().await.map(|()| 0))?;

                let path = format!("flaky-{n}");
                let file = engine.open(&mount.path(&path), &rw).await.map_err(|e| e.to_string())?;
                // (offset, bytes reported written or None for a failed write, byte)
                let mut attempts = Vec::new();
                for &(offset, len, byte) in writes {
                    let result = file.write_at(vec![byte; len], offset).await.0;
                    attempts.push((offset, len, result.ok(), byte));
                }
                fsync_failure(&*engine, &strict, n).await?;
                if file.fsync().await.is_ok() {
                    let landed = std::fs::read(mount.backing_path(&path)).map_err(|e| e.to_string())?;
                    check_claimed_writes(&attempts, &landed)?;
                }
                Ok(())
            })
        },
    )
}

/// Every byte a write reported written is in the file, unless a later write
/// covers it: newest first, the newest claimed write at each byte decides. A
/// failed write may have landed in part (a library that loops over
/// write(2), as a buffered writer's flush does, reports an error after a
/// first chunk landed), so at a byte it covers, its own byte is allowed too.
fn check_claimed_writes(
    attempts: &[(u64, usize, Option<usize>, u8)],
    landed: &[u8],
) -> Result<(), String> {
    let end = attempts
        .iter()
        .map(|&(offset, len, ..)| offset as usize + len)
        .max()
        .unwrap_or(0);
    let mut decided = vec![false; end];
    let mut failed_here: Vec<Vec<u8>> = vec![Vec::new(); end];
    for &(offset, len, written, byte) in attempts.iter().rev() {
        let offset = offset as usize;
        let Some(written) = written else {
            for bytes in &mut failed_here[offset..offset + len] {
                bytes.push(byte);
            }
            continue;
        };
        for at in offset..offset + written {
            if decided[at] {
                continue;
            }
            decided[at] = true;
            let found = landed.get(at).copied();
            let allowed =
                found == Some(byte) || found.is_some_and(|b| failed_here[at].contains(&b));
            ensure(allowed, || {
                format!(
                    "fsync succeeded, yet byte {at} of a write reported done is not in the file"
                )
            })?;
        }
    }
    Ok(())
}

/// A write-back failure on the second fsync of a file: the engine must report
/// it, and a crash afterwards shows what a success would have hidden.
async fn fsync_failure<E: Engine>(
    engine: &E,
    mount: &slowfs::fixture::SlowMount,
    n: u64,
) -> Result<(), String> {
    let name = format!("fsf-{n}");
    let rule = mount
        .set(&format!(
            "fsync,fdatasync path={name} error=EIO drop after=1"
        ))
        .map_err(|e| e.to_string())?;
    let result = async {
        let file = engine
            .open(&mount.path(&name), &OpenOptions::read_write_create())
            .await
            .map_err(|e| e.to_string())?;
        file.write_all_at(b"durable;".to_vec(), 0)
            .await
            .0
            .map_err(|e| e.to_string())?;
        file.fsync().await.map_err(|e| format!("first fsync: {e}"))?;
        engine
            .sync_dir(&mount.path(""))
            .await
            .map_err(|e| e.to_string())?;
        file.write_all_at(b"dropped!".to_vec(), 8)
            .await
            .0
            .map_err(|e| e.to_string())?;
        let reported = file.fsync().await;
        let _ = file.close().await;
        if reported.is_ok() {
            mount.crash();
            let after = std::fs::read(mount.path(&name)).unwrap_or_default();
            return Err(format!(
                "fsync failed with a write-back error (EIO, the data dropped as Linux drops it),                  yet the engine reported success; after a crash the file holds {:?}, not the                  {:?} the caller was told is durable",
                String::from_utf8_lossy(&after),
                "durable;dropped!"
            ));
        }
        Ok(())
    }
    .await;
    mount.clear(Some(rule));
    result
}

#[cfg(test)]
mod tests {
    use super::check_claimed_writes;

    #[test]
    fn a_claimed_write_must_be_in_the_file() {
        let attempts = [(0, 4, Some(4), b'a')];
        assert!(check_claimed_writes(&attempts, b"aaaa").is_ok());
        assert!(check_claimed_writes(&attempts, b"aaxa").is_err());
        assert!(
            check_claimed_writes(&attempts, b"aaa").is_err(),
            "a short file"
        );
    }

    #[test]
    fn a_later_claimed_write_decides_where_it_overlaps() {
        let attempts = [(0, 4, Some(4), b'a'), (2, 2, Some(2), b'b')];
        assert!(check_claimed_writes(&attempts, b"aabb").is_ok());
        assert!(check_claimed_writes(&attempts, b"aaaa").is_err());
    }

    #[test]
    fn a_failed_write_may_have_landed_in_part_but_nothing_else_may() {
        // The async-fs case: a later write failed after its first chunk landed.
        let attempts = [(0, 4, Some(4), b'a'), (0, 4, None, b'b')];
        assert!(check_claimed_writes(&attempts, b"bbaa").is_ok());
        assert!(check_claimed_writes(&attempts, b"aaaa").is_ok());
        assert!(check_claimed_writes(&attempts, b"bbca").is_err());
        // An earlier failed write does not excuse a later claimed one.
        let attempts = [(0, 4, None, b'b'), (0, 4, Some(4), b'a')];
        assert!(check_claimed_writes(&attempts, b"bbaa").is_err());
    }
}

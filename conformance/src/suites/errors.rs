//! `errors`: injected errnos reach the caller of the operation that hit them, and
//! a write is never claimed durable when its data did not land: after a
//! successful `fsync`, every byte a `write_at` reported written is in the file.
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
                let mut claimed = Vec::new();
                for &(offset, len, byte) in writes {
                    if let Ok(written) = file.write_at(vec![byte; len], offset).await.0 {
                        claimed.push((offset, written, byte));
                    }
                }
                fsync_failure(&*engine, &strict, n).await?;
                if file.fsync().await.is_ok() {
                    let landed = std::fs::read(mount.backing_path(&path)).map_err(|e| e.to_string())?;
                    // Later writes may overwrite earlier ones: check newest first.
                    let mut seen = vec![false; landed.len()];
                    for &(offset, written, byte) in claimed.iter().rev() {
                        for at in offset as usize..offset as usize + written {
                            if seen.get(at).copied().unwrap_or(false) {
                                continue;
                            }
                            ensure(landed.get(at) == Some(&byte), || {
                                format!("fsync succeeded, yet byte {at} of a write reported done is not in the file")
                            })?;
                            seen[at] = true;
                        }
                    }
                }
                Ok(())
            })
        },
    )
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

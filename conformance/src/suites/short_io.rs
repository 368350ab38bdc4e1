//! `short-io`: under a rule that makes every read and write move 1..512 bytes, a
//! single `write_at`/`read_at` reports exactly what the filesystem moved (checked
//! against the backing file, behind the engine's back), `write_all_at` and
//! `read_exact_at` loop to completion, and a write that moves 0 bytes is an error
//! from `write_all_at`, not a hang.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use slowfs_harness::{Engine, EngineFile, OpenOptions};

use super::{ensure, mount};
use crate::proptest_run::check;
use crate::{Outcome, SuiteConfig};

/// Runs the suite.
pub fn run<E: Engine>(engine: Arc<E>, config: &SuiteConfig) -> Outcome {
    let mount = match mount(config, &["read,write path=short-* short=1..512"]) {
        Ok(m) => m,
        Err(verdict) => return crate::outcome(verdict, 0),
    };
    let rt = crate::runtime();
    let case = AtomicU64::new(0);
    let outcome = check(
        config.seed,
        config.cases,
        (0u64..20_000, 1usize..40_000, any::<u8>()),
        |(offset, len, byte)| {
            format!(
                "  write_at({offset}, {len} x {byte:#04x}); read_at; write_all_at; read_exact_at"
            )
        },
        |&(offset, len, byte)| {
            let name = format!("short-{}", case.fetch_add(1, Ordering::Relaxed));
            rt.block_on(async {
                let path = mount.path(&name);
                let file = engine
                    .open(&path, &OpenOptions::read_write_create())
                    .await
                    .map_err(|e| e.to_string())?;
                let data = vec![byte; len];
                let (result, _) = file.write_at(data.clone(), offset).await;
                let n = result.map_err(|e| format!("write_at: {e}"))?;
                let landed = std::fs::read(mount.backing_path(&name)).map_err(|e| e.to_string())?;
                let actual = landed.len().saturating_sub(offset as usize);
                ensure(n == actual, || {
                    format!("write_at reported {n} bytes but {actual} reached the file")
                })?;
                let (result, buf) = file.read_at(vec![0; len], offset).await;
                let r = result.map_err(|e| format!("read_at: {e}"))?;
                ensure(r <= n && r > 0, || {
                    format!("read_at returned {r} of {n} available")
                })?;
                ensure(buf[..r].iter().all(|b| *b == byte), || {
                    "read_at returned wrong bytes".into()
                })?;
                file.write_all_at(data.clone(), offset)
                    .await
                    .0
                    .map_err(|e| format!("write_all_at: {e}"))?;
                let (result, back) = file.read_exact_at(vec![0; len], offset).await;
                result.map_err(|e| format!("read_exact_at: {e}"))?;
                ensure(back == data, || "read_exact_at returned wrong bytes".into())?;
                file.close().await.map_err(|e| e.to_string())
            })
        },
    );
    if !outcome.passed() {
        return outcome;
    }
    // A write that moves nothing: write_all_at must give up with an error.
    let zero = rt.block_on(async {
        let rule = mount
            .set("write path=zero short=0!")
            .map_err(|e| e.to_string())?;
        let file = engine
            .open(&mount.path("zero"), &OpenOptions::read_write_create())
            .await
            .map_err(|e| e.to_string())?;
        let result =
            tokio::time::timeout(Duration::from_secs(5), file.write_all_at(vec![1; 100], 0)).await;
        mount.clear(Some(rule));
        match result {
            Err(_) => {
                Err("write_all_at kept retrying a write that moves 0 bytes (hung 5 s)".to_string())
            }
            Ok((Ok(()), _)) => {
                Err("write_all_at reported success though nothing was written".to_string())
            }
            Ok((Err(_), _)) => Ok(()),
        }
    });
    match zero {
        Ok(()) => outcome,
        Err(reason) => crate::outcome(
            crate::Verdict::Fail {
                reason,
                trace: "  rule \"write short=0!\"; write_all_at(0, 100 bytes)".into(),
            },
            outcome.cases + 1,
        ),
    }
}

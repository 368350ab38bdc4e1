//! `durability`: on a recording slowfs, the durability model says what a crash
//! would keep. Whenever the engine's `fsync` returns success, the file's durable
//! content (as of that moment in the log) must be everything the engine reported
//! written — an engine that skips or defers the fsync is caught.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use proptest::prelude::*;
use slowfs::fixture::SlowMount;
use slowfs_harness::{Engine, EngineFile, OpenOptions};

use super::ensure;
use crate::model::SparseFile;
use crate::proptest_run::check;
use crate::{Outcome, SuiteConfig};

/// One step of a case.
#[derive(Debug, Clone)]
pub enum Step {
    /// `write_at(offset, len x byte)`.
    Write(u64, usize, u8),
    /// `fsync`, then check what is durable.
    Fsync,
    /// `fdatasync`, then check what is durable.
    Fdatasync,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0u64..20_000, 1usize..5000, any::<u8>()).prop_map(|(o, l, b)| Step::Write(o, l, b)),
        1 => Just(Step::Fsync),
        1 => Just(Step::Fdatasync),
    ]
}

/// Runs the suite.
pub fn run<E: Engine>(engine: Arc<E>, config: &SuiteConfig) -> Outcome {
    let mount = match super::recording_mount(config) {
        Ok(m) => m,
        Err(verdict) => return crate::outcome(verdict, 0),
    };
    let rt = crate::runtime();
    let n = AtomicU64::new(0);
    check(
        config.seed,
        config.cases,
        prop::collection::vec(step(), 1..12),
        |steps| {
            steps
                .iter()
                .map(|s| format!("  {s:?}"))
                .collect::<Vec<_>>()
                .join("\n")
        },
        |steps| {
            let name = format!("dur-{}", n.fetch_add(1, Ordering::Relaxed));
            rt.block_on(one_case(&*engine, &mount, &name, steps))
        },
    )
}

async fn one_case<E: Engine>(
    engine: &E,
    mount: &SlowMount,
    name: &str,
    steps: &[Step],
) -> Result<(), String> {
    // The file and its directory entry are made durable first, by the suite itself.
    std::fs::File::create(mount.path(name))
        .and_then(|f| f.sync_all())
        .and_then(|()| std::fs::File::open(mount.path("")).and_then(|d| d.sync_all()))
        .map_err(|e| format!("setting up {name}: {e}"))?;
    let file = engine
        .open(&mount.path(name), &OpenOptions::read_write_create())
        .await
        .map_err(|e| e.to_string())?;
    let mut model = SparseFile::default();
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::Write(offset, len, byte) => {
                let (result, _) = file.write_at(vec![*byte; *len], *offset).await;
                let written = result.map_err(|e| format!("step {i}: write_at: {e}"))?;
                model.write(*offset, &vec![*byte; written]);
            }
            Step::Fsync | Step::Fdatasync => {
                let result = if matches!(step, Step::Fsync) {
                    file.fsync().await
                } else {
                    file.fdatasync().await
                };
                result.map_err(|e| format!("step {i}: {step:?}: {e}"))?;
                let log = mount.log();
                let durable = log.durable_state(log.ops().len());
                let content = durable
                    .lookup(name)
                    .and_then(|n| n.data())
                    .map(<[u8]>::to_vec)
                    .unwrap_or_default();
                let expected = model.read(0, model.len() as usize);
                ensure(content == expected, || {
                    format!(
                        "step {i}: {step:?} returned success, but a crash now would keep {} bytes of {name} \
                         where the engine had reported {} written",
                        content.len(),
                        expected.len()
                    )
                })?;
            }
        }
    }
    file.close().await.map_err(|e| e.to_string())
}

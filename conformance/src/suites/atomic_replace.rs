//! `atomic-replace`: `atomic_write(path, new)` over a durable old file, on a
//! recording slowfs. At every crash point during the call, in every state the
//! durability model allows (including torn writes), the file holds the complete
//! old or the complete new content — never a mix, never nothing; and once the
//! call has returned, a crash keeps the new content.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use slowfs::fixture::SlowMount;
use slowfs_harness::Engine;

use super::ensure;
use crate::proptest_run::check;
use crate::{Outcome, SuiteConfig};

const SECTOR: u64 = 4096;
const STATES_PER_POINT: usize = 64;

/// Runs the suite.
pub fn run<E: Engine>(engine: Arc<E>, config: &SuiteConfig) -> Outcome {
    let mount = match super::recording_mount(config) {
        Ok(m) => m,
        Err(verdict) => return crate::outcome(verdict, 0),
    };
    let rt = crate::runtime();
    let n = AtomicU64::new(0);
    let seed = config.seed;
    check(
        config.seed,
        config.cases,
        (1usize..20_000, 1usize..20_000),
        |(old, new)| {
            format!("  file holds {old} x 'o' (durable); atomic_write({new} x 'n'); crash anywhere")
        },
        |&(old_len, new_len)| {
            let name = format!("replace-{}", n.fetch_add(1, Ordering::Relaxed));
            rt.block_on(one_case(&*engine, &mount, &name, old_len, new_len, seed))
        },
    )
}

async fn one_case<E: Engine>(
    engine: &E,
    mount: &SlowMount,
    name: &str,
    old_len: usize,
    new_len: usize,
    seed: u64,
) -> Result<(), String> {
    let (old, new) = (vec![b'o'; old_len], vec![b'n'; new_len]);
    std::fs::write(mount.path(name), &old)
        .and_then(|()| std::fs::File::open(mount.path(name))?.sync_all())
        .and_then(|()| std::fs::File::open(mount.path(""))?.sync_all())
        .map_err(|e| format!("setting up {name}: {e}"))?;
    let start = mount.log().ops().len();
    engine
        .atomic_write(&mount.path(name), new.clone())
        .await
        .map_err(|e| format!("atomic_write: {e}"))?;
    let log = mount.log();
    let end = log.ops().len();
    let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(seed);
    for point in slowfs_faults::crash::points::Sweep::new(&log, start, end) {
        let k = point.k;
        let states = slowfs_faults::crash::states::PointStates::new(
            &log,
            &point.pending,
            Some(SECTOR),
            true,
        );
        let (states, _) = states.up_to(STATES_PER_POINT, &mut rng);
        for kept in states {
            let tree = log.state_on(point.durable.clone(), k, &kept);
            let content = tree.lookup(name).and_then(|n| n.data());
            ensure(
                content == Some(&old[..]) || content == Some(&new[..]),
                || {
                    format!(
                    "a crash after {} of the call's {} operations can leave {name} {} (kept pending ops {:?})",
                    k - start,
                    end - start,
                    match content {
                        None => "missing".to_string(),
                        Some(c) => format!("with {} bytes that are neither old nor new", c.len()),
                    },
                    kept.keys().map(|i| i - start).collect::<Vec<_>>()
                )
                },
            )?;
        }
    }
    let after = log.state_with(end, &BTreeMap::new());
    ensure(
        after.lookup(name).and_then(|n| n.data()) == Some(&new[..]),
        || {
            format!("atomic_write returned, yet a crash right after keeps the old {name}: the rename is not durable (missing directory fsync?)")
        },
    )
}

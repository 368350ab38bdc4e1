//! One module per suite.

pub mod atomic_replace;
pub mod cancel;
pub mod durability;
pub mod errors;
pub mod loop_lag;
pub mod positioned;
pub mod short_io;

use slowfs::fixture::SlowMount;

use crate::{SuiteConfig, Verdict};

/// Mounts slowfs with the run's seed, the suite's rules and the run's profile.
pub(crate) fn mount(config: &SuiteConfig, rules: &[&str]) -> Result<SlowMount, Verdict> {
    let mut spec = slowfs_faults::FaultSpec {
        seed: Some(config.seed),
        ..Default::default()
    };
    let fail = |e: String| cannot_mount(&e);
    if let Some(profile) = &config.profile {
        spec.add_profile(profile).map_err(|e| fail(e.to_string()))?;
    }
    for rule in rules {
        spec.add_rule("suite", rule)
            .map_err(|e| fail(e.to_string()))?;
    }
    match &config.fault_traces {
        Some(traces) => SlowMount::traced(spec, traces.next_mount()),
        None => SlowMount::start(spec),
    }
    .map_err(|e| fail(e.to_string()))
}

/// Mounts a recording slowfs (for the suites that ask the durability model).
pub(crate) fn recording_mount(config: &SuiteConfig) -> Result<SlowMount, Verdict> {
    SlowMount::recording(config.seed).map_err(|e| cannot_mount(&e.to_string()))
}

fn cannot_mount(why: &str) -> Verdict {
    Verdict::Fail {
        reason: format!("cannot mount slowfs: {why}"),
        trace: String::new(),
    }
}

/// `Err(message)` unless `condition`.
pub(crate) fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), String> {
    if condition {
        Ok(())
    } else {
        Err(message())
    }
}

/// Checks, on the backing files, that the engine does the I/O it reports with
/// the capabilities `suite` uses: a write's bytes land in the file, a read
/// returns the file's bytes. A suite that looked only at what the engine says
/// could be passed by an engine that does nothing (every write "done", every
/// read zeros); run before every suite, on a mount of its own.
pub(crate) fn verify_io<E: slowfs_harness::Engine>(
    engine: &E,
    suite: crate::Suite,
    config: &SuiteConfig,
) -> Result<(), Verdict> {
    use slowfs_harness::{Capability, EngineFile};
    let uses = |cap| suite.requires().contains(&cap) && engine.supports(cap);
    let fail = |reason: String| Verdict::Fail {
        reason: format!("the engine does not do the I/O it reports: {reason}"),
        trace: String::new(),
    };
    let mount = mount(config, &[])?;
    let pattern = |salt: u64| -> Vec<u8> {
        let mut x = config.seed ^ salt ^ 0x9e37_79b9_7f4a_7c15;
        (0..10_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        if uses(Capability::WriteAt) {
            let data = pattern(1);
            let path = mount.path("verify-write");
            let file = engine
                .open(&path, &slowfs_harness::OpenOptions::read_write_create())
                .await
                .map_err(|e| fail(format!("open for writing: {e}")))?;
            let (written, _) = file.write_all_at(data.clone(), 0).await;
            written.map_err(|e| fail(format!("write_all_at 10,000 bytes: {e}")))?;
            file.close()
                .await
                .map_err(|e| fail(format!("close after writing: {e}")))?;
            let landed = std::fs::read(mount.backing_path("verify-write")).unwrap_or_default();
            if landed != data {
                return Err(fail(format!(
                    "write_all_at reported 10,000 bytes written at 0, and the file holds {} bytes{}",
                    landed.len(),
                    if landed.len() == data.len() { ", not the ones written" } else { "" }
                )));
            }
        }
        let data = pattern(2);
        std::fs::write(mount.backing_path("verify-read"), &data)
            .map_err(|e| fail(format!("writing the backing file: {e}")))?;
        let read_at = uses(Capability::ReadAt);
        if read_at || uses(Capability::Read) {
            let file = engine
                .open(&mount.path("verify-read"), &slowfs_harness::OpenOptions::read())
                .await
                .map_err(|e| fail(format!("open for reading: {e}")))?;
            let mut got = Vec::new();
            while got.len() < data.len() {
                let want = vec![0; data.len() - got.len()];
                let (n, buf) = if read_at {
                    file.read_at(want, got.len() as u64).await
                } else {
                    file.read(want).await
                };
                let n = n.map_err(|e| fail(format!("read: {e}")))?;
                if n == 0 || n > buf.len() {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            let _ = file.close().await;
            if got != data {
                let op = if read_at { "read_at" } else { "read" };
                return Err(fail(format!(
                    "{op} of a 10,000-byte file returned {} bytes{}",
                    got.len(),
                    if got.len() == data.len() { " that differ from the file's" } else { "" }
                )));
            }
        }
        Ok(())
    })
}

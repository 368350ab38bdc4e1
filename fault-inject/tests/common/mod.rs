//! What the property tests share: one seed per run, printed, so a failure replays.

use proptest::test_runner::{Config, RngSeed};

/// proptest's config (regression files kept) with the run's seed: SLOWFS_SEED, or a fresh one. The
/// seed is printed once; `SLOWFS_SEED=N cargo test ...` runs the same cases.
pub fn seeded(cases: u32) -> Config {
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let seed = *SEED.get_or_init(|| {
        std::env::var("SLOWFS_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(fresh_seed)
    });
    // Printed by every test that uses it: a failing test shows its own output.
    println!("proptest seed {seed} (replay: SLOWFS_SEED={seed})");
    Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        ..Config::default()
    }
}

fn fresh_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}

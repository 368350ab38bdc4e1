//! Helpers shared by the tests: the mount fixture, a daemon process, output text.
#![allow(dead_code)]

pub mod daemon;

use std::path::Path;

/// The one mount fixture (`slowfs::fixture`), as every test uses it.
#[allow(unused_imports)]
pub use slowfs::fixture::SlowMount;

/// fsync of a directory: its entries become durable.
pub fn sync_dir(path: &Path) {
    std::fs::File::open(path).unwrap().sync_all().unwrap();
}

/// A command's stdout and stderr, together, for assertion messages.
pub fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

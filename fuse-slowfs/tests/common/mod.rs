//! Helpers shared by the tests: the mount fixture, a daemon process, output text.
#![allow(dead_code)]

pub mod daemon;

use std::path::Path;

/// The one mount fixture (`slowfs::fixture`), as every test uses it.
#[allow(unused_imports)]
pub use slowfs::fixture::SlowMount;

/// Opens `path` for reading and writing, creating it if missing (not
/// truncated).
pub fn open_rw_create(path: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .unwrap()
}

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

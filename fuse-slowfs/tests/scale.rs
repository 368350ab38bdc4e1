//! Any number of files: the daemon keeps a bounded number of fds however many
//! inodes the kernel holds, under a small open-file limit (`ulimit -n 1024`).

mod common;

use std::os::unix::fs::{DirEntryExt, MetadataExt};
use std::path::Path;

use common::daemon::{Daemon, Options};

/// Creates `dirs` x `per_dir` empty files, then stats every one through a fresh
/// listing; returns how many were stat'ed.
fn create_and_stat(root: &Path, dirs: usize, per_dir: usize) -> usize {
    for d in 0..dirs {
        let dir = root.join(format!("d{d}"));
        std::fs::create_dir(&dir).unwrap();
        for f in 0..per_dir {
            let path = dir.join(format!("f{f}"));
            std::fs::File::create(&path).unwrap_or_else(|e| {
                panic!(
                    "creating file {} of {}: {e}",
                    d * per_dir + f,
                    path.display()
                )
            });
        }
    }
    let mut seen = 0;
    for d in 0..dirs {
        for entry in std::fs::read_dir(root.join(format!("d{d}"))).unwrap() {
            let entry = entry.unwrap();
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            assert!(meta.is_file());
            assert_eq!(meta.ino(), entry.ino(), "d_ino matches st_ino");
            seen += 1;
        }
    }
    seen
}

#[test]
fn a_hundred_thousand_files_under_ulimit_1024() {
    let daemon = Daemon::start(Options {
        nofile: Some(1024),
        ..Options::default()
    });
    let seen = create_and_stat(&daemon.mountpoint, 100, 1000);
    assert_eq!(seen, 100_000);
    let fds = daemon.fds();
    assert!(fds < 600, "the daemon holds {fds} fds for 100,000 inodes");
    // The tree is still usable: a listing of the root works.
    assert_eq!(std::fs::read_dir(&daemon.mountpoint).unwrap().count(), 100);
}

#[test]
fn reopening_by_name_when_file_handles_are_off() {
    let daemon = Daemon::start(Options {
        nofile: Some(1024),
        args: &["--tune", "file-handles=off", "--tune", "fd-cache=64"],
    });
    let seen = create_and_stat(&daemon.mountpoint, 20, 500);
    assert_eq!(seen, 10_000);
    assert!(daemon.fds() < 200, "{} fds", daemon.fds());
    // Renames and unlinks keep evicted inodes reachable: an open file whose name is
    // gone still reads, and a renamed directory's files are found at the new name.
    let root = &daemon.mountpoint;
    std::fs::write(root.join("d0/f0"), b"kept").unwrap();
    let open = std::fs::File::open(root.join("d0/f0")).unwrap();
    std::fs::remove_file(root.join("d0/f0")).unwrap();
    std::fs::rename(root.join("d1"), root.join("renamed")).unwrap();
    // Push everything out of the cache.
    let _ = create_and_stat(&root.join("renamed"), 1, 200);
    let mut text = String::new();
    use std::io::Read;
    (&open).read_to_string(&mut text).unwrap();
    assert_eq!(text, "kept");
    assert!(std::fs::metadata(root.join("renamed/f499"))
        .unwrap()
        .is_file());
}

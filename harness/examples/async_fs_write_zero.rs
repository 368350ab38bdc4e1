//! Standalone reproducer (async-fs 2.2 / blocking 1.7, no slowfs code): a
//! write(2) that returns 0 is taken by `blocking::Unblock` as the end of its
//! pipe, so `flush()` and `sync_all()` succeed and the bytes are silently
//! dropped.
//!
//! ```sh
//! cargo build --release --example async_fs_write_zero -p slowfs-harness
//! slowfs run --set 'write short=0!' -- target/release/examples/async_fs_write_zero
//! ```
//! prints `wrote 100, flush Ok(()), sync_all Ok(()); the file holds 0 bytes`.
//! (`write short=0!` makes every write(2) on the mount return 0; std's
//! `write_all` reports that as an error, WriteZero.)

use futures::io::AsyncWriteExt;

fn main() {
    let dir = std::env::var("SLOWFS_MOUNT").unwrap_or_else(|_| {
        eprintln!("run me under `slowfs run --set 'write short=0!' -- ...` (SLOWFS_MOUNT unset)");
        std::process::exit(2)
    });
    let path = std::path::Path::new(&dir).join("async-fs-write-zero");
    futures::executor::block_on(async {
        let mut file = async_fs::File::create(&path).await.expect("create");
        let wrote = file.write(&[7u8; 100]).await.expect("write");
        let flushed = file.flush().await;
        let synced = file.sync_all().await;
        let len = std::fs::metadata(&path).expect("stat").len();
        println!(
            "wrote {wrote}, flush {flushed:?}, sync_all {synced:?}; the file holds {len} bytes"
        );
    });
}

//! Standalone reproducer (tokio-uring 0.5 and monoio 0.2, no slowfs code): a
//! positioned write through io_uring that the filesystem completes short comes
//! back as EIO, though the filesystem stored the short prefix (the kernel's
//! cached size still says 0 bytes: a caller cannot tell). Linux answers an async
//! direct-I/O write that FUSE completed short with -EIO (fs/fuse/file.c,
//! `fuse_get_res_by_io`); a `pwrite(2)` of the same bytes returns the short
//! count, which a write-all loop continues from.
//!
//! ```sh
//! cargo build --release --example short_write_eio -p uring-runtimes
//! slowfs run --set 'write short=100..100' -- target/release/examples/short_write_eio
//! ```
//! prints, for each runtime, `write_at(4096 bytes) -> Err(... "Input/output
//! error" ...); the file holds 0 bytes` (slowfs's stats: each write moved 100
//! bytes), then `pwrite(2) of the same -> Ok(100)`.

use std::os::unix::fs::FileExt;

fn main() {
    let dir = std::env::var("SLOWFS_MOUNT").unwrap_or_else(|_| {
        eprintln!(
            "run me under `slowfs run --set 'write short=100..100' -- ...` (SLOWFS_MOUNT unset)"
        );
        std::process::exit(2)
    });
    let dir = std::path::PathBuf::from(dir);
    let tokio_path = dir.join("tokio-uring-short-write");
    tokio_uring::start(async {
        let file = tokio_uring::fs::File::create(&tokio_path)
            .await
            .expect("create");
        let (result, _) = file.write_at(vec![7u8; 4096], 0).submit().await;
        file.close().await.expect("close");
        report("tokio-uring", &tokio_path, result);
    });
    let monoio_path = dir.join("monoio-short-write");
    monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
        .build()
        .expect("monoio needs io_uring")
        .block_on(async {
            let file = monoio::fs::File::create(&monoio_path)
                .await
                .expect("create");
            let (result, _) = file.write_at(vec![7u8; 4096], 0).await;
            file.close().await.expect("close");
            report("monoio", &monoio_path, result);
        });
    let std_path = dir.join("pwrite-short-write");
    let file = std::fs::File::create(&std_path).expect("create");
    println!(
        "pwrite(2) of the same -> {:?}",
        file.write_at(&[7u8; 4096], 0)
    );
}

fn report(runtime: &str, path: &std::path::Path, result: std::io::Result<usize>) {
    let len = std::fs::metadata(path).expect("stat").len();
    println!("{runtime}: write_at(4096 bytes) -> {result:?}; the file holds {len} bytes");
}

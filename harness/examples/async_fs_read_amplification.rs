//! Standalone reproducer (async-fs 2.2 / blocking 1.7, no slowfs code): after
//! a seek and a 4 KiB read through `async_fs::File`, `blocking::Unblock` goes on
//! reading ahead into its pipe (up to 8 MiB), and the next seek waits for that
//! read-ahead and throws it away: every random read pays two storage reads.
//!
//! ```sh
//! cargo build --release --example async_fs_read_amplification -p slowfs-harness
//! slowfs run --set 'read delay=5ms' -- target/release/examples/async_fs_read_amplification
//! ```
//! prints `asked for 400 KiB in 100 reads of 4 KiB: 1041.2 ms, 96 reads/s`
//! (`pread(2)` of the same: 535 ms, 187 reads/s), and slowfs's stats at exit show
//! what the file really read: `read 200 ... 1638400` bytes.

use std::time::Instant;

use futures::io::{AsyncReadExt, AsyncSeekExt};

/// The file's size and the reads made.
const FILE: usize = 64 << 20;
const READS: u64 = 100;

fn main() {
    let dir = std::env::var("SLOWFS_MOUNT").unwrap_or_else(|_| {
        eprintln!("run me under `slowfs run -- ...` (SLOWFS_MOUNT unset)");
        std::process::exit(2)
    });
    let path = std::path::Path::new(&dir).join("async-fs-read-amplification");
    std::fs::write(&path, vec![1u8; FILE]).expect("write the file");
    futures::executor::block_on(async {
        let mut file = async_fs::File::open(&path).await.expect("open");
        let mut buf = vec![0u8; 4096];
        let start = Instant::now();
        // Offsets spread over the file (a fixed stride: no RNG needed).
        for i in 0..READS {
            let offset = (i * 7_919 * 4096) % (FILE as u64 - 4096);
            file.seek(std::io::SeekFrom::Start(offset))
                .await
                .expect("seek");
            file.read_exact(&mut buf).await.expect("read");
        }
        let took = start.elapsed();
        println!(
            "asked for {} KiB in {READS} reads of 4 KiB: {:.1} ms, {:.0} reads/s",
            READS * 4,
            took.as_secs_f64() * 1e3,
            READS as f64 / took.as_secs_f64()
        );
    });
}

//! `slowfs-engine-bench`: engine throughput, side by side in one run.
//!
//! `slowfs-engine-bench engines [--json FILE]` measures every backend on local disk
//! (4 KiB random reads of a hot file at several concurrencies, 1 MiB sequential
//! reads and writes) and on slowfs with every read and write delayed 10 ms
//! (throughput against concurrency, next to what Little's law allows a pool of
//! N threads: N / latency).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use serde::Serialize;
use slowfs::fixture::SlowMount;
use slowfs_harness::backend::threadpool::DEFAULT_THREADS;
use slowfs_harness::backend::uring::{UringConfig, UringEngine};
use slowfs_harness::{AnyEngine, Engine, EngineFile, OpenOptions, ENGINE_NAMES};

#[derive(Parser)]
#[command(about = "Benchmarks of the harness engines (measurements, not tests)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Every backend on local disk and on slowfs with 10 ms per read/write.
    Engines {
        /// Also write the rows as JSON.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Seconds per measurement.
        #[arg(long, default_value_t = 1.0)]
        seconds: f64,
        /// Directory on local disk for the hot file.
        #[arg(long, default_value = "/var/tmp")]
        dir: PathBuf,
    },
}

#[derive(Debug, Clone, Serialize)]
struct Row {
    backend: String,
    target: String,
    workload: String,
    concurrency: usize,
    ops_per_s: f64,
    mib_per_s: f64,
    /// Little's law bound for pools (threads / latency), where it applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    littles_law_ops_per_s: Option<f64>,
}

#[derive(Clone, Copy)]
enum Workload {
    RandRead4k,
    SeqRead1m,
    SeqWrite1m,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::RandRead4k => "randread-4k",
            Workload::SeqRead1m => "seqread-1m",
            Workload::SeqWrite1m => "seqwrite-1m",
        }
    }

    fn block(self) -> usize {
        match self {
            Workload::RandRead4k => 4096,
            _ => 1 << 20,
        }
    }
}

const FILE_SIZE: u64 = 64 << 20;

/// Runs `concurrency` tasks, each with its own handle, doing `workload` for `seconds`.
async fn measure<E: Engine>(
    engine: &Arc<E>,
    path: &Path,
    workload: Workload,
    concurrency: usize,
    seconds: f64,
) -> (f64, f64) {
    let ops = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for task in 0..concurrency {
        let (engine, ops, stop, path) = (
            Arc::clone(engine),
            Arc::clone(&ops),
            Arc::clone(&stop),
            path.to_path_buf(),
        );
        tasks.push(tokio::spawn(async move {
            let options = match workload {
                Workload::SeqWrite1m => OpenOptions::read_write_create(),
                _ => OpenOptions::read(),
            };
            let file = engine.open(&path, &options).await.expect("open");
            let block = workload.block();
            let blocks = FILE_SIZE / block as u64;
            let mut buf = vec![0u8; block];
            let mut n: u64 = task as u64 * 7919;
            while !stop.load(Ordering::Relaxed) {
                n = n
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let offset = match workload {
                    Workload::RandRead4k => (n >> 33) % blocks * block as u64,
                    _ => (ops.load(Ordering::Relaxed) + task as u64) % blocks * block as u64,
                };
                let (result, back) = match workload {
                    Workload::SeqWrite1m => file.write_at(buf, offset).await,
                    _ => file.read_at(buf, offset).await,
                };
                buf = back;
                result.expect("I/O failed during the benchmark");
                ops.fetch_add(1, Ordering::Relaxed);
            }
            file.close().await.expect("close");
        }));
    }
    // The deadline is kept by a plain thread: tasks of the blocking backend never
    // yield to the runtime, so a tokio timer could not fire while they run.
    let start = Instant::now();
    let deadline = {
        let (stop, ops) = (Arc::clone(&stop), Arc::clone(&ops));
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs_f64(seconds));
            let done = ops.load(Ordering::Relaxed);
            stop.store(true, Ordering::Relaxed);
            (done, start.elapsed().as_secs_f64())
        })
    };
    for task in tasks {
        let _ = task.await;
    }
    let (done, elapsed) = deadline.join().expect("deadline thread");
    let ops_per_s = done as f64 / elapsed;
    (
        ops_per_s,
        ops_per_s * workload.block() as f64 / (1 << 20) as f64,
    )
}

fn engine(name: &str) -> Arc<AnyEngine> {
    Arc::new(AnyEngine::by_name(name).unwrap_or_else(|e| panic!("{name}: {e}")))
}

async fn local(dir: &Path, seconds: f64, rows: &mut Vec<Row>) {
    let path = dir.join(format!("slowfs-engine-bench-{}.dat", std::process::id()));
    std::fs::write(&path, vec![0xa5u8; FILE_SIZE as usize]).expect("writing the hot file");
    let _ = std::fs::read(&path);
    for name in ENGINE_NAMES {
        let engine = engine(name);
        for (workload, concurrency) in [
            (Workload::RandRead4k, 1),
            (Workload::RandRead4k, 16),
            (Workload::RandRead4k, 64),
            (Workload::SeqRead1m, 1),
            (Workload::SeqWrite1m, 1),
        ] {
            let (ops_per_s, mib_per_s) =
                measure(&engine, &path, workload, concurrency, seconds).await;
            rows.push(Row {
                backend: name.to_string(),
                target: "local".into(),
                workload: workload.name().into(),
                concurrency,
                ops_per_s,
                mib_per_s,
                littles_law_ops_per_s: None,
            });
        }
    }
    let _ = std::fs::remove_file(&path);
}

async fn delayed(seconds: f64, rows: &mut Vec<Row>) {
    const LATENCY: f64 = 0.010;
    let mount = SlowMount::with_rules(1, &[]).expect("mounting slowfs");
    std::fs::write(mount.backing_path("f"), vec![0x5au8; FILE_SIZE as usize])
        .expect("writing the file");
    mount.set("read,write delay=10ms").expect("rule");
    let path = mount.path("f");
    let mut engines: Vec<(String, Arc<AnyEngine>, Option<f64>)> = ENGINE_NAMES
        .iter()
        .map(|name| {
            let bound = match *name {
                "threadpool" => Some(DEFAULT_THREADS as f64 / LATENCY),
                // tokio's blocking pool: 512 threads by default.
                "tokio-fs" => Some(512.0 / LATENCY),
                "blocking" => Some(2.0 / LATENCY),
                _ => None,
            };
            (name.to_string(), engine(name), bound)
        })
        .collect();
    // io_uring punts FUSE reads to io-wq workers, capped by default at ~4 per CPU.
    let default_iowq = UringEngine::new(UringConfig {
        iowq_max_workers: None,
        ..UringConfig::default()
    })
    .expect("uring");
    engines.insert(
        1,
        (
            "uring (default io-wq cap)".into(),
            Arc::new(AnyEngine::Uring(default_iowq)),
            None,
        ),
    );
    for (name, engine, bound) in engines {
        for concurrency in [1, 4, 16, 64, 128, 256] {
            let (ops_per_s, mib_per_s) = measure(
                &engine,
                &path,
                Workload::RandRead4k,
                concurrency,
                seconds * 2.0,
            )
            .await;
            rows.push(Row {
                backend: name.clone(),
                target: "slowfs read delay=10ms".into(),
                workload: "randread-4k".into(),
                concurrency,
                ops_per_s,
                mib_per_s,
                littles_law_ops_per_s: bound.map(|b| b.min(concurrency as f64 / LATENCY)),
            });
        }
    }
}

fn print(rows: &[Row]) {
    println!(
        "{:<28} {:<24} {:<12} {:>5} {:>11} {:>9} {:>9}",
        "backend", "target", "workload", "conc", "ops/s", "MiB/s", "ratio"
    );
    for row in rows {
        // Local rows compare with the blocking backend (plain syscalls); delayed rows
        // with concurrency / latency, the most any engine can do.
        let reference = if row.target == "local" {
            rows.iter()
                .find(|r| {
                    r.backend == "blocking"
                        && r.target == row.target
                        && r.workload == row.workload
                        && r.concurrency == row.concurrency
                })
                .map(|r| r.ops_per_s)
        } else {
            Some(row.concurrency as f64 / 0.010)
        };
        let ratio = reference.map_or(String::new(), |r| format!("{:.2}x", row.ops_per_s / r));
        println!(
            "{:<28} {:<24} {:<12} {:>5} {:>11.0} {:>9.1} {:>9}",
            row.backend,
            row.target,
            row.workload,
            row.concurrency,
            row.ops_per_s,
            row.mib_per_s,
            ratio
        );
    }
    println!("ratio: local rows vs the blocking backend at the same concurrency; slowfs rows vs concurrency/latency (Little's law).");
}

fn main() -> anyhow::Result<()> {
    let (json, seconds, dir) = match Cli::parse().command {
        Command::Engines { json, seconds, dir } => (json, seconds, dir),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut rows = Vec::new();
    runtime.block_on(async {
        eprintln!("slowfs-engine-bench: local disk ({})", dir.display());
        local(&dir, seconds, &mut rows).await;
        eprintln!("slowfs-engine-bench: slowfs, read delay=10ms");
        delayed(seconds, &mut rows).await;
    });
    print(&rows);
    if let Some(path) = json {
        std::fs::write(&path, serde_json::to_string_pretty(&rows)?)?;
        eprintln!("slowfs-engine-bench: wrote {}", path.display());
    }
    Ok(())
}

//! `slowfs-bench fidelity`: is a fault what its rule says, measured at the caller's
//! syscall? Injected against observed for fixed delays (concurrency 1 and 1,000),
//! distributions (two-sample Kolmogorov-Smirnov statistic), spikes, throttle and
//! IOPS caps, and the `nfs` and `hdd` profiles, in one run.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use serde::Serialize;
use slowfs::fixture::SlowMount;
use slowfs_faults::DelayDist;

/// Every read reaches the daemon (direct I/O), with no delay: the round trip.
const BASELINE_RULE: &str = "read,write delay=1ms p=0";

#[derive(Debug, Serialize)]
pub struct Report {
    round_trip_us: Percentiles,
    round_trip_1000_us: Percentiles,
    /// Fixed delays at concurrency 1 are measured with 1,000 other requests parked.
    pub(crate) fixed: Vec<FixedRow>,
    pub(crate) distributions: Vec<DistRow>,
    spikes: Vec<SpikeRow>,
    rates: Vec<RateRow>,
    profiles: Vec<ProfileRow>,
}

#[derive(Debug, Clone, Copy, Serialize)]
struct Percentiles {
    p50: f64,
    p99: f64,
}

#[derive(Debug, Serialize)]
pub(crate) struct FixedRow {
    pub(crate) delay_us: f64,
    pub(crate) concurrency: usize,
    samples: usize,
    /// Observed minus the same-run round trip.
    pub(crate) p50_us: f64,
    pub(crate) p99_us: f64,
    /// Observed p99 minus the round trip's own p99.
    p99_minus_round_trip_p99_us: f64,
    /// Within 0.1 ms or 5% at p50 and 0.5 ms or 10% at p99 (see [`within`]).
    within_bounds: bool,
    /// How late a plain `nanosleep` of the same length wakes in this process
    /// (timer slack 1 ns), at the same moment: the machine's physical limit.
    sleep_overshoot_us: Percentiles,
    /// The same bounds, with the kernel's own sleep overshoot added to the delay.
    within_bounds_of_sleep: bool,
}

#[derive(Debug, Serialize)]
pub(crate) struct DistRow {
    pub(crate) rule: String,
    samples: usize,
    pub(crate) ks: f64,
    observed_p50_us: f64,
    configured_p50_us: f64,
    /// KS against the configured distribution plus a kernel sleep's overshoot
    /// (drawn from the measured overshoots): what a perfect sleeper gets here.
    ks_vs_sleep: f64,
    /// The samples behind the statistics, for the plots (not in the JSON).
    #[serde(skip)]
    pub(crate) samples_us: DistSamples,
}

/// One distribution's samples, in µs: what the caller saw, what the rule
/// draws, and the draws plus a kernel sleep's overshoot.
#[derive(Debug, Default)]
pub(crate) struct DistSamples {
    pub(crate) observed: Vec<f64>,
    pub(crate) configured: Vec<f64>,
    pub(crate) configured_and_sleep: Vec<f64>,
}

#[derive(Debug, Serialize)]
struct SpikeRow {
    rule: String,
    samples: usize,
    configured_rate: f64,
    observed_rate: f64,
}

#[derive(Debug, Serialize)]
struct RateRow {
    rule: String,
    set: f64,
    observed: f64,
    ratio: f64,
}

#[derive(Debug, Serialize)]
struct ProfileRow {
    profile: String,
    op: String,
    rule: String,
    p50_us: f64,
    p99_us: f64,
}

fn percentiles(samples: &mut [f64]) -> Percentiles {
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    Percentiles {
        p50: at(0.5),
        p99: at(0.99),
    }
}

/// Latencies (µs) of `n` 4 KiB preads of `file`, one at a time.
fn serial_reads(file: &File, n: usize) -> Vec<f64> {
    let mut buf = vec![0u8; 4096];
    (0..n)
        .map(|_| {
            let t = Instant::now();
            // SAFETY: valid fd and buffer.
            let r = unsafe { libc::pread(file.as_raw_fd(), buf.as_mut_ptr().cast(), 4096, 0) };
            assert!(r >= 0, "pread: {}", std::io::Error::last_os_error());
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect()
}

/// Latencies (µs) of one 4 KiB pread in each of `threads` threads at once (each
/// with its own open file), `rounds` times.
fn parallel_reads(path: &std::path::Path, threads: usize, rounds: usize) -> Vec<f64> {
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (barrier, path) = (Arc::clone(&barrier), path.to_path_buf());
            std::thread::Builder::new()
                .stack_size(64 << 10)
                .spawn(move || {
                    let file = File::open(path).expect("open");
                    let mut out = Vec::new();
                    for _ in 0..rounds {
                        barrier.wait();
                        out.extend(serial_reads(&file, 1));
                    }
                    out
                })
                .expect("thread")
        })
        .collect();
    handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect()
}

/// The two-sample Kolmogorov-Smirnov statistic: the largest gap between the two
/// empirical distribution functions.
pub fn ks_statistic(a: &mut [f64], b: &mut [f64]) -> f64 {
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let (mut i, mut j, mut d) = (0, 0, 0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / a.len() as f64 - j as f64 / b.len() as f64).abs());
    }
    d
}

/// Within 0.1 ms or 5% at p50 and 0.5 ms or 10% at p99. Both are observed minus
/// the same run's no-delay round trip: p50 minus its p50, p99 minus its p99 (the
/// machine's own tail, which no delay can undercut, is not the delay's error).
fn within(delay_us: f64, p50: f64, p99: f64) -> bool {
    (p50 - delay_us).abs() <= (100.0f64).max(0.05 * delay_us)
        && (p99 - delay_us).abs() <= (500.0f64).max(0.10 * delay_us)
}

/// How late `nanosleep(delay)` wakes, `n` times (µs), with 1 ns timer slack (as
/// the daemon's timekeeper has): the floor any delay on this machine sits on.
fn sleep_overshoots(delay: Duration, n: usize) -> Vec<f64> {
    // SAFETY: prctl on the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1u64) };
    (0..n)
        .map(|_| {
            let start = Instant::now();
            std::thread::sleep(delay);
            (start.elapsed().as_secs_f64() - delay.as_secs_f64()) * 1e6
        })
        .collect()
}

/// Runs every measurement; `scale` < 1 shortens the run (fewer samples).
pub fn run(scale: f64) -> anyhow::Result<Report> {
    let n = |full: usize| ((full as f64 * scale) as usize).max(5);
    let mount = SlowMount::with_rules(2026, &[BASELINE_RULE])?;
    std::fs::write(mount.backing_path("f"), vec![7u8; 1 << 20])?;
    let path = mount.path("f");
    let file = File::open(&path)?;
    serial_reads(&file, 50); // warm up
    let round_trip = percentiles(&mut serial_reads(&file, n(2000)));
    let round_trip_1000 = percentiles(&mut parallel_reads(&path, 1000, 3));
    eprintln!(
        "fidelity: round trip p50 {:.0} µs (1 at a time), {:.0} µs (1,000 at once)",
        round_trip.p50, round_trip_1000.p50
    );

    let fixed = fixed_delays(&mount, &file, (round_trip, round_trip_1000), &n)?;
    let distributions = distributions(&mount, &file, round_trip, &n)?;
    let spikes = spikes(&mount, &file, &n)?;
    let rates = rates(&mount, &path, scale)?;
    drop(file);
    drop(mount);

    let profiles = profiles(n)?;
    Ok(Report {
        round_trip_us: round_trip,
        round_trip_1000_us: round_trip_1000,
        fixed,
        distributions,
        spikes,
        rates,
        profiles,
    })
}

/// Fixed delays from 50 µs to 1 s, with 1,000 other requests parked all along:
/// what a reader sees beyond the mount's own round trip (`round_trip`: one at
/// a time, 1,000 at once).
fn fixed_delays(
    mount: &SlowMount,
    file: &File,
    (round_trip, round_trip_1000): (Percentiles, Percentiles),
    n: &dyn Fn(usize) -> usize,
) -> anyhow::Result<Vec<FixedRow>> {
    let path = mount.path("f");
    // 1,000 requests parked for the whole measurement (hung reads of another file):
    // the timers must stay precise with that many waiting.
    std::fs::write(mount.backing_path("parked"), b"x")?;
    let hang = mount.set("read path=parked hang")?;
    let parked_path = mount.path("parked");
    let parked: Vec<_> = (0..1000)
        .map(|_| {
            let path = parked_path.clone();
            std::thread::Builder::new()
                .stack_size(64 << 10)
                .spawn(move || serial_reads(&File::open(path).expect("open"), 1))
                .expect("thread")
        })
        .collect();
    while mount.waiting() < 1000 {
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!("fidelity: 1,000 requests parked");

    let mut fixed = Vec::new();
    for (text, serial) in [
        ("50us", 300),
        ("100us", 300),
        ("250us", 300),
        ("500us", 300),
        ("1ms", 300),
        ("3ms", 300),
        ("10ms", 200),
        ("100ms", 40),
        ("1s", 8),
    ] {
        let delay_us = slowfs_faults::parse_duration(text).unwrap().as_secs_f64() * 1e6;
        let id = mount.set(&format!("read path=f delay={text}"))?;
        let mut runs = vec![(1, serial_reads(file, n(serial)), round_trip)];
        if delay_us >= 10_000.0 {
            // 1,000 issued at once: on two cores, shorter delays measure the CPU time
            // of waking 1,000 threads, not the timer.
            runs.push((1000, parallel_reads(&path, 1000, 1), round_trip_1000));
        }
        let sleep = percentiles(&mut sleep_overshoots(
            Duration::from_secs_f64(delay_us / 1e6),
            n(serial),
        ));
        for (concurrency, mut samples, rt) in runs {
            let count = samples.len();
            for s in &mut samples {
                *s -= rt.p50;
            }
            let p = percentiles(&mut samples);
            let p99_excess = p.p99 + rt.p50 - rt.p99;
            eprintln!(
                "fidelity: delay={text:>6} x{concurrency:<4} observed-rt p50 {:>9.1} µs p99 {:>9.1} µs",
                p.p50, p.p99
            );
            fixed.push(FixedRow {
                delay_us,
                concurrency,
                samples: count,
                p50_us: p.p50,
                p99_us: p.p99,
                p99_minus_round_trip_p99_us: p99_excess,
                within_bounds: within(delay_us, p.p50, p99_excess),
                sleep_overshoot_us: sleep,
                within_bounds_of_sleep: within(delay_us, p.p50 - sleep.p50, p99_excess - sleep.p99),
            });
        }
        mount.clear(Some(id));
    }
    mount.clear(Some(hang));
    mount.release();
    for thread in parked {
        thread.join().expect("parked reader");
    }

    Ok(fixed)
}

/// Delay distributions: the delays a reader sees against draws from the
/// configured distribution (Kolmogorov-Smirnov), with and without a kernel
/// sleep's overshoot.
fn distributions(
    mount: &SlowMount,
    file: &File,
    round_trip: Percentiles,
    n: &dyn Fn(usize) -> usize,
) -> anyhow::Result<Vec<DistRow>> {
    let mut distributions = Vec::new();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    // A kernel sleep's overshoot around these distributions' medians.
    let overshoots = sleep_overshoots(Duration::from_millis(1), n(2000));
    for dist in ["lognormal(800us,0.6)", "normal(2ms,0.3ms)", "500us..3ms"] {
        let id = mount.set(&format!("read delay={dist}"))?;
        let mut observed: Vec<f64> = serial_reads(file, n(5000))
            .into_iter()
            .map(|s| s - round_trip.p50)
            .collect();
        mount.clear(Some(id));
        let parsed = DelayDist::parse(dist).unwrap();
        let mut drawn: Vec<f64> = (0..observed.len())
            .map(|_| parsed.sample(&mut rng).as_secs_f64() * 1e6)
            .collect();
        let mut drawn_then_slept: Vec<f64> = drawn
            .iter()
            .map(|d| d + overshoots[rng.gen_range(0..overshoots.len())])
            .collect();
        let ks_vs_sleep = ks_statistic(&mut observed.clone(), &mut drawn_then_slept);
        let ks = ks_statistic(&mut observed, &mut drawn);
        let row = DistRow {
            rule: format!("read delay={dist}"),
            samples: observed.len(),
            ks,
            observed_p50_us: observed[observed.len() / 2],
            configured_p50_us: drawn[drawn.len() / 2],
            ks_vs_sleep,
            samples_us: DistSamples {
                observed,
                configured: drawn,
                configured_and_sleep: drawn_then_slept,
            },
        };
        eprintln!(
            "fidelity: {dist:<22} KS {ks:.3}, {ks_vs_sleep:.3} with a sleep's overshoot (p50 {:.0} vs {:.0} µs)",
            row.observed_p50_us, row.configured_p50_us
        );
        distributions.push(row);
    }

    Ok(distributions)
}

/// Spikes: the share of reads past a threshold against the configured rate.
fn spikes(
    mount: &SlowMount,
    file: &File,
    n: &dyn Fn(usize) -> usize,
) -> anyhow::Result<Vec<SpikeRow>> {
    let mut spikes = Vec::new();
    for (rule, rate, threshold_us) in [
        ("read delay=200us spike=0.02:20ms", 0.02, 10_000.0),
        ("read delay=1ms spike=0.005:100ms", 0.005, 50_000.0),
    ] {
        let id = mount.set(rule)?;
        let samples = serial_reads(file, n(3000));
        mount.clear(Some(id));
        let observed =
            samples.iter().filter(|&&s| s > threshold_us).count() as f64 / samples.len() as f64;
        eprintln!("fidelity: {rule}: spikes {observed:.4} (set {rate})");
        spikes.push(SpikeRow {
            rule: rule.into(),
            samples: samples.len(),
            configured_rate: rate,
            observed_rate: observed,
        });
    }

    Ok(spikes)
}

/// Throttles and IOPS limits: the steady rate reached against the set one.
fn rates(mount: &SlowMount, path: &std::path::Path, scale: f64) -> anyhow::Result<Vec<RateRow>> {
    let mut rates = Vec::new();
    let seconds = 5.0 * scale.max(0.2);
    for (rule, set, block, threads) in [
        ("read throttle=64MiB/s", 64.0, 1 << 20, 8),
        ("read throttle=1GiB/s", 1024.0, 1 << 20, 8),
        ("read throttle=2GiB/s", 2048.0, 1 << 20, 8),
        ("read iops=1000", 1000.0, 4096, 16),
        ("read iops=10000", 10_000.0, 4096, 16),
        ("read iops=20000", 20_000.0, 4096, 16),
    ] {
        let id = mount.set(rule)?;
        // The bucket starts full (its burst, 100 ms of the rate): measure the
        // steady rate after it is spent.
        let _ = saturate(path, threads, block, Duration::from_millis(300));
        let (bytes, ops) = saturate(path, threads, block, Duration::from_secs_f64(seconds));
        mount.clear(Some(id));
        let observed = if rule.contains("throttle") {
            bytes as f64 / (1 << 20) as f64 / seconds
        } else {
            ops as f64 / seconds
        };
        eprintln!(
            "fidelity: {rule}: {observed:.0} ({:.3} of the set rate)",
            observed / set
        );
        rates.push(RateRow {
            rule: rule.into(),
            set,
            observed,
            ratio: observed / set,
        });
    }
    Ok(rates)
}

/// Reads `block`s from `threads` threads for `time`; bytes and requests done.
fn saturate(path: &std::path::Path, threads: usize, block: usize, time: Duration) -> (u64, u64) {
    let stop = Instant::now() + time;
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let path = path.to_path_buf();
            std::thread::spawn(move || {
                let file = File::open(path).unwrap();
                let mut buf = vec![0u8; block];
                let (mut bytes, mut ops) = (0u64, 0u64);
                while Instant::now() < stop {
                    // SAFETY: valid fd and buffer.
                    let r =
                        unsafe { libc::pread(file.as_raw_fd(), buf.as_mut_ptr().cast(), block, 0) };
                    assert!(r >= 0);
                    bytes += r as u64;
                    ops += 1;
                }
                (bytes, ops)
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().unwrap())
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
}

/// One syscall to time; its return value (negative on failure).
type Call<'a> = Box<dyn Fn() -> i64 + 'a>;

/// Observed per-operation latency of the `nfs` and `hdd` profiles at the caller.
fn profiles(n: impl Fn(usize) -> usize) -> anyhow::Result<Vec<ProfileRow>> {
    let mut rows = Vec::new();
    for name in ["nfs", "hdd"] {
        let profile = slowfs_faults::profile(name).expect("built in");
        let mut spec = slowfs_faults::FaultSpec::default();
        spec.add_profile(name)?;
        spec.seed = Some(3);
        let mount = SlowMount::start(spec)?;
        std::fs::write(mount.backing_path("f"), vec![1u8; 1 << 20])?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(mount.path("f"))?;
        let fd = file.as_raw_fd();
        let buf = vec![0u8; 4096];
        let read_buf = std::cell::RefCell::new(vec![0u8; 4096]);
        let ops: [(&str, &str, Call); 4] = [
            (
                "stat",
                "lookup",
                Box::new(|| {
                    let p = std::ffi::CString::new(mount.path("f").as_os_str().as_encoded_bytes())
                        .unwrap();
                    // SAFETY: valid path and buffer.
                    let mut st: libc::stat = unsafe { std::mem::zeroed() };
                    unsafe { libc::stat(p.as_ptr(), &mut st) as i64 }
                }),
            ),
            // SAFETY (all three): valid fd and buffer.
            (
                "pread 4KiB",
                "read",
                Box::new(|| unsafe {
                    libc::pread(fd, read_buf.borrow_mut().as_mut_ptr().cast(), 4096, 0) as i64
                }),
            ),
            (
                "pwrite 4KiB",
                "write",
                Box::new(|| unsafe { libc::pwrite(fd, buf.as_ptr().cast(), 4096, 0) as i64 }),
            ),
            (
                "fsync",
                "fsync",
                Box::new(|| unsafe { libc::fsync(fd) as i64 }),
            ),
        ];
        for (what, op, call) in ops {
            let rule = profile
                .rules
                .iter()
                .find(|r| {
                    r.split_whitespace()
                        .next()
                        .is_some_and(|ops| ops.split(',').any(|o| o == op))
                })
                .map_or("no rule", |r| r);
            let mut samples: Vec<f64> = (0..n(if op == "fsync" { 100 } else { 300 }))
                .map(|_| {
                    let t = Instant::now();
                    assert!(call() >= 0, "{what}: {}", std::io::Error::last_os_error());
                    t.elapsed().as_secs_f64() * 1e6
                })
                .collect();
            let p = percentiles(&mut samples);
            eprintln!(
                "fidelity: {name} {what:<12} p50 {:>8.0} µs p99 {:>8.0} µs   ({rule})",
                p.p50, p.p99
            );
            rows.push(ProfileRow {
                profile: name.into(),
                op: what.into(),
                rule: rule.into(),
                p50_us: p.p50,
                p99_us: p.p99,
            });
        }
    }
    Ok(rows)
}

/// Prints the report as Markdown tables.
pub fn print(report: &Report) {
    println!(
        "round trip (no delay): p50 {:.0} µs, p99 {:.0} µs; with 1,000 at once: p50 {:.0} µs\n",
        report.round_trip_us.p50, report.round_trip_us.p99, report.round_trip_1000_us.p50
    );
    println!("Concurrency 1 is measured with 1,000 other requests parked (hung) the whole time.\n");
    println!("| delay | concurrency | samples | p50 − round-trip p50 | p99 − round-trip p50 | p99 − round-trip p99 | within bounds | nanosleep overshoot p50 / p99 | within bounds of a nanosleep |");
    println!("|---:|---:|---:|---:|---:|---:|---|---:|---|");
    let yes = |b: bool| if b { "yes" } else { "no" };
    for r in &report.fixed {
        println!(
            "| {} | {} | {} | {:.0} µs | {:.0} µs | {:.0} µs | {} | {:.0} / {:.0} µs | {} |",
            slowfs_faults::DisplayDuration(Duration::from_secs_f64(r.delay_us / 1e6)),
            r.concurrency,
            r.samples,
            r.p50_us,
            r.p99_us,
            r.p99_minus_round_trip_p99_us,
            yes(r.within_bounds),
            r.sleep_overshoot_us.p50,
            r.sleep_overshoot_us.p99,
            yes(r.within_bounds_of_sleep),
        );
    }
    println!("\n| distribution | samples | KS statistic | KS vs configured + a nanosleep's overshoot | observed p50 | configured p50 |");
    println!("|---|---:|---:|---:|---:|---:|");
    for r in &report.distributions {
        println!(
            "| `{}` | {} | {:.3} | {:.3} | {:.0} µs | {:.0} µs |",
            r.rule, r.samples, r.ks, r.ks_vs_sleep, r.observed_p50_us, r.configured_p50_us
        );
    }
    for r in &report.spikes {
        println!(
            "\n`{}`: spikes in {:.2}% of {} requests (set: {:.2}%)",
            r.rule,
            r.observed_rate * 100.0,
            r.samples,
            r.configured_rate * 100.0
        );
    }
    println!("\n| rule | set | observed | ratio |");
    println!("|---|---:|---:|---:|");
    for r in &report.rates {
        println!(
            "| `{}` | {:.0} | {:.0} | {:.3} |",
            r.rule, r.set, r.observed, r.ratio
        );
    }
    println!("\n| profile | call | p50 | p99 | rule |");
    println!("|---|---|---:|---:|---|");
    for r in &report.profiles {
        println!(
            "| {} | {} | {:.2} ms | {:.2} ms | `{}` |",
            r.profile,
            r.op,
            r.p50_us / 1000.0,
            r.p99_us / 1000.0,
            r.rule
        );
    }
}

/// Writes the report as JSON.
pub fn write_json(report: &Report, path: &PathBuf) -> anyhow::Result<()> {
    std::fs::write(path, serde_json::to_string_pretty(report)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ks_is_zero_for_equal_samples_and_one_for_disjoint() {
        let mut a = vec![1.0, 2.0, 3.0];
        assert_eq!(ks_statistic(&mut a.clone(), &mut a), 0.0);
        assert_eq!(ks_statistic(&mut [1.0, 2.0], &mut [5.0, 6.0]), 1.0);
    }
}

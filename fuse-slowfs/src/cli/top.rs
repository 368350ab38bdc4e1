//! `slowfs top MNT` and `slowfs ctl MNT stats --watch`: a mount's stats over
//! time. `top` redraws a screen of rates (per second over the last interval)
//! beside the latency percentiles since the mount started (in a terminal; into
//! a pipe or a file it prints the frames one after another); `--watch` prints a
//! table (or one JSON object per line) per interval, for scripts.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use slowfs::control::{request, Command};
use slowfs::stats::{micros, percent, StatsReport};

/// Asks the mount for its stats; `None` once it is gone.
fn fetch(socket: &Path) -> anyhow::Result<Option<StatsReport>> {
    let response = match request(socket, &Command::Stats) {
        Ok(r) => r,
        Err(_) => return Ok(None),
    };
    if !response.ok {
        anyhow::bail!("{}", response.message);
    }
    Ok(Some(serde_json::from_value(response.data)?))
}

/// `slowfs top`: redraws until the mount goes away or the user presses Ctrl-C.
pub fn top(mountpoint: &Path, socket: &Path, interval: Duration) -> anyhow::Result<ExitCode> {
    let Some(mut previous) = fetch(socket)? else {
        anyhow::bail!(
            "no answer from the slowfs at {} (socket {})",
            mountpoint.display(),
            socket.display()
        );
    };
    let mut previous_at = Instant::now();
    // In a terminal each frame replaces the last in place; into a pipe or a
    // file, escape codes would only be noise: plain frames, one after another.
    let terminal = std::io::stdout().is_terminal();
    loop {
        std::thread::sleep(interval);
        let Some(now) = fetch(socket)? else {
            say!(
                "\nslowfs top: {} is no longer mounted",
                mountpoint.display()
            );
            return Ok(ExitCode::SUCCESS);
        };
        let seconds = previous_at.elapsed().as_secs_f64();
        previous_at = Instant::now();
        let frame = frame(mountpoint, &previous, &now, seconds);
        let text = if terminal {
            // Home, clear: the frame replaces the last one in place.
            format!("\x1b[H\x1b[2J{frame}")
        } else {
            format!("{frame}\n")
        };
        let mut out = std::io::stdout().lock();
        match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            // The reader went away (`| head`): done, not an error.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
            other => other?,
        }
        previous = now;
    }
}

/// One screen: rates over the last `seconds`, latencies since the start.
pub fn frame(mountpoint: &Path, before: &StatsReport, now: &StatsReport, seconds: f64) -> String {
    use std::fmt::Write as _;
    let per_s = |delta: u64| delta as f64 / seconds.max(1e-9);
    let mut s = String::new();
    let (mut total_ops, mut total_bytes) = (0.0, 0.0);
    let mut rows = String::new();
    let share = |delta_us: u64| delta_us as f64 / 1e6 / seconds.max(1e-9);
    let mut ops_now: Vec<&slowfs::stats::OpReport> = now.ops.iter().collect();
    let spent = |op: &slowfs::stats::OpReport| {
        let old = before.ops.iter().find(|o| o.op == op.op);
        op.time_us.saturating_sub(old.map_or(0, |o| o.time_us))
    };
    // The operations that took the most of this interval first.
    ops_now.sort_by_key(|op| std::cmp::Reverse(spent(op)));
    for op in ops_now {
        let old = before.ops.iter().find(|o| o.op == op.op);
        let delta = |f: fn(&slowfs::stats::OpReport) -> u64| f(op).saturating_sub(old.map_or(0, f));
        let (ops, bytes) = (per_s(delta(|o| o.count)), per_s(delta(|o| o.bytes)));
        total_ops += ops;
        total_bytes += bytes;
        let _ = writeln!(
            rows,
            "{:<16} {:>9.1} {:>11} {:>6} {:>9.1} {:>9.1} {:>9.1} {:>10} {:>10} {:>10}",
            op.op,
            ops,
            human_rate(bytes),
            percent(share(spent(op))),
            // Requests a rule fired on; of those, the ones answered an
            // injected error; apart, the backing filesystem's own errors
            // (ENOENT lookups, unsupported xattrs), which are no faults.
            per_s(delta(|o| o.faulted)),
            per_s(delta(|o| o.injected.failed)),
            per_s(delta(|o| o.fs_errors)),
            micros(op.p50_us),
            micros(op.p99_us),
            micros(op.max_us),
        );
    }
    let _ = writeln!(
        s,
        "slowfs top {}   up {:.0}s   every {:.1}s   {:.1} ops/s   {}   parked now: {} ({} hung)",
        mountpoint.display(),
        now.uptime_s,
        seconds,
        total_ops,
        human_rate(total_bytes),
        now.parked,
        now.hung
    );
    let _ = writeln!(
        s,
        "\n{:<16} {:>9} {:>11} {:>6} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10}",
        "op", "ops/s", "bytes/s", "%wall", "faults/s", "failed/s", "fs-err/s", "p50", "p99", "max"
    );
    s.push_str(&rows);
    if now.ops.is_empty() {
        s.push_str("(no requests yet)\n");
    }
    let _ = writeln!(
        s,
        "\nrules (fired/s, fired, matched, %wall of the requests it fired on):"
    );
    if now.rules.is_empty() {
        s.push_str("  none (slowfs ctl MNT set RULE adds one)\n");
    }
    for rule in &now.rules {
        let old = before.rules.iter().find(|r| r.id == rule.id);
        let _ = writeln!(
            s,
            "  #{:<3} {:>8.1} {:>9} {:>9} {:>6}  {}",
            rule.id,
            per_s(rule.fired.saturating_sub(old.map_or(0, |r| r.fired))),
            rule.fired,
            rule.matched,
            percent(share(
                rule.time_us.saturating_sub(old.map_or(0, |r| r.time_us))
            )),
            rule.rule
        );
    }
    s.push_str(
        "\n(rates and %wall over the last interval; latencies since the mount started; Ctrl-C quits)\n",
    );
    s
}

/// `slowfs ctl MNT stats --watch`: a table (or a JSON line) per interval.
pub fn watch(socket: &Path, interval: Duration, json: bool) -> anyhow::Result<ExitCode> {
    let mut first = true;
    loop {
        let Some(report) = fetch(socket)? else {
            if first {
                anyhow::bail!("no answer from the control socket {}", socket.display());
            }
            return Ok(ExitCode::SUCCESS);
        };
        first = false;
        let line = if json {
            serde_json::to_string(&report)?
        } else {
            report.render()
        };
        let mut out = std::io::stdout().lock();
        match writeln!(out, "{line}").and_then(|()| out.flush()) {
            // The reader went away (`| head`): done, not an error.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
            other => other?,
        }
        drop(out);
        std::thread::sleep(interval);
    }
}

fn human_rate(bytes_per_s: f64) -> String {
    const UNITS: [&str; 4] = ["B/s", "KiB/s", "MiB/s", "GiB/s"];
    let mut value = bytes_per_s;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;
    use slowfs::stats::{InjectedCounts, OpReport, RuleStats};

    fn report(reads: u64, bytes: u64, fired: u64) -> StatsReport {
        serde_json::from_value(serde_json::json!({
            "uptime_s": 10.0,
            "ops": [serde_json::to_value(OpReport {
                op: "read".into(), count: reads, time_us: reads * 1000, wall_share: 0.0,
                fs_errors: 0, faulted: fired,
                injected: InjectedCounts { delayed: fired, ..Default::default() },
                interrupted: 0, bytes,
                p50_us: 100, p99_us: 20_000, max_us: 30_000, histogram: vec![],
            }).unwrap()],
            "rules": [serde_json::to_value(RuleStats {
                id: 1, rule: "read delay=1ms".into(), matched: reads, fired,
                time_us: fired * 1000, wall_share: 0.0,
            }).unwrap()],
            "parked": 3, "hung": 1,
        }))
        .unwrap()
    }

    #[test]
    fn a_frame_shows_rates_over_the_interval() {
        let f = frame(
            Path::new("/m"),
            &report(100, 0, 10),
            &report(300, 2 << 20, 50),
            2.0,
        );
        assert!(f.contains("100.0"), "200 reads in 2 s: {f}");
        assert!(f.contains("1.0 MiB/s"), "{f}");
        assert!(f.contains("20.0ms"), "{f}");
        assert!(f.contains("parked now: 3 (1 hung)"), "{f}");
        assert!(f.contains("#1"), "{f}");
        // 200 reads of 1 ms each in 2 s: 10% of the interval.
        assert!(f.contains(" 10% "), "{f}");
    }
}

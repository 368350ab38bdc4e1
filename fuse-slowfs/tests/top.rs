//! `slowfs top` in a real terminal (tmux: the frame is read back with
//! capture-pane) and `slowfs ctl MNT stats --watch` for scripts, on a real mount.

mod common;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::SlowMount;

const SLOWFS: &str = env!("CARGO_BIN_EXE_slowfs");

/// A tmux session killed on drop (also when the test panics).
struct Tmux(String);

impl Tmux {
    fn start(name: &str, command: &str) -> Tmux {
        let status = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-x",
                "140",
                "-y",
                "40",
                "-s",
                name,
                command,
            ])
            .status()
            .expect("tmux must be installed (scripts/test.sh installs it)");
        assert!(status.success(), "tmux new-session failed");
        Tmux(name.to_string())
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.0])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .status();
    }
}

/// Reads a file on the mount over and over until told to stop.
fn reader(mount: &SlowMount, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::fs::write(mount.path("f"), vec![7u8; 64 << 10]).unwrap();
    let path = mount.path("f");
    std::thread::spawn(move || {
        let mut reads = 0;
        while !stop.load(Ordering::Relaxed) {
            std::fs::read(&path).unwrap();
            reads += 1;
        }
        reads
    })
}

#[test]
fn top_shows_live_rates_latencies_and_rules_and_ends_with_the_mount() {
    // A data rule: files opened under it are served by the daemon, not passthrough.
    let mount = SlowMount::configured(&["read delay=2ms"], |_| {}).expect("mounting slowfs");
    let socket = mount.mount().control_socket().unwrap().to_path_buf();
    let stop = Arc::new(AtomicBool::new(false));
    let reads = reader(&mount, Arc::clone(&stop));
    let session = format!("slowfs-top-{}", std::process::id());
    let tmux = Tmux::start(
        &session,
        &format!(
            "{SLOWFS} top {} --socket {} --interval 300ms; echo TOP-EXITED; sleep 30",
            mount.path("").display(),
            socket.display()
        ),
    );
    // Wait for a frame in which reads are flowing.
    let deadline = Instant::now() + Duration::from_secs(20);
    let frame = loop {
        let screen = tmux.screen();
        let flowing = screen.lines().any(|l| {
            l.starts_with("read ")
                && l.split_whitespace()
                    .nth(1)
                    .and_then(|r| r.parse::<f64>().ok())
                    .is_some_and(|r| r > 0.0)
        });
        if flowing {
            break screen;
        }
        assert!(Instant::now() < deadline, "no frame with reads:\n{screen}");
        std::thread::sleep(Duration::from_millis(100));
    };
    stop.store(true, Ordering::Relaxed);
    assert!(reads.join().unwrap() > 0);
    assert!(frame.contains("slowfs top"), "{frame}");
    assert!(frame.contains("ops/s") && frame.contains("p99"), "{frame}");
    assert!(
        frame.contains("read delay=2ms"),
        "the rule and its firings:\n{frame}"
    );
    // The frame is redrawn in place: one header on the screen, not a scroll.
    assert_eq!(frame.matches("slowfs top").count(), 1, "{frame}");

    // Unmounting ends top with a message.
    drop(mount);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let screen = tmux.screen();
        if screen.contains("TOP-EXITED") {
            assert!(screen.contains("no longer mounted"), "{screen}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "top did not end with the mount:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn stats_watch_prints_a_json_line_per_interval() {
    let mount = SlowMount::configured(&["read delay=1ms"], |_| {}).expect("mounting slowfs");
    let socket = mount.mount().control_socket().unwrap().to_path_buf();
    std::fs::write(mount.path("f"), b"x").unwrap();
    let child = Command::new(SLOWFS)
        .args(["ctl", "--socket"])
        .arg(&socket)
        .arg(mount.path(""))
        .args(["stats", "--json", "--watch", "100ms"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    drop(mount);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert!(lines.len() >= 3, "{} lines", lines.len());
    assert!(lines
        .iter()
        .all(|l| l["rules"][0]["rule"] == "read delay=1ms"));
    // Each op carries its latency histogram; the buckets count every request.
    let last = lines.last().unwrap();
    for op in last["ops"].as_array().unwrap() {
        let buckets = op["histogram"].as_array().unwrap();
        let counted: u64 = buckets.iter().map(|b| b["count"].as_u64().unwrap()).sum();
        assert_eq!(counted, op["count"].as_u64().unwrap(), "{op}");
        assert!(
            buckets
                .iter()
                .all(|b| b["below_us"].as_u64().unwrap().is_power_of_two()),
            "{buckets:?}"
        );
    }

    // --watch is for stats only.
    let out = Command::new(SLOWFS)
        .args(["ctl", "/nonexistent", "rules", "--watch", "1s"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--watch goes with `stats`"));
}

/// The write end of a pipe whose read end is already closed (`| head -1`
/// after head has its line).
fn closed_pipe() -> std::os::fd::OwnedFd {
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    write
}

#[test]
fn ctl_and_top_into_a_closed_pipe_end_without_a_panic() {
    let mount = SlowMount::configured(&["read delay=1ms"], |_| {}).expect("mounting slowfs");
    let socket = mount.mount().control_socket().unwrap().to_path_buf();
    std::fs::write(mount.path("f"), b"x").unwrap();
    let ctl = |args: &[&str], pipe: Option<std::os::fd::OwnedFd>| {
        let mut command = Command::new(SLOWFS);
        command
            .args(["ctl", "--socket"])
            .arg(&socket)
            .arg(mount.path(""))
            .args(args);
        match pipe {
            Some(pipe) => command.stdout(std::process::Stdio::from(pipe)),
            None => command.stdout(std::process::Stdio::piped()),
        };
        command
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap()
    };
    for args in [&["stats"][..], &["stats", "--json"], &["rules"]] {
        let out = ctl(args, Some(closed_pipe()));
        assert_eq!(
            out.status.code(),
            Some(0),
            "ctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The control: read, the same command prints its answer.
        let out = ctl(args, None);
        assert!(out.status.success() && !out.stdout.is_empty(), "{out:?}");
    }
    // top into a closed pipe ends at its first frame, successfully.
    let mut top = Command::new(SLOWFS)
        .args(["top", "--interval", "50ms", "--socket"])
        .arg(&socket)
        .arg(mount.path(""))
        .stdout(std::process::Stdio::from(closed_pipe()))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = top.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            top.kill().unwrap();
            panic!("top kept running with nobody reading");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = top.wait_with_output().unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn top_into_a_pipe_prints_plain_frames() {
    let mount = SlowMount::configured(&["read delay=1ms"], |_| {}).expect("mounting slowfs");
    let socket = mount.mount().control_socket().unwrap().to_path_buf();
    let stop = Arc::new(AtomicBool::new(false));
    let reads = reader(&mount, Arc::clone(&stop));
    let top = Command::new(SLOWFS)
        .args(["top", "--interval", "100ms", "--socket"])
        .arg(&socket)
        .arg(mount.path(""))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    stop.store(true, Ordering::Relaxed);
    assert!(reads.join().unwrap() > 0);
    drop(mount);
    let out = top.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !out.stdout.contains(&0x1b),
        "escape codes in piped output: {text:?}"
    );
    // Frame after frame, one after another (in a terminal they replace each
    // other in place: the tmux test above sees one header on the screen).
    assert!(text.matches("slowfs top").count() >= 3, "{text}");
    assert!(text.lines().any(|l| l.starts_with("read ")), "{text}");
    assert!(text.contains("no longer mounted"), "{text}");
}

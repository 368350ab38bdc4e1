//! A parked request ends when its caller is interrupted (NFS `intr`): at once when
//! the caller is killed, with EINTR when it has a handler; `--no-intr` keeps the
//! wait. And `slowfs run` always exits on SIGTERM, leaving no mount.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::SlowMount;

/// Starts `cat FILE` in the background and waits until its read is parked.
fn parked_reader(m: &SlowMount) -> std::process::Child {
    std::fs::write(m.backing_path("f"), b"data").unwrap();
    let reader = Command::new("cat")
        .arg(m.path("f"))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while m.mount().waiting() == 0 {
        assert!(Instant::now() < deadline, "the read never parked");
        std::thread::sleep(Duration::from_millis(5));
    }
    reader
}

/// SIGKILLs a parked reader; how long it took to be gone.
fn kill_parked_reader(m: &SlowMount) -> Duration {
    let mut reader = parked_reader(m);
    let killed = Instant::now();
    reader.kill().unwrap();
    reader.wait().unwrap();
    killed.elapsed()
}

#[test]
fn a_killed_reader_parked_on_a_long_delay_is_gone_at_once() {
    let m = SlowMount::configured(&["read delay=30s"], |_| {}).expect("mounting slowfs");
    let took = kill_parked_reader(&m);
    assert!(took < Duration::from_secs(1), "gone after {took:?}");
}

#[test]
fn a_killed_reader_parked_on_a_hang_is_gone_at_once() {
    let m = SlowMount::configured(&["read hang"], |_| {}).expect("mounting slowfs");
    let took = kill_parked_reader(&m);
    assert!(took < Duration::from_secs(1), "gone after {took:?}");
    assert_eq!(m.mount().waiting(), 0, "the parked request ended");
}

#[test]
fn without_intr_a_killed_reader_waits_for_the_release() {
    let m = SlowMount::configured(&["read hang"], |c| c.interruptible = false)
        .expect("mounting slowfs");
    let mut reader = parked_reader(&m);
    reader.kill().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        reader.try_wait().unwrap().is_none(),
        "still held by the hang"
    );
    assert_eq!(m.mount().release(), 1);
    reader.wait().unwrap();
}

#[test]
fn a_python_reader_with_a_signal_handler_sees_the_interrupt() {
    let m = SlowMount::configured(&["read delay=30s"], |_| {}).expect("mounting slowfs");
    std::fs::write(m.backing_path("f"), b"data").unwrap();
    // The handler raises, so Python does not restart the read (PEP 475).
    let script = r#"
import os, signal, sys, time
class Interrupted(Exception): pass
def on_alarm(*_): raise Interrupted()
signal.signal(signal.SIGALRM, on_alarm)
signal.setitimer(signal.ITIMER_REAL, 0.3)
fd = os.open(sys.argv[1], os.O_RDONLY)
t = time.monotonic()
try:
    os.read(fd, 4)
    print("completed", time.monotonic() - t)
except Interrupted:
    print("interrupted", time.monotonic() - t)
"#;
    let started = Instant::now();
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(m.path("f"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.starts_with("interrupted"),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let seconds: f64 = said.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(seconds < 1.3, "interrupted after {seconds} s");
}

#[test]
fn run_exits_on_sigterm_with_hung_requests_and_leaves_no_mount() {
    let mut run = Command::new(env!("CARGO_BIN_EXE_slowfs"))
        .args(["run", "--set", "read hang", "--"])
        .args([
            "sh",
            "-c",
            "echo x > \"$SLOWFS_MOUNT/f\"; echo \"$SLOWFS_MOUNT\"; cat \"$SLOWFS_MOUNT/f\" & cat \"$SLOWFS_MOUNT/f\"; wait",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut mountpoint = String::new();
    let mut stdout = run.stdout.take().unwrap();
    let mut byte = [0u8; 1];
    while stdout.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
        mountpoint.push(byte[0] as char);
    }
    std::thread::sleep(Duration::from_millis(300));
    let signalled = Instant::now();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(run.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = run.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = run.kill();
            panic!("slowfs run still running 15 s after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(signalled.elapsed() < Duration::from_secs(10));
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status}");
    assert!(
        !slowfs::mount::slowfs_mounts()
            .iter()
            .any(|m| m.to_str() == Some(&mountpoint)),
        "{mountpoint} left mounted"
    );
}

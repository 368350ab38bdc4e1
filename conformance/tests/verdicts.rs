//! Verdicts a CI can trust, through the `slowfs-conformance` command as a
//! library's CI runs it: never green on nothing (no capabilities, a typo, a
//! fake), never red on a busy machine, always ending in bounded time, leaving
//! nothing mounted.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use slowfs_conformance::report::Status;
use slowfs_conformance::runner::run_matrix;
use slowfs_conformance::{expectations, Suite, SuiteConfig, Verdict};

const BIN: &str = env!("CARGO_BIN_EXE_slowfs-conformance");

/// Matrices count the process's fds and time its loop: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A driver that prints `handshake` and then answers nothing.
fn handshake_only(handshake: &str) -> String {
    format!("cmd:echo '{handshake}'; cat > /dev/null")
}

/// The runner with a private TMPDIR (to check that nothing is left in it),
/// in a scratch directory (where failed cells' fault traces are kept).
fn conformance(args: &[&str], tmp: &Path) -> Output {
    let scratch = tempfile::tempdir().unwrap();
    Command::new(BIN)
        .args(args)
        .env("TMPDIR", tmp)
        .current_dir(scratch.path())
        .output()
        .unwrap()
}

/// What a run left behind in `tmp`: files and slowfs mounts.
fn leftovers(tmp: &Path) -> Vec<String> {
    let mut left: Vec<String> = std::fs::read_dir(tmp)
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .collect();
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    left.extend(
        mounts
            .lines()
            .filter(|l| l.contains(&*tmp.to_string_lossy()))
            .map(String::from),
    );
    left
}

fn python() -> PathBuf {
    let venv = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv/bin/python3"));
    assert!(
        venv.exists(),
        "{} is missing: run scripts/test.sh, which creates it",
        venv.display()
    );
    venv
}

fn control_driver(name: &str) -> String {
    format!(
        "cmd:{} {}/../drivers/python/controls.py --control {name}",
        python().display(),
        env!("CARGO_MANIFEST_DIR")
    )
}

/// The documented minimal driver, slowed to `secs` per request.
fn slow_driver(dir: &Path, secs: f64) -> String {
    let doc = include_str!("../../docs/driver-protocol.md");
    let code = doc
        .split("## A minimal driver")
        .nth(1)
        .and_then(|s| s.split("```python\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("docs/driver-protocol.md has the minimal driver");
    let slow = code
        .replace("import base64,", "import time, base64,")
        .replace(
            "    req = json.loads(line)\n",
            &format!("    req = json.loads(line)\n    time.sleep({secs})\n"),
        );
    assert_ne!(slow, code, "the minimal driver changed shape");
    let script = dir.join("slow_driver.py");
    std::fs::write(&script, slow).unwrap();
    format!("cmd:python3 {}", script.display())
}

#[test]
fn a_driver_that_declares_nothing_fails_the_run() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let nothing = handshake_only(
        r#"{"hello":"slowfs-driver","version":1,"engine":"nothing","capabilities":[]}"#,
    );
    let out = conformance(&["run", "--engine", &nothing, "--cases", "2"], tmp.path());
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("declares none of the capabilities"), "{said}");
    assert!(!said.contains("as expected"), "{said}");
    assert!(
        leftovers(tmp.path()).is_empty(),
        "{:?}",
        leftovers(tmp.path())
    );
}

#[test]
fn unknown_names_are_errors_that_list_the_known_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let typo = handshake_only(
        r#"{"hello":"slowfs-driver","version":1,"engine":"typo","capabilities":["open","writeat"]}"#,
    );
    let out = conformance(&["run", "--engine", &typo], tmp.path());
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("unknown capability 'writeat'"), "{said}");
    assert!(
        said.contains("known: open, close, read, read_at, write_at"),
        "{said}"
    );

    let file = tmp.path().join("expect.toml");
    std::fs::write(
        &file,
        "[[expect]]\nengine = \"uring\"\nsuite = \"short_io\"\nstatus = \"fail\"\nwhy = \"typo\"\n",
    )
    .unwrap();
    let out = conformance(
        &[
            "run",
            "--engine",
            "uring",
            "--expectations",
            file.to_str().unwrap(),
        ],
        tmp.path(),
    );
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("unknown suite 'short_io'") && said.contains("short-io"),
        "{said}"
    );

    std::fs::write(
        &file,
        "[[expect]]\nengine = \"uring\"\nsuite = \"short-io\"\nstatus = \"failed\"\nwhy = \"typo\"\n",
    )
    .unwrap();
    let out = conformance(
        &[
            "run",
            "--engine",
            "uring",
            "--expectations",
            file.to_str().unwrap(),
        ],
        tmp.path(),
    );
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("unknown status 'failed'"), "{said}");

    let out = conformance(&["run", "--suite", "loop_lag"], tmp.path());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("loop-lag"), "{}", text(&out));
}

#[test]
fn engines_with_one_name_are_refused_or_labelled() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let driver = control_driver("blocking");
    let out = conformance(
        &[
            "run", "--engine", &driver, "--engine", &driver, "--suite", "short-io",
        ],
        tmp.path(),
    );
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("both call themselves 'py:control-blocking'"),
        "{said}"
    );
    assert!(said.contains("--engine 'OTHER_NAME="), "{said}");

    let (a, b) = (format!("first={driver}"), format!("second={driver}"));
    let json = tmp.path().join("report.json");
    let out = conformance(
        &[
            "run",
            "--engine",
            &a,
            "--engine",
            &b,
            "--suite",
            "short-io",
            "--cases",
            "2",
            "--json",
            json.to_str().unwrap(),
        ],
        tmp.path(),
    );
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let engines: Vec<&str> = report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["engine"].as_str().unwrap())
        .collect();
    assert_eq!(engines, ["first", "second"], "{said}");
}

/// A driver that answers without doing the I/O is caught by every suite it
/// claims, cancel and loop-lag included; and so is the Rust twin of it.
#[test]
fn fake_io_fails_every_suite() {
    let _serial = serial();
    let config = SuiteConfig::default().cases(6).seed(19);
    for engine in [control_driver("fake-io"), "broken:fakes-io".to_string()] {
        let report = run_matrix(
            std::slice::from_ref(&engine),
            Suite::ALL,
            false,
            &config,
            &[],
            |_| {},
        )
        .expect("engines start");
        println!("{}", report.render());
        assert_eq!(report.cells.len(), Suite::ALL.len());
        for cell in &report.cells {
            assert!(
                matches!(cell.status, Status::Fail | Status::Caught),
                "{engine}: {} passed a fake:\n{}",
                cell.suite,
                report.render()
            );
        }
    }
}

/// A driver that takes 2 s per request: each of its cells times out (the
/// second still runs), the run ends in bounded time with `timeout`s (never
/// `pass`), and nothing is left mounted or on disk.
#[test]
fn a_pathological_driver_times_out_in_bounded_time() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let scripts = tempfile::tempdir().unwrap();
    let slow = slow_driver(scripts.path(), 2.0);
    let json = scripts.path().join("report.json");
    let started = Instant::now();
    let out = conformance(
        &[
            "run",
            "--engine",
            &slow,
            "--suite",
            "positioned",
            "--suite",
            "errors",
            "--cell-timeout",
            "6s",
            "--json",
            json.to_str().unwrap(),
        ],
        tmp.path(),
    );
    let took = started.elapsed();
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(took < Duration::from_secs(40), "took {took:?}: {said}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let statuses: Vec<&str> = report["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["timeout", "timeout"], "{said}");
    // Each cell has a driver of its own: the second is run, not charged for
    // the first one's timeout.
    assert!(!said.contains("not run"), "{said}");
    assert!(said.contains("[2/2] errors x minimal ..."), "{said}");
    assert!(
        said.contains("[1/2] positioned x minimal ..."),
        "progress lines: {said}"
    );
    assert!(
        leftovers(tmp.path()).is_empty(),
        "{:?}",
        leftovers(tmp.path())
    );
}

/// Ctrl-C (SIGINT to the runner's process group, as a terminal sends it) and
/// SIGTERM mid-cell: the partial report is printed, the exit status is 128+N,
/// and no mount and no temp directory is left.
#[test]
fn signals_print_the_partial_report_and_leave_nothing() {
    let _serial = serial();
    let scripts = tempfile::tempdir().unwrap();
    let slow = slow_driver(scripts.path(), 0.5);
    for (signal, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let tmp = tempfile::tempdir().unwrap();
        let stderr = scripts.path().join(format!("stderr-{signal}"));
        let mut child = Command::new(BIN)
            .args([
                "run", "--engine", &slow, "--suite", "short-io", "--suite", "errors",
            ])
            .env("TMPDIR", tmp.path())
            .current_dir(scripts.path())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .process_group(0)
            .spawn()
            .unwrap();
        // Wait until the first cell runs and its slowfs is mounted.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let mounted = std::fs::read_to_string("/proc/mounts")
                .unwrap()
                .contains(&*tmp.path().to_string_lossy());
            if mounted {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no mount appeared: {}",
                std::fs::read_to_string(&stderr).unwrap()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(500));
        // SAFETY: kill(2) of the runner's own process group.
        unsafe { libc::kill(-(child.id() as i32), signal) };
        let mut stdout = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        let status = child.wait().unwrap();
        let said = format!("{stdout}{}", std::fs::read_to_string(&stderr).unwrap());
        assert_eq!(status.code(), Some(code), "{said}");
        let name = if signal == libc::SIGINT {
            "SIGINT"
        } else {
            "SIGTERM"
        };
        assert!(
            said.contains(&format!("result: STOPPED by {name}")),
            "{said}"
        );
        assert!(
            leftovers(tmp.path()).is_empty(),
            "{:?}\n{said}",
            leftovers(tmp.path())
        );
    }
}

/// Busy-loop processes, killed on drop (also on panic).
struct Load(Vec<std::process::Child>);

impl Load {
    fn busy_loops(n: usize) -> Load {
        Load(
            (0..n)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .spawn()
                        .unwrap()
                })
                .collect(),
        )
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// loop-lag at 7x CPU oversubscription (14 busy loops on 2 cores): our engines
/// pass, and every negative control and expected finding keeps its verdict.
#[test]
fn loop_lag_verdicts_hold_at_7x_oversubscription() {
    let _serial = serial();
    let _load = Load::busy_loops(14);
    let known = expectations::parse("built-in", expectations::BUILT_IN).unwrap();
    let engines: Vec<String> = ["uring", "threadpool", "aio", "tokio-fs", "blocking"]
        .iter()
        .map(|s| s.to_string())
        .chain([control_driver("blocking")])
        .collect();
    let config = SuiteConfig::default().cases(1).seed(2026);
    let report = run_matrix(&engines, &[Suite::LoopLag], false, &config, &known, |c| {
        println!("{} {:?} {}", c.engine, c.status, c.detail)
    })
    .expect("engines start");
    println!("{}", report.render());
    let status = |engine: &str| {
        report
            .cells
            .iter()
            .find(|c| c.engine == engine)
            .map(|c| c.status)
    };
    assert_eq!(status("uring"), Some(Status::Pass), "{}", report.render());
    assert_eq!(
        status("threadpool"),
        Some(Status::Pass),
        "{}",
        report.render()
    );
    assert_eq!(status("aio"), Some(Status::Fail), "{}", report.render());
    assert_eq!(
        status("tokio-fs"),
        Some(Status::Fail),
        "{}",
        report.render()
    );
    assert_eq!(
        status("blocking"),
        Some(Status::Caught),
        "{}",
        report.render()
    );
    assert_eq!(
        status("py:control-blocking"),
        Some(Status::Fail),
        "{}",
        report.render()
    );
}

/// An engine that declares `cancel` but cannot be cancelled fails the suite;
/// `blocking`, which says it cannot, is unsupported with its reason.
#[test]
fn unsupported_says_why() {
    let _serial = serial();
    let config = SuiteConfig::default().cases(2).seed(3);
    let engine = std::sync::Arc::new(slowfs_harness::AnyEngine::by_name("blocking").unwrap());
    let verdict = slowfs_conformance::run_suite(Suite::Cancel, engine, &config).verdict;
    assert!(
        matches!(&verdict, Verdict::Unsupported { reason, explained: true, .. } if reason.contains("runtime thread")),
        "{verdict:?}"
    );
}

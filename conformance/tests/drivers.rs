//! The Python libraries through the driver protocol, and drivers that misbehave.
//! `scripts/test.sh` makes the venv (`python3 -m venv .venv && .venv/bin/pip install
//! aiofiles ayafileio aiofile`); without it these tests fail and say so.

use std::path::PathBuf;

use slowfs_conformance::runner::run_matrix;
use slowfs_conformance::{Suite, SuiteConfig, Verdict};
use slowfs_harness::{AnyEngine, Engine, OpenOptions};

/// Suites count the process's fds and time its loop: one matrix at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn python() -> PathBuf {
    let venv = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv/bin/python3"));
    let python = std::env::var_os("SLOWFS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or(venv);
    assert!(
        python.exists(),
        "{} is missing: create it with `python3 -m venv .venv && .venv/bin/pip install aiofiles ayafileio aiofile` (scripts/test.sh does)",
        python.display()
    );
    python
}

/// `cmd:` running `drivers/python/SCRIPT ARGS` with the venv's Python.
fn python_driver(script: &str, args: &str) -> String {
    format!(
        "cmd:{} {}/../drivers/python/{script} {args}",
        python().display(),
        env!("CARGO_MANIFEST_DIR")
    )
}

fn driver(lib: &str) -> String {
    python_driver("slowfs_driver.py", &format!("--lib {lib}"))
}

/// Takes the one-matrix-at-a-time lock, caps each driver request at 10 s (a
/// library that stops answering costs that per case and shrink step), and
/// returns the run's config.
fn setup(cases: u32, seed: u64) -> (std::sync::MutexGuard<'static, ()>, SuiteConfig) {
    let serial = serial();
    std::env::set_var("SLOWFS_DRIVER_TIMEOUT_MS", "10000");
    let config = SuiteConfig::default().cases(cases).seed(seed);
    (serial, config)
}

/// The driver matrices (every suite on each library's APIs) take minutes each,
/// almost all of it waiting on injected delays: one after another they took
/// 6 min of wall time for 44 s of CPU. Each runs as a `slowfs-conformance run`
/// process of its own, so they share nothing with this process (whose suites
/// count its fds), and the first matrix test to start launches all of them at
/// once; each test then waits for its own and judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Matrix {
    Python,
    AnyioTrio,
    Node,
    Jvm,
    Go,
}

impl Matrix {
    const ALL: [Matrix; 5] = [
        Matrix::Python,
        Matrix::AnyioTrio,
        Matrix::Node,
        Matrix::Jvm,
        Matrix::Go,
    ];

    /// The engines, cases and seed of this matrix, after checking that its
    /// runtime is installed (and building the Go driver into `dir`).
    fn plan(self, dir: &std::path::Path) -> Result<(Vec<String>, u32, u64), String> {
        let manifest = env!("CARGO_MANIFEST_DIR");
        Ok(match self {
            Matrix::Python => {
                let mut engines: Vec<String> = ["to_thread", "aiofiles", "ayafileio"]
                    .iter()
                    .map(|l| driver(l))
                    .collect();
                for caio in ["uring", "linux", "thread", "python"] {
                    engines.push(driver(&format!("aiofile --caio {caio}")));
                }
                (engines, 8, 5)
            }
            Matrix::AnyioTrio => {
                let engines = [
                    "--lib anyio --backend asyncio",
                    "--lib anyio --backend trio",
                    "--lib trio",
                ]
                .iter()
                .map(|args| python_driver("anyio_driver.py", args))
                .collect();
                (engines, 4, 2026)
            }
            Matrix::Node => {
                let version = quietly(std::process::Command::new("node").arg("--version"), dir);
                if !version.as_ref().is_ok_and(|(ok, _)| *ok) {
                    return Err(format!(
                        "node is missing (install Node 20: apt install nodejs): {version:?}"
                    ));
                }
                let driver = format!("node {manifest}/../drivers/node/slowfs_driver.mjs");
                (per_api(&driver, &["promises", "callbacks"]), 8, 5)
            }
            Matrix::Jvm => {
                let java = quietly(std::process::Command::new("java").arg("-version"), dir);
                let text = java.as_ref().map(|(_, t)| t.clone()).unwrap_or_default();
                // `openjdk version "17.0.15" ...`; Java 8 says "1.8.0_...".
                let major: u32 = text
                    .split('"')
                    .nth(1)
                    .and_then(|v| v.split(|c: char| !c.is_ascii_digit()).next())
                    .and_then(|m| m.parse().ok())
                    .unwrap_or(0);
                if !java.as_ref().is_ok_and(|(ok, _)| *ok) || major < 11 {
                    return Err(format!(
                        "java 11+ is missing (it runs drivers/jvm/SlowfsDriver.java as a single-file source; install a JDK: apt install default-jdk-headless, as scripts/test.sh does): {text}{java:?}"
                    ));
                }
                let driver = format!("java {manifest}/../drivers/jvm/SlowfsDriver.java");
                (per_api(&driver, &["nio", "nio-interrupt"]), 8, 5)
            }
            Matrix::Go => {
                let go = quietly(std::process::Command::new("go").arg("version"), dir);
                if !go.as_ref().is_ok_and(|(ok, _)| *ok) {
                    return Err(format!(
                        "go is missing (install Go 1.19+: apt install golang-go, as scripts/test.sh does): {go:?}"
                    ));
                }
                let binary = dir.join("slowfs-go-driver");
                let built = quietly(
                    std::process::Command::new("go")
                        .args(["build", "-o"])
                        .arg(&binary)
                        .arg(".")
                        .current_dir(format!("{manifest}/../drivers/go"))
                        .env("GOTOOLCHAIN", "local"),
                    dir,
                );
                match built {
                    Ok((true, _)) => {}
                    other => return Err(format!("go build in drivers/go failed: {other:?}")),
                }
                let driver = binary.display().to_string();
                (per_api(&driver, &["osfile", "osfile-ctx"]), 8, 5)
            }
        })
    }

    /// Plans and runs this matrix in a `slowfs-conformance run` process;
    /// returns the report and what the run printed.
    fn run(self) -> Result<(slowfs_conformance::report::Report, String), String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let (engines, cases, seed) = self.plan(dir.path())?;
        let json = dir.path().join("report.json");
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_slowfs-conformance"));
        command
            .arg("run")
            .args(["--cases", &cases.to_string(), "--seed", &seed.to_string()])
            .arg("--json")
            .arg(&json)
            .arg("--fault-traces")
            .arg(dir.path().join("faults"))
            // Caps each driver request at 10 s (a request queued behind delayed
            // ones in a 4-thread pool took over 3 s on a loaded machine): a
            // library that stops answering costs that per case and shrink step.
            .env("SLOWFS_DRIVER_TIMEOUT_MS", "10000");
        for engine in &engines {
            command.arg("--engine").arg(engine);
        }
        let (_, printed) = quietly(&mut command, dir.path()).map_err(|e| e.to_string())?;
        let report = std::fs::read(&json)
            .map_err(|e| format!("{self:?}: no report ({e}); the run printed:\n{printed}"))?;
        let report = serde_json::from_slice(&report).map_err(|e| e.to_string())?;
        Ok((report, printed))
    }
}

/// One engine per API of a driver that takes `--api NAME`.
fn per_api(driver: &str, apis: &[&str]) -> Vec<String> {
    apis.iter()
        .map(|api| format!("cmd:{driver} --api {api}"))
        .collect()
}

/// Runs `command` with its output (stdout and stderr) in a file in `dir`:
/// whether it succeeded, and the output. Starts it under the one-at-a-time
/// lock: a child's pipes are fds of this process while they exist, and an
/// in-process suite counts them.
fn quietly(
    command: &mut std::process::Command,
    dir: &std::path::Path,
) -> std::io::Result<(bool, String)> {
    let out = tempfile::NamedTempFile::new_in(dir)?;
    let mut child = {
        let _serial = serial();
        command
            .stdin(std::process::Stdio::null())
            .stdout(out.reopen()?)
            .stderr(out.reopen()?)
            .spawn()?
    };
    let status = child.wait()?;
    Ok((status.success(), std::fs::read_to_string(out.path())?))
}

type Launched = std::collections::HashMap<
    Matrix,
    std::sync::Mutex<
        Option<
            std::thread::JoinHandle<Result<(slowfs_conformance::report::Report, String), String>>,
        >,
    >,
>;

/// The report of `matrix` (launching every matrix on the first call), after
/// checking that every cell is as the built-in expectations say.
fn matrix_as_expected(matrix: Matrix) -> slowfs_conformance::report::Report {
    static LAUNCHED: std::sync::OnceLock<Launched> = std::sync::OnceLock::new();
    let launched = LAUNCHED.get_or_init(|| {
        Matrix::ALL
            .iter()
            .map(|&m| {
                (
                    m,
                    std::sync::Mutex::new(Some(std::thread::spawn(move || m.run()))),
                )
            })
            .collect()
    });
    let running = launched[&matrix]
        .lock()
        .unwrap()
        .take()
        .expect("each matrix is judged by one test");
    let (report, printed) = running
        .join()
        .expect("the matrix thread does not panic")
        .unwrap_or_else(|e| panic!("{e}"));
    println!("{printed}");
    assert!(report.ok(), "{}", report.render());
    report
}

#[test]
fn python_libraries_match_their_expectations() {
    let report = matrix_as_expected(Matrix::Python);
    let status = |engine: &str, suite: &str| {
        report
            .cells
            .iter()
            .find(|c| c.engine == engine && c.suite == suite)
            .map(|c| c.status)
    };
    use slowfs_conformance::report::Status::*;
    assert_eq!(
        status("py:aiofiles", "positioned"),
        Some(Unsupported),
        "aiofiles has no pread"
    );
    assert_eq!(status("py:to_thread", "loop-lag"), Some(Pass));
    assert_eq!(status("py:ayafileio", "short-io"), Some(Fail));
    // caio's C backends lose the errno; its Python backend keeps it.
    assert_eq!(status("py:aiofile-thread", "errors"), Some(Fail));
    assert_eq!(status("py:aiofile-python", "errors"), Some(Pass));
}

/// anyio (on asyncio and on trio) and trio, as services use them: every suite
/// passes but cancel (a held read is not cancellable: worker threads are not
/// abandoned), and positioned is unsupported with the reason stated.
#[test]
fn anyio_and_trio_match_their_expectations() {
    let report = matrix_as_expected(Matrix::AnyioTrio);
    use slowfs_conformance::report::Status::*;
    for engine in ["py:anyio-asyncio", "py:anyio-trio", "py:trio"] {
        let status = |suite: &str| {
            report
                .cells
                .iter()
                .find(|c| c.engine == engine && c.suite == suite)
                .map(|c| c.status)
        };
        assert_eq!(status("cancel"), Some(Fail), "{engine}");
        assert_eq!(status("positioned"), Some(Unsupported), "{engine}");
        assert_eq!(status("errors"), Some(Pass), "{engine}");
        assert_eq!(status("loop-lag"), Some(Pass), "{engine}");
    }
}

#[test]
fn a_driver_that_is_not_one_is_reported_with_its_output() {
    let err = AnyEngine::by_name("cmd:echo garbage; echo oops >&2")
        .unwrap_err()
        .to_string();
    assert!(err.contains("handshake") && err.contains("oops"), "{err}");
    let err = AnyEngine::by_name("cmd:exit 3").unwrap_err().to_string();
    assert!(err.contains("handshake"), "{err}");
}

#[test]
fn a_driver_that_dies_fails_requests_instead_of_hanging() {
    let hello = r#"{"hello":"slowfs-driver","version":1,"engine":"dies","capabilities":["open"]}"#;
    let engine = AnyEngine::by_name(&format!(
        "cmd:echo '{hello}'; read line; echo 'dying' >&2; exit 1"
    ))
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let err = rt
        .block_on(engine.open("/tmp/x".as_ref(), &OpenOptions::read()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("driver") && err.contains("dying"), "{err}");
    let wrong = r#"{"hello":"slowfs-driver","version":99}"#;
    let err = AnyEngine::by_name(&format!("cmd:echo '{wrong}'"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("version 99"), "{err}");
}

fn control(name: &str) -> std::sync::Arc<AnyEngine> {
    let command = python_driver("controls.py", &format!("--control {name}"));
    std::sync::Arc::new(AnyEngine::by_name(&command).unwrap())
}

/// The negative-control drivers (drivers/python/controls.py): each has one
/// defect, and the suite that owns that property must catch it.
#[test]
fn python_negative_controls_are_caught() {
    let (_serial, config) = setup(8, 7);
    let run = |name: &str, suite: Suite| {
        let outcome = slowfs_conformance::run_suite(suite, control(name), &config);
        println!("control {name} on {suite:?}: {}", outcome.verdict);
        outcome.verdict
    };
    let verdict = run("ignore-cancel", Suite::Cancel);
    assert!(
        matches!(&verdict, Verdict::Fail { reason, .. } if reason.contains("the cancel did not stop it")),
        "a driver that ignores cancel must fail the cancel suite: {verdict}"
    );
    let verdict = run("blocking", Suite::LoopLag);
    assert!(
        matches!(verdict, Verdict::Fail { .. }),
        "a driver that blocks its loop must fail loop-lag: {verdict}"
    );
    let verdict = run("failing-io", Suite::LoopLag);
    assert!(
        !matches!(verdict, Verdict::Pass),
        "a driver that does no I/O must not pass loop-lag: {verdict}"
    );
    let verdict = run("lost-errno", Suite::Errors);
    assert!(
        matches!(verdict, Verdict::Fail { .. }),
        "a driver that loses the errno must fail the errors suite: {verdict}"
    );
}

/// asyncio.to_thread answers a cancel at once while its thread still carries the
/// write out: the cancel suite reports the ghost write.
#[test]
fn to_thread_ghost_writes_are_reported() {
    let (_serial, config) = setup(16, 11);
    let engine = std::sync::Arc::new(AnyEngine::by_name(&driver("to_thread")).unwrap());
    let verdict = slowfs_conformance::run_suite(Suite::Cancel, engine, &config).verdict;
    println!("{verdict}");
    assert!(
        matches!(&verdict, Verdict::Fail { reason, trace } if reason.contains("ghost write") && trace.lines().count() <= 3),
        "{verdict}"
    );
}

/// The minimal driver in docs/driver-protocol.md, run as written: the doc alone
/// is enough to write a driver that the suites accept.
#[test]
fn the_documented_minimal_driver_passes() {
    let doc = include_str!("../../docs/driver-protocol.md");
    let section = doc
        .split("## A minimal driver")
        .nth(1)
        .expect("docs/driver-protocol.md has a `## A minimal driver` section");
    let code = section
        .split("```python\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the section has a ```python block");
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("minimal_driver.py");
    std::fs::write(&script, code).unwrap();
    let engine = format!("cmd:python3 {}", script.display());
    let (_serial, config) = setup(8, 3);
    let report =
        run_matrix(&[engine], Suite::ALL, false, &config, &[], |_| {}).expect("engines start");
    println!("{}", report.render());
    use slowfs_conformance::report::Status::*;
    for cell in &report.cells {
        let want = if ["cancel", "loop-lag"].contains(&cell.suite.as_str()) {
            Unsupported
        } else {
            Pass
        };
        assert_eq!(
            cell.status,
            want,
            "{} x minimal\n{}",
            cell.suite,
            report.render()
        );
    }
    assert_eq!(report.cells.len(), Suite::ALL.len());
}

/// Node 20's fs.promises and callback APIs through drivers/node/slowfs_driver.mjs.
#[test]
fn node_apis_match_their_expectations() {
    let report = matrix_as_expected(Matrix::Node);
    use slowfs_conformance::report::Status::*;
    for cell in &report.cells {
        if cell.suite != "cancel" {
            assert_eq!(cell.status, Pass, "{} x {}", cell.engine, cell.suite);
        }
    }
}

/// Java NIO's AsynchronousFileChannel through drivers/jvm/SlowfsDriver.java, run
/// as a single-file source (`java SlowfsDriver.java`, Java 11+): Future.cancel(false)
/// (`nio`) and Future.cancel(true) (`nio-interrupt`). Both fail cancel (a ghost
/// write; a closed channel), pass everything else, and positioned says append
/// was not tested (the API refuses APPEND).
#[test]
fn jvm_apis_match_their_expectations() {
    let report = matrix_as_expected(Matrix::Jvm);
    use slowfs_conformance::report::Status::*;
    for cell in &report.cells {
        let want = if cell.suite == "cancel" { Fail } else { Pass };
        assert_eq!(cell.status, want, "{} x {}", cell.engine, cell.suite);
        if cell.suite == "positioned" {
            assert!(
                cell.detail.contains("append mode not tested"),
                "{}",
                cell.detail
            );
        }
    }
    assert_eq!(report.cells.len(), 2 * Suite::ALL.len());
}

/// Go's os.File through drivers/go (standard library only), built first with
/// the local toolchain: `osfile` (cancel is f.SetDeadline, which cannot reach
/// a pread) and `osfile-ctx` (the context idiom, which abandons the call).
/// Both fail cancel (a held read unanswered; a ghost write); loop-lag passes
/// unless f.Close() met Go's preemption signal (EINTR, golang/go#44964),
/// which the expectations allow; everything else passes.
#[test]
fn go_apis_match_their_expectations() {
    let report = matrix_as_expected(Matrix::Go);
    use slowfs_conformance::report::Status::*;
    for cell in &report.cells {
        match cell.suite.as_str() {
            "cancel" => assert_eq!(cell.status, Fail, "{}", cell.engine),
            "loop-lag" => assert!(
                cell.status == Pass
                    || (cell.status == Fail
                        && cell.detail.contains("close: Interrupted system call")),
                "{} x loop-lag: {:?}\n{}",
                cell.engine,
                cell.status,
                cell.detail
            ),
            _ => assert_eq!(cell.status, Pass, "{} x {}", cell.engine, cell.suite),
        }
        if cell.suite == "positioned" {
            assert!(
                cell.detail.contains("append mode not tested"),
                "{}",
                cell.detail
            );
        }
    }
    assert_eq!(report.cells.len(), 2 * Suite::ALL.len());
}

/// A driver that leaves one request unanswered: the cell fails at the request
/// timeout (3 s here), naming the request, instead of running until its time
/// limit with every later request waiting a timeout of its own.
#[test]
fn an_unanswered_request_is_named_and_ends_the_cell() {
    let (_serial, config) = setup(8, 3);
    let started = std::time::Instant::now();
    let verdict =
        slowfs_conformance::run_suite(Suite::Positioned, control("silent-once"), &config).verdict;
    println!("{verdict}");
    assert!(
        matches!(&verdict, Verdict::Fail { reason, .. }
            if reason.contains("left request #") && reason.contains("`write_at`") && reason.contains("unanswered")),
        "{verdict}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
}

/// After a cancel, no request on the same handle goes out before the
/// cancelled one is answered: the strict-handles control answers a cancelled
/// write 200 ms late and refuses (EBADF) anything on its handle before that.
/// The cancel suite used to send `close` 70 µs after a cancel.
#[test]
fn no_request_overtakes_a_cancelled_one_on_its_handle() {
    let (_serial, _config) = setup(8, 5);
    let dir = tempfile::tempdir().unwrap();
    let engine = control("strict-handles");
    use slowfs_harness::EngineFile;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let file = engine
            .open(&dir.path().join("f"), &OpenOptions::read_write_create())
            .await
            .unwrap();
        let write = file.write_at(vec![1u8; 100], 0);
        // Dropped in flight: the runner sends `cancel`.
        let dropped = tokio::time::timeout(std::time::Duration::from_millis(50), write).await;
        assert!(dropped.is_err(), "the write should still be in flight");
        let closed = file.close().await;
        assert!(
            closed.is_ok(),
            "close overtook the cancelled write: {closed:?}"
        );
    });
}

/// A library without append mode (the no-append control declares no
/// `append`, says why and refuses an append open) still gets a positioned
/// verdict, which says that append was not tested; it used to be unable to
/// pass positioned at all.
#[test]
fn a_driver_without_append_gets_a_positioned_verdict() {
    let (_serial, config) = setup(8, 9);
    let outcome = slowfs_conformance::run_suite(Suite::Positioned, control("no-append"), &config);
    println!("{}", outcome.detail());
    assert_eq!(outcome.verdict, Verdict::Pass, "{}", outcome.detail());
    assert!(
        outcome.detail().contains("append mode not tested"),
        "{}",
        outcome.detail()
    );
}

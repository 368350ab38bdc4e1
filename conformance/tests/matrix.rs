//! The suites on real slowfs mounts: our engines keep every promise, the
//! third-party engine's known findings hold, and every negative control is caught
//! (a suite that goes blind fails here).

use slowfs_conformance::broken::Defect;
use slowfs_conformance::report::Status;
use slowfs_conformance::runner::run_matrix;
use slowfs_conformance::{expectations, Suite, SuiteConfig};

/// The suites count the process's fds and mounts: the tests here run one at a
/// time so that one's mounts never look like another's leaks.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn config() -> SuiteConfig {
    let seed = std::env::var("SLOWFS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(11);
    println!("seed {seed} (SLOWFS_SEED to change)");
    SuiteConfig::default().cases(16).seed(seed)
}

#[test]
fn the_default_matrix_is_as_expected() {
    let _serial = serial();
    let known = expectations::parse("built-in", expectations::BUILT_IN).unwrap();
    let engines: Vec<String> = slowfs_harness::ENGINE_NAMES
        .iter()
        .map(|s| s.to_string())
        .collect();
    let report =
        run_matrix(&engines, Suite::ALL, true, &config(), &known, |_| {}).expect("engines start");
    println!("{}", report.render());
    assert!(report.ok(), "unexpected cells:\n{}", report.render());
    for cell in &report.cells {
        // aio keeps every promise except loop-lag (io_submit blocks; expected).
        let ours = cell.engine == "uring"
            || cell.engine == "threadpool"
            || (cell.engine == "aio" && cell.suite != "loop-lag");
        if ours {
            assert!(
                matches!(cell.status, Status::Pass | Status::Unsupported),
                "{} x {}: {:?}",
                cell.suite,
                cell.engine,
                cell.status
            );
        }
    }
    let caught = |engine: &str, suite: &str| {
        report
            .cells
            .iter()
            .any(|c| c.engine == engine && c.suite == suite && c.status == Status::Caught)
    };
    assert!(
        caught("blocking", "loop-lag"),
        "blocking must fail loop-lag"
    );
    assert!(
        report
            .cells
            .iter()
            .any(|c| c.engine == "aio" && c.suite == "loop-lag" && c.status == Status::Fail),
        "io_submit blocks the loop: aio must fail loop-lag"
    );
    for defect in Defect::ALL {
        for suite in defect.caught_by() {
            assert!(
                caught(defect.name(), suite.name()),
                "{} not caught by {}",
                defect.name(),
                suite.name()
            );
        }
    }
    let json = serde_json::to_value(&report).unwrap();
    assert!(json["seed"].is_u64());
    assert!(json["cells"][0]["status"].is_string());
    assert!(report
        .junit()
        .contains("<testsuite name=\"slowfs-conformance\""));
}

/// Two busy-loop processes, killed on drop (also on panic).
struct Load(Vec<std::process::Child>);

impl Load {
    fn two_busy_loops() -> Load {
        Load(
            (0..2)
                .map(|_| {
                    std::process::Command::new("sh")
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

/// loop-lag's bound (half of one injected delay) holds on a loaded machine: with
/// two busy loops on the two cores, our engines still pass, and `blocking`, which
/// waits for every file operation on the loop thread, is still caught.
#[test]
fn loop_lag_is_load_proof() {
    let _serial = serial();
    let _load = Load::two_busy_loops();
    let known = expectations::parse("built-in", expectations::BUILT_IN).unwrap();
    let engines: Vec<String> = ["uring", "threadpool", "blocking"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let report = run_matrix(
        &engines,
        &[Suite::LoopLag],
        false,
        &config(),
        &known,
        |_| {},
    )
    .expect("engines start");
    println!("{}", report.render());
    for cell in &report.cells {
        let expected = if cell.engine == "blocking" {
            Status::Caught
        } else {
            Status::Pass
        };
        assert_eq!(
            cell.status,
            expected,
            "{} under load: {}",
            cell.engine,
            report.render()
        );
    }
}

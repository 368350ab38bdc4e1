//! The Python libraries through the driver protocol, and drivers that misbehave.
//! `scripts/test.sh` makes the venv (`python3 -m venv .venv && .venv/bin/pip install
//! aiofiles ayafileio`); without it these tests fail and say so.

use std::path::PathBuf;

use conformance::runner::run_matrix;
use conformance::{expectations, Suite, SuiteConfig};
use harness::{AnyEngine, Engine, OpenOptions};

fn python() -> PathBuf {
    let venv = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv/bin/python3"));
    let python = std::env::var_os("SLOWFS_PYTHON")
        .map(PathBuf::from)
        .unwrap_or(venv);
    assert!(
        python.exists(),
        "{} is missing: create it with `python3 -m venv .venv && .venv/bin/pip install aiofiles ayafileio` (scripts/test.sh does)",
        python.display()
    );
    python
}

fn driver(lib: &str) -> String {
    format!(
        "cmd:{} {}/../drivers/python/slowfs_driver.py --lib {lib}",
        python().display(),
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn python_libraries_match_their_expectations() {
    // A library that stops answering costs this long per case (and per shrink step).
    std::env::set_var("SLOWFS_DRIVER_TIMEOUT_MS", "3000");
    let known = expectations::parse("built-in", expectations::BUILT_IN).unwrap();
    let engines: Vec<String> = ["to_thread", "aiofiles", "ayafileio"]
        .iter()
        .map(|l| driver(l))
        .collect();
    let config = SuiteConfig {
        cases: 8,
        seed: 5,
        ..SuiteConfig::default()
    };
    let report = run_matrix(&engines, Suite::ALL, false, &config, &known, |_| {});
    println!("{}", report.render());
    assert!(report.ok(), "{}", report.render());
    let status = |engine: &str, suite: &str| {
        report
            .cells
            .iter()
            .find(|c| c.engine == engine && c.suite == suite)
            .map(|c| c.status)
    };
    use conformance::report::Status::*;
    assert_eq!(
        status("py:aiofiles", "positioned"),
        Some(Unsupported),
        "aiofiles has no pread"
    );
    assert_eq!(status("py:to_thread", "loop-lag"), Some(Pass));
    assert_eq!(status("py:ayafileio", "short-io"), Some(Fail));
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

"""The pytest plugin on real mounts: each test runs an inner pytest in a
subprocess (as a user's suite would run) and checks what it did and that no
mount is left behind."""

import errno
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

import slowfs
from slowfs._mount import is_mounted

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def slowfs_mounts():
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f if " - fuse.slowfs " in line]


def mountpoint_printed(lines):
    """The mountpoint an inner test printed as `MOUNTED AT PATH`."""
    return next(l for l in lines if "MOUNTED AT" in l).split()[-1]


@pytest.fixture(autouse=True)
def leaves_no_mount(tmp_path_factory, monkeypatch):
    # The test's mounts (and its inner pytest's, which inherits TMPDIR) go
    # under a temporary directory of its own: mounts others make on the
    # machine meanwhile (a crash search, another suite) are not its own.
    own = str(tmp_path_factory.mktemp("tmpdir"))
    monkeypatch.setenv("TMPDIR", own)
    monkeypatch.setattr(tempfile, "tempdir", own)
    yield
    left = [m for m in slowfs_mounts() if m.startswith(own + "/")]
    assert not left, f"mounts left behind: {left}"


def test_the_fixture_mounts_controls_and_unmounts(pytester):
    pytester.makepyfile(
        """
        import errno, os

        def test_it(slowfs):
            assert os.path.ismount(slowfs.path)
            (slowfs.path / "f").write_bytes(b"hello")
            assert (slowfs.backing / "f").read_bytes() == b"hello"
            slowfs.set("read error=EIO")
            fd = os.open(slowfs.path / "f", os.O_RDONLY)
            try:
                os.read(fd, 5)
                raise AssertionError("the rule did not fire")
            except OSError as e:
                assert e.errno == errno.EIO
            finally:
                os.close(fd)
            slowfs.clear()
            assert (slowfs.path / "f").read_bytes() == b"hello"
            stats = slowfs.stats()
            assert "read" in str(stats), stats
            print("MOUNTED AT", slowfs.path)
        """
    )
    result = pytester.runpytest_subprocess("-s")
    result.assert_outcomes(passed=1)
    assert not is_mounted(mountpoint_printed(result.outlines))


def test_the_marker_configures_the_mount(pytester):
    pytester.makepyfile(
        """
        import errno, os, pytest

        @pytest.mark.slowfs(rules=["write error=ENOSPC"], seed=3)
        def test_it(slowfs):
            fd = os.open(slowfs.path / "f", os.O_WRONLY | os.O_CREAT)
            try:
                os.write(fd, b"x")
                raise AssertionError("the marker's rule did not fire")
            except OSError as e:
                assert e.errno == errno.ENOSPC
            finally:
                os.close(fd)

        @pytest.mark.slowfs(rule="typo")
        def test_typo(slowfs):
            pass
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*unknown keyword(s)*rule*known*"])


def test_a_failing_test_is_unmounted_too(pytester):
    pytester.makepyfile(
        """
        def test_fails(slowfs):
            print("MOUNTED AT", slowfs.path)
            assert False, "on purpose"
        """
    )
    result = pytester.runpytest_subprocess("-s")
    result.assert_outcomes(failed=1)
    assert not is_mounted(mountpoint_printed(result.outlines))


def test_crash_keeps_only_what_was_durable(pytester):
    pytester.makepyfile(
        """
        import os, pytest

        @pytest.mark.slowfs(crash_model="strict")
        def test_it(slowfs):
            synced = slowfs.path / "synced"
            fd = os.open(synced, os.O_WRONLY | os.O_CREAT)
            os.write(fd, b"kept")
            os.fsync(fd)
            os.close(fd)
            dfd = os.open(slowfs.path, os.O_RDONLY)
            os.fsync(dfd)
            os.close(dfd)
            (slowfs.path / "unsynced").write_bytes(b"lost")
            at_risk = slowfs.durable()
            assert "unsynced" in str(at_risk), at_risk
            slowfs.crash()
            assert synced.read_bytes() == b"kept"
            assert not (slowfs.path / "unsynced").exists()
        """
    )
    pytester.runpytest_subprocess().assert_outcomes(passed=1)


def test_a_whole_suite_runs_on_slow_storage(pytester):
    pytester.makepyfile(
        """
        import os

        def mount_of(path):
            path = os.path.realpath(path)
            best = ("", "")
            for line in open("/proc/self/mountinfo"):
                f = line.split()
                point, fstype = f[4], f[f.index("-") + 1]
                if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) > len(best[0]):
                    best = (point, fstype)
            return best[1]

        def test_a(tmp_path):
            (tmp_path / "x").write_text("x")
            assert mount_of(tmp_path) == "fuse.slowfs"

        def test_b(tmpdir):
            assert mount_of(str(tmpdir)) == "fuse.slowfs"
        """
    )
    # pytester's own runner passes --basetemp, which the option replaces.
    result = pytester.run(
        sys.executable, "-m", "pytest", "--slowfs-profile", "nfs", "--slowfs-seed", "5"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["slowfs: tmp_path on *"])
    # The negative control: without the option, tmp_path is not on slowfs.
    pytester.runpytest_subprocess().assert_outcomes(failed=2)


def test_a_bad_profile_is_a_usage_error_naming_the_real_ones(pytester):
    pytester.makepyfile("def test_a(): pass")
    result = pytester.run(sys.executable, "-m", "pytest", "--slowfs-profile", "slow-disk")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stderr.str()
    result.stderr.fnmatch_lines(["*--slowfs-profile slow-disk: no such profile*nfs, slow-fsync*"])
    assert "INTERNALERROR" not in result.stderr.str() + result.stdout.str()
    # --help lists the binary's profiles, and no made-up one.
    helped = pytester.run(sys.executable, "-m", "pytest", "--help").stdout.str()
    assert "slow-fsync" in helped and "slow-disk" not in helped, helped


def test_a_failing_test_says_its_seed_and_how_to_replay_it(pytester):
    pytester.makepyfile(
        """
        import os, pytest

        @pytest.mark.slowfs(rules=["read error=EIO p=0.5"])
        def test_flaky_read(slowfs):
            (slowfs.path / "f").write_bytes(b"x" * 10)
            fd = os.open(slowfs.path / "f", os.O_RDONLY)
            good = 0
            try:
                for _ in range(40):
                    os.pread(fd, 1, 0)
                    good += 1
            except OSError:
                pass
            finally:
                os.close(fd)
            assert good == 40, f"EIO after {good} good reads"
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(failed=1)
    line = next(l for l in result.outlines if "replay: SLOWFS_SEED=" in l)
    seed = int(line.split("seed ")[1].split(";")[0])
    # The replay: the same seed gives the same failure.
    os.environ["SLOWFS_SEED"] = str(seed)
    try:
        first = pytester.runpytest_subprocess()
        second = pytester.runpytest_subprocess()
    finally:
        del os.environ["SLOWFS_SEED"]
    first.assert_outcomes(failed=1)
    second.assert_outcomes(failed=1)
    assert f"seed {seed};" in first.stdout.str()
    def failing_step(run):
        return [l for l in run.outlines if "EIO after" in l]

    assert failing_step(first) and failing_step(first) == failing_step(second)


def test_the_header_says_the_session_mounts_seed(pytester):
    pytester.makepyfile("def test_a(tmp_path): (tmp_path / 'x').write_text('x')")
    result = pytester.run(sys.executable, "-m", "pytest", "--slowfs-profile", "nfs")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["slowfs: tmp_path on * (nfs), seed *(replay: --slowfs-seed *)"])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_an_interrupted_run_leaves_no_mount(pytester, sig):
    pytester.makepyfile(
        """
        import time

        def test_waits(slowfs):
            print("MOUNTED AT", slowfs.path, flush=True)
            time.sleep(60)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-s", "-p", "no:cacheprovider"],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # A run started in the background by a shell ignores SIGINT, and its
        # children inherit that: give pytest a terminal's default back.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    mountpoint = mountpoint_printed(proc.stdout)
    assert is_mounted(mountpoint)
    proc.send_signal(sig)
    proc.communicate(timeout=60)
    deadline = time.monotonic() + 30
    while is_mounted(mountpoint) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not is_mounted(mountpoint), f"{mountpoint} still mounted after {sig!r}"


def test_mount_outside_pytest():
    with slowfs.Mount(rules=["fsync delay=1ms"]) as m:
        (m.path / "a").write_text("a")
        assert "fsync" in m.rules_in_force()
    assert not is_mounted(m.path)
    with pytest.raises(slowfs.MountError, match="slowfs mount failed"):
        slowfs.Mount(rules=["read delay=nonsense"]).start()


def test_conformance_one_cell_per_test():
    cell = slowfs.run_cell("threadpool", "positioned", seed=2026, cases=4)
    assert cell.status == "pass", cell.output
    cell.check()
    # The negative control: a driver that fakes its I/O must not pass.
    fake = f"cmd:{sys.executable} {ROOT}/drivers/python/controls.py --control fake-io"
    cell = slowfs.run_cell(fake, "positioned", seed=2026, cases=4)
    with pytest.raises(slowfs.ConformanceError, match="positioned"):
        cell.check()
    with pytest.raises(ValueError, match="known"):
        slowfs.run_cell("threadpool", "positionned")


def minimal_driver(tmp_path):
    """The protocol doc's minimal driver, as the doc shows it."""
    with open(os.path.join(ROOT, "docs", "driver-protocol.md")) as f:
        doc = f.read()
    section = doc[doc.index("## A minimal driver"):]
    code = section[section.index("```python\n") + len("```python\n"):]
    driver = tmp_path / "minimal_driver.py"
    driver.write_text(code[: code.index("```")])
    return f"cmd:{sys.executable} {driver}"


@pytest.mark.parametrize("suite", ["cancel", "positioned"])
def test_check_judges_a_cell_as_the_cli_does(tmp_path, suite):
    # The minimal driver says why it has no cancel: `unsupported` with the
    # driver's reason is as expected to the CLI (exit 0), so to check() too.
    driver = minimal_driver(tmp_path)
    cell = slowfs.run_cell(driver, suite, seed=2026, cases=4)
    assert cell.exit_code == 0, cell.output
    assert cell.status == ("unsupported" if suite == "cancel" else "pass"), cell.output
    cell.check()
    # The negative control: the same driver without its reasons is unsupported
    # for no stated reason, which the CLI fails, and so does check().
    silent = tmp_path / "silent_driver.py"
    silent.write_text(
        (tmp_path / "minimal_driver.py").read_text().replace('"unsupported": {', '"_": {')
    )
    cell = slowfs.run_cell(f"cmd:{sys.executable} {silent}", "cancel", seed=2026, cases=4)
    assert cell.exit_code != 0 and cell.unexpected, cell.output
    with pytest.raises(slowfs.ConformanceError, match="no reason given"):
        cell.check()

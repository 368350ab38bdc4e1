"""The slowfs pytest plugin (registered through the ``pytest11`` entry point).

* ``slowfs`` fixture: a fresh mount per test (a ``slowfs.Mount``: ``.path``,
  ``.backing``, ``set(rule)``, ``clear()``, ``release()``, ``crash()``,
  ``durable()``, ``stats()``), unmounted when the test ends, passes or fails.
* ``@pytest.mark.slowfs(profile="nfs", rules=[...], seed=1, crash_model="strict")``
  configures that fixture for one test.
* ``pytest --slowfs-profile nfs`` (and/or ``--slowfs-rule RULE``) runs the whole
  suite with its temporary directories (``tmp_path``, ``tmpdir``) on one slowfs
  mount: an existing test suite on slow storage, unchanged.
"""

import functools
import os
import shlex
import signal
import subprocess

import pytest

from ._binaries import binary
from ._mount import Mount

_SESSION_MOUNT = "_slowfs_session_mount"


def pytest_addoption(parser):
    group = parser.getgroup("slowfs", "slow, flaky storage for tests (slowfs)")
    names = _profile_names()
    group.addoption(
        "--slowfs-profile",
        metavar="NAME",
        help="put tmp_path/tmpdir of every test on a slowfs mount with this "
        "profile, one of: "
        + (", ".join(names) if names else "see `slowfs profiles`"),
    )
    group.addoption(
        "--slowfs-rule",
        action="append",
        default=[],
        metavar="RULE",
        help='put tmp_path on slowfs with this rule (repeatable), e.g. "fsync delay=50ms"',
    )
    group.addoption(
        "--slowfs-seed",
        type=int,
        metavar="N",
        help="seed for the faults of the --slowfs-profile/--slowfs-rule mount "
        "(printed in the header; the slowfs fixture takes $SLOWFS_SEED)",
    )


@functools.lru_cache(maxsize=None)
def _profile_names():
    """The built-in profiles, as the installed binary lists them (empty when
    it cannot be run: the mount then says what is wrong)."""
    try:
        listed = subprocess.run(
            [binary("slowfs"), "profiles"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(
        line.split()[0] for line in listed.splitlines() if line and not line[0].isspace()
        and not line.startswith("`")
    )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # tryfirst: pytest's tmp_path factory reads basetemp in its own
    # pytest_configure, which must see the mount.
    config.addinivalue_line(
        "markers",
        "slowfs(profile=None, rules=(), seed=None, crash_model=None, passthrough=None): "
        "configure the slowfs fixture of this test",
    )
    profile = config.getoption("slowfs_profile")
    rules = config.getoption("slowfs_rule")
    if not profile and not rules:
        return
    names = _profile_names()
    if profile and names and profile not in names:
        raise pytest.UsageError(
            f"--slowfs-profile {profile}: no such profile; the profiles are "
            f"{', '.join(names)} (`slowfs profiles NAME` describes one)"
        )
    if getattr(config, "workerinput", None) is None and config.getoption("basetemp"):
        raise pytest.UsageError("--slowfs-profile/--slowfs-rule choose the basetemp: drop --basetemp")
    mount = Mount(profile=profile, rules=rules, seed=config.getoption("slowfs_seed"))
    mount.start()
    setattr(config, _SESSION_MOUNT, mount)
    config.option.basetemp = str(mount.path / "pytest")
    _terminate_as_interrupt()


def pytest_report_header(config):
    mount = getattr(config, _SESSION_MOUNT, None)
    if mount is not None:
        what = " ".join(filter(None, [mount.profile, *mount.rules]))
        return (
            f"slowfs: tmp_path on {mount.path} ({what}), seed {mount.seed_used} "
            f"(replay: --slowfs-seed {mount.seed_used})"
        )
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # A failing test on slowfs says the seed its faults were drawn with and
    # how to run it again with the same faults.
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    mount = getattr(item, "_slowfs_mount", None)
    if mount is not None:
        seed = mount.seed_used
        replay = f"SLOWFS_SEED={seed} pytest {shlex.quote(item.nodeid)}"
    else:
        mount = getattr(item.config, _SESSION_MOUNT, None)
        if mount is None:
            return
        seed = mount.seed_used
        replay = f"pytest {shlex.quote(item.nodeid)} " + " ".join(
            [f"--slowfs-profile {mount.profile}"] * bool(mount.profile)
            + [f"--slowfs-rule {shlex.quote(r)}" for r in mount.rules]
            + [f"--slowfs-seed {seed}"]
        )
    report.sections.append(("slowfs", f"seed {seed}; replay: {replay}"))


def pytest_unconfigure(config):
    mount = getattr(config, _SESSION_MOUNT, None)
    if mount is not None:
        mount.stop()


def _terminate_as_interrupt():
    # SIGTERM (a CI job cancelled) ends pytest like Ctrl-C does, so fixtures
    # tear down and mounts are unmounted. A handler someone else set is kept.
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:

        def interrupt(signum, frame):
            raise KeyboardInterrupt(f"signal {signum}")

        signal.signal(signal.SIGTERM, interrupt)


@pytest.fixture
def slowfs(request):
    """A fresh slowfs mount for this test (see ``slowfs.Mount``)."""
    marker = request.node.get_closest_marker("slowfs")
    options = dict(marker.kwargs) if marker else {}
    if marker and marker.args:
        raise pytest.UsageError(
            "@pytest.mark.slowfs takes keywords only: profile=, rules=, seed=, crash_model=, passthrough="
        )
    known = {"profile", "rules", "seed", "crash_model", "passthrough"}
    unknown = set(options) - known
    if unknown:
        raise pytest.UsageError(
            f"@pytest.mark.slowfs: unknown keyword(s) {sorted(unknown)}; known: {sorted(known)}"
        )
    if isinstance(options.get("rules"), str):
        options["rules"] = [options["rules"]]
    if options.get("seed") is None and os.environ.get("SLOWFS_SEED"):
        options["seed"] = int(os.environ["SLOWFS_SEED"])
    mount = Mount(**options)
    mount.start()
    request.node._slowfs_mount = mount
    try:
        yield mount
    finally:
        mount.stop()

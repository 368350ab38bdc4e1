"""``Mount``: one slowfs mount, started and stopped by this process."""

import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterable, Optional

from ._binaries import binary

_PR_SET_PDEATHSIG = 1
_MOUNT_WAIT_S = 20.0
_UNMOUNT_WAIT_S = 30.0


class MountError(RuntimeError):
    """slowfs could not be mounted, controlled or unmounted (the message says why)."""


def _die_with_parent() -> None:
    # Runs in the child before exec: if the test process is killed (even with
    # SIGKILL), the daemon gets SIGTERM and unmounts itself.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def is_mounted(mountpoint) -> bool:
    """Whether a slowfs is mounted at ``mountpoint`` (from /proc/self/mountinfo)."""
    target = os.path.realpath(mountpoint)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            dash = fields.index("-")
            # The kernel escapes space, tab, newline and backslash as \ooo.
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
            if point == target and fields[dash + 1] == "fuse.slowfs":
                return True
    return False


class Mount:
    """A fresh slowfs over a backing directory, mounted until ``stop()``.

    Use it as a context manager::

        with slowfs.Mount(rules=["fsync delay=250ms"]) as m:
            (m.path / "f").write_text("hello")
            m.set("read error=EIO p=0.5")
            print(m.stats())

    ``path`` is the mountpoint, ``backing`` the directory behind it. Rules
    use the syntax of ``slowfs mount --set`` (``slowfs mount --help``).
    ``crash_model="strict"`` records what is durable so that ``crash()``
    and ``durable()`` work. The daemon is a child of this process and dies
    with it: a killed test run leaves no mount behind.
    """

    def __init__(
        self,
        rules: Iterable[str] = (),
        profile: Optional[str] = None,
        seed: Optional[int] = None,
        crash_model: Optional[str] = None,
        backing=None,
        mountpoint=None,
        passthrough: Optional[str] = None,
        extra_args: Iterable[str] = (),
    ):
        self.rules = list(rules)
        self.profile = profile
        self.seed = seed
        self.crash_model = crash_model
        self.passthrough = passthrough
        self.extra_args = list(extra_args)
        self._own_dirs = []
        self.backing = Path(backing) if backing else None
        self.path = Path(mountpoint) if mountpoint else None
        self._process: Optional[subprocess.Popen] = None
        self._log = None

    # -- lifecycle -------------------------------------------------------

    def start(self) -> "Mount":
        if self._process is not None:
            raise MountError("this Mount is already started")
        if self.backing is None:
            self.backing = Path(tempfile.mkdtemp(prefix="slowfs-backing-"))
            self._own_dirs.append(self.backing)
        if self.path is None:
            self.path = Path(tempfile.mkdtemp(prefix="slowfs-mnt-"))
            self._own_dirs.append(self.path)
        args = [binary("slowfs"), "mount", "--backing", str(self.backing)]
        if self.profile:
            args += ["--profile", self.profile]
        for rule in self.rules:
            args += ["--set", rule]
        if self.seed is not None:
            args += ["--seed", str(self.seed)]
        if self.crash_model:
            args += ["--crash-model", self.crash_model]
        if self.passthrough:
            args += ["--passthrough", self.passthrough]
        args += self.extra_args
        args.append(str(self.path))
        self._log = tempfile.TemporaryFile()
        self._process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
        deadline = time.monotonic() + _MOUNT_WAIT_S
        while not is_mounted(self.path):
            if self._process.poll() is not None:
                said = self.daemon_output()
                self._process = None
                self._remove_own_dirs()
                raise MountError(f"slowfs mount failed: {said.strip()}")
            if time.monotonic() > deadline:
                self.stop()
                raise MountError(
                    f"slowfs did not mount {self.path} within {_MOUNT_WAIT_S:.0f} s"
                )
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Unmount and wait for the daemon to exit (idempotent)."""
        process, self._process = self._process, None
        if process is None:
            return
        try:
            if process.poll() is None:
                subprocess.run(
                    [binary("slowfs"), "umount", str(self.path)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    timeout=_UNMOUNT_WAIT_S,
                )
            try:
                process.wait(timeout=_UNMOUNT_WAIT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if is_mounted(self.path):
                # The daemon is gone: `slowfs umount` detaches a dead mount.
                subprocess.run([binary("slowfs"), "umount", str(self.path)], timeout=30)
        finally:
            self._remove_own_dirs()

    def _remove_own_dirs(self) -> None:
        for d in self._own_dirs:
            if d == self.path and is_mounted(d):
                continue
            shutil.rmtree(d, ignore_errors=True)
        self._own_dirs = [d for d in self._own_dirs if d.exists()]

    def __enter__(self) -> "Mount":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __fspath__(self) -> str:
        return str(self.path)

    @property
    def seed_used(self) -> Optional[int]:
        """The seed the mount's faults are drawn with: the one given, else the
        one the daemon chose and printed (``None`` before ``start()``)."""
        if self.seed is not None:
            return self.seed
        found = re.search(r"slowfs: seed (\d+)", self.daemon_output())
        return int(found.group(1)) if found else None

    def daemon_output(self) -> str:
        """What the daemon printed so far (its seed, warnings, errors)."""
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    # -- control ---------------------------------------------------------

    def ctl(self, *args: str) -> str:
        """Run ``slowfs ctl MOUNTPOINT ARGS...`` and return its output."""
        if self._process is None:
            raise MountError("the mount is not running (start() it first)")
        done = subprocess.run(
            [binary("slowfs"), "ctl", str(self.path), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0:
            raise MountError(
                f"slowfs ctl {' '.join(args)} failed: {done.stderr.strip() or done.stdout.strip()}"
            )
        return done.stdout

    def set(self, rule: str) -> None:
        """Add a rule now, e.g. ``m.set("write error=ENOSPC p=0.1")``."""
        self.ctl("set", rule)

    def clear(self) -> None:
        """Remove every rule."""
        self.ctl("clear")

    def release(self) -> None:
        """Release every request held by a ``hang`` rule."""
        self.ctl("release")

    def crash(self) -> None:
        """Power loss now: the tree becomes its durable state (needs crash_model="strict")."""
        self.ctl("crash")

    def durable(self) -> dict:
        """What a crash now would lose (needs crash_model="strict"), as a dict:
        the operations not yet durable and the paths at risk, e.g.
        ``assert not m.durable()["at_risk"]`` after a save that should be durable."""
        return json.loads(self.ctl("durable", "--json"))

    def stats(self) -> dict:
        """Per-operation counts, bytes, latencies and rule hits, as a dict."""
        return json.loads(self.ctl("stats", "--json"))

    def rules_in_force(self) -> str:
        """The rules in force with their ids and hit counts (text)."""
        return self.ctl("rules")

"""The conformance suites from Python: one call per (engine, suite) cell.

One pytest test per cell::

    import pytest, slowfs

    DRIVER = "cmd:python3 my_driver.py"      # docs/driver-protocol.md

    @pytest.mark.parametrize("suite", slowfs.SUITES)
    def test_conformance(suite):
        slowfs.run_cell(DRIVER, suite, seed=2026).check()

``check()`` fails with the cell's detail and the command that replays it
unless the cell is as expected, by the one rule ``slowfs-conformance run``
judges by: a cell is unexpected exactly when the report says why in its
``unexpected`` field (a pass; a caught control; an ``unsupported`` the driver
explained; a finding the expectations file lists are all as expected).
"""

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Iterable, Optional

from ._binaries import binary

SUITES = (
    "positioned",
    "short-io",
    "cancel",
    "errors",
    "durability",
    "atomic-replace",
    "loop-lag",
)


class ConformanceError(AssertionError):
    """A cell that did not pass, or a run that gave no verdict."""


@dataclass
class CellResult:
    engine: str
    suite: str
    status: str
    detail: str
    replay: str
    expected: Optional[str]
    unexpected: Optional[str]
    seconds: float
    output: str
    exit_code: int = 0

    @property
    def as_expected(self) -> bool:
        """The CLI's rule: nothing unexpected (and so it exited 0)."""
        return self.unexpected is None

    def check(self) -> "CellResult":
        """Raise ConformanceError unless the cell is as expected (as the CLI
        judges it: its exit code says the same)."""
        if self.as_expected and self.exit_code == 0:
            return self
        if self.as_expected:
            raise ConformanceError(
                f"{self.engine} / {self.suite}: the report calls the cell {self.status} and as "
                f"expected, but slowfs-conformance exited {self.exit_code}:\n{self.output}"
            )
        raise ConformanceError(
            f"{self.engine} / {self.suite}: {self.status}"
            + (f" (unexpected: {self.unexpected})" if self.unexpected else "")
            + f"\n{self.detail}\nreplay: {self.replay}"
        )


def run_cell(
    engine: str,
    suite: str,
    seed: Optional[int] = None,
    cases: Optional[int] = None,
    expectations: Optional[str] = None,
    extra_args: Iterable[str] = (),
    timeout: float = 600,
) -> CellResult:
    """Run one suite against one engine (a built-in name or ``cmd:COMMAND``)."""
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; known: {', '.join(SUITES)}")
    with tempfile.TemporaryDirectory(prefix="slowfs-conformance-") as scratch:
        report = os.path.join(scratch, "report.json")
        args = [
            binary("slowfs-conformance"),
            "run",
            "--engine",
            engine,
            "--suite",
            suite,
            "--no-controls",
            "--json",
            report,
        ]
        if seed is not None:
            args += ["--seed", str(seed)]
        if cases is not None:
            args += ["--cases", str(cases)]
        if expectations is not None:
            args += ["--expectations", str(expectations)]
        args += list(extra_args)
        done = subprocess.run(
            args,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        output = done.stdout + done.stderr
        if not os.path.exists(report):
            raise ConformanceError(
                f"slowfs-conformance gave no report (exit {done.returncode}):\n{output}"
            )
        with open(report) as f:
            cells = json.load(f)["cells"]
    if len(cells) != 1:
        raise ConformanceError(f"expected one cell, the report has {len(cells)}:\n{output}")
    c = cells[0]
    return CellResult(
        engine=c["engine"],
        suite=c["suite"],
        status=c["status"],
        detail=c.get("detail", ""),
        replay=c.get("replay", ""),
        expected=c.get("expected"),
        unexpected=c.get("unexpected"),
        seconds=c.get("seconds", 0.0),
        output=output,
        exit_code=done.returncode,
    )

"""The conformance suites from Python: one call per (engine, suite) cell.

One pytest test per cell::

    import pytest, slowfs

    DRIVER = "cmd:python3 my_driver.py"      # docs/driver-protocol.md

    @pytest.mark.parametrize("suite", slowfs.SUITES)
    def test_conformance(suite):
        slowfs.run_cell(DRIVER, suite, seed=2026).check()

``check()`` fails with the cell's detail and the command that replays it
unless the cell passed (or is a finding the expectations file lists).
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

    def check(self) -> "CellResult":
        """Raise ConformanceError unless the cell passed or was expected."""
        if self.unexpected is None and self.status in ("pass", "caught"):
            return self
        if self.unexpected is None and self.expected is not None:
            return self
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
    )

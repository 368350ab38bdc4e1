"""The wheel's build backend (packaging/backend/slowfs_build.py) copies what
maturin and cargo write to stderr to the terminal, since pip captures it and
shows only "still running..." for the minutes cargo compiles; pip's own
capture keeps every byte."""

import importlib
import os
import subprocess
import sys
import types
from pathlib import Path

BACKEND = Path(__file__).resolve().parents[2] / "packaging" / "backend"


def load_backend(monkeypatch, build_wheel):
    fake = types.ModuleType("maturin")
    fake.build_wheel = build_wheel
    fake.build_sdist = lambda *a, **k: "sdist"
    monkeypatch.setitem(sys.modules, "maturin", fake)
    monkeypatch.syspath_prepend(str(BACKEND))
    monkeypatch.delitem(sys.modules, "slowfs_build", raising=False)
    return importlib.import_module("slowfs_build")


def with_stderr_to(path, call):
    """Runs call() with fd 2 writing to path (as pip's pipe would take it)."""
    sys.stderr.flush()
    saved = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        return call()
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def cargo_like(wheel_directory, config_settings=None, metadata_directory=None):
    subprocess.run(["sh", "-c", "echo '   Compiling slowfs v0.1.0' >&2"], check=True)
    return "slowfs.whl"


def test_cargo_progress_reaches_the_terminal_and_pip(tmp_path, monkeypatch):
    backend = load_backend(monkeypatch, cargo_like)
    terminal = tmp_path / "tty"
    terminal.write_bytes(b"")
    monkeypatch.setattr(backend, "_TERMINAL", str(terminal))
    pip = tmp_path / "pip-capture"
    assert with_stderr_to(pip, lambda: backend.build_wheel(str(tmp_path))) == "slowfs.whl"
    assert b"Compiling slowfs" in terminal.read_bytes()
    assert b"Compiling slowfs" in pip.read_bytes()
    # The other hooks are maturin's.
    assert backend.build_sdist(str(tmp_path)) == "sdist"


def test_without_a_terminal_nothing_changes(tmp_path, monkeypatch):
    backend = load_backend(monkeypatch, cargo_like)
    monkeypatch.setattr(backend, "_TERMINAL", str(tmp_path / "no-such-terminal"))
    pip = tmp_path / "pip-capture"
    assert with_stderr_to(pip, lambda: backend.build_wheel(str(tmp_path))) == "slowfs.whl"
    assert b"Compiling slowfs" in pip.read_bytes()
    assert not (tmp_path / "no-such-terminal").exists()

"""The wheel's build backend: maturin's, with cargo's progress on the terminal.

pip runs a build backend with its output captured and shows none of it unless
the build fails or ``-v`` is given: for the minutes cargo compiles the two
commands, ``pip install .`` said only "still running...". ``build_wheel`` here
copies maturin's stderr (where cargo says what it compiles) to the terminal
pip was started from, when there is one, as well as to pip, whose capture
(for ``-v`` and for the error report of a failed build) stays whole. Without
a terminal (CI), ``pip install -v .`` shows the same lines in the log.
Everything else is maturin's (pyproject.toml, ``[tool.maturin]``).
"""

import os
import threading

import maturin
from maturin import *  # noqa: F401,F403 (every other hook is maturin's)

# maturin warns that pip will not use it when build-backend is not "maturin";
# pip does, through this module.
os.environ.setdefault("MATURIN_NO_MISSING_BUILD_BACKEND_WARNING", "1")


def _copy(source: int, targets) -> None:
    while True:
        chunk = os.read(source, 65536)
        if not chunk:
            return
        for fd in list(targets):
            try:
                os.write(fd, chunk)
            except OSError:
                targets.remove(fd)  # the terminal went away: pip still gets it


# Where the copy goes (a test points it elsewhere).
_TERMINAL = "/dev/tty"


class _StderrToTerminal:
    """While open, fd 2 (inherited by maturin and cargo) is a pipe whose bytes
    go both to the old fd 2 and to /dev/tty; nothing changes without a tty."""

    def __enter__(self):
        self.tty = None
        try:
            self.tty = os.open(_TERMINAL, os.O_WRONLY | os.O_NOCTTY)
        except OSError:
            return self
        self.saved = os.dup(2)
        read, write = os.pipe()
        os.dup2(write, 2)
        os.close(write)
        self.copier = threading.Thread(
            target=_copy, args=(read, [self.saved, self.tty]), daemon=True
        )
        self.copier.start()
        self.read = read
        return self

    def __exit__(self, *exc):
        if self.tty is None:
            return
        os.dup2(self.saved, 2)  # closes the pipe's last write end we hold
        # A straggler child could keep the pipe open: do not wait for it long.
        self.copier.join(timeout=5)
        if not self.copier.is_alive():
            os.close(self.read)
        os.close(self.saved)
        os.close(self.tty)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with _StderrToTerminal():
        return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)

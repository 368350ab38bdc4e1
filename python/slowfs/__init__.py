"""slowfs for Python: mount a slow, flaky, crash-prone filesystem from a test.

The ``slowfs`` and ``slowfs-conformance`` binaries come with this package (the
wheel carries them; nothing to compile). ``Mount`` mounts a fresh slowfs in a
context manager and talks to it through ``slowfs ctl``; the pytest plugin
(``slowfs.pytest_plugin``, registered automatically) gives tests a ``slowfs``
fixture, a ``@pytest.mark.slowfs(...)`` marker and ``--slowfs-profile`` to put
a whole suite's temporary directories on slow storage.
"""

from ._binaries import binary
from ._mount import Mount, MountError
from .conformance import SUITES, CellResult, ConformanceError, run_cell

__all__ = [
    "binary",
    "Mount",
    "MountError",
    "SUITES",
    "CellResult",
    "ConformanceError",
    "run_cell",
]
__version__ = "0.1.0"

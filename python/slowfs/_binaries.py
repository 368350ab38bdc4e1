"""Finding the slowfs binaries: the ones this package installed, else $PATH."""

import os
import shutil
import sysconfig
from pathlib import Path


def binary(name: str = "slowfs") -> str:
    """The path of ``slowfs`` or ``slowfs-conformance``.

    Looked up in this order: ``$SLOWFS_BIN_DIR`` (a directory, e.g. a cargo
    ``target/release``), the scripts directory of the running Python (where
    the wheel installs them), then ``$PATH``.
    """
    candidates = []
    if os.environ.get("SLOWFS_BIN_DIR"):
        candidates.append(Path(os.environ["SLOWFS_BIN_DIR"]) / name)
    candidates.append(Path(sysconfig.get_path("scripts")) / name)
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    raise FileNotFoundError(
        f"the {name} binary was not found (looked in $SLOWFS_BIN_DIR, "
        f"{sysconfig.get_path('scripts')} and $PATH): install the wheel "
        f"(pip install . in a checkout of slowfs: it is not on PyPI yet) or point "
        f"SLOWFS_BIN_DIR at a directory holding it"
    )

#!/usr/bin/env python3
"""The four exports in Python. `tmp-fsync-rename-dirsync` is the pattern from the
aiofiles article (write tmp; fsync; os.replace) plus the directory fsync that makes
the replace itself durable.

usage: export.py in-place|tmp-rename|tmp-fsync-rename|tmp-fsync-rename-dirsync
"""
import os
import sys

NEW = b"n" * 10000


def main(mode: str) -> None:
    root = os.environ["SLOWFS_MOUNT"]
    dst = os.path.join(root, "config.json")
    if mode == "in-place":
        with open(dst, "wb") as f:
            f.write(NEW)
        return
    tmp = dst + ".tmp"
    with open(tmp, "wb") as f:
        f.write(NEW)
        if mode != "tmp-rename":
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, dst)
    if mode == "tmp-fsync-rename-dirsync":
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])

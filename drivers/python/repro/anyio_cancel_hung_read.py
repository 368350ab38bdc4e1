#!/usr/bin/env python3
"""Standalone reproducer: anyio's and trio's async files cannot cancel a read
the storage holds. `move_on_after(1)` around `await f.read()` returns only
when the storage answers (here after 5 s), not after 1 s.

    slowfs run --set "read hang=5s" -- python3 anyio_cancel_hung_read.py anyio-asyncio
    slowfs run --set "read hang=5s" -- python3 anyio_cancel_hung_read.py anyio-trio
    slowfs run --set "read hang=5s" -- python3 anyio_cancel_hung_read.py trio

(`slowfs run` mounts a fresh slowfs at $SLOWFS_MOUNT for the command.) Exits 1
and says so when the cancel was late: every file call is a worker-thread
hand-off that is not abandoned on cancel (anyio.to_thread.run_sync /
trio.to_thread.run_sync with abandon_on_cancel=False), so the scope waits for
the thread. On the network storage a service reads from, a hung NFS read
makes `fail_after` useless.
"""
import os
import sys
import time

import anyio


async def main(flavour):
    path = os.path.join(os.environ["SLOWFS_MOUNT"], "data")
    with open(path, "wb") as f:  # writes are not held; reads are
        f.write(b"x" * 4096)
    if flavour == "trio":
        import trio
        open_file, move_on_after = trio.open_file, trio.move_on_after
    else:
        open_file, move_on_after = anyio.open_file, anyio.move_on_after
    f = await open_file(path, "rb", buffering=0)
    start = time.monotonic()
    with move_on_after(1):
        await f.read(4096)
    took = time.monotonic() - start
    await f.aclose()
    late = took > 2
    print(f"{flavour}: move_on_after(1) around a held read returned after {took:.1f} s"
          + (": the cancel waited for the storage" if late else ": cancelled in time"))
    return 1 if late else 0


if __name__ == "__main__":
    flavour = sys.argv[1] if len(sys.argv) > 1 else "anyio-asyncio"
    backend = {"anyio-asyncio": "asyncio", "anyio-trio": "trio", "trio": "trio"}[flavour]
    sys.exit(anyio.run(main, flavour, backend=backend))

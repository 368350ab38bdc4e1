#!/usr/bin/env python3
"""A slowfs driver (protocol v1, docs/driver-protocol.md) for anyio and trio:
their async file APIs as a service uses them (FastAPI/Starlette serve files
through anyio), on either event loop.

    python3 anyio_driver.py --lib anyio --backend asyncio   # engine py:anyio-asyncio
    python3 anyio_driver.py --lib anyio --backend trio      # engine py:anyio-trio
    python3 anyio_driver.py --lib trio                      # engine py:trio

Every request runs in its own task under its own cancel scope; `cancel`
cancels that scope, as `anyio.fail_after`/`trio.move_on_after` would. A
heartbeat task on the same loop measures the loop's lag. Neither library has
positioned I/O: read_at/write_at are seek + read/write under a per-file lock,
as their users write them (the handshake says positioned: false).
"""
import argparse
import json
import os

import anyio

import slowfs_driver
from slowfs_driver import precreate, python_mode


class AsyncFileLib:
    """anyio.open_file or trio.open_file: a file object whose every call is a
    worker-thread hand-off (to_thread.run_sync, not abandoned on cancel)."""

    positioned = False
    capabilities = ["open", "append", "read_at", "write_at", "read", "fsync", "fdatasync", "set_len",
                    "metadata", "close", "rename", "remove_file", "create_dir", "sync_dir",
                    "copy", "cancel", "lag"]

    def __init__(self, lib):
        self.name = lib
        if lib == "trio":
            import trio
            self.open_file, self.run_sync = trio.open_file, trio.to_thread.run_sync
        else:
            self.open_file, self.run_sync = anyio.open_file, anyio.to_thread.run_sync
        self.unsupported = {
            "positioned": f"{lib} has no positioned I/O: read_at/write_at are seek + read/write",
            "read_many": f"{lib} has no batched reads",
            "write_many": f"{lib} has no batched writes",
        }
        self.locks = {}

    async def open(self, req):
        await self.run_sync(precreate, req)
        f = await self.open_file(req["path"], python_mode(req), buffering=0)
        self.locks[id(f)] = anyio.Lock()
        return f

    async def read(self, f, n):
        return await f.read(n)

    async def read_at(self, f, offset, n):
        async with self.locks[id(f)]:
            await f.seek(offset)
            return await f.read(n)

    async def write_at(self, f, offset, data):
        async with self.locks[id(f)]:
            await f.seek(offset)
            return await f.write(data)

    async def fsync(self, f):
        await self.run_sync(os.fsync, f.wrapped.fileno())

    async def fdatasync(self, f):
        await self.run_sync(os.fdatasync, f.wrapped.fileno())

    async def set_len(self, f, n):
        await f.truncate(n)

    async def metadata(self, f):
        return (await self.run_sync(os.fstat, f.wrapped.fileno())).st_size

    async def close(self, f):
        self.locks.pop(id(f), None)
        await f.aclose()


class Driver(slowfs_driver.Driver):
    """The asyncio driver's request handling (slowfs_driver.Driver.handle) on
    anyio: a cancel scope per request instead of an asyncio task."""

    def __init__(self, lib, engine):
        super().__init__(lib)
        self.engine = engine
        self.scopes, self.cancel_early = {}, set()
        self.heartbeat = slowfs_driver.Heartbeat(anyio.sleep)

    async def run_sync(self, fn, *args):
        return await self.lib.run_sync(fn, *args)

    async def serve_one(self, req):
        rid = req.get("id")
        answer = None
        with anyio.CancelScope() as scope:
            self.scopes[rid] = scope
            if rid in self.cancel_early:
                scope.cancel()
            try:
                answer = {"id": rid, "ok": await self.handle(req)}
            except Exception as e:
                answer = self.failure(rid, e)
        self.scopes.pop(rid, None)
        self.cancel_early.discard(rid)
        self.send(answer if answer is not None and not scope.cancelled_caught
                  else {"id": rid, "err": "cancelled"})

    def cancel(self, rid):
        scope = self.scopes.get(rid)
        if scope is not None:
            scope.cancel()
        else:
            self.cancel_early.add(rid)

    async def main(self):
        stdin = anyio.wrap_file(os.fdopen(0, "rb", buffering=0, closefd=False))
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.heartbeat.run)
            self.hello(self.engine)
            pending = b""
            while True:
                chunk = await stdin.read(1 << 16)
                if not chunk:
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    req = json.loads(line)
                    if "cancel" in req:
                        self.cancel(req["cancel"])
                    else:
                        tg.start_soon(self.serve_one, req)
            tg.cancel_scope.cancel()


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lib", choices=["anyio", "trio"], required=True)
    parser.add_argument("--backend", choices=["asyncio", "trio"],
                        help="with --lib anyio: the event loop (trio's own API needs trio)")
    args = parser.parse_args()
    if args.lib == "anyio" and args.backend is None:
        parser.error("--lib anyio needs --backend asyncio or --backend trio")
    if args.lib == "trio" and args.backend not in (None, "trio"):
        parser.error("--lib trio runs on trio's own loop: drop --backend")
    backend = args.backend or "trio"
    engine = f"py:anyio-{backend}" if args.lib == "anyio" else "py:trio"
    anyio.run(Driver(AsyncFileLib(args.lib), engine).main, backend=backend)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A slowfs driver (protocol v1, docs/driver-protocol.md) for Python async file
libraries: aiofiles, asyncio.to_thread (stdlib), ayafileio and aiofile (caio).

    python3 slowfs_driver.py --lib aiofiles|to_thread|ayafileio
    python3 slowfs_driver.py --lib aiofile --caio uring|linux|thread|python

Every request runs as an asyncio task on this process's event loop; `cancel`
cancels the task; a heartbeat task on the same loop measures the loop's lag.
"""
import argparse
import asyncio
import base64
import errno
import json
import os
import sys
import threading
import time

PROTOCOL_VERSION = 1


class Heartbeat:
    """Sleeps 1 ms at a time and records how late each wake-up is (ms).
    `sleep` is the event loop's sleep (asyncio's, or anyio's for other loops)."""

    def __init__(self, sleep=asyncio.sleep):
        self.late = []
        self.sleep = sleep

    async def run(self):
        while True:
            start = time.perf_counter()
            await self.sleep(0.001)
            self.late.append((time.perf_counter() - start - 0.001) * 1000)

    def report(self, reset):
        late = sorted(self.late)
        if reset:
            self.late = []
        if not late:
            return {"samples": 0, "p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
        pick = lambda q: late[min(len(late) - 1, int(q * len(late)))]
        return {"samples": len(late), "p50_ms": pick(0.5), "p99_ms": pick(0.99), "max_ms": late[-1],
                "late_ms": [l for l in late if l > 10]}


def open_flags(req):
    if req.get("append"):
        access = os.O_RDWR if req.get("read") else os.O_WRONLY
    elif req.get("read") and req.get("write"):
        access = os.O_RDWR
    elif req.get("write"):
        access = os.O_WRONLY
    else:
        access = os.O_RDONLY
    flags = access | os.O_CLOEXEC
    if req.get("create_new"):
        flags |= os.O_CREAT | os.O_EXCL
    elif req.get("create"):
        flags |= os.O_CREAT
    if req.get("truncate"):
        flags |= os.O_TRUNC
    if req.get("append"):
        flags |= os.O_APPEND
    return flags


def python_mode(req):
    """The open() mode for libraries that take one; creation happens beforehand."""
    if req.get("append"):
        return "a+b" if req.get("read") else "ab"
    if req.get("write") and req.get("truncate"):
        return "w+b" if req.get("read") else "wb"
    if req.get("write"):
        return "r+b"
    return "rb"


def precreate(req):
    """Creation semantics (O_CREAT, O_EXCL) that a mode string cannot express."""
    if req.get("create") or req.get("create_new"):
        flags = os.O_CREAT | os.O_WRONLY | (os.O_EXCL if req.get("create_new") else 0)
        os.close(os.open(req["path"], flags, 0o644))


def sync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def copy(src, dst):
    with open(src, "rb") as s, open(dst, "wb") as d:
        n = os.path.getsize(src)
        done = 0
        while done < n:
            done += os.copy_file_range(s.fileno(), d.fileno(), n - done)
        return done


class ToThread:
    """asyncio.to_thread around whole operations: one thread call per logical op."""

    name = "to_thread"
    positioned = True
    capabilities = ["open", "append", "read_at", "write_at", "read_many", "write_many", "read", "fsync",
                    "fdatasync", "set_len", "metadata", "close", "rename", "remove_file",
                    "create_dir", "sync_dir", "copy", "cancel", "lag"]

    async def open(self, req):
        return await asyncio.to_thread(os.open, req["path"], open_flags(req), 0o644)

    async def read_at(self, fd, offset, n):
        return await asyncio.to_thread(os.pread, fd, n, offset)

    async def read(self, fd, n):
        return await asyncio.to_thread(os.read, fd, n)

    async def write_at(self, fd, offset, data):
        return await asyncio.to_thread(os.pwrite, fd, data, offset)

    async def fsync(self, fd):
        await asyncio.to_thread(os.fsync, fd)

    async def fdatasync(self, fd):
        await asyncio.to_thread(os.fdatasync, fd)

    async def set_len(self, fd, n):
        await asyncio.to_thread(os.ftruncate, fd, n)

    async def metadata(self, fd):
        return (await asyncio.to_thread(os.fstat, fd)).st_size

    async def close(self, fd):
        await asyncio.to_thread(os.close, fd)


class Aiofiles:
    """aiofiles: every call on the file object is a hand-off to the default
    executor. It has no positioned I/O: read_at/write_at are seek + read/write, as
    its users write them (so the handshake says positioned: false)."""

    name = "aiofiles"
    positioned = False
    unsupported = {
        "positioned": "aiofiles has no positioned I/O: read_at/write_at are seek + read/write",
        "read_many": "aiofiles has no batched reads",
        "write_many": "aiofiles has no batched writes",
    }
    capabilities = ["open", "append", "read_at", "write_at", "read", "fsync", "fdatasync", "set_len",
                    "metadata", "close", "rename", "remove_file", "create_dir", "sync_dir",
                    "copy", "cancel", "lag"]

    def __init__(self):
        import aiofiles
        import aiofiles.os
        self.aiofiles = aiofiles
        self.fsync_ = aiofiles.os.wrap(os.fsync)
        self.fdatasync_ = aiofiles.os.wrap(os.fdatasync)

    async def open(self, req):
        await self.aiofiles.os.wrap(precreate)(req)
        return await self.aiofiles.open(req["path"], python_mode(req), buffering=0)

    async def read(self, f, n):
        return await f.read(n)

    async def read_at(self, f, offset, n):
        async with self.lock(f):
            await f.seek(offset)
            return await f.read(n)

    async def write_at(self, f, offset, data):
        async with self.lock(f):
            await f.seek(offset)
            return await f.write(data)

    def lock(self, f):
        # seek and the read or write that follows must not interleave with another's
        if not hasattr(f, "_slowfs_lock"):
            f._slowfs_lock = asyncio.Lock()
        return f._slowfs_lock

    async def fsync(self, f):
        await f.flush()
        await self.fsync_(f.fileno())

    async def fdatasync(self, f):
        await f.flush()
        await self.fdatasync_(f.fileno())

    async def set_len(self, f, n):
        await f.truncate(n)

    async def metadata(self, f):
        return (await self.aiofiles.os.stat(f.name)).st_size

    async def close(self, f):
        await f.close()


class Ayafileio:
    """ayafileio: io_uring on Linux, with read_at/write_at/read_many/write_many.
    It has no fsync; the driver fsyncs its fd with asyncio.to_thread."""

    name = "ayafileio"
    positioned = True
    capabilities = ["open", "append", "read_at", "write_at", "read_many", "write_many", "read", "fsync",
                    "fdatasync", "set_len", "metadata", "close", "rename", "remove_file",
                    "create_dir", "sync_dir", "copy", "cancel", "lag"]

    def __init__(self):
        import ayafileio
        self.ayafileio = ayafileio

    async def open(self, req):
        await asyncio.to_thread(precreate, req)
        return self.ayafileio.open(req["path"], python_mode(req))

    async def _ready(self, f):
        # ayafileio files open lazily on first use in some versions.
        if hasattr(f, "__aenter__") and not getattr(f, "_slowfs_entered", False):
            f = await f.__aenter__()
        return f

    async def read_at(self, f, offset, n):
        return await f.read_at(offset, n)

    async def read(self, f, n):
        return await f.read(n)

    async def write_at(self, f, offset, data):
        return await f.write_at(offset, data)

    async def fsync(self, f):
        await f.flush()
        await asyncio.to_thread(os.fsync, f.fileno())

    async def fdatasync(self, f):
        await f.flush()
        await asyncio.to_thread(os.fdatasync, f.fileno())

    async def set_len(self, f, n):
        await f.truncate(n)

    async def metadata(self, f):
        return (await asyncio.to_thread(os.fstat, f.fileno())).st_size

    async def close(self, f):
        await f.close()


class Aiofile:
    """aiofile on caio: positioned reads and writes through a caio context whose
    backend `--caio` picks (CAIO_IMPL): uring (io_uring), linux (Linux native
    AIO), thread (caio's C thread pool) or python (a Python thread pool).
    aiofile has no cursor read; the driver keeps one per file, as aiofile's
    Reader does."""

    positioned = True
    capabilities = ["open", "append", "read_at", "write_at", "read_many", "write_many", "read", "fsync",
                    "fdatasync", "set_len", "metadata", "close", "rename", "remove_file",
                    "create_dir", "sync_dir", "copy", "cancel", "lag"]
    MODULES = {"uring": "linux_uring", "linux": "linux_aio", "thread": "thread_aio",
               "python": "python_aio"}

    def __init__(self, caio_impl):
        os.environ["CAIO_IMPL"] = caio_impl
        import caio
        import aiofile
        wanted = getattr(caio, self.MODULES[caio_impl], None)
        if wanted is None or caio.Context is not wanted.Context:
            sys.exit(f"caio backend {caio_impl!r} is not available here; available: "
                     f"{[v.__name__.rsplit('.', 1)[-1] for v in caio.variants]}")
        self.aiofile = aiofile
        self.name = f"aiofile-{caio_impl}"
        self.cursor = {}

    async def open(self, req):
        await asyncio.to_thread(precreate, req)
        f = self.aiofile.AIOFile(req["path"], python_mode(req))
        await f.open()
        self.cursor[id(f)] = 0
        return f

    async def read_at(self, f, offset, n):
        return await f.read_bytes(n, offset)

    async def read(self, f, n):
        data = await f.read_bytes(n, self.cursor[id(f)])
        self.cursor[id(f)] += len(data)
        return data

    async def write_at(self, f, offset, data):
        return await f.write_bytes(data, offset)

    async def fsync(self, f):
        await f.fsync()

    async def fdatasync(self, f):
        await f.fdsync()

    async def set_len(self, f, n):
        await f.truncate(n)

    async def metadata(self, f):
        return (await asyncio.to_thread(os.fstat, f.fileno())).st_size

    async def close(self, f):
        self.cursor.pop(id(f), None)
        await f.close()


LIBS = {"to_thread": ToThread, "aiofiles": Aiofiles, "ayafileio": Ayafileio, "aiofile": Aiofile}


class Driver:
    def __init__(self, lib):
        self.lib = lib
        self.files = {}
        self.next_file = 1
        self.tasks = {}
        self.heartbeat = Heartbeat()

    def send(self, message):
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    async def run_sync(self, fn, *args):
        """Runs a blocking call (directory operations) off the loop."""
        return await asyncio.to_thread(fn, *args)

    async def handle(self, req):
        op, lib = req["op"], self.lib
        if op == "lag":
            return self.heartbeat.report(req.get("reset", False))
        if op not in lib.capabilities:
            raise NotImplementedError(op)
        if op == "open":
            handle = await lib.open(req)
            fid = self.next_file
            self.next_file += 1
            self.files[fid] = handle
            return {"file": fid}
        if op in ("rename", "remove_file", "create_dir", "sync_dir", "copy"):
            fn = {"rename": os.replace, "remove_file": os.remove, "create_dir": os.mkdir,
                  "sync_dir": sync_dir, "copy": copy}[op]
            args = (req["from"], req["to"]) if op in ("rename", "copy") else (req["path"],)
            n = await self.run_sync(fn, *args)
            return {"n": n or 0}
        f = self.files[req["file"]]
        if op == "read_at":
            return {"data": base64.b64encode(await lib.read_at(f, req["offset"], req["len"])).decode()}
        if op == "read":
            return {"data": base64.b64encode(await lib.read(f, req["len"])).decode()}
        if op == "write_at":
            return {"n": await lib.write_at(f, req["offset"], base64.b64decode(req["data"]))}
        if op == "metadata":
            return {"len": await lib.metadata(f)}
        if op == "set_len":
            await lib.set_len(f, req["len"])
            return {}
        if op in ("fsync", "fdatasync"):
            await getattr(lib, op)(f)
            return {}
        if op == "close":
            await lib.close(self.files.pop(req["file"]))
            return {}
        raise NotImplementedError(op)

    def failure(self, rid, e):
        """The answer to request `rid` that raised `e`."""
        if isinstance(e, NotImplementedError):
            return {"id": rid, "err": "unsupported", "message": f"{self.lib.name} has no {e}"}
        if isinstance(e, OSError):
            code = e.errno or errno.EIO
            return {"id": rid, "err": errno.errorcode.get(code, "EIO"), "errno": code,
                    "message": str(e)}
        # a library bug: report it, keep serving
        return {"id": rid, "err": type(e).__name__, "message": str(e)}

    def hello(self, engine):
        """The handshake (docs/driver-protocol.md), sent from the loop's thread."""
        self.send({"hello": "slowfs-driver", "version": PROTOCOL_VERSION,
                   "engine": engine, "capabilities": self.lib.capabilities,
                   "positioned": self.lib.positioned,
                   "unsupported": getattr(self.lib, "unsupported", {}),
                   "loop_thread": threading.get_native_id()})

    async def serve_one(self, req):
        rid = req.get("id")
        try:
            self.send({"id": rid, "ok": await self.handle(req)})
        except asyncio.CancelledError:
            self.send({"id": rid, "err": "cancelled"})
        except Exception as e:
            self.send(self.failure(rid, e))
        finally:
            self.tasks.pop(rid, None)

    def cancelled_early(self, task, rid):
        """A task cancelled before it started never runs serve_one: answer it here."""
        if task.cancelled():
            self.tasks.pop(rid, None)
            self.send({"id": rid, "err": "cancelled"})

    def cancel(self, rid):
        """Cancels request `rid` the way asyncio does; its task still answers."""
        task = self.tasks.get(rid)
        if task:
            task.cancel()

    async def main(self):
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 30)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        beat = asyncio.create_task(self.heartbeat.run())
        self.hello("py:" + self.lib.name)
        while True:
            line = await reader.readline()
            if not line:
                break
            req = json.loads(line)
            if "cancel" in req:
                self.cancel(req["cancel"])
                continue
            task = asyncio.create_task(self.serve_one(req))
            task.add_done_callback(lambda t, rid=req["id"]: self.cancelled_early(t, rid))
            self.tasks[req["id"]] = task
        beat.cancel()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lib", choices=sorted(LIBS), required=True)
    parser.add_argument("--caio", choices=sorted(Aiofile.MODULES),
                        help="with --lib aiofile: the caio backend (CAIO_IMPL)")
    args = parser.parse_args()
    if (args.lib == "aiofile") != (args.caio is not None):
        parser.error("--caio goes with --lib aiofile, and --lib aiofile needs --caio "
                     "(uring, linux, thread or python)")
    lib = Aiofile(args.caio) if args.caio else LIBS[args.lib]()
    asyncio.run(Driver(lib).main())


if __name__ == "__main__":
    main()

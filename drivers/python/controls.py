#!/usr/bin/env python3
"""Negative-control drivers: deliberately broken engines that the conformance
suites must catch. Each is the `to_thread` driver with one defect.

    python3 controls.py --control ignore-cancel|blocking|failing-io|lost-errno|fake-io|silent-once|no-append|strict-handles

  ignore-cancel  declares `cancel` and ignores it: the cancel suite must fail
                 (a cancelled request held by a hang stays unanswered)
  blocking       runs every operation on the event-loop thread: loop-lag must fail
  failing-io     every read, write and fsync fails with EIO: loop-lag must be
                 inconclusive (no work done), never pass
  lost-errno     raises errors without an errno, like caio's C backends: the
                 errors suite must fail
  fake-io        does no I/O it reports: a write claims every byte without
                 writing, a read returns zeros (with a real read's count):
                 every suite must fail
  silent-once    never answers its third write_at: the cell must fail at the
                 request timeout, naming that request, not run to its time limit
  no-append      has no append mode (declares no `append`, says why, refuses
                 an append open): the positioned suite must still pass it,
                 saying append was not tested
  strict-handles answers a cancelled request 200 ms late and refuses (EBADF)
                 any request on its handle that comes before that answer: the
                 runner must wait for a cancelled request's answer before
                 reusing its handle (docs/driver-protocol.md)
"""
import argparse
import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slowfs_driver  # noqa: E402


class IgnoreCancel(slowfs_driver.Driver):
    def cancel(self, rid):
        pass


class Blocking(slowfs_driver.ToThread):
    name = "control-blocking"

    async def open(self, req):
        return os.open(req["path"], slowfs_driver.open_flags(req), 0o644)

    async def read_at(self, fd, offset, n):
        return os.pread(fd, n, offset)

    async def read(self, fd, n):
        return os.read(fd, n)

    async def write_at(self, fd, offset, data):
        return os.pwrite(fd, data, offset)

    async def fsync(self, fd):
        os.fsync(fd)

    async def close(self, fd):
        os.close(fd)


class FailingIo(slowfs_driver.ToThread):
    name = "control-failing-io"

    async def _fail(self, *_):
        raise OSError(5, "Input/output error (control: failing-io)")

    read_at = read = write_at = fsync = fdatasync = _fail


class LostErrno(slowfs_driver.ToThread):
    name = "control-lost-errno"

    async def _strip(self, call):
        try:
            return await call
        except OSError as e:
            raise SystemError(os.strerror(e.errno or 5)) from None

    async def write_at(self, fd, offset, data):
        return await self._strip(super().write_at(fd, offset, data))

    async def read_at(self, fd, offset, n):
        return await self._strip(super().read_at(fd, offset, n))

    async def fsync(self, fd):
        return await self._strip(super().fsync(fd))


class FakeIo(slowfs_driver.ToThread):
    name = "control-fake-io"

    async def write_at(self, fd, offset, data):
        return len(data)

    async def read_at(self, fd, offset, n):
        return bytes(len(await super().read_at(fd, offset, n)))

    async def read(self, fd, n):
        return bytes(len(await super().read(fd, n)))


class IgnoreCancelLib(slowfs_driver.ToThread):
    name = "control-ignore-cancel"


class SilentOnce(slowfs_driver.ToThread):
    name = "control-silent-once"
    writes = 0

    async def write_at(self, fd, offset, data):
        SilentOnce.writes += 1
        if SilentOnce.writes == 3:
            await asyncio.Event().wait()  # never answers (nor on cancel)
        return await super().write_at(fd, offset, data)


class StrictHandles(slowfs_driver.Driver):
    """Holds each cancelled request's answer back 200 ms and fails any request
    on the same handle that arrives before it."""

    def __init__(self, lib):
        super().__init__(lib)
        self.unanswered = {}  # file -> id of a cancelled request not yet answered
        self.file_of = {}

    async def serve_one(self, req):
        rid, fid = req.get("id"), req.get("file")
        early = self.unanswered.get(fid) if fid is not None else None
        if early is not None:
            self.send({"id": rid, "err": "EBADF", "errno": 9,
                       "message": f"control strict-handles: request on file {fid} before "
                                  f"cancelled request #{early} was answered"})
            self.tasks.pop(rid, None)
            return
        self.file_of[rid] = fid
        try:
            result = {"id": rid, "ok": await self.handle(req)}
        except asyncio.CancelledError:
            result = {"id": rid, "err": "cancelled"}
        except Exception as e:
            result = self.failure(rid, e)
        if rid in self.cancelled:
            await asyncio.sleep(0.2)
        self.unanswered.pop(self.file_of.pop(rid, None), None)
        self.send(result)
        self.tasks.pop(rid, None)

    cancelled = set()

    def cancel(self, rid):
        self.cancelled.add(rid)
        fid = self.file_of.get(rid)
        if fid is not None:
            self.unanswered[fid] = rid
        super().cancel(rid)


class NoAppend(slowfs_driver.ToThread):
    name = "control-no-append"
    capabilities = [c for c in slowfs_driver.ToThread.capabilities if c != "append"]
    unsupported = {"append": "control: no append mode, like Java's AsynchronousFileChannel"}

    async def open(self, req):
        if req.get("append"):
            raise NotImplementedError("append")
        return await super().open(req)


class StrictHandlesLib(slowfs_driver.ToThread):
    name = "control-strict-handles"

    async def write_at(self, fd, offset, data):
        await asyncio.sleep(0.3)  # long enough to be cancelled in flight
        return await super().write_at(fd, offset, data)


CONTROLS = {
    "ignore-cancel": (IgnoreCancel, IgnoreCancelLib),
    "blocking": (slowfs_driver.Driver, Blocking),
    "failing-io": (slowfs_driver.Driver, FailingIo),
    "lost-errno": (slowfs_driver.Driver, LostErrno),
    "fake-io": (slowfs_driver.Driver, FakeIo),
    "silent-once": (slowfs_driver.Driver, SilentOnce),
    "no-append": (slowfs_driver.Driver, NoAppend),
    "strict-handles": (StrictHandles, StrictHandlesLib),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--control", choices=sorted(CONTROLS), required=True)
    args = parser.parse_args()
    driver, lib = CONTROLS[args.control]
    asyncio.run(driver(lib()).main())


if __name__ == "__main__":
    main()

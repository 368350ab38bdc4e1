#!/usr/bin/env python3
"""Negative-control drivers: deliberately broken engines that the conformance
suites must catch. Each is the `to_thread` driver with one defect.

    python3 controls.py --control ignore-cancel|blocking|failing-io|lost-errno|fake-io

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


CONTROLS = {
    "ignore-cancel": (IgnoreCancel, IgnoreCancelLib),
    "blocking": (slowfs_driver.Driver, Blocking),
    "failing-io": (slowfs_driver.Driver, FailingIo),
    "lost-errno": (slowfs_driver.Driver, LostErrno),
    "fake-io": (slowfs_driver.Driver, FakeIo),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--control", choices=sorted(CONTROLS), required=True)
    args = parser.parse_args()
    driver, lib = CONTROLS[args.control]
    asyncio.run(driver(lib()).main())


if __name__ == "__main__":
    main()

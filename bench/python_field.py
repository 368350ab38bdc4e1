#!/usr/bin/env python3
"""The field's measurements, reproduced: per-line aiofiles awaits vs one
to_thread call vs one batched write, and read throughput against concurrency for
the thread-based libraries (aiofiles, asyncio.to_thread) with the default executor.

usage: python_field.py lines DIR | concurrency DIR LATENCY_MS
"""
import asyncio
import json
import os
import sys
import time

import aiofiles

LINES = [f"line {i}: some short log text\n" for i in range(20_000)]


async def per_line_aiofiles(path):
    async with aiofiles.open(path, "w") as f:
        for line in LINES:
            await f.write(line)


async def one_to_thread(path):
    def write_all():
        with open(path, "w") as f:
            for line in LINES:
                f.write(line)
    await asyncio.to_thread(write_all)


async def one_batched_write(path):
    async with aiofiles.open(path, "w") as f:
        await f.write("".join(LINES))


async def lines(directory):
    out = {}
    for name, fn in [("aiofiles, one await per line", per_line_aiofiles),
                     ("to_thread, one call for the file", one_to_thread),
                     ("aiofiles, one batched write", one_batched_write)]:
        path = os.path.join(directory, "lines.txt")
        start = time.perf_counter()
        await fn(path)
        out[name] = time.perf_counter() - start
    return out


async def concurrency(directory, latency_ms):
    path = os.path.join(directory, "data.bin")
    with open(path, "wb") as f:
        f.write(b"x" * (1 << 20))
    threads = min(32, (os.cpu_count() or 1) + 4)
    rows = []
    for lib in ("aiofiles", "to_thread"):
        for n in (1, 4, 16, 64):
            done = 0
            stop = time.perf_counter() + 2.0

            async def worker(i):
                nonlocal done
                if lib == "aiofiles":
                    async with aiofiles.open(path, "rb", buffering=0) as f:
                        while time.perf_counter() < stop:
                            await f.seek((i * 4096) % (1 << 20))
                            await f.read(4096)
                            done += 1
                else:
                    fd = os.open(path, os.O_RDONLY)
                    try:
                        while time.perf_counter() < stop:
                            await asyncio.to_thread(os.pread, fd, 4096, (i * 4096) % (1 << 20))
                            done += 1
                    finally:
                        os.close(fd)

            start = time.perf_counter()
            await asyncio.gather(*(worker(i) for i in range(n)))
            rate = done / (time.perf_counter() - start)
            bound = min(n, threads) / (latency_ms / 1000)
            rows.append({"lib": lib, "concurrency": n, "ops_per_s": rate,
                         "littles_law_ops_per_s": bound, "executor_threads": threads})
    return rows


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    if sys.argv[1] == "lines":
        print(json.dumps(asyncio.run(lines(sys.argv[2]))))
    else:
        print(json.dumps(asyncio.run(concurrency(sys.argv[2], float(sys.argv[3])))))


if __name__ == "__main__":
    main()

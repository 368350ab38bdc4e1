#!/usr/bin/env python3
"""Many files through slowfs and natively, side by side in one run.

Creates N empty files (in directories of 1,000), lists every directory, stats
every file and deletes them all, first on the backing filesystem directly, then
through a `slowfs mount` (no rules) under `ulimit -n 1024`. Prints time per
operation, the ratio to native, and the daemon's RSS and open fds at their peak
and after the run (sampled every 100 ms).

    python3 bench/many_files.py [--files 1000000] [--slowfs target/release/slowfs]
        [--json FILE] [-- extra slowfs mount arguments]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time


def phases(root, n, per_dir):
    """Runs the four phases under root; returns seconds per phase."""
    dirs = (n + per_dir - 1) // per_dir
    out = {}
    t = time.perf_counter()
    for d in range(dirs):
        path = f"{root}/d{d}"
        os.mkdir(path)
        for i in range(min(per_dir, n - d * per_dir)):
            os.close(os.open(f"{path}/f{i}", os.O_CREAT | os.O_WRONLY, 0o644))
    out["create"] = time.perf_counter() - t
    t = time.perf_counter()
    listed = sum(len(os.listdir(f"{root}/d{d}")) for d in range(dirs))
    out["list"] = time.perf_counter() - t
    assert listed == n, (listed, n)
    t = time.perf_counter()
    for d in range(dirs):
        for i in range(min(per_dir, n - d * per_dir)):
            os.lstat(f"{root}/d{d}/f{i}")
    out["stat"] = time.perf_counter() - t
    t = time.perf_counter()
    for d in range(dirs):
        for i in range(min(per_dir, n - d * per_dir)):
            os.unlink(f"{root}/d{d}/f{i}")
        os.rmdir(f"{root}/d{d}")
    out["delete"] = time.perf_counter() - t
    return out


class Sampler(threading.Thread):
    """Peak RSS (KiB) and open fds of a process, every 100 ms."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.stop, self.peak_rss, self.peak_fds = pid, False, 0, 0

    def now(self):
        with open(f"/proc/{self.pid}/status") as f:
            rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
        return rss, len(os.listdir(f"/proc/{self.pid}/fd"))

    def run(self):
        while not self.stop:
            rss, fds = self.now()
            self.peak_rss, self.peak_fds = max(self.peak_rss, rss), max(self.peak_fds, fds)
            time.sleep(0.1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--per-dir", type=int, default=1000)
    ap.add_argument("--slowfs", default="target/release/slowfs")
    ap.add_argument("--nofile", type=int, default=1024)
    ap.add_argument("--json")
    ap.add_argument("mount_args", nargs="*")
    args = ap.parse_args()

    base = tempfile.mkdtemp(prefix="slowfs-many-", dir="/var/tmp")
    native, backing, mnt = (f"{base}/{x}" for x in ("native", "backing", "mnt"))
    for d in (native, backing, mnt):
        os.mkdir(d)
    results = {"files": args.files, "nofile": args.nofile}
    print(f"{args.files} files, {args.per_dir} per directory; native on {native}", file=sys.stderr)
    results["native"] = phases(native, args.files, args.per_dir)

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (args.nofile, args.nofile))

    daemon = subprocess.Popen(
        [args.slowfs, "mount", "--backing", backing, "--ctl-socket", f"{base}/ctl.sock",
         *args.mount_args, mnt],
        preexec_fn=limit, stderr=subprocess.DEVNULL)
    try:
        while f" {mnt} " not in open("/proc/mounts").read():
            time.sleep(0.02)
        sampler = Sampler(daemon.pid)
        sampler.start()
        results["slowfs"] = phases(mnt, args.files, args.per_dir)
        sampler.stop = True
        sampler.join()
        time.sleep(1)
        rss_after, fds_after = sampler.now()
        results["daemon"] = {"peak_rss_kib": sampler.peak_rss, "peak_fds": sampler.peak_fds,
                             "rss_after_kib": rss_after, "fds_after": fds_after}
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)

    print(f"| phase | native µs/op | slowfs µs/op | x native |")
    print(f"|---|---:|---:|---:|")
    ops = {"create": args.files, "list": args.files, "stat": args.files, "delete": args.files}
    for phase, count in ops.items():
        n, s = results["native"][phase] / count * 1e6, results["slowfs"][phase] / count * 1e6
        print(f"| {phase} | {n:.1f} | {s:.1f} | {s / n:.1f} |")
    d = results["daemon"]
    print(f"daemon (ulimit -n {args.nofile}): peak RSS {d['peak_rss_kib'] / 1024:.0f} MiB, "
          f"peak fds {d['peak_fds']}; after: RSS {d['rss_after_kib'] / 1024:.0f} MiB, "
          f"fds {d['fds_after']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    subprocess.run(["rm", "-rf", base])


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""stat(2) through slowfs against native, side by side in one run.

Two workloads: stat of N freshly created files (each stat'ed once, right
after all were created) and a hot file stat'ed N times. Three setups, in
interleaved rounds so that the machine's noise falls on all of them alike:
the backing filesystem itself (native), a default `slowfs mount` with no
rule, and `--passthrough never`. Prints µs per stat, the median of the
rounds, and the ratio to native.

    python3 bench/metadata.py [--files 20000] [--rounds 3] [--slowfs target/release/slowfs]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

SETUPS = {"native": None, "default": [], "passthrough never": ["--passthrough", "never"]}


def fresh_files(root, n):
    """µs per stat of n files created just before, in directories of 1,000."""
    names = []
    for d in range(0, n, 1000):
        os.mkdir(f"{root}/d{d}")
        for i in range(d, min(d + 1000, n)):
            name = f"{root}/d{d}/f{i}"
            os.close(os.open(name, os.O_CREAT | os.O_WRONLY, 0o644))
            names.append(name)
    t = time.perf_counter()
    for name in names:
        os.stat(name)
    return (time.perf_counter() - t) / n * 1e6


def hot_file(root, n):
    """µs per stat of one file, n times."""
    name = f"{root}/hot"
    with open(name, "w") as f:
        f.write("x")
    os.stat(name)
    t = time.perf_counter()
    for _ in range(n):
        os.stat(name)
    return (time.perf_counter() - t) / n * 1e6


def mounted(slowfs, base, args):
    """Starts a slowfs over a new backing directory; (process, mountpoint)."""
    backing, mnt = tempfile.mkdtemp(dir=base), tempfile.mkdtemp(dir=base)
    daemon = subprocess.Popen([slowfs, "mount", "--backing", backing, *args, mnt],
                              stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while f" {mnt} " not in open("/proc/mounts").read():
        if daemon.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"metadata: slowfs mount {' '.join(args)} did not come up")
        time.sleep(0.02)
    return daemon, mnt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--slowfs", default="target/release/slowfs")
    args = ap.parse_args()
    slowfs = os.path.abspath(args.slowfs)
    base = tempfile.mkdtemp(prefix="slowfs-metadata-", dir="/var/tmp")
    results = {(s, w): [] for s in SETUPS for w in ("fresh", "hot")}
    try:
        for r in range(args.rounds):
            for setup, mount_args in SETUPS.items():
                print(f"round {r + 1}/{args.rounds}: {setup}", file=sys.stderr)
                daemon = None
                if mount_args is None:
                    root = tempfile.mkdtemp(dir=base)
                else:
                    daemon, root = mounted(slowfs, base, mount_args)
                try:
                    results[(setup, "fresh")].append(fresh_files(root, args.files))
                    results[(setup, "hot")].append(hot_file(root, args.files))
                finally:
                    if daemon:
                        subprocess.run(["umount", root])
                        daemon.wait(timeout=30)
    finally:
        subprocess.run(["rm", "-rf", base])
    print(f"stat(2), {args.files} files / stats, median of {args.rounds} interleaved rounds")
    print("| setup | fresh files µs/stat | x native | hot file µs/stat | x native |")
    print("|---|---:|---:|---:|---:|")
    median = {k: statistics.median(v) for k, v in results.items()}
    for setup in SETUPS:
        fresh, hot = median[(setup, "fresh")], median[(setup, "hot")]
        print(f"| {setup} | {fresh:.2f} | {fresh / median[('native', 'fresh')]:.1f} "
              f"| {hot:.2f} | {hot / median[('native', 'hot')]:.1f} |")


if __name__ == "__main__":
    main()

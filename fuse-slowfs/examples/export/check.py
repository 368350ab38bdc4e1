#!/usr/bin/env python3
"""Accepts a crash state when config.json is exactly the old or the new export;
with --new-after-success, the new one once the export has returned."""
import os
import sys

state = os.environ["SLOWFS_STATE"]
path = os.path.join(state, "config.json")
try:
    data = open(path, "rb").read()
except FileNotFoundError:
    sys.exit("config.json is missing")
if data not in (b"o" * 6000, b"n" * 10000):
    sys.exit(f"config.json is neither the old nor the new export ({len(data)} bytes)")
finished = os.environ["SLOWFS_CRASH_POINT"] == os.environ["SLOWFS_OPS"]
if "--new-after-success" in sys.argv and finished and data != b"n" * 10000:
    sys.exit("the export returned, yet the old config.json survived")

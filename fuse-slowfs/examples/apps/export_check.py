#!/usr/bin/env python3
"""Checks a crash state of export_save.py: report.json, if present, is one whole
version (valid JSON with all 200 rows); a leftover report.json.tmp is fine."""
import json
import os
import sys

path = os.path.join(os.environ["SLOWFS_STATE"], "report.json")
if not os.path.exists(path):
    sys.exit(0)
with open(path, "rb") as f:
    data = f.read()
try:
    report = json.loads(data)
    assert len(report["rows"]) == 200
except Exception:
    print(f"report.json is not a whole export: {len(data)} bytes, starts {data[:20]!r}")
    sys.exit(1)

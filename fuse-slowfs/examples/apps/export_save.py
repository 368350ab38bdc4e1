#!/usr/bin/env python3
"""An export that replaces report.json atomically: write a temp file, fsync it,
rename it over the old one, fsync the directory. Run in $SLOWFS_MOUNT.

    export_save.py --on-fsync-error fatal   # give up, keep the old file (correct)
    export_save.py --on-fsync-error retry   # fsync again and carry on (PostgreSQL
                                            # before 2018): the retry succeeds and
                                            # the data is gone

The first run (no report.json yet) writes version 1; each later run the next
version. The checker (export_check.py) accepts a report.json that is a whole
version; under `slowfs explore --fsync-fails` the retrying export is caught.
"""
import argparse
import json
import os
import sys

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--on-fsync-error", choices=["fatal", "retry"], required=True)
parser.add_argument("--versions", type=int, default=2, help="exports to run, one after another")
args = parser.parse_args()
os.chdir(os.environ.get("SLOWFS_MOUNT", "."))


def fsync(fd):
    try:
        os.fsync(fd)
    except OSError as e:
        if args.on_fsync_error == "fatal":
            raise
        print(f"fsync failed ({e}); retrying", file=sys.stderr)
        os.fsync(fd)  # succeeds: the kernel dropped the dirty pages


def export(version):
    body = json.dumps({"version": version, "rows": [[i, i * i] for i in range(200)]}).encode()
    fd = os.open("report.json.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, body)
        fsync(fd)
    except OSError:
        os.close(fd)
        os.unlink("report.json.tmp")
        raise
    os.close(fd)
    os.rename("report.json.tmp", "report.json")
    dfd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        fsync(dfd)
    finally:
        os.close(dfd)


for version in range(1, args.versions + 1):
    try:
        export(version)
    except OSError as e:
        print(f"export of version {version} failed: {e}; the previous report is kept", file=sys.stderr)
        sys.exit(1)

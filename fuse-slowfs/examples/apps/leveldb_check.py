#!/usr/bin/env python3
"""Checks a crash state of leveldb_save.py: a database directory that has a
CURRENT file must open, and hold a prefix k1..km of the synced puts."""
import os
import sys

import plyvel

path = os.path.join(os.environ["SLOWFS_STATE"], "db")
if not os.path.exists(os.path.join(path, "CURRENT")):
    sys.exit(0)
try:
    db = plyvel.DB(path)
except Exception as e:  # corruption, missing MANIFEST, ...
    print(f"cannot open: {type(e).__name__}: {str(e).splitlines()[0]}")
    sys.exit(1)
keys = [k for k, _ in db]
db.close()
expected = [b"k%d" % i for i in range(1, len(keys) + 1)]
if keys != expected:
    print(f"keys {keys} are not a prefix of k1..k3")
    sys.exit(1)

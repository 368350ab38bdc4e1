#!/usr/bin/env python3
"""Checks a crash state of lmdb_save.py: a database that has a data file must
open and hold a prefix k1..km of the committed transactions, with their
values. A data file of zero bytes is a database never initialised (LMDB
starts it afresh), not a loss."""
import os
import sys

import lmdb

path = os.path.join(os.environ["SLOWFS_STATE"], "db")
data = os.path.join(path, "data.mdb")
if not os.path.exists(data) or os.path.getsize(data) == 0:
    sys.exit(0)
try:
    env = lmdb.open(path, readonly=True, lock=False)
    with env.begin() as txn:
        items = list(txn.cursor())
    env.close()
except lmdb.Error as e:
    print(f"cannot open ({os.path.getsize(data)} bytes): {type(e).__name__}: {e}")
    sys.exit(1)
expected = [(b"k%d" % i, b"v%d" % i * 100) for i in range(1, len(items) + 1)]
if items != expected:
    print(f"keys {[k for k, _ in items]} are not a prefix of k1..k3 with their values")
    sys.exit(1)

#!/usr/bin/env python3
"""A save path on LMDB (py-lmdb): three write transactions, each committed
durably (sync=True, LMDB's default), into $SLOWFS_MOUNT/db. `--writemap`
stores through a shared mapping (MDB_WRITEMAP), synced with msync at commit.
"""
import os
import sys

import lmdb

env = lmdb.open(
    os.path.join(os.environ["SLOWFS_MOUNT"], "db"),
    map_size=1 << 20,
    writemap="--writemap" in sys.argv,
)
for i in range(1, 4):
    with env.begin(write=True) as txn:
        txn.put(b"k%d" % i, b"v%d" % i * 100)
env.close()

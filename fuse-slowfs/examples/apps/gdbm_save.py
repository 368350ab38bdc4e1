#!/usr/bin/python3
"""A save path on GDBM (Python's dbm.gnu, Debian's python3-gdbm): N keys into
$SLOWFS_MOUNT/app.gdbm, each made durable with db.sync() (gdbm_sync, an fsync
of the database file) before the next.

    /usr/bin/python3 gdbm_save.py [N]
"""
import dbm.gnu
import os
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
db = dbm.gnu.open(os.path.join(os.environ["SLOWFS_MOUNT"], "app.gdbm"), "c")
for i in range(1, n + 1):
    db[f"key{i}"] = f"value{i}" * 20
    db.sync()
db.close()

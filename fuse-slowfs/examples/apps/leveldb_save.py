#!/usr/bin/env python3
"""A save path on LevelDB (plyvel): three synchronous puts into $SLOWFS_MOUNT/db."""
import os
import plyvel

db = plyvel.DB(os.path.join(os.environ["SLOWFS_MOUNT"], "db"), create_if_missing=True)
for i in range(1, 4):
    db.put(b"k%d" % i, b"v%d" % i, sync=True)
db.close()

#!/usr/bin/env python3
"""A save path on SQLite: N transactions of ROWS rows each into $SLOWFS_MOUNT/app.db.

    sqlite_save.py JOURNAL SYNC [N] [ROWS]
    JOURNAL: rollback | wal        SYNC: OFF | NORMAL | FULL | EXTRA
"""
import os
import sqlite3
import sys

journal, sync = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 12
rows = int(sys.argv[4]) if len(sys.argv) > 4 else 50
db = sqlite3.connect(os.path.join(os.environ["SLOWFS_MOUNT"], "app.db"), isolation_level=None)
db.execute("PRAGMA journal_mode=" + ("WAL" if journal == "wal" else "DELETE"))
db.execute("PRAGMA synchronous=" + sync)
db.execute("CREATE TABLE IF NOT EXISTS t (tx INTEGER, i INTEGER, payload TEXT)")
for tx in range(1, n + 1):
    db.execute("BEGIN")
    db.executemany("INSERT INTO t VALUES (?, ?, ?)", [(tx, i, "x" * 100) for i in range(rows)])
    db.execute("COMMIT")
db.close()

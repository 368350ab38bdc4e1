#!/usr/bin/env python3
"""SQLite on two NFS clients: two processes increment one counter, each
through its own mount of the same directory (two slowfs mounts with
--cache nfs are two NFS clients).

    sqlite_two_clients.py DB_ON_CLIENT_A DB_ON_CLIENT_B [N]

Each process runs N transactions (BEGIN IMMEDIATE; read; write; COMMIT),
so the counter must end at 2N. With `nfs:lock` the clients share fcntl
locks and it does; with `nfs:nolock` each client's locks are its own, both
"hold" the write lock at once, and updates are lost or the database is
corrupted: the classic way SQLite databases break on NFS (sqlite.org/faq.html#q5).
Prints one JSON line: expected, got, integrity, errors.
"""
import json
import multiprocessing
import sqlite3
import sys
import time


def worker(path, n, start, errors):
    db = sqlite3.connect(path, timeout=60, isolation_level=None)
    start.wait()
    for _ in range(n):
        try:
            db.execute("BEGIN IMMEDIATE")
            (value,) = db.execute("SELECT n FROM counter").fetchone()
            time.sleep(0.001)  # the work a real transaction does
            db.execute("UPDATE counter SET n = ?", (value + 1,))
            db.execute("COMMIT")
        except sqlite3.DatabaseError as e:
            errors.put(f"{e} ({getattr(e, 'sqlite_errorname', '?')})")
            try:
                db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
    db.close()


def main():
    a, b = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    db = sqlite3.connect(a, isolation_level=None)
    db.execute("CREATE TABLE counter (n INTEGER)")
    db.execute("INSERT INTO counter VALUES (0)")
    db.close()
    start = multiprocessing.Event()
    errors = multiprocessing.Queue()
    procs = [
        multiprocessing.Process(target=worker, args=(path, n, start, errors))
        for path in (a, b)
    ]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join()
    seen = []
    while not errors.empty():
        seen.append(errors.get())
    try:
        db = sqlite3.connect(a)
        got = db.execute("SELECT n FROM counter").fetchone()[0]
        integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
    except sqlite3.DatabaseError as e:
        got, integrity = None, str(e)
    print(json.dumps({"expected": 2 * n, "got": got, "integrity": integrity,
                      "errors": sorted(set(seen))[:5], "error_count": len(seen)}))


if __name__ == "__main__":
    main()

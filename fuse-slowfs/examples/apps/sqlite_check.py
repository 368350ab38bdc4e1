#!/usr/bin/env python3
"""Checks a crash state of sqlite_save.py: the database opens, passes
`PRAGMA integrity_check`, and holds whole transactions 1..m (no torn or missing
one in between). With --complete N: once the workload had finished
(SLOWFS_CRASH_POINT == SLOWFS_OPS), all N transactions (needs --per-point).

One-shot: runs in the state directory. --persistent: reads STATE<TAB>POINT<TAB>OPS
lines on stdin and answers `ok` or the reason, a line each.
"""
import os
import sqlite3
import sys

ROWS = 50


def check(state, point, ops, complete):
    path = os.path.join(state, "app.db")
    if not os.path.exists(path):
        return None if not complete or point != ops else "app.db is missing after the save returned"
    try:
        db = sqlite3.connect(path)
        result = db.execute("PRAGMA integrity_check").fetchone()[0]
        if result != "ok":
            return f"integrity_check: {result}"
        try:
            got = db.execute("SELECT tx, count(*) FROM t GROUP BY tx ORDER BY tx").fetchall()
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):
                got = []
            else:
                raise
        db.close()
    except sqlite3.DatabaseError as e:
        return f"cannot read app.db: {e}"
    txs = [tx for tx, _ in got]
    if txs != list(range(1, len(txs) + 1)):
        return f"transactions {txs} are not a prefix 1..m"
    partial = [(tx, n) for tx, n in got if n != ROWS]
    if partial:
        return f"transaction {partial[0][0]} has {partial[0][1]} of {ROWS} rows"
    if complete and point == ops and len(txs) != complete:
        return f"{len(txs)} of {complete} transactions after the save returned"
    return None


def main():
    complete = int(sys.argv[sys.argv.index("--complete") + 1]) if "--complete" in sys.argv else 0
    if "--persistent" in sys.argv:
        for line in sys.stdin:
            state, point, ops = line.rstrip("\n").split("\t")
            problem = check(state, int(point), int(ops), complete)
            print("ok" if problem is None else problem, flush=True)
        return
    problem = check(os.environ["SLOWFS_STATE"], int(os.environ["SLOWFS_CRASH_POINT"]),
                    int(os.environ["SLOWFS_OPS"]), complete)
    if problem:
        print(problem)
        sys.exit(1)


main()

#!/usr/bin/python3
"""Checks a crash state of gdbm_save.py: the database opens and holds keys
1..m with their values (a prefix: no synced key lost before a later one). With
--complete N (and --per-point): once the save had returned, all N keys.
"""
import dbm.gnu
import os
import sys


def main():
    complete = int(sys.argv[sys.argv.index("--complete") + 1]) if "--complete" in sys.argv else 0
    point, ops = os.environ.get("SLOWFS_CRASH_POINT"), os.environ.get("SLOWFS_OPS")
    done = complete and point == ops
    if not os.path.exists("app.gdbm"):
        if done:
            sys.exit("app.gdbm is missing after the save returned (its directory entry was never fsynced)")
        return
    try:
        db = dbm.gnu.open("app.gdbm", "r")
        keys = sorted(int(k.decode()[3:]) for k in db.keys())
        for k in keys:
            try:
                value = db[f"key{k}"]
            except KeyError:
                sys.exit(f"key{k} is listed but cannot be read (a damaged bucket)")
            if value != (f"value{k}" * 20).encode():
                sys.exit(f"key{k} has a wrong value")
        db.close()
    except dbm.gnu.error as e:
        sys.exit(f"cannot open app.gdbm: {e}")
    if keys != list(range(1, len(keys) + 1)):
        sys.exit(f"keys {keys} are not a prefix 1..m")
    if done and len(keys) != complete:
        sys.exit(f"{len(keys)} of {complete} synced keys after the save returned")


main()

#!/usr/bin/env python3
"""Workloads and report of bench/peers.sh (run by it; not on its own).

    peers_work.py meta-create|meta-list|meta-stat|meta-unlink DIR N
        one metadata phase over N empty files in DIR/meta (create makes DIR/meta,
        unlink removes it); prints {"seconds": S, "ops": N}. Each phase is its own
        process, so nothing of one phase is cached in the next one's memory.
    peers_work.py sqlite DIR wal|delete COUNT
        COUNT transactions of one small INSERT each into a fresh database in DIR,
        journal_mode=WAL or DELETE (rollback journal), synchronous=FULL; prints
        {"seconds": S, "ops": COUNT} (the loop only: not the open, not the close).
    peers_work.py fio FILE
        prints {"seconds", "ops", "iops", "mb_per_s"} of one fio JSON output
        (group_reporting: one job); ops are the write (or read) requests issued.
    peers_work.py report SAMPLES.jsonl INFO.json OUT.json OUT.md
        medians over the rounds, ratios to native; JSON and a Markdown page.
"""

import json
import os
import sqlite3
import statistics
import sys
import time


def meta(phase, root, n):
    d = os.path.join(root, "meta")
    names = [os.path.join(d, f"f{i:05d}") for i in range(n)]
    if phase == "create":
        os.mkdir(d)
    t = time.perf_counter()
    if phase == "create":
        for p in names:
            os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    elif phase == "list":
        listed = len(os.listdir(d))
    elif phase == "stat":
        for p in names:
            os.lstat(p)
    elif phase == "unlink":
        for p in names:
            os.unlink(p)
    seconds = time.perf_counter() - t
    if phase == "list":
        assert listed == n, (listed, n)
    if phase == "unlink":
        os.rmdir(d)
    return {"seconds": seconds, "ops": n}


def sqlite_tx(root, mode, count):
    path = os.path.join(root, f"bench-{mode}.db")
    db = sqlite3.connect(path, isolation_level=None)
    got = db.execute(f"PRAGMA journal_mode={mode}").fetchone()[0]
    assert got.lower() == mode, f"journal_mode {mode} refused: {got}"
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)")
    payload = b"x" * 100
    t = time.perf_counter()
    for _ in range(count):
        db.execute("BEGIN")
        db.execute("INSERT INTO t (v) VALUES (?)", (payload,))
        db.execute("COMMIT")
    seconds = time.perf_counter() - t
    n = db.execute("SELECT count(*) FROM t").fetchone()[0]
    db.close()
    assert n == count, (n, count)
    return {"seconds": seconds, "ops": count}


def fio(path):
    job = json.load(open(path))["jobs"][0]
    io = job["write"] if job["write"]["io_bytes"] else job["read"]
    seconds = io["runtime"] / 1000
    return {"seconds": seconds, "ops": io["total_ios"], "iops": io["iops"],
            "mb_per_s": io["bw_bytes"] / 1e6}


# metric -> (label, unit, number format, higher is better)
METRICS = [
    ("seqwrite", "fio seq write 64k (+ end fsync)", "MB/s", "{:.0f}", True),
    ("randread", "fio rand read 4k (page cache)", "IOPS", "{:.0f}", True),
    ("wal", "WAL-like: 4k append + fdatasync, 1 job", "IOPS", "{:.0f}", True),
    ("randwrite4", "rand write 4k + fsync, 4 jobs", "IOPS", "{:.0f}", True),
    ("create", "create (empty file)", "µs/file", "{:.1f}", False),
    ("list", "list (readdir, cold-ish)", "µs/entry", "{:.2f}", False),
    ("stat", "stat (cold-ish, fresh process)", "µs/file", "{:.1f}", False),
    ("unlink", "unlink", "µs/file", "{:.1f}", False),
    ("sqlite_wal", "SQLite WAL, synchronous=FULL", "tx/s", "{:.0f}", True),
    ("sqlite_delete", "SQLite rollback journal, synchronous=FULL", "tx/s", "{:.0f}", True),
    ("cpu_wal", "daemon CPU, WAL-like", "ms/1k ops", "{:.1f}", False),
    ("cpu_meta", "daemon CPU, metadata (create+list+stat+unlink)", "ms/1k ops", "{:.1f}", False),
]


def report(samples_path, info_path, out_json, out_md):
    info = json.load(open(info_path))
    targets = [t["name"] for t in info["targets"]]
    rounds = info["rounds"]
    vals, errors = {}, []
    for line in open(samples_path):
        s = json.loads(line)
        if "error" in s:
            errors.append(s)
            continue
        vals.setdefault((s["metric"], s["target"]), {})[s["round"]] = s["value"]
    table = {}
    for metric, *_ in METRICS:
        for t in targets:
            by_round = vals.get((metric, t), {})
            native = vals.get((metric, "native"), {})
            cell = {"rounds": [by_round.get(r) for r in range(1, rounds + 1)]}
            got = [v for v in cell["rounds"] if v is not None]
            if got:
                cell["median"] = statistics.median(got)
                ratios = [by_round[r] / native[r] for r in by_round
                          if r in native and native[r]]
                if ratios:
                    cell["ratio_median"] = statistics.median(ratios)
                    cell["ratio_min"], cell["ratio_max"] = min(ratios), max(ratios)
            table.setdefault(metric, {})[t] = cell
    json.dump({"info": info, "metrics": [m[0] for m in METRICS], "table": table,
               "errors": errors}, open(out_json, "w"), indent=1)

    heads = [t["label"] for t in info["targets"]]
    lines = ["| workload | unit | " + " | ".join(heads) + " |",
             "|---|---|" + "---:|" * len(heads)]
    for metric, label, unit, fmt, _ in METRICS:
        row = []
        for t in targets:
            cell = table[metric][t]
            if t == "native" and metric.startswith("cpu_"):
                row.append("–")
            elif "median" not in cell:
                row.append("fail")
            else:
                text = fmt.format(cell["median"])
                if len([v for v in cell["rounds"] if v is not None]) < rounds:
                    text += "*"
                if t != "native" and "ratio_median" in cell and not metric.startswith("cpu_"):
                    text += f" ({cell['ratio_median']:.2f})"
                row.append(text)
        lines.append(f"| {label} | {unit} | " + " | ".join(row) + " |")
    spread = ["| workload | " + " | ".join(heads[1:]) + " |", "|---|" + "---:|" * (len(heads) - 1)]
    for metric, label, unit, fmt, _ in METRICS:
        if metric.startswith("cpu_"):
            continue
        row = []
        for t in targets[1:]:
            c = table[metric][t]
            row.append(f"{c['ratio_min']:.2f}-{c['ratio_max']:.2f}" if "ratio_min" in c else "–")
        spread.append(f"| {label} | " + " | ".join(row) + " |")
    raw = ["| workload | target | " + " | ".join(f"round {r}" for r in range(1, rounds + 1)) + " |",
           "|---|---|" + "---:|" * rounds]
    for metric, label, unit, fmt, _ in METRICS:
        for t, h in zip(targets, heads):
            rs = table[metric][t]["rounds"]
            if t == "native" and metric.startswith("cpu_"):
                continue
            raw.append(f"| {metric} | {h} | " + " | ".join(
                "fail" if v is None else fmt.format(v) for v in rs) + " |")

    md = [f"# FUSE peers side by side (measured {info['date']})", ""]
    md += [f"`bench/peers.sh`: every target below, in one run of {rounds} interleaved rounds "
           "(each round visits every target, starting at another one; `sync -f` of the disk "
           "before every workload), on a shared 2-core VM. Each cell: the median over the "
           "rounds, and in parentheses the median of the per-round ratio to native (the same "
           "round's native value; for µs rows above 1 is slower, for the others below 1 is "
           "slower). `fail`: no round gave a number; `*`: some round failed (see below).", ""]
    md += ["| | |", "|---|---|"]
    for k, v in [("date", info["date"]), ("kernel (`uname -r`)", info["kernel"]),
                 ("`nproc`", info["nproc"]), ("disk", info["disk"]),
                 ("load average before", info["load_before"]),
                 ("load average after", info["load_after"]),
                 ("run time", f"{info['elapsed_s'] / 60:.1f} min"),
                 ("command", f"`{info['command']}`")]:
        md.append(f"| {k} | {v} |")
    md += ["", "Versions:", ""] + [f"* {v}" for v in info["versions"]] + [""]
    md += ["Targets:", ""] + [f"* **{t['label']}**: `{t['how']}`" for t in info["targets"]]
    md += [f"* {note}" for note in info["left_out"]] + [""]
    md += lines + [""]
    md += ["How each row is measured:", ""] + [f"* {h}" for h in info["how"]] + [""]
    md += ["Spread: min-max of the per-round ratio to native:", ""] + spread + [""]
    md += ["Every round's value:", ""] + raw + [""]
    if errors:
        md += ["Failures:", ""]
        md += [f"* round {e['round']}, {e['target']}, {e['metric']}: {e['error']}" for e in errors]
        md += [""]
    else:
        md += ["No workload failed on any target in any round.", ""]
    text = "\n".join(md)
    open(out_md, "w").write(text)
    print(text)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd.startswith("meta-"):
        out = meta(cmd[5:], args[0], int(args[1]))
    elif cmd == "sqlite":
        out = sqlite_tx(args[0], args[1], int(args[2]))
    elif cmd == "fio":
        out = fio(args[0])
    elif cmd == "report":
        return report(*args)
    else:
        sys.exit(f"unknown command {cmd}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Generated crash-consistency workloads, as CrashMonkey's ACE: are the
persistence models sound against the real kernels?

Each workload is a short sequence over two files and two directories (A and
B in d/, made and synced first), each operation followed by one persistence
point (fsync, fdatasync, directory fsync, sync). The checker does not judge:
it prints the state it sees (every name with its kind and content, one
letter per KiB: the letter of the write that put it there, Z for zeros) and
fails, so every distinct crash state is one violation group. A model run
(`slowfs explore`, no --fs) then holds every state the models can produce,
labelled with the models that can leave it, and each real filesystem's run
(`explore --fs FS --compare-with` the model run) judges every state the
kernel left: predicted, MODEL SAYS NEVER (the model rules out a state the
kernel produced) or MODEL GAP (the model run checked every state and never
made it). A sound model has neither.

    bench/ace.py --seq 1                      # every seq-1 workload
    bench/ace.py --seq 2 --sample 1000 --seed 7
    bench/ace.py --seq 1 --limit 4 --fs ext4  # a few, one filesystem
    SLOWFS=target/release/slowfs bench/ace.py ... --out results.jsonl
    bench/ace.py --seq 2 --fs xfs --jobs 3 --resume --model-cache DIR --out xfs.jsonl

--jobs N runs N workloads at once (their recordings mostly wait in the
workload's pauses and the settle time); --resume skips the workloads (and
filesystems) the --out file already has a row for; --model-cache DIR keeps
each workload's model run, so that a later run on another filesystem does
not make it again. Rows are written as each workload ends (in --jobs order).

Prints one line per workload and filesystem, and a table at the end; the
exit status is 1 if any MODEL SAYS NEVER or MODEL GAP was found.
"""

import argparse
import concurrent.futures
import hashlib
import itertools
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Set on SIGINT/SIGTERM: runs that end after it are not written (their
# explore was interrupted), and no new workload or run starts.
STOPPING = threading.Event()
# The checker, the setup and the workload run under this interpreter itself,
# without site (they use the standard library only): `python3` may be a
# pyenv shim, ~80 ms a start, and the checker starts once per checked state.
PYTHON = [sys.executable, "-S"]


def python_command(script):
    """`script` under PYTHON, as one shell command (for --check, --fs-setup)."""
    return " ".join(shlex.quote(a) for a in PYTHON + [script])
# States each real filesystem's run checks (a state is a mount: 30-70/s):
# every flush epoch's high-yield states fit in it for these small workloads.
FS_STATES = 400

# The initial state: A (8 KiB of g) in the root, d/ with B (4 KiB of h).
SETUP = """
import os
os.makedirs("d", exist_ok=True)
for path, size, letter in (("A", 8192, b"g"), ("d/B", 4096, b"h")):
    with open(path, "wb") as f:
        f.write(letter * size)
os.sync()
"""

# The checker: the state as one line, then failure (every state a group).
CHECK = r"""
import os, sys
def summary(data):
    out = []
    for i in range(0, len(data), 1024):
        chunk = data[i:i + 1024]
        kinds = set(chunk)
        if kinds == {0}:
            out.append("Z")
        elif len(kinds) == 1:
            out.append(chr(next(iter(kinds))))
        else:
            out.append("M")
    if len(data) % 1024:
        out.append("+")
    return "".join(out) or "empty"
entries = []
for dirpath, dirnames, filenames in os.walk("."):
    dirnames[:] = sorted(d for d in dirnames if d != "lost+found")
    rel = os.path.relpath(dirpath, ".")
    prefix = "" if rel == "." else rel + "/"
    for d in dirnames:
        entries.append(prefix + d + "/")
    for name in sorted(filenames):
        path = os.path.join(dirpath, name)
        if os.path.islink(path):
            entries.append(prefix + name + "@" + os.readlink(path))
        else:
            with open(path, "rb") as f:
                entries.append(prefix + name + "=" + summary(f.read()))
print("state " + " ".join(sorted(entries)))
sys.exit(1)
"""

# Operations: (name, python code). `L` is the operation's own letter.
OPS = {
    "creat-C": "open('C', 'w').close()",
    "creat-d/C": "open('d/C', 'w').close()",
    "mkdir-E": "os.mkdir('E')",
    "append-A": "fd = os.open('A', os.O_WRONLY); os.pwrite(fd, L * 4096, os.fstat(fd).st_size); os.close(fd)",
    "append-B": "fd = os.open('d/B', os.O_WRONLY); os.pwrite(fd, L * 4096, os.fstat(fd).st_size); os.close(fd)",
    "write-C": "fd = os.open('C', os.O_WRONLY | os.O_CREAT, 0o644); os.pwrite(fd, L * 4096, 0); os.close(fd)",
    "overwrite-A": "fd = os.open('A', os.O_WRONLY); os.pwrite(fd, L * 4096, 0); os.close(fd)",
    "overwrite-A-unaligned": "fd = os.open('A', os.O_WRONLY); os.pwrite(fd, L * 6144, 1024); os.close(fd)",
    "direct-write-A": "direct_write('A', L, 4096)",
    "mmap-write-A": "mmap_write('A', L)",
    "truncate-A-shrink": "os.truncate('A', 2048)",
    "truncate-A-grow": "os.truncate('A', 16384)",
    "falloc-A-keep-size": "fallocate('A', 1, 8192, 8192)",
    "falloc-A-grow": "fallocate('A', 0, 8192, 8192)",
    "punch-A": "fallocate('A', 3, 0, 4096)",
    "link-A-d/L": "os.link('A', 'd/L')",
    "unlink-A": "os.unlink('A')",
    "unlink-B": "os.unlink('d/B')",
    "rename-A-d/R": "os.rename('A', 'd/R')",
    "rename-B-B2": "os.rename('d/B', 'B2')",
    "rename-B-over-A": "os.rename('d/B', 'A')",
    "symlink-S": "os.symlink('A', 'S')",
    "setxattr-A": "setxattr('A')",
}

# Persistence points: code given the op's main path (file or its directory).
SYNCS = {
    "fsync": "sync_path({path!r}, os.fsync)",
    "fdatasync": "sync_path({path!r}, os.fdatasync)",
    "fsync-dir": "sync_path({dir!r}, os.fsync)",
    "sync": "os.sync()",
}

# The path each op's persistence point syncs (a file; fsync-dir its parent).
TARGET = {
    "creat-C": "C", "creat-d/C": "d/C", "mkdir-E": "E", "append-A": "A", "append-B": "d/B",
    "write-C": "C", "overwrite-A": "A", "overwrite-A-unaligned": "A", "direct-write-A": "A",
    "mmap-write-A": "A", "truncate-A-shrink": "A", "truncate-A-grow": "A",
    "falloc-A-keep-size": "A", "falloc-A-grow": "A", "punch-A": "A", "link-A-d/L": "d/L",
    "unlink-A": ".", "unlink-B": "d", "rename-A-d/R": "d/R", "rename-B-B2": "B2",
    "rename-B-over-A": "A", "symlink-S": ".", "setxattr-A": "A",
}

PRELUDE = r"""
import ctypes, errno, mmap, os, sys, time
os.chdir(os.environ.get("SLOWFS_MOUNT", "."))
libc = ctypes.CDLL(None, use_errno=True)
def fallocate(path, mode, offset, length):
    fd = os.open(path, os.O_WRONLY)
    try:
        if libc.fallocate(fd, mode, ctypes.c_long(offset), ctypes.c_long(length)) != 0:
            e = ctypes.get_errno()
            print(f"fallocate {path}: {os.strerror(e)}", file=sys.stderr)
    finally:
        os.close(fd)
def direct_write(path, letter, size):
    buf = mmap.mmap(-1, size)
    buf.write(letter * size)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_DIRECT)
    except OSError:
        fd = os.open(path, os.O_WRONLY)  # no O_DIRECT here: a plain write
    try:
        os.pwrite(fd, buf, 0)
    except OSError:
        os.pwrite(fd, letter * size, 0)
    os.close(fd)
def mmap_write(path, letter):
    # A map writes only within the file: past its end is SIGBUS, not a write.
    fd = os.open(path, os.O_RDWR)
    size = min(os.fstat(fd).st_size, 4096)
    if size:
        with mmap.mmap(fd, size) as m:
            m[0:size] = letter * size
    else:
        print(f"mmap {path}: empty, nothing to map", file=sys.stderr)
    os.close(fd)
def setxattr(path):
    try:
        os.setxattr(path, "user.ace", b"v")
    except OSError as e:
        print(f"setxattr {path}: {e}", file=sys.stderr)
def sync_path(path, how):
    if not os.path.lexists(path):
        path = os.path.dirname(path) or "."
    fd = os.open(path, os.O_RDONLY)
    how(fd)
    os.close(fd)
"""


def workload_code(steps):
    """A workload: each (op, sync) step, a pause between steps so that the
    journal's commit timer can write what came before (more real states)."""
    lines = [PRELUDE]
    for n, (op, sync) in enumerate(steps):
        letter = "ijklmnopqrstuvwxy"[n]
        path = TARGET[op]
        lines.append(f"L = b{letter!r}")
        lines.append(OPS[op])
        lines.append("time.sleep(1.1)")
        lines.append(SYNCS[sync].format(path=path, dir=os.path.dirname(path) or "."))
    return "\n".join(lines) + "\n"


def applicable(steps):
    """Drops sequences whose later steps name what an earlier one removed."""
    gone = set()
    for op, _ in steps:
        uses = {"A"} if op.endswith("-A") or "-A-" in op else set()
        if op in ("append-B", "unlink-B", "rename-B-B2", "rename-B-over-A"):
            uses = {"B"}
        if uses & gone:
            return False
        if op in ("unlink-A", "rename-A-d/R"):
            gone.add("A")
        if op in ("unlink-B", "rename-B-B2", "rename-B-over-A"):
            gone.add("B")
    names = [op for op, _ in steps]
    if names.count("creat-C") + names.count("write-C") > 1 or names.count("mkdir-E") > 1:
        return False
    if names.count("link-A-d/L") > 1 or names.count("symlink-S") > 1:
        return False
    return True


def workloads(seq, sample, seed):
    steps = list(itertools.product(sorted(OPS), sorted(SYNCS)))
    if seq == 1:
        return [[s] for s in steps]
    rng = random.Random(seed)
    chosen, seen = [], set()
    while len(chosen) < sample:
        pick = tuple(rng.choice(steps) for _ in range(seq))
        if pick in seen or not applicable(list(pick)):
            continue
        seen.add(pick)
        chosen.append(list(pick))
    return chosen


def slowfs_binary():
    # Absolute: each explore runs in its own scratch directory.
    binary = os.path.abspath(os.environ.get("SLOWFS") or os.path.join(ROOT, "target/release/slowfs"))
    if not os.path.exists(binary):
        sys.exit(f"ace: {binary} is missing: cargo build --release -p slowfs (or set SLOWFS)")
    return binary


# The explore processes running, for a stop to pass its signal on to.
RUNNING = set()
RUNNING_LOCK = threading.RLock()


def run(cmd, cwd):
    with RUNNING_LOCK:
        if STOPPING.is_set():
            return 130, "ace: stopping"
        child = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, stdin=subprocess.DEVNULL)
        RUNNING.add(child)
    try:
        out, _ = child.communicate()
    finally:
        with RUNNING_LOCK:
            RUNNING.discard(child)
    return child.returncode, out




def model_key(slowfs, steps, whole_writes):
    """What a model run depends on: the workload, checker and setup code, the
    settings and the slowfs binary (its size and modification time)."""
    st = os.stat(slowfs)
    text = json.dumps([workload_code(steps), CHECK, SETUP, whole_writes, slowfs, st.st_size, st.st_mtime_ns])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def model_command(slowfs, backing, model, check, workload, extra=()):
    """The model run of a workload: every state (no --fs), a JSON report."""
    return [slowfs, "explore", "--backing", backing, "--max-states", "100000", "--json", model,
            "--check", check, *extra, "--", *workload]


def fs_command(slowfs, fs, setup, model, real, check, workload, extra=()):
    """A real filesystem's run of a workload, judged against a model run."""
    return [slowfs, "explore", "--fs", fs, "--fs-settle", "1s", "--max-states", str(FS_STATES),
            "--fs-setup", setup, *extra, "--compare-with", model, "--json", real, "--check", check,
            "--", *workload]


def explore_one(slowfs, steps, filesystems, scratch, whole_writes=False, model_cache=None):
    """The model run and each filesystem's judgement of one workload."""
    work = os.path.join(scratch, "work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    for name, text in (("workload.py", workload_code(steps)), ("check.py", CHECK), ("setup.py", SETUP)):
        with open(os.path.join(work, name), "w") as f:
            f.write(text)
    backing = os.path.join(work, "backing")
    os.makedirs(backing)
    subprocess.run(PYTHON + [os.path.join(work, "setup.py")], cwd=backing, check=True)
    check = python_command(os.path.join(work, "check.py"))
    workload = PYTHON + [os.path.join(work, "workload.py")]
    model = os.path.join(work, "model.json")
    cached = model_cache and os.path.join(model_cache, model_key(slowfs, steps, whole_writes) + ".json")
    started = time.time()
    if cached and os.path.exists(cached):
        shutil.copyfile(cached, model)
        model_seconds = 0.0
    else:
        extra = ["--whole-writes"] if whole_writes else []
        code, out = run(model_command(slowfs, backing, model, check, workload, extra), work)
        model_seconds = round(time.time() - started, 1)
        if not os.path.exists(model):
            return [{"fs": fs, "error": f"model run: exit {code}: {out[-400:]}"} for fs in filesystems]
        with open(model) as f:
            model_kind = json.load(f)["outcome"]["kind"]
        if model_kind == "interrupted" or STOPPING.is_set():
            return [{"fs": fs, "interrupted": True} for fs in filesystems]
        if cached:
            os.makedirs(model_cache, exist_ok=True)
            shutil.copyfile(model, cached + f".{os.getpid()}.{threading.get_ident()}")
            os.replace(cached + f".{os.getpid()}.{threading.get_ident()}", cached)
    rows = []
    with open(model) as f:
        model_report = json.load(f)
    for fs in filesystems:
        if STOPPING.is_set():
            rows.append({"fs": fs, "interrupted": True})
            continue
        real = os.path.join(work, f"real-{fs}.json")
        setup = python_command(os.path.join(work, "setup.py"))
        started = time.time()
        code, out = run(fs_command(slowfs, fs, setup, model, real, check, workload), work)
        seconds = round(time.time() - started, 1)
        if STOPPING.is_set() or code == 130:
            rows.append({"fs": fs, "interrupted": True})
            continue
        if not os.path.exists(real):
            rows.append({"fs": fs, "error": f"exit {code}: {out[-400:]}"})
            continue
        with open(real) as f:
            report = json.load(f)
        if report["outcome"]["kind"] == "interrupted":
            rows.append({"fs": fs, "interrupted": True})
            continue
        if report["outcome"]["kind"] == "refused":
            # Nothing checked (e.g. an xattr the states do not hold): no verdict.
            rows.append({"fs": fs, "refused": report["verdict"]})
            continue
        judged = [g.get("model", {}).get("prediction") for g in report["groups"]]
        rows.append({
            "fs": fs,
            "real_states": len(report["groups"]),
            "predicted": judged.count("predicted"),
            "said_never": judged.count("said_never"),
            # A real state only an approximate rule of the model stands for:
            # not wrong, but evidence about that rule; counted apart.
            "unknown": judged.count("unknown"),
            "gap": judged.count("gap"),
            "not_in_model_run": judged.count("not_in_model_run"),
            "model_can_not_seen": len((report.get("compared_with") or {}).get("not_shown", [])),
            "model_states": len(model_report["groups"]),
            "model_exhaustive": model_report["coverage"].get("exhaustive", False),
            "wrong": [g["message"] for g in report["groups"]
                      if g.get("model", {}).get("prediction") in ("said_never", "gap")],
            "high_yield_complete": report["coverage"]["complete"],
            # A checker killed for time answered nothing about its states
            # (explore judges such a group "timed_out", not against the model).
            "timed_out": judged.count("timed_out"),
            "seconds": seconds,
            "model_seconds": model_seconds,
        })
    return rows


def name_of(steps):
    return " ; ".join(f"{o}+{s}" for o, s in steps)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seq", type=int, default=1, choices=(1, 2, 3))
    parser.add_argument("--sample", type=int, default=1000, help="seq-2/3: how many workloads")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--limit", type=int, help="only the first N workloads")
    parser.add_argument("--only", help="only workloads whose steps contain this text")
    parser.add_argument("--workload", action="append", default=[], metavar="NAME",
                        help="only this workload, named as the rows name it ('A+fsync ; B+sync'); repeatable")
    parser.add_argument("--fs", default="ext4,xfs,btrfs")
    parser.add_argument("--shuffle", action="store_true", help="run the workloads in a seeded random order")
    parser.add_argument("--whole-writes", action="store_true",
                        help="model runs without block tears and sizes without data (the old, unsound default: a negative control)")
    parser.add_argument("--out", help="append one JSON line per workload and filesystem")
    parser.add_argument("--resume", action="store_true",
                        help="skip the workloads whose rows (for each filesystem asked) --out already has")
    parser.add_argument("--jobs", type=int, default=1, help="workloads run at once (default 1)")
    parser.add_argument("--model-cache", help="a directory keeping each workload's model run, for reuse")
    args = parser.parse_args()
    if args.resume and not args.out:
        parser.error("--resume needs --out")
    slowfs = slowfs_binary()
    filesystems = args.fs.split(",")
    chosen = workloads(args.seq, args.sample, args.seed)
    if args.only:
        chosen = [w for w in chosen if any(args.only in f"{o}+{s}" for o, s in w)]
    if args.workload:
        known = {name_of(w) for w in chosen}
        unknown = [n for n in args.workload if n not in known]
        if unknown:
            example = f", e.g. {name_of(chosen[0])!r}" if chosen else ""
            sys.exit(f"ace: not among the workloads chosen: {unknown} (names as in the rows{example}; "
                     f"the same --seq, --sample and --seed, and an --only that keeps them)")
        chosen = [w for w in chosen if name_of(w) in args.workload]
    if args.shuffle:
        # A run cut short is then a random sample, not the first ops by name.
        random.Random(args.seed).shuffle(chosen)
    if args.limit:
        chosen = chosen[: args.limit]
    done = set()
    if args.resume and os.path.exists(args.out):
        with open(args.out) as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    done.add((row["workload"], row["fs"]))
    total = len(chosen)
    todo = [(n, steps) for n, steps in enumerate(chosen, 1)
            if not all((" ; ".join(f"{o}+{s}" for o, s in steps), fs) in done for fs in filesystems)]
    print(f"ace: {len(chosen)} seq-{args.seq} workloads (seed {args.seed}) on {', '.join(filesystems)}", flush=True)
    if args.resume:
        print(f"ace: --resume: {total - len(todo)} already in {args.out}, {len(todo)} to run", flush=True)
    totals = {fs: {"workloads": 0, "agree": 0, "unknown": 0, "said_never": 0, "gap": 0, "errors": 0, "refused": 0}
              for fs in filesystems}
    start = time.time()
    wrong_found = False
    ran = 0
    lock = threading.Lock()

    def stop(signum, _frame):
        # Each running explore gets SIGTERM and ends its run as interrupted
        # (it cleans up its mounts and loop devices); no new one starts.
        STOPPING.set()
        with RUNNING_LOCK:
            for child in RUNNING:
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)
        print(f"ace: signal {signum}: stopping; interrupted runs are not written", flush=True)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)

    def one(n, steps, scratch):
        if STOPPING.is_set():
            return n, steps, []
        if all(op == "setxattr-A" for op, _ in steps):
            # The crash states hold no xattrs (not modelled): nothing of
            # this workload can be judged, and an "agree" would be on nothing.
            return n, steps, [{"fs": fs, "refused": "xattrs are not in the crash states (not modelled)"}
                              for fs in filesystems if (name_of(steps), fs) not in done]
        return n, steps, explore_one(slowfs, steps, [fs for fs in filesystems if (name_of(steps), fs) not in done],
                                     scratch, args.whole_writes, args.model_cache)

    def record(n, steps, rows):
        nonlocal wrong_found, ran
        name = name_of(steps)
        if rows and not any("interrupted" in r for r in rows):
            ran += 1
        for row in rows:
            if "interrupted" in row:
                continue
            row["workload"] = name
            t = totals[row["fs"]]
            t["workloads"] += 1
            if "refused" in row:
                t["refused"] += 1
                verdict = "no verdict: " + row["refused"]
            elif "error" in row:
                t["errors"] += 1
                verdict = "ERROR " + row["error"].strip().splitlines()[-1]
            else:
                t["said_never"] += row["said_never"]
                t["gap"] += row["gap"]
                t["unknown"] += row.get("unknown", 0)
                if row["said_never"] or row["gap"]:
                    wrong_found = True
                    verdict = f"MODEL SAYS NEVER {row['said_never']}, MODEL GAP {row['gap']}: {row['wrong']}"
                elif row.get("timed_out", 0) > 0:
                    # Some states got no answer: an "agree" would be on part of it.
                    t["refused"] += 1
                    verdict = (f"no verdict: the checker timed out on {row['timed_out']} group(s) "
                               f"of states (a loaded machine: run it again)")
                else:
                    t["agree"] += 1
                    verdict = (f"agree ({row['predicted']} real states predicted, "
                               f"{row.get('unknown', 0)} unknown to the model, "
                               f"{row['model_can_not_seen']} the model can but not seen)")
            print(f"[{n}/{total}] {row['fs']:5} {name}: {verdict}", flush=True)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(json.dumps(row) + "\n")

    with tempfile.TemporaryDirectory(prefix="slowfs-ace-") as scratch:
        if args.jobs <= 1:
            for n, steps in todo:
                if STOPPING.is_set():
                    break
                record(*one(n, steps, scratch))
        else:
            slots = [os.path.join(scratch, f"job{j}") for j in range(args.jobs)]
            free = list(slots)

            def job(n, steps):
                with lock:
                    slot = free.pop()
                try:
                    return one(n, steps, slot)
                finally:
                    with lock:
                        free.append(slot)

            with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
                pending = set()
                queue = iter(todo)
                while True:
                    while len(pending) < args.jobs and not STOPPING.is_set():
                        item = next(queue, None)
                        if item is None:
                            break
                        pending.add(pool.submit(job, *item))
                    if not pending:
                        break
                    finished, pending = concurrent.futures.wait(
                        pending, timeout=1, return_when=concurrent.futures.FIRST_COMPLETED)
                    for future in finished:
                        record(*future.result())
    minutes = (time.time() - start) / 60
    print(f"\nace: {ran} workloads in {minutes:.1f} min "
          f"({ran / max(minutes, 1e-9):.1f} workloads/min over {len(filesystems)} filesystem(s))")
    print("| fs | workloads | agree | real states unknown to the model | MODEL SAYS NEVER | MODEL GAP | errors | no verdict |")
    print("|---|---|---|---|---|---|---|---|")
    for fs, t in totals.items():
        print(f"| {fs} | {t['workloads']} | {t['agree']} | {t['unknown']} | {t['said_never']} | {t['gap']} "
              f"| {t['errors']} | {t['refused']} |")
    if sum(t["workloads"] - t["errors"] - t["refused"] for t in totals.values()) == 0:
        sys.exit("ace: no workload was judged: no verdict")
    sys.exit(1 if wrong_found else 0)


if __name__ == "__main__":
    main()

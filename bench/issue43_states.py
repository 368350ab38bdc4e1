#!/usr/bin/env python3
"""The crash states issue 43 found real ext4 and XFS leaving that the old
default models could not make (or called impossible): does a default model
run make each, and does `explore --fs FS --compare-with` that run judge it
predicted when the kernel leaves it?

Each case is a setup (made and synced first), a workload and the state to
look for, in bench/ace.py's notation (each name with one letter per KiB: the
letter of the write that put it there, Z for zeros). For each case the model
run (no --fs, the defaults, every state) must hold the state; then each
filesystem runs the workload on up to --tries kernel timelines, until its
kernel leaves the state (a timeline may not: the kernel's flushes decide),
and that state must be judged predicted.

    bench/issue43_states.py                     # every case, ext4 and XFS
    bench/issue43_states.py --case fdatasync --fs xfs --tries 5
    SLOWFS=target/release/slowfs bench/issue43_states.py
    bench/issue43_states.py --fs ext4 --mkfs-options '-b 1024'   # the issue's images

Prints a line per case and filesystem and a table; exit 1 if a model run
lacks a state or a kernel's state is judged anything but predicted.
"""

import argparse
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ace  # noqa: E402  (the checker, the interpreter and the runner)

WRITE = """
def write(path, letter, size, offset=None, sync=None):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    os.pwrite(fd, letter * size, os.fstat(fd).st_size if offset is None else offset)
    if sync:
        sync(fd)
    os.close(fd)
"""

# name: (setup, workload, the state's regex, extra model-run args, extra --fs
# args: a list, or per filesystem)
CASES = {
    # An append without fsync: the new size, zeros where the data should be
    # (ext4's delayed allocation, XFS's unwritten extents).
    "append": (
        "write('foo', b'g', 4096)",
        "write('foo', b'j', 4096)\ntime.sleep(6)",
        r"^foo=ggggZZZZ$",
        [], [],
    ),
    # A new file in a new directory after the directory's fsync.
    "new-dir": (
        "",
        "os.mkdir('newd')\nwrite('newd/f', b'j', 4096)\n"
        "fd = os.open('newd', os.O_RDONLY); os.fsync(fd); os.close(fd)\ntime.sleep(6)",
        r"(^| )newd/f=ZZZZ( |$)",
        [], [],
    ),
    # The same append beside a second file written and fsynced.
    "beside-fsync": (
        "write('foo', b'g', 4096)",
        "write('foo', b'j', 4096)\nwrite('bar', b'k', 4096, sync=os.fsync)\ntime.sleep(6)",
        r"(^| )foo=ggggZZZZ( |$)",
        [], [],
    ),
    # A 4 KiB overwrite torn inside a block: only on a filesystem whose
    # blocks are smaller than a page (here ext4 with 1 KiB blocks, the old
    # image default) and only with --torn (tears finer than a block).
    "torn-1k": (
        "write('foo', b'g', 4096)",
        "write('foo', b'j', 4096, offset=0)\ntime.sleep(6)",
        r"^foo=(?=.*g)(?=.*j)[gj]{4}$",
        ["--torn"], {"ext4": ["--mkfs-options", "-b 1024"], "xfs": ["--mkfs-options", "-b size=1024"]},
    ),
    # fdatasync after in-place overwrites commits no journal or log: baz,
    # created before it, may be lost while both new blocks are kept.
    "fdatasync": (
        "write('foo', b'g', 8192)",
        "write('foo', b'g', 4096, offset=0)\ntime.sleep(1.2)\nwrite('baz', b'b', 0)\n"
        "write('foo', b'j', 4096, offset=0, sync=os.fdatasync)\n"
        "write('foo', b'k', 4096, offset=4096, sync=os.fdatasync)",
        r"^foo=jjjjkkkk$",
        [], [],
    ),
}


def script(body):
    return "import os, time\nos.chdir(os.environ.get('SLOWFS_MOUNT', '.'))\n" + WRITE + body + "\n"


def states(report):
    """Each group's state line and its judgement (None in a model run)."""
    out = []
    for group in report["groups"]:
        message = group["message"]
        found = re.search(r"state (.*)", message)
        if found:
            out.append((found.group(1).strip(), group.get("model", {}).get("prediction")))
    return out


def matching(pattern, report):
    return [(s, p) for s, p in states(report) if re.search(pattern, s)]


def one_case(slowfs, name, filesystems, tries, scratch, mkfs_options=None):
    setup, workload, pattern, model_args, fs_args = CASES[name]
    if mkfs_options:
        fs_args = ["--mkfs-options", mkfs_options]
    work = os.path.join(scratch, name)
    os.makedirs(work)
    paths = {}
    for file, text in (("setup.py", script(setup + "\nos.sync()")), ("workload.py", script(workload)),
                       ("check.py", ace.CHECK)):
        paths[file] = os.path.join(work, file)
        with open(paths[file], "w") as f:
            f.write(text)
    check = ace.python_command(paths["check.py"])
    workload_cmd = ace.PYTHON + [paths["workload.py"]]
    backing = os.path.join(work, "backing")
    os.makedirs(backing)
    ace.subprocess.run(ace.PYTHON + [paths["setup.py"]], cwd=backing, check=True)
    model = os.path.join(work, "model.json")
    code, out = ace.run(ace.model_command(slowfs, backing, model, check, workload_cmd, model_args), work)
    if not os.path.exists(model):
        return [{"case": name, "fs": "model", "error": f"exit {code}: {out[-600:]}"}]
    with open(model) as f:
        model_report = json.load(f)
    in_model = matching(pattern, model_report)
    rows = [{"case": name, "fs": "model", "args": model_args, "exhaustive": model_report["coverage"].get("exhaustive"),
             "has_state": [s for s, _ in in_model], "states": len(states(model_report))}]
    for fs in filesystems:
        extra = fs_args.get(fs, []) if isinstance(fs_args, dict) else fs_args
        row = {"case": name, "fs": fs, "args": extra, "tries": 0, "seen": [], "other_wrong": []}
        for attempt in range(tries):
            real = os.path.join(work, f"real-{fs}-{attempt}.json")
            setup_cmd = ace.python_command(paths["setup.py"])
            code, out = ace.run(ace.fs_command(slowfs, fs, setup_cmd, model, real, check, workload_cmd, extra),
                                work)
            row["tries"] += 1
            if not os.path.exists(real):
                row["error"] = f"exit {code}: {out[-600:]}"
                break
            with open(real) as f:
                report = json.load(f)
            row["other_wrong"] += [s for s, p in states(report) if p in ("said_never", "gap")]
            row["seen"] = matching(pattern, report)
            if row["seen"]:
                break
        rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="only this case (repeatable)")
    parser.add_argument("--fs", default="ext4,xfs", help="comma-separated (default: ext4,xfs)")
    parser.add_argument("--tries", type=int, default=3, help="kernel timelines per case and filesystem")
    parser.add_argument("--out", help="append the rows here (JSON lines)")
    parser.add_argument("--mkfs-options", help="for every case's --fs runs (e.g. '-b 1024' for ext4 "
                        "with 1 KiB blocks, the images the issue was found on)")
    args = parser.parse_args()
    slowfs = ace.slowfs_binary()
    filesystems = args.fs.split(",")
    bad = 0
    table = []
    with tempfile.TemporaryDirectory(prefix="slowfs-issue43-") as scratch:
        for name in args.case or list(CASES):
            rows = one_case(slowfs, name, filesystems, args.tries, scratch, args.mkfs_options)
            for row in rows:
                if row["fs"] == "model":
                    ok = bool(row.get("has_state"))
                    line = (f"model run {' '.join(row.get('args', [])) or '(defaults)'}: "
                            + (f"makes it ({row['has_state'][0]}; {row['states']} states, every one checked: "
                               f"{row['exhaustive']})" if ok else f"does NOT make it: {row.get('error', '')}"))
                    cell = "makes it" if ok else "MISSING"
                else:
                    judged = {p for _, p in row["seen"]}
                    ok = judged == {"predicted"} and not row["other_wrong"] and "error" not in row
                    if row.get("error"):
                        line, cell = f"error: {row['error']}", "error"
                    elif not row["seen"]:
                        line = f"the kernel did not leave it in {row['tries']} timeline(s)"
                        cell, ok = f"not seen in {row['tries']}", True
                    else:
                        line = f"{row['seen'][0][0]}: {', '.join(sorted(map(str, judged)))} (timeline {row['tries']})"
                        cell = f"{'predicted' if ok else 'WRONG'} (timeline {row['tries']})"
                    if row["other_wrong"]:
                        line += f"; other states the model got wrong: {row['other_wrong']}"
                bad += not ok
                print(f"{name:13} {row['fs']:6} {line}", flush=True)
                table.append((name, row["fs"], cell))
                if args.out:
                    with open(args.out, "a") as f:
                        f.write(json.dumps(row) + "\n")
    columns = ["model"] + filesystems
    print("\n| case | " + " | ".join(columns) + " |\n|---|" + "---|" * len(columns))
    for name in args.case or list(CASES):
        cells = {fs: cell for n, fs, cell in table if n == name}
        print(f"| {name} | " + " | ".join(cells.get(c, "-") for c in columns) + " |")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Build the `slowfs` wheel: the Python package plus the slowfs and
slowfs-conformance binaries (Linux x86_64), so `pip install` compiles nothing.

    python3 scripts/build_wheel.py [--bin-dir target/release] [--out dist]

The binaries must be built first (`cargo build --release --bins -p slowfs -p
slowfs-conformance`). They are stripped into the wheel's scripts (pip puts
them on the venv's PATH); the platform tag is the manylinux glibc level the
binaries actually need (read from their versioned symbols), so pip refuses
the wheel on an older glibc instead of failing at run time.
"""

import argparse
import base64
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "python" / "slowfs"
BINARIES = ("slowfs", "slowfs-conformance")
NAME = "slowfs"


def version() -> str:
    text = (ROOT / "fuse-slowfs" / "Cargo.toml").read_text()
    return re.search(r'^version\s*=\s*"([^"]+)"', text, re.M).group(1)


def glibc_needed(path: Path) -> tuple:
    out = subprocess.run(
        ["objdump", "-T", str(path)], capture_output=True, text=True, check=True
    ).stdout
    found = [tuple(int(x) for x in v.split(".")) for v in re.findall(r"GLIBC_(\d+\.\d+)", out)]
    return max(found, default=(2, 17))


def digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin-dir", default=str(ROOT / "target" / "release"))
    parser.add_argument("--out", default=str(ROOT / "dist"))
    args = parser.parse_args()
    bin_dir = Path(args.bin_dir)
    missing = [b for b in BINARIES if not (bin_dir / b).is_file()]
    if missing:
        print(
            f"build_wheel: {', '.join(missing)} not in {bin_dir}: build them first with "
            "`cargo build --release --bins -p slowfs -p slowfs-conformance`",
            file=sys.stderr,
        )
        return 2
    ver = version()
    glibc = max(glibc_needed(bin_dir / b) for b in BINARIES)
    tag = f"py3-none-manylinux_{glibc[0]}_{glibc[1]}_x86_64"
    dist_info = f"{NAME}-{ver}.dist-info"
    data = f"{NAME}-{ver}.data"
    files = []  # (archive name, bytes, mode)
    for py in sorted(PACKAGE.rglob("*.py")):
        files.append((f"slowfs/{py.relative_to(PACKAGE)}", py.read_bytes(), 0o644))
    with tempfile.TemporaryDirectory() as tmp:
        for b in BINARIES:
            stripped = Path(tmp) / b
            shutil.copy2(bin_dir / b, stripped)
            subprocess.run(["strip", str(stripped)], check=True)
            files.append((f"{data}/scripts/{b}", stripped.read_bytes(), 0o755))
    readme = (ROOT / "python" / "README.md").read_text()
    metadata = (
        "Metadata-Version: 2.1\n"
        f"Name: {NAME}\n"
        f"Version: {ver}\n"
        "Summary: A FUSE filesystem that makes storage slow, flaky and crash-prone on "
        "demand, deterministically; with a pytest plugin\n"
        "License: MIT OR Apache-2.0\n"
        "Requires-Python: >=3.8\n"
        "Classifier: Framework :: Pytest\n"
        "Classifier: Operating System :: POSIX :: Linux\n"
        "Description-Content-Type: text/markdown\n\n" + readme
    )
    files.append((f"{dist_info}/METADATA", metadata.encode(), 0o644))
    wheel = f"Wheel-Version: 1.0\nGenerator: slowfs build_wheel.py\nRoot-Is-Purelib: false\nTag: {tag}\n"
    files.append((f"{dist_info}/WHEEL", wheel.encode(), 0o644))
    entry_points = "[pytest11]\nslowfs = slowfs.pytest_plugin\n"
    files.append((f"{dist_info}/entry_points.txt", entry_points.encode(), 0o644))
    record = io.StringIO()
    for name, content, _ in files:
        record.write(f"{name},{digest(content)},{len(content)}\n")
    record.write(f"{dist_info}/RECORD,,\n")
    files.append((f"{dist_info}/RECORD", record.getvalue().encode(), 0o644))

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{NAME}-{ver}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, content, mode in files:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, content)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

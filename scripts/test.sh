#!/usr/bin/env bash
# The README's test command: installs what the tests need on a fresh machine (each
# step skipped when already done), then runs every test. Extra arguments go to
# `cargo test` (e.g. `scripts/test.sh -p slowfs-faults`).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

say() { echo "scripts/test.sh: $*" >&2; }

# Debian packages: fusermount3 (non-root mounts), libacl1-dev (building pjdfstest),
# fio (benchmarks and the fio test), tmux (the `slowfs top` test runs it in a terminal),
# chromium (the HTML report's browser test), xfsprogs and btrfs-progs (explore --fs on
# real XFS and btrfs; ext4's e2fsprogs is always there), golang-go (the Go driver's
# tests build drivers/go with it).
packages=(fuse3 libacl1-dev fio tmux chromium xfsprogs btrfs-progs golang-go)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node (the Node driver's tests); the machines come with Node 20, Debian's is 18.
command -v node >/dev/null || missing+=(nodejs)
# A JDK, 11 or later (the JVM driver's tests run drivers/jvm/SlowfsDriver.java as a
# single-file source, which needs the JDK's compiler): the machines come with OpenJDK 17.
command -v javac >/dev/null || missing+=(default-jdk-headless)
if ((${#missing[@]})); then
  sudo=()
  if [[ $(id -u) != 0 ]]; then
    command -v sudo >/dev/null || { say "need root (or sudo) to install: ${missing[*]}"; exit 1; }
    sudo=(sudo)
  fi
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Third-party filesystem suites the tests run (a missing one fails its test).
command -v fsx >/dev/null || { say "installing fsx"; cargo install --locked --quiet fsx@0.3.2; }
command -v pjdfstest >/dev/null || { say "installing pjdfstest"; cargo install --locked --quiet pjdfstest@0.2.2; }

# Python libraries tested through the driver protocol.
# Pinned: the expectations in conformance/expectations.toml are about these versions.
python_packages=(aiofiles==25.1.0 ayafileio==2.0.0 aiofile==3.12.3 caio==0.12.10 plyvel==1.5.1 lmdb==1.6.2 pytest==8.3.4 anyio==4.16.0 trio==0.35.0)
if [[ ! -x .venv/bin/python3 ]]; then
  say "creating .venv"
  python3 -m venv .venv
fi
if ! .venv/bin/python3 -c "import aiofiles, ayafileio, aiofile, plyvel, lmdb, pytest, anyio, trio" 2>/dev/null; then
  say "installing ${python_packages[*]} into .venv"
  .venv/bin/pip install --quiet --disable-pip-version-check "${python_packages[@]}"
fi

if [[ ! -e /dev/fuse ]]; then
  say "/dev/fuse is missing: the tests mount real slowfs filesystems (modprobe fuse; in a container, pass --device /dev/fuse)"
  exit 1
fi

say "set-up done after ${SECONDS}s"
status=0
loops_before=$(losetup -a 2>/dev/null | sort)
cargo test --workspace --release --no-fail-fast "$@" || status=$?
say "cargo test done after ${SECONDS}s"
# The README's main job is `cargo run --release --bin slowfs-conformance -- run`:
# that it still names one binary (a second crate with a bin of that name once
# made it ambiguous).
cargo run --release --quiet --bin slowfs-conformance -- list >/dev/null || {
  say "the README's main job no longer starts: cargo run --release --bin slowfs-conformance"
  status=1
}

# The Python package as users get it: the wheel (binaries inside) installed
# into the venv, then its pytest plugin's tests on real mounts. Only on a full
# run (arguments select Rust tests).
if (($# == 0)); then
  # Exactly what a user of a checkout does: pip builds the wheel with maturin
  # (pyproject.toml; the commands from packaging/wheel) and installs it.
  say "pip install . (the slowfs wheel, built by maturin)"
  .venv/bin/pip install --quiet --disable-pip-version-check --force-reinstall . || status=$?
  # Publishing waits for credentials (a crates.io token, a PyPI one): the
  # crates package as they would be uploaded (their compile is the tests'),
  # and the wheel is the one just built, so that day it is one command each.
  say "cargo publish --workspace --dry-run"
  cargo publish --workspace --dry-run --no-verify --allow-dirty --quiet || status=$?
  say "pytest python/tests (the slowfs wheel's plugin)"
  (cd python/tests && ../../.venv/bin/python3 -m pytest -q -p no:cacheprovider) || status=$?
fi

# Every test unmounts what it mounted, also when it panics: check.
if grep -q ' fuse.slowfs ' /proc/mounts; then
  say "slowfs mounts left behind:"
  grep ' fuse.slowfs ' /proc/mounts >&2
  exit 1
fi
# ... and detaches the loop devices it attached (explore --fs): check.
loops_left=$(comm -13 <(echo "$loops_before") <(losetup -a 2>/dev/null | sort))
if [[ -n $loops_left ]]; then
  say "loop devices left attached:"
  echo "$loops_left" >&2
  exit 1
fi
say "all done after ${SECONDS}s (exit $status)"
exit "$status"

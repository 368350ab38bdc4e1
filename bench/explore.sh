#!/usr/bin/env bash
# Benchmark (not a test): how fast `slowfs explore` checks crash states, and how
# much memory a recording mount takes for a 100 MiB workload.
source "$(dirname "$0")/lib.sh"
ex=fuse-slowfs/examples/export
work=$(mktemp -d /var/tmp/slowfs-explore-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "== example 4 (tmp + fsync + rename + fsync dir), checker: true, --torn"
mkdir -p "$work/ex4" && head -c 6000 /dev/zero | tr '\0' o > "$work/ex4/config.json"
$slowfs explore --torn --backing "$work/ex4" --check true -- "$ex/tmp-fsync-rename-dirsync.sh" 2>/dev/null | grep -E "states"

echo "== 200 files written without fsync (large state space), checker: true, --max-states 5000"
mkdir -p "$work/many"
$slowfs explore --max-states 5000 --backing "$work/many" --check true -- \
  sh -c 'for i in $(seq 200); do echo "$i" > "$SLOWFS_MOUNT/f$i"; done' 2>/dev/null | grep -E "states|ops"

echo "== memory of a recording mount for a 100 MiB workload (max RSS of slowfs explore)"
mkdir -p "$work/big"
/usr/bin/time -f "max RSS %M KiB, %e s" $slowfs explore --max-states 3 --backing "$work/big" --check true -- \
  sh -c 'head -c 100M /dev/zero | tr "\0" x > "$SLOWFS_MOUNT/big"; sync "$SLOWFS_MOUNT/big"' 2>&1 >/dev/null | grep "max RSS"

#!/usr/bin/env bash
# The run steps of the CI workflow in docs/ci.md, as one script, so that what
# CI does can be run (and is, by conformance/tests/docs.rs) on a laptop:
#
#   scripts/ci/conformance.sh install [CHECKOUT]    slowfs + slowfs-conformance on PATH (cargo install, once):
#                                                   from CHECKOUT, a checkout of slowfs's repository
#                                                   (until it is on crates.io), else from crates.io
#   scripts/ci/conformance.sh shard K N ENGINE...   shard K of N of the matrix -> $OUT/shard-K.{json,xml},
#                                                   failed cells' fault traces -> $OUT/fault-traces/
#   scripts/ci/conformance.sh merge                 every $OUT/shard-*.json -> $OUT/report.{json,xml}
#
# ENGINE is what `slowfs-conformance run --engine` takes ('cmd:python3 my_driver.py').
# Environment: SLOWFS_SEED (default 2026; every shard must use the same),
# SLOWFS_OUT (default conformance-out), SLOWFS_EXPECTATIONS (an expectations file).
# Exit status: slowfs-conformance's (0 pass, 1 a finding, 2 bad usage).
set -euo pipefail
seed=${SLOWFS_SEED:-2026}
out=${SLOWFS_OUT:-conformance-out}
say() { echo "scripts/ci/conformance.sh: $*" >&2; }

case ${1:-} in
  install)
    if command -v slowfs >/dev/null && command -v slowfs-conformance >/dev/null; then
      say "slowfs and slowfs-conformance are on PATH"
      exit 0
    fi
    if [[ -n ${2:-} ]]; then
      [[ -f $2/fuse-slowfs/Cargo.toml && -f $2/conformance/Cargo.toml ]] || {
        say "$2 is not a checkout of slowfs (no fuse-slowfs/ and conformance/ crates)"
        exit 2
      }
      say "installing slowfs and slowfs-conformance from $2 (cargo install --path)"
      cargo install --locked --path "$2/fuse-slowfs"
      cargo install --locked --path "$2/conformance"
    else
      say "installing slowfs and slowfs-conformance from crates.io (cargo install)"
      cargo install --locked slowfs slowfs-conformance || {
        say "not on crates.io yet? install from a checkout: $0 install PATH-TO-SLOWFS-CHECKOUT"
        exit 1
      }
    fi
    ;;
  shard)
    [[ $# -ge 4 ]] || { say "usage: $0 shard K N ENGINE..."; exit 2; }
    k=$2 n=$3
    shift 3
    mkdir -p "$out"
    # A failed cell's fault traces, which its replay command names, go with
    # the reports (an artifact), not into the current directory.
    args=(run --seed "$seed" --shard "$k/$n" --json "$out/shard-$k.json" --junit "$out/shard-$k.xml"
      --fault-traces "$out/fault-traces")
    for engine in "$@"; do args+=(--engine "$engine"); done
    [[ -n ${SLOWFS_EXPECTATIONS:-} ]] && args+=(--expectations "$SLOWFS_EXPECTATIONS")
    say "shard $k of $n, seed $seed: slowfs-conformance ${args[*]}"
    slowfs-conformance "${args[@]}"
    ;;
  merge)
    shopt -s nullglob
    shards=("$out"/shard-*.json)
    ((${#shards[@]})) || { say "no $out/shard-*.json to merge (did the shard jobs upload them?)"; exit 2; }
    say "merging ${#shards[@]} shard(s) into $out/report.json and $out/report.xml"
    slowfs-conformance merge --json "$out/report.json" --junit "$out/report.xml" "${shards[@]}"
    ;;
  *)
    sed -n '2,16p' "$0" >&2
    exit 2
    ;;
esac

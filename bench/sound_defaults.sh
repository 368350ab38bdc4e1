#!/usr/bin/env bash
# The cost of explore's sound defaults (block tears and sizes without data)
# against --whole-writes (the old default), on the explore-apps workloads:
# high-yield states planned, distinct states checked, whether every state was
# checked, seconds until every high-yield state was, violations, groups.
#   bench/sound_defaults.sh            (SLOWFS=path/to/slowfs to choose the binary)
source "$(dirname "$0")/lib.sh"
APPS=fuse-slowfs/examples/apps
VENV=.venv/bin/python3
BUDGET=${BUDGET:-20000}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

run() { # name mode extra-args... -- check -- workload...
  local name=$1 mode=$2; shift 2
  local args=() check workload=()
  while [[ $1 != -- ]]; do args+=("$1"); shift; done; shift
  check=$1; shift 2
  workload=("$@")
  local json=$scratch/$name-$mode.json flag=()
  [[ $mode == whole ]] && flag=(--whole-writes)
  (cd "$scratch" && "$slowfs" explore --max-states "$BUDGET" --json "$json" "${flag[@]}" "${args[@]}" \
      --check "$check" -- "${workload[@]}" >/dev/null 2>&1) || true
  python3 - "$json" "$name" "$mode" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
c = r["coverage"]
hy = r.get("high_yield_seconds")
print(f"| {sys.argv[2]} | {sys.argv[3]} | {c['high_yield_states'][1]} | {r['states']} | "
      f"{'yes' if c.get('exhaustive') else 'no'} | {hy if hy is None else round(hy, 1)} | "
      f"{r['seconds']:.1f} | {r['violations']} | {len(r['groups'])} |")
EOF
}

echo "| workload | writes | high-yield planned | states checked | every state | s to high-yield | s in all | violations | groups |"
echo "|---|---|---|---|---|---|---|---|---|"
for mode in whole sound; do
  run export "$mode" -- "python3 $PWD/$APPS/export_check.py" -- python3 "$PWD/$APPS/export_save.py" --on-fsync-error fatal
  run lmdb "$mode" -- "$PWD/$VENV $PWD/$APPS/lmdb_check.py" -- "$PWD/$VENV" "$PWD/$APPS/lmdb_save.py" --plain
  run leveldb "$mode" -- "$PWD/$VENV $PWD/$APPS/leveldb_check.py" -- "$PWD/$VENV" "$PWD/$APPS/leveldb_save.py"
  run sqlite-wal "$mode" --persistent --ignore '*-shm' -- "python3 $PWD/$APPS/sqlite_check.py --persistent" -- python3 "$PWD/$APPS/sqlite_save.py" wal FULL 3 50
done

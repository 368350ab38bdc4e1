#!/usr/bin/env bash
# Benchmark (not a test): issue 33's goal, "every flush epoch of a git commit,
# a SQLite transaction and the write-temp-rename export covered on each of the
# three filesystems in under 3 minutes on this 2-core machine". Runs each
# workload under `slowfs explore --fs FS` with a 3-minute budget and prints,
# per cell, when the last high-yield state (each flush epoch's boundary, then
# each pending write dropped alone) was checked, how many there were, the
# distinct states checked in all, states/s and peak RSS. BUDGET (default 3m);
# ONLY=REGEX runs the matching workloads; SLOWFS=PATH runs that binary.
# Needs root, loop devices, xfsprogs, btrfs-progs.
source "$(dirname "$0")/lib.sh"
apps=$PWD/fuse-slowfs/examples/apps
export_ex=$PWD/fuse-slowfs/examples/export
budget=${BUDGET:-3m}
work=$(mktemp -d /var/tmp/slowfs-realfs-epochs.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "| workload | fs | flush epochs | high-yield states | all checked after | states in ${budget} | states/s | peak RSS |"
echo "|---|---|---|---|---|---|---|---|"

# cell NAME SETUP CHECK -- WORKLOAD...
cell() {
  local name=$1 setup=$2 check=$3; shift 4
  [[ -z ${ONLY:-} || $name =~ $ONLY ]] || return 0
  for fs in ext4 xfs btrfs; do
    rm -f "$work/run.json"
    /usr/bin/time -f %M -o "$work/rss" "$slowfs" explore --json "$work/run.json" --fs "$fs" \
      --fs-setup "$setup" --partial-ok --log-dir "$work" -j 2 --time-budget "$budget" \
      --max-states 100000 --check "$check" -- "$@" >"$work/out" 2>&1 || true
    epochs=$(sed -n 's/.* in \([0-9]*\) flush epochs.*/\1/p' "$work/out" | head -n 1)
    python3 - "$work/run.json" "$name" "$fs" "${epochs:-?}" "$(tail -n 1 "$work/rss")" <<'PY'
import json, sys
path, name, fs, epochs, rss = sys.argv[1:]
try:
    r = json.load(open(path))
except (OSError, ValueError):
    print(f"| {name} | {fs} | ? | the run failed | | | | |")
    sys.exit()
total, done = r.get("coverage", {}).get("high_yield_states", [0, 0])
after = r.get("high_yield_seconds")
after = f"{after:.0f} s" if after is not None else f"NOT all ({done} of {total})"
seconds = r.get("seconds") or 0
rate = f"{r['states'] / seconds:.0f}" if seconds else "?"
print(f"| {name} | {fs} | {epochs} | {total} | {after} | {r['states']} | {rate} | {int(rss) // 1024} MiB |")
PY
  done
}

cell "git commit x2 (core.fsync=all)" "sh $apps/git_setup.sh . fsync" "sh $apps/git_check.sh" -- sh "$apps/git_commits.sh"
cell "SQLite rollback FULL, 3 transactions x50" "true" "python3 $apps/sqlite_check.py" -- python3 "$apps/sqlite_save.py" rollback FULL 3 50
cfg="printf '%6000s' '' | tr ' ' o > config.json; sync"
cell "JSON export tmp-fsync-rename" "$cfg" "python3 $export_ex/check.py" -- python3 "$export_ex/export.py" tmp-fsync-rename

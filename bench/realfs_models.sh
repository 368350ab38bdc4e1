#!/usr/bin/env bash
# Benchmark and field table (not a test): the persistence models checked
# against the real kernel. Each application's save path runs twice: under
# `slowfs explore` on the recording mount (its violation groups labelled with
# the models they can happen on) and under `slowfs explore --fs FS` on real
# ext4, XFS and btrfs (what the filesystem itself leaves after its own
# recovery). Prints a Markdown table: per filesystem, whether the model says
# a violation can happen there, whether the kernel showed one, and the
# verdict: "agree", "model can, not seen" (one timeline: not "never"), or
# "MODEL SAYS NEVER" (the model is wrong: must be zero). Also states, states/s
# and peak RSS of each --fs run. BUDGET (default 90s) per --fs run; ONLY=REGEX
# runs the matching rows; SLOWFS=PATH runs that binary instead of building one
# (a copy, so a rebuild during the run cannot change it). Needs root, loop
# devices, xfsprogs, btrfs-progs.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z ${SLOWFS:-} ]]; then
  cargo build --release --quiet -p slowfs
fi
slowfs=${SLOWFS:-$PWD/target/release/slowfs}
apps=$PWD/fuse-slowfs/examples/apps
export_ex=$PWD/fuse-slowfs/examples/export
realfs=$PWD/fuse-slowfs/tests/data/realfs
venv=$PWD/.venv/bin/python3
budget=${BUDGET:-90s}
work=$(mktemp -d /var/tmp/slowfs-realfs-models.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "| workload | model groups (possible on xfs / ext4-ordered / btrfs) | real ext4 | real XFS | real btrfs |"
echo "|---|---|---|---|---|"

# verdict MODEL_CAN REAL_VIOLATIONS
verdict() {
  if (($2 > 0)) && (($1 == 0)); then echo "MODEL SAYS NEVER"
  elif (($2 > 0)); then echo "agree"
  elif (($1 > 0)); then echo "model can, not seen"
  else echo "agree"; fi
}

# row NAME SETUP CHECK -- WORKLOAD...: SETUP runs in the fresh directory (the
# model run's backing directory, the real filesystem's root) before recording.
row() {
  local name=$1 setup=$2 check=$3; shift 4
  [[ -z ${ONLY:-} || $name =~ $ONLY ]] || return 0
  local backing out groups xfs ext4 btrfs cells=()
  backing=$(mktemp -d "$work/backing.XXXX")
  (cd "$backing" && SLOWFS_MOUNT=$backing sh -c "$setup")
  out=$("$slowfs" explore --partial-ok --log-dir "$work" -j 2 --time-budget 1m --max-states 100000 \
    --backing "$backing" --check "$check" -- "$@" 2>/dev/null) || true
  groups=$(grep -c '^group ' <<<"$out" || true)
  xfs=$(grep -cE '^  can happen on: [^;]*xfs' <<<"$out" || true)
  ext4=$(grep -cE '^  can happen on: [^;]*ext4-ordered' <<<"$out" || true)
  btrfs=$(grep -cE '^  can happen on: [^;]*btrfs' <<<"$out" || true)
  local -A can=([ext4]=$ext4 [xfs]=$xfs [btrfs]=$btrfs)
  for fs in ext4 xfs btrfs; do
    local rss real states rate viol cov
    rss=$work/rss
    real=$(/usr/bin/time -f %M -o "$rss" "$slowfs" explore --fs "$fs" --fs-setup "$setup" --partial-ok \
      --log-dir "$work" -j 2 --time-budget "$budget" --max-states 100000 --check "$check" -- "$@" 2>/dev/null) || true
    states=$(sed -n 's/^states checked: \([0-9]*\) distinct.*/\1/p' <<<"$real")
    rate=$(sed -n 's/^states checked: .*, \([0-9]*\)\/s$/\1/p' <<<"$real")
    viol=$(sed -n 's/^violations: //p' <<<"$real")
    cov=$(sed -n 's/^  high-yield states checked: \([0-9]* of [0-9]*\).*/\1/p' <<<"$real")
    cells+=("$(verdict "${can[$fs]}" "${viol:-0}"): ${viol:-?} violations in ${states:-?} states (${rate:-?}/s, high-yield ${cov:-?}, $(($(tail -n 1 "$rss") / 1024)) MiB)")
  done
  printf '| %s | %s: %s / %s / %s | %s | %s | %s |\n' "$name" "$groups" "$xfs" "$ext4" "$btrfs" "${cells[@]}"
}

cfg="printf '%6000s' '' | tr ' ' o > config.json"
for mode in in-place tmp-rename tmp-fsync-rename tmp-fsync-rename-dirsync; do
  row "JSON export: $mode" "$cfg; sync" "python3 $export_ex/check.py" -- python3 "$export_ex/export.py" "$mode"
done
row "config export, no fsync (ready marker)" "true" "$realfs/check_config.sh" -- "$realfs/export_nofsync.sh"
row "a, then b fsynced" "true" "$realfs/check_two_files.sh" -- "$realfs/two_files.sh"
for fsync in "" fsync; do
  row "git, 2 commits ${fsync:+(core.fsync=all)}" "sh $apps/git_setup.sh . $fsync" "sh $apps/git_check.sh" -- sh "$apps/git_commits.sh"
done
for sync in OFF FULL; do
  row "SQLite rollback, $sync, 3x50" "true" "python3 $apps/sqlite_check.py" -- python3 "$apps/sqlite_save.py" rollback "$sync" 3 50
done
row "LevelDB (plyvel), 3 synced puts" "true" "$venv $apps/leveldb_check.py" -- "$venv" "$apps/leveldb_save.py"

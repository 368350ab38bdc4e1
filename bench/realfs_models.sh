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
# and peak RSS of each --fs run; then, group by group, what each kernel
# showed and whether the model predicted it. BUDGET (default 90s) per --fs run;
# MODEL_BUDGET (default 1m) per model run and MODEL_ARGS (e.g. --torn) added
# to every model run's options; ONLY=REGEX
# runs the matching rows; SLOWFS=PATH runs that binary instead of building one
# (a copy, so a rebuild during the run cannot change it). Needs root, loop
# devices, xfsprogs, btrfs-progs; the GDBM and Mercurial rows need
# python3-gdbm and hg (without them they check nothing, or stop the script).
source "$(dirname "$0")/lib.sh"
apps=$PWD/fuse-slowfs/examples/apps
export_ex=$PWD/fuse-slowfs/examples/export
realfs=$PWD/fuse-slowfs/tests/data/realfs
venv=$PWD/.venv/bin/python3
budget=${BUDGET:-90s}
model_budget=${MODEL_BUDGET:-1m}
read -r -a model_args <<<"${MODEL_ARGS:-}"
work=$(mktemp -d /var/tmp/slowfs-realfs-models.XXXXXX)
trap 'rm -rf "$work"' EXIT
: >"$work/groups.md"

echo "| workload | model groups (possible on xfs / ext4-ordered / btrfs) | real ext4 | real XFS | real btrfs |"
echo "|---|---|---|---|---|"

# row NAME SETUP CHECK [EXTRA...] -- WORKLOAD...: SETUP runs in the fresh
# directory (the model run's backing directory, the real filesystem's root)
# before recording; EXTRA are explore options for the model run (e.g.
# --ignore: on a real filesystem every file is in the image).
# Both runs report in JSON; the --fs run judges its groups against the model
# run (--compare-with: whether the model run had a group with the same
# checker message and labelled it possible on that filesystem), and
# bench/realfs_compare.py makes the cell and the list of groups.
row() {
  local name=$1 setup=$2 check=$3; shift 3
  local extra=()
  while [[ $1 != -- ]]; do extra+=("$1"); shift; done
  shift
  [[ -z ${ONLY:-} || $name =~ $ONLY ]] || return 0
  local backing cells=()
  backing=$(mktemp -d "$work/backing.XXXX")
  (cd "$backing" && SLOWFS_MOUNT=$backing sh -c "$setup")
  rm -f "$work/model.json" "$work"/real-*.json
  "$slowfs" explore --json "$work/model.json" --partial-ok --log-dir "$work" -j 2 --time-budget "$model_budget" \
    --max-states 100000 "${model_args[@]}" "${extra[@]}" --backing "$backing" --check "$check" -- "$@" >/dev/null 2>&1 || true
  local compare=()
  [[ -s $work/model.json ]] && compare=(--compare-with "$work/model.json")
  for fs in ext4 xfs btrfs; do
    /usr/bin/time -f %M -o "$work/rss" "$slowfs" explore --json "$work/real-$fs.json" --fs "$fs" \
      --fs-setup "$setup" --partial-ok --log-dir "$work" -j 2 --time-budget "$budget" --max-states 100000 \
      "${compare[@]}" --check "$check" -- "$@" >/dev/null 2>&1 || true
    cells+=("$(python3 bench/realfs_compare.py cell "$work/model.json" "$work/real-$fs.json" "$fs" "$(tail -n 1 "$work/rss")" \
      "$name" "$work/groups.md")")
  done
  printf '| %s | %s | %s | %s | %s |\n' "$name" "$(python3 bench/realfs_compare.py model "$work/model.json")" "${cells[@]}"
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
for sync in OFF FULL; do
  row "SQLite WAL, $sync, 3x50" "true" "python3 $apps/sqlite_check.py" --ignore '*-shm' -- python3 "$apps/sqlite_save.py" wal "$sync" 3 50
done
for mode in plain writemap; do
  row "LMDB (py-lmdb), 3 commits, $mode" "true" "$venv $apps/lmdb_check.py" -- "$venv" "$apps/lmdb_save.py" "--$mode"
done
row "GDBM, 5 synced keys" "true" "/usr/bin/python3 $apps/gdbm_check.py" -- /usr/bin/python3 "$apps/gdbm_save.py" 5
row "Mercurial, 2 commits" "sh $apps/hg_setup.sh ." "sh $apps/hg_check.sh" -- sh "$apps/hg_commits.sh"

echo
echo "Each group a kernel showed, and whether the model predicted it:"
echo
cat "$work/groups.md"

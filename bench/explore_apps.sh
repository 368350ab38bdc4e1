#!/usr/bin/env bash
# Benchmark and field table (not a test): `slowfs explore` on real applications'
# save paths, one run on this machine. Prints a Markdown table: operations, crash
# points, states checked, duplicates skipped, states/s, violations, how many of
# their groups can happen on xfs, on ext4 data=ordered and on btrfs (the
# rest only under strict POSIX), seconds. ONLY=REGEX runs the matching rows.
source "$(dirname "$0")/lib.sh"
# What the rows run; a missing one would give empty rows, so say so first.
missing=()
command -v hg >/dev/null || missing+=("hg (apt-get install mercurial)")
command -v git >/dev/null || missing+=("git")
/usr/bin/python3 -c 'import dbm.gnu' 2>/dev/null || missing+=("/usr/bin/python3's dbm.gnu (apt-get install python3-gdbm)")
.venv/bin/python3 -c 'import plyvel, lmdb' 2>/dev/null || missing+=(".venv with plyvel and lmdb (bash scripts/test.sh makes it)")
if ((${#missing[@]})); then
  printf 'bench/explore_apps.sh: missing: %s\n' "${missing[@]}" >&2
  exit 2
fi
apps=$PWD/fuse-slowfs/examples/apps
export_ex=$PWD/fuse-slowfs/examples/export
venv=$PWD/.venv/bin/python3
work=$(mktemp -d /var/tmp/slowfs-explore-apps.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "| workload | checker | options | ops | crash points with all high-yield states | all high-yield states after s | states checked | duplicates skipped | states/s | violations (groups) | groups possible on xfs | groups possible on ext4-ordered | groups possible on btrfs | verdict | seconds |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"
row() { # name checker-label options... -- explore args
  local name=$1 label=$2 opts=$3; shift 3
  # ONLY=REGEX runs the rows whose name matches (ONLY=SQLite).
  [[ -z ${ONLY:-} || $name =~ $ONLY ]] || return 0
  local start end out code
  start=$(date +%s.%N)
  code=0
  out=$("$slowfs" explore --partial-ok --log-dir "$work" "$@" 2>/dev/null) || code=$?
  end=$(date +%s.%N)
  local ops points states dups rate viol groups incomplete verdict hy ext4 xfs btrfs
  ops=$(sed -n 's/^ops recorded: //p' <<<"$out")
  points=$(sed -n 's/^crash points: .*(\([0-9]*\) in all)/\1/p' <<<"$out")
  incomplete=$(sed -n 's/^  high-yield states NOT all checked *\([0-9]*\).*/\1/p' <<<"$out")
  states=$(sed -n 's/^states checked: \([0-9]*\) distinct.*/\1/p' <<<"$out")
  dups=$(sed -n 's/^states checked: [0-9]* distinct (\([0-9]*\) skipped.*/\1/p' <<<"$out")
  rate=$(sed -n 's/^states checked: .*, \([0-9]*\)\/s$/\1/p' <<<"$out")
  viol=$(sed -n 's/^violations: //p' <<<"$out")
  groups=$(grep -c '^group ' <<<"$out" || true)
  xfs=$(grep -cE '^  can happen on: [^;]*xfs' <<<"$out" || true)
  ext4=$(grep -cE '^  can happen on: [^;]*ext4-ordered' <<<"$out" || true)
  btrfs=$(grep -cE '^  can happen on: [^;]*btrfs' <<<"$out" || true)
  verdict=$(sed -n 's/^verdict: \([^:(]*\).*/\1/p' <<<"$out")
  hy=$(sed -n 's/.*all of them after \([0-9]*\) s$/\1/p' <<<"$out")
  printf '| %s | %s | %s | %s | %s of %s | %s | %s | %s | %s | %s (%s) | %s of %s | %s of %s | %s of %s | %s | %.0f |\n' "$name" "$label" "$opts" "$ops" \
    "$((points - ${incomplete:-0}))" "$points" "${hy:--}" "$states" "$dups" "$rate" "$viol" "$groups" "$xfs" "$groups" "$ext4" "$groups" "$btrfs" "$groups" "$verdict" "$(echo "$end - $start" | bc)"
}

py_sqlite="python3 $apps/sqlite_check.py"
# SQLite, 12 transactions x 50 rows, in all four modes, to full high-yield
# coverage (persistent checker: a one-shot Python checker runs ~10 states/s).
for journal in rollback wal; do
  for sync in FULL OFF; do
    ignore=(); [[ $journal == wal ]] && ignore=(--ignore '*-shm')
    row "SQLite $journal, $sync, 12x50" "Python, persistent" "-j 2" -j 2 --persistent "${ignore[@]}" \
      --time-budget 10m --max-states 200000 \
      --check "$py_sqlite --persistent" -- python3 "$apps/sqlite_save.py" "$journal" "$sync" 12 50
  done
done
row "SQLite rollback, FULL, 3x50" "all 3 once returned" "--per-point" -j 2 --persistent --per-point --time-budget 1m --max-states 100000 \
  --check "$py_sqlite --persistent --complete 3" -- python3 "$apps/sqlite_save.py" rollback FULL 3 50
row "GDBM, 5 synced keys" "all 5 once returned" "--per-point" -j 2 --per-point \
  --check "/usr/bin/python3 $apps/gdbm_check.py --complete 5" -- /usr/bin/python3 "$apps/gdbm_save.py" 5
mkdir -p "$work/hg" && sh "$apps/hg_setup.sh" "$work/hg"
row "Mercurial 6.3, 2 commits" "hg recover; hg verify" "-j 2, 3 min" --backing "$work/hg" -j 2 --time-budget 3m --max-states 100000 \
  --check "sh $apps/hg_check.sh" -- sh "$apps/hg_commits.sh"
for fsync in "" fsync; do
  mkdir -p "$work/git$fsync" && sh "$apps/git_setup.sh" "$work/git$fsync" $fsync
  row "git, 2 commits ${fsync:+(core.fsync=all)}" "git fsck" "-j 2, 2 min" --backing "$work/git$fsync" -j 2 --time-budget 2m --max-states 100000 \
    --check "sh $apps/git_check.sh" -- sh "$apps/git_commits.sh"
done
for mode in plain writemap; do
  row "LMDB (py-lmdb), 3 commits, $mode" "open + prefix" "-j 2" -j 2 --time-budget 2m --max-states 100000 \
    --check "$venv $apps/lmdb_check.py" -- "$venv" "$apps/lmdb_save.py" "--$mode"
done
row "LevelDB (plyvel), 3 synced puts" "open + prefix" "-j 2" -j 2 --time-budget 2m --max-states 100000 \
  --check "$venv $apps/leveldb_check.py" -- "$venv" "$apps/leveldb_save.py"
for mode in in-place tmp-rename tmp-fsync-rename tmp-fsync-rename-dirsync; do
  mkdir -p "$work/json-$mode" && head -c 6000 /dev/zero | tr '\0' o > "$work/json-$mode/config.json"
  row "JSON export: $mode" "old or new" "--torn" --backing "$work/json-$mode" --torn -j 2 \
    --check "python3 $export_ex/check.py" -- python3 "$export_ex/export.py" "$mode"
done

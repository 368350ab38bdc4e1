#!/usr/bin/env bash
# Benchmark and field table (not a test): `slowfs explore` on real applications'
# save paths, one run on this machine. Prints a Markdown table: operations, crash
# points, states checked, duplicates skipped, states/s, violations, seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet -p fuse-slowfs
slowfs=$PWD/target/release/slowfs
apps=$PWD/fuse-slowfs/examples/apps
export_ex=$PWD/fuse-slowfs/examples/export
venv=$PWD/.venv/bin/python3
work=$(mktemp -d /var/tmp/slowfs-explore-apps.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "| workload | checker | options | ops | crash points with every high-yield state | states checked | duplicates skipped | states/s | violations | seconds |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"
row() { # name checker-label options... -- explore args
  local name=$1 label=$2 opts=$3; shift 3
  local start end out
  start=$(date +%s.%N)
  out=$("$slowfs" explore "$@" 2>/dev/null || true)
  end=$(date +%s.%N)
  local ops points states dups rate viol incomplete
  ops=$(sed -n 's/^ops recorded: //p' <<<"$out")
  points=$(sed -n 's/^crash points: .*(\([0-9]*\) in all)/\1/p' <<<"$out")
  incomplete=$(sed -n 's/.*high-yield states were not all checked: \([0-9]*\).*/\1/p' <<<"$out")
  states=$(sed -n 's/^states checked: \([0-9]*\) distinct.*/\1/p' <<<"$out")
  dups=$(sed -n 's/^states checked: [0-9]* distinct (\([0-9]*\) skipped.*/\1/p' <<<"$out")
  rate=$(sed -n 's/^states\/s: //p' <<<"$out")
  viol=$(sed -n 's/^violations: //p' <<<"$out")
  printf '| %s | %s | %s | %s | %s of %s | %s | %s | %s | %s | %.0f |\n' "$name" "$label" "$opts" "$ops" \
    "$((points - ${incomplete:-0}))" "$points" "$states" "$dups" "$rate" "$viol" "$(echo "$end - $start" | bc)"
}

py_sqlite="python3 $apps/sqlite_check.py"
# SQLite, 12 transactions x 50 rows: the issue's target workload.
row "SQLite rollback, FULL, 12x50" "Python, persistent" "-j 2, 3 min" -j 2 --persistent --time-budget 3m --max-states 100000 \
  --check "$py_sqlite --persistent" -- python3 "$apps/sqlite_save.py" rollback FULL 12 50
row "SQLite rollback, FULL, 12x50" "Python, one-shot" "-j 2, 3 min" -j 2 --time-budget 3m --max-states 100000 \
  --check "$py_sqlite" -- python3 "$apps/sqlite_save.py" rollback FULL 12 50
row "SQLite rollback, FULL, 12x50" "true" "-j 2, 3 min" -j 2 --time-budget 3m --max-states 100000 \
  --check true -- python3 "$apps/sqlite_save.py" rollback FULL 12 50
row "SQLite rollback, FULL, 12x50" "true" "--per-point (no dedupe), 3 min" -j 2 --per-point --time-budget 3m --max-states 100000 \
  --check true -- python3 "$apps/sqlite_save.py" rollback FULL 12 50
row "SQLite WAL, FULL, 12x50" "Python, persistent" "--ignore '*-shm'" -j 2 --persistent --ignore '*-shm' --time-budget 3m --max-states 100000 \
  --check "$py_sqlite --persistent" -- python3 "$apps/sqlite_save.py" wal FULL 12 50
row "SQLite rollback, OFF, 12x50" "Python, persistent" "" -j 2 --persistent --time-budget 1m --max-states 100000 \
  --check "$py_sqlite --persistent" -- python3 "$apps/sqlite_save.py" rollback OFF 12 50
row "SQLite rollback, FULL, 3x50" "all 3 once returned" "--per-point" -j 2 --persistent --per-point --time-budget 1m --max-states 100000 \
  --check "$py_sqlite --persistent --complete 3" -- python3 "$apps/sqlite_save.py" rollback FULL 3 50
row "SQLite rollback, EXTRA, 3x50" "all 3 once returned" "--per-point" -j 2 --persistent --per-point --time-budget 1m --max-states 100000 \
  --check "$py_sqlite --persistent --complete 3" -- python3 "$apps/sqlite_save.py" rollback EXTRA 3 50
for fsync in "" fsync; do
  mkdir -p "$work/git$fsync" && sh "$apps/git_setup.sh" "$work/git$fsync" $fsync
  row "git, 2 commits ${fsync:+(core.fsync=all)}" "git fsck" "-j 2, 2 min" --backing "$work/git$fsync" -j 2 --time-budget 2m --max-states 100000 \
    --check "sh $apps/git_check.sh" -- sh "$apps/git_commits.sh"
done
row "LevelDB (plyvel), 3 synced puts" "open + prefix" "-j 2" -j 2 --time-budget 2m --max-states 100000 \
  --check "$venv $apps/leveldb_check.py" -- "$venv" "$apps/leveldb_save.py"
for mode in in-place tmp-rename tmp-fsync-rename tmp-fsync-rename-dirsync; do
  mkdir -p "$work/json-$mode" && head -c 6000 /dev/zero | tr '\0' o > "$work/json-$mode/config.json"
  row "JSON export: $mode" "old or new" "--torn" --backing "$work/json-$mode" --torn -j 2 \
    --check "python3 $export_ex/check.py" -- python3 "$export_ex/export.py" "$mode"
done

#!/usr/bin/env bash
# Benchmark (not a test): `--profile nfs` under the NFS client's caching
# (`--cache nfs`) beside every call paying (`--cache every-call`) and native,
# side by side in one run. For each workload: wall time and the requests
# (RPCs) that reached the daemon, by kind. Workloads: a 4 MiB file read in
# 4 KiB reads, a 4 MiB write then close, 1,000 stats of a hot file, tar of a
# 500-file tree, a local git clone, git status, SQLite (100 committed
# inserts), cp -r of a 1,000-file tree (40 directories x 25 files), and ls -l
# and find of a 5,000-entry directory. Prints a Markdown table; the
# requests the Linux client sends for the same workloads are in docs/nfs.md.
# ONLY=REGEX runs the matching workloads. (Root is no longer needed for the read-ahead window: 128 KiB, the kernel default, as the Linux NFS client since 5.4.)
source "$(dirname "$0")/lib.sh"
work=$(mktemp -d /var/tmp/slowfs-nfs-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The fixtures, made once on the backing directory.
backing=$work/backing
mkdir -p "$backing/tree"
head -c 4M /dev/urandom > "$backing/big"
echo hot > "$backing/hot"
for d in $(seq 20); do
  mkdir -p "$backing/tree/d$d"
  for f in $(seq 25); do head -c $((RANDOM % 8192)) /dev/urandom > "$backing/tree/d$d/f$f"; done
done
mkdir -p "$backing/many" "$backing/copyme"
for f in $(seq 5000); do : > "$backing/many/f$f"; done
for d in $(seq 40); do
  mkdir -p "$backing/copyme/d$d"
  for f in $(seq 25); do head -c $((RANDOM % 8192)) /dev/urandom > "$backing/copyme/d$d/f$f"; done
done
git init -q "$backing/repo"
(cd "$backing/repo" && cp -r ../tree/d1 ../tree/d2 . && git add -A && git -c user.name=b -c user.email=b@b commit -qm one)

declare -A workloads=(
  [read-4MiB-in-4KiB]='dd if="$M/big" of=/dev/null bs=4k status=none'
  [write-4MiB-close]='dd if=/dev/zero of="$M/out" bs=4k count=1024 status=none; rm "$M/out"'
  [stat-hot-x1000]='python3 -c "import os,sys; [os.stat(sys.argv[1]) for _ in range(1000)]" "$M/hot"'
  [tar-500-files]='tar -cf /dev/null -C "$M" tree'
  [git-clone-local]='git clone -q --no-hardlinks "$M/repo" "$M/clone"; rm -rf "$M/clone"'
  [git-status]='git -C "$M/repo" status --short >/dev/null; git -C "$M/repo" status --short >/dev/null'
  [cp-r-1000-files]='cp -r "$M/copyme" "$M/copy"'
  [ls-l-5000]='ls -l "$M/many" >/dev/null'
  [find-5000]='find "$M/many" >/dev/null'
  [sqlite-100-commits]='python3 -c "
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute(\"create table t (x)\")
for i in range(100):
    db.execute(\"insert into t values (?)\", (i,))
    db.commit()
" "$M/s.db"; rm -f "$M/s.db"'
)
# What a workload leaves behind, removed after its time and requests are taken.
declare -A cleanup=([cp-r-1000-files]='rm -rf "$M/copy"')
order=(read-4MiB-in-4KiB write-4MiB-close stat-hot-x1000 tar-500-files git-clone-local git-status sqlite-100-commits cp-r-1000-files ls-l-5000 find-5000)

# run NAME MODE: prints "seconds requests-summary"
run() {
  local name=$1 mode=$2 script=${workloads[$1]} after=${cleanup[$1]:-:}
  sync; echo 3 > /proc/sys/vm/drop_caches
  if [[ $mode == native ]]; then
    local t0=$(date +%s.%N)
    M=$backing sh -c "$script"
    local t1=$(date +%s.%N)
    # Before the line is printed: the caller goes on once it has read it.
    M=$backing sh -c "$after"
    echo "$(echo "$t1 - $t0" | bc) -"
    return
  fi
  "$slowfs" run --quiet --seed 1 --backing "$backing" --profile nfs --cache "$mode" -- sh -c '
    M=$SLOWFS_MOUNT; t0=$(date +%s.%N)
    '"$script"'
    t1=$(date +%s.%N)
    '"$slowfs"' ctl "$M" stats --json > "'"$work"'/stats.json"
    '"$after"'
    echo "$(echo "$t1 - $t0" | bc)"' 2>/dev/null | tr '\n' ' '
  python3 - "$work/stats.json" <<'EOF'
import json, sys
ops = {o["op"]: o["count"] for o in json.load(open(sys.argv[1]))["ops"]}
total = sum(ops.values())
# Every kind that reached the daemon, most first.
print(f"{total} (" + ", ".join(f"{k} {n}" for k, n in sorted(ops.items(), key=lambda o: -o[1]) if n) + ")")
EOF
}

echo "| workload | native | --cache nfs: time, requests | --cache every-call: time, requests | requests every-call / nfs |"
echo "|---|---|---|---|---|"
for name in "${order[@]}"; do
  [[ -z ${ONLY:-} || $name =~ $ONLY ]] || continue
  read -r native _ < <(run "$name" native)
  read -r nfs_t nfs_r < <(run "$name" nfs)
  read -r every_t every_r < <(run "$name" every-call)
  ratio=$(python3 -c "print(f'{int(\"${every_r%% *}\") / max(1, int(\"${nfs_r%% *}\")):.1f}x')")
  printf '| %s | %.3f s | %.3f s, %s | %.3f s, %s | %s |\n' "$name" "$native" "$nfs_t" "$nfs_r" "$every_t" "$every_r" "$ratio"
done

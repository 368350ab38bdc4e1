#!/usr/bin/env bash
# Benchmark (not a test): slowfs side by side with other FUSE filesystems, in one
# run (issue 24). Targets (columns): native (a plain directory on the same disk),
# slowfs with no rules (kernel passthrough for unruled files), slowfs
# --passthrough never, slowfs with one rule that matches no file, slowfs with a
# rule that matches every read and write and never fires (`read,write delay=1ms
# p=0`: every file opened FOPEN_DIRECT_IO, each read and write through the daemon
# and its rule check: the daemon path; `delay=0` would not do, slowfs treats a zero
# delay as no rule and keeps kernel passthrough), libfuse's passthrough_ll (default
# options, and -o writeback), libfuse's passthrough_hp, and LazyFS (default config,
# faults off).
# Workloads (rows): fio seq write, 4k rand read, WAL-like 4k append + fdatasync,
# 4 writers of 4k rand write + fsync (bench/peers.fio); create, list, stat and
# unlink of FILES empty files in one directory; SQLite (python3's sqlite3) in WAL
# and rollback-journal mode, synchronous=FULL, one small INSERT per transaction;
# the daemon's CPU time (utime+stime from /proc/PID/stat) per 1,000 operations
# of the WAL-like and of the metadata workloads.
# ROUNDS interleaved rounds: each round visits every target (fresh backing
# directory and mount per visit), starting at another target. Medians, and the
# median of the per-round ratio to native. Writes bench/results/peers-DATE.json
# and docs/results/DATE-peers.md, and prints the Markdown.
#
# Usage: [SLOWFS=path] [PASSTHROUGH_LL=path] [PASSTHROUGH_HP=path] [LAZYFS=path]
#        [ROUNDS=3] [RUNTIME=4] [FILES=5000] [SQLITE_TX=1000] [DATE=YYYY-MM-DD]
#        [SUFFIX=name] [DROP_CACHES=1] [BASE=/var/tmp] [TARGETS=REGEX] bench/peers.sh
#   TARGETS         only the targets whose name matches (e.g. 'native|slowfs|slowfs-nfs')
#   SLOWFS          the slowfs binary (default target/release/slowfs; this script
#                   does not build it: cargo build --release -p slowfs)
#   PASSTHROUGH_LL  libfuse's example/passthrough_ll, PASSTHROUGH_HP its
#                   example/passthrough_hp (both from `apt-get source fuse3`,
#                   `meson setup build -Dexamples=true -Dutils=false && ninja -C build`)
#   LAZYFS          LazyFS's build/lazyfs (github.com/dsrhaslab/lazyfs; in no registry:
#                   build it by its own README; this repository keeps no recipe for
#                   it). A VERSION file beside the binary is quoted in the report. Its config is
#                   config/default.toml's (1 GiB cache, no eviction) with the fault
#                   FIFO in the run's directory and no injection: faults off
#   SUFFIX          appended to the output names (peers-DATE-SUFFIX.json,
#                   DATE-peers-SUFFIX.md), so that a second run on a day keeps the first
#   A peer whose variable is unset is left out of the table, with a line saying so.
#   BASE            where the run's directory is made (native and every backing
#                   directory are in it, so on the same filesystem); default /var/tmp.
#                   On an ext4 without a journal, creates skip inodes freed in the
#                   last minute, at a cost that grows with this benchmark's own
#                   unlinks: the create row then measures that (see
#                   docs/results/2026-12-04-peers.md); a journaled filesystem avoids it
#   DROP_CACHES=1 (default, needs root) writes 2 to /proc/sys/vm/drop_caches
#   (dentries and inodes, system-wide; not the page cache) before the list and
#   the stat phases, so that they start cold-ish; 0 leaves the caches alone.
# Needs: bash, python3 (sqlite3 module), fio, coreutils (sync -f, timeout), root or
# fusermount3 for the FUSE mounts. Took 12-15 minutes on a shared 2-core VM with the
# eight targets (no LazyFS), 17.4 minutes with the nine (LazyFS too).
# Every mount it makes is unmounted on every exit path (also on Ctrl-C). A daemon that
# crashes or hangs (a workload past RUNTIME*15+120 s is killed) fails its workloads:
# `fail` in their cells and a line under Failures; the run goes on.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
command_line="$0${*:+ $*}" # as given: the variables set, then the script
for v in BASE LAZYFS PASSTHROUGH_HP PASSTHROUGH_LL SLOWFS SUFFIX DATE DROP_CACHES SQLITE_TX FILES RUNTIME ROUNDS; do
  if [ -n "${!v:-}" ]; then command_line="$v=${!v} $command_line"; fi
done
rounds=${ROUNDS:-3}
export RUNTIME=${RUNTIME:-4}
files=${FILES:-5000}
sqlite_tx=${SQLITE_TX:-1000}
date=${DATE:-$(date +%F)}
drop=${DROP_CACHES:-1}
slowfs=${SLOWFS:-target/release/slowfs}
[ -x "$slowfs" ] || { echo "no slowfs binary at $slowfs (cargo build --release -p slowfs, or set SLOWFS)" >&2; exit 2; }
slowfs=$(realpath "$slowfs")
command -v fio >/dev/null || { echo "needs fio (apt-get install fio)" >&2; exit 2; }
out_json=bench/results/peers-$date${SUFFIX:+-$SUFFIX}.json
out_md=docs/results/$date-peers${SUFFIX:+-$SUFFIX}.md
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date +%s)

# name|label|how: "native", "slowfs ARGS...", "pll ARGS...", "php ARGS...", "lazyfs"
targets=("native|native|native"
         "slowfs|slowfs (default)|slowfs"
         "slowfs-never|slowfs --passthrough never|slowfs --passthrough never"
         "slowfs-nomatch|slowfs, 1 non-matching rule|slowfs --set 'read path=nomatch/** delay=1ms'"
         "slowfs-noop|slowfs, matching no-op rule (daemon path)|slowfs --set 'read,write delay=1ms p=0'"
         "slowfs-nfs|slowfs --cache nfs (the NFS client's caching, no rule)|slowfs --cache nfs")
left_out=()
if [ -n "${PASSTHROUGH_LL:-}" ]; then
  targets+=("pll|passthrough_ll|pll" "pll-wb|passthrough_ll -o writeback|pll -o writeback")
else
  left_out+=("passthrough_ll (default and -o writeback): left out, PASSTHROUGH_LL is not set")
fi
if [ -n "${PASSTHROUGH_HP:-}" ]; then targets+=("php|passthrough_hp|php")
else left_out+=("passthrough_hp: left out, PASSTHROUGH_HP is not set"); fi
if [ -n "${LAZYFS:-}" ]; then targets+=("lazyfs|LazyFS|lazyfs")
else left_out+=("LazyFS: left out, LAZYFS is not set"); fi
if [ -n "${TARGETS:-}" ]; then
  kept=()
  for t in "${targets[@]}"; do
    if [[ ${t%%|*} =~ ^($TARGETS)$ ]]; then kept+=("$t"); else left_out+=("${t%%|*}: left out, not in TARGETS"); fi
  done
  targets=("${kept[@]}")
fi
for l in "${left_out[@]}"; do echo "$l" >&2; done

work=$(mktemp -d "${BASE:-/var/tmp}/slowfs-peers.XXXXXX")
mnt="$work/mnt"
samples="$work/samples.jsonl"
: >"$samples"
pid=""   # the daemon of the target being measured
child="" # the workload running (under timeout, which is its own process group)
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$child" ]; then
    kill -TERM -- "-$child" 2>/dev/null || true
    kill -TERM "$child" 2>/dev/null || true
    wait "$child" 2>/dev/null || true
  fi
  if [ -n "$pid" ]; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do running "$pid" || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  if grep -q " $mnt " /proc/mounts; then umount -l "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null || true; fi
  if grep -q " $mnt " /proc/mounts; then echo "WARNING: $mnt is still mounted" >&2
  else rm -rf "$work"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# LazyFS's config/default.toml (at a47a5ba: the format its libpcache
# src/config/config.cpp reads), with the FIFO moved into the run's directory. No
# [[injection]] entries and nothing is written to the FIFO: no fault fires. LazyFS
# preallocates the whole cache (1 GiB) before it mounts (about 1 s here).
lazyfs_config() {
  cat >"$work/lazyfs.toml" <<EOF
[faults]
fifo_path="$work/lazyfs.fifo"
[cache]
apply_eviction=false
[cache.simple]
custom_size="1gb"
blocks_per_page=1
[filesystem]
log_all_operations=false
logfile=""
EOF
}

start_target() { # how... -> sets dir (and pid for a daemon)
  local kind=$1; shift
  rm -rf "$work/backing" "$work/native"
  mkdir -p "$work/backing" "$mnt" "$work/native"
  case $kind in
    native) dir="$work/native"; pid=""; return ;;
    slowfs) "$slowfs" mount --seed 1 --ctl-socket "$work/ctl.sock" --backing "$work/backing" "$@" "$mnt" 2>"$work/daemon.log" & ;;
    pll) "$PASSTHROUGH_LL" -f -o source="$work/backing" "$@" "$mnt" 2>"$work/daemon.log" & ;;
    php) "$PASSTHROUGH_HP" --foreground "$@" "$work/backing" "$mnt" 2>"$work/daemon.log" & ;;
    lazyfs) lazyfs_config # it logs to stdout
            "$LAZYFS" "$mnt" --config-path "$work/lazyfs.toml" -o allow_other -o modules=subdir \
              -o subdir="$work/backing" -f >"$work/daemon.log" 2>&1 & ;;
  esac
  pid=$!
  dir=$mnt
  for _ in $(seq 100); do grep -q " $mnt " /proc/mounts && return 0; sleep 0.1; done
  return 1
}

stop_target() {
  [ -z "$pid" ] && return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 100); do running "$pid" || break; sleep 0.1; done
  if running "$pid"; then
    echo "daemon $pid did not exit on SIGTERM within 10 s: SIGKILL" >&2; kill -KILL "$pid" || true
  fi
  wait "$pid" 2>/dev/null || true
  pid=""
  if grep -q " $mnt " /proc/mounts; then umount "$mnt" 2>/dev/null || umount -l "$mnt"; fi
}

tck=$(getconf CLK_TCK)
cpu_ms() { # utime+stime of the daemon (all its threads), in ms
  local st
  [ -z "$pid" ] && { echo 0; return; }
  # A daemon that just died gives 0, not an abort (set -e); the caller's alive check
  # records the failure.
  st=$(cat "/proc/$pid/stat" 2>/dev/null) || { echo 0; return; }
  sed 's/.*) //' <<<"$st" | awk -v t="$tck" '{print ($12 + $13) * 1000 / t}'
}
running() { # the daemon PID exists and is not a zombie (a crashed daemon is one until
  # waited for, and kill -0 succeeds on it)
  local st
  st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  st=${st##*) }
  [ "${st%% *}" != Z ]
}
alive() { # the target still serves: no daemon (native), or daemon running and mounted
  # (a crashed daemon's mount stays in /proc/mounts, hence running)
  [ -z "$pid" ] || { running "$pid" && grep -q " $mnt " /proc/mounts; }
}

sample() { # round target metric value|error TEXT
  python3 -c 'import json, sys
r, t, m, k, v = sys.argv[1:]
print(json.dumps({"round": int(r), "target": t, "metric": m, k: float(v) if k == "value" else v}))' "$@" >>"$samples"
}
record() { sample "$1" "$2" "$3" value "$4"; }
fail() { sample "$1" "$2" "$3" error "$4"; echo "FAILED: round $1 $2 $3: $4" >&2; }
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
calc() { python3 -c "print($1)"; }
settle() { sync -f "$work"; }
drop_caches() { [ "$drop" = 1 ] && { sync -f "$work"; echo 2 >/proc/sys/vm/drop_caches; } || true; }
limit=$((RUNTIME * 15 + 120)) # seconds any one workload may take before it counts as failed

# Runs a workload under timeout, stdout to $work/out, stderr to $work/err; in the
# background and waited for, so that Ctrl-C reaches the traps at once (timeout
# puts it in a process group of its own, which the terminal's ^C does not reach).
workload() {
  timeout -k 5 "$limit" "$@" >"$work/out" 2>"$work/err" </dev/null &
  child=$!
  local rc=0
  wait "$child" || rc=$?
  child=""
  return "$rc"
}
why() { # a one-line reason for a failed workload
  local daemon=""
  local timed=""
  case $1 in
    124) timed=" (timed out: still running after ${limit} s)" ;;
    137) timed=" (SIGKILL: still running ${limit} s + 5 s after its start, or killed)" ;;
  esac
  alive || daemon="; the daemon exited or the mount is gone: $(tail -c 200 "$work/daemon.log" 2>/dev/null)"
  echo "exit $1$timed: $(tail -c 300 "$work/err")$daemon" | tr '\n' ' '
}

run_fio() { # round name section: seqwrite|randread|wal|randwrite4
  local r=$1 name=$2 sec=$3 before after res rc=0
  alive || { fail "$r" "$name" "$sec" "target not serving before the run"; return 0; }
  settle
  before=$(cpu_ms)
  DIR=$dir workload fio --section="$sec" --output-format=json --output="$work/fio.json" bench/peers.fio || rc=$?
  if [ "$rc" != 0 ] || ! alive; then fail "$r" "$name" "$sec" "fio $(why "$rc")"; return 0; fi
  after=$(cpu_ms)
  res=$(python3 bench/peers_work.py fio "$work/fio.json")
  case $sec in
    seqwrite) record "$r" "$name" "$sec" "$(field "$res" mb_per_s)" ;;
    *) record "$r" "$name" "$sec" "$(field "$res" iops)" ;;
  esac
  if [ "$sec" = wal ] && [ -n "$pid" ]; then
    record "$r" "$name" cpu_wal "$(calc "($after - $before) / ($(field "$res" ops) / 1000)")"
  fi
  return 0
}

run_meta() { # round name
  local r=$1 name=$2 cpu=0 before after res phase rc
  alive || { fail "$r" "$name" create "target not serving before the run"; return 0; }
  settle
  for phase in create list stat unlink; do
    case $phase in list|stat) drop_caches ;; esac
    before=$(cpu_ms)
    rc=0
    workload python3 bench/peers_work.py "meta-$phase" "$dir" "$files" || rc=$?
    if [ "$rc" != 0 ] || ! alive; then
      fail "$r" "$name" "$phase" "$(why "$rc")"
      alive && { rm -rf "${dir:?}/meta" || true; }
      return 0
    fi
    after=$(cpu_ms)
    res=$(cat "$work/out")
    cpu=$(calc "$cpu + $after - $before")
    record "$r" "$name" "$phase" "$(calc "$(field "$res" seconds) * 1e6 / $files")"
  done
  [ -n "$pid" ] && record "$r" "$name" cpu_meta "$(calc "$cpu / (4 * $files / 1000)")"
  return 0
}

run_sqlite() { # round name mode
  local r=$1 name=$2 mode=$3 res rc=0
  alive || { fail "$r" "$name" "sqlite_$mode" "target not serving before the run"; return 0; }
  settle
  workload python3 bench/peers_work.py sqlite "$dir" "$mode" "$sqlite_tx" || rc=$?
  if [ "$rc" != 0 ] || ! alive; then fail "$r" "$name" "sqlite_$mode" "$(why "$rc")"; return 0; fi
  res=$(cat "$work/out")
  record "$r" "$name" "sqlite_$mode" "$(calc "$(field "$res" ops) / $(field "$res" seconds)")"
}

count=${#targets[@]}
for round in $(seq "$rounds"); do
  # Each round starts at another target (spread over the list), so none always
  # follows the same one, and a noisy minute lands on every target alike.
  start=$(( (round - 1) * count / rounds ))
  for k in $(seq 0 $((count - 1))); do
    i=$(( (k + start) % count ))
    IFS='|' read -r name label how <<<"${targets[$i]}"
    echo "round $round/$rounds: $label ($(cut -d' ' -f1-3 /proc/loadavg))" >&2
    settle
    # shellcheck disable=SC2086 # $how is a word list on purpose (\ keeps a space)
    if ! eval "start_target $how"; then
      fail "$round" "$name" mount "did not mount within 10 s: $(tail -c 300 "$work/daemon.log" | tr '\n' ' ')"
      stop_target
      continue
    fi
    run_fio "$round" "$name" seqwrite
    run_fio "$round" "$name" randread
    # (|| true: a daemon that dies after the check must not abort the run: set -e)
    if alive; then rm -f "$dir/seq.dat" || true; fi
    run_fio "$round" "$name" wal
    if alive; then rm -f "$dir/wal.dat" || true; fi
    run_fio "$round" "$name" randwrite4
    if alive; then rm -f "$dir"/randwrite4.* || true; fi
    run_meta "$round" "$name"
    run_sqlite "$round" "$name" wal
    run_sqlite "$round" "$name" delete
    stop_target
  done
done

load_after=$(cut -d' ' -f1-3 /proc/loadavg)
elapsed=$(( $(date +%s) - started ))
dirty=""
[ -n "$(git -C "$repo" --no-optional-locks status --porcelain --untracked-files=no)" ] && dirty=" (with uncommitted changes)"
versions=("slowfs: $("$slowfs" --version), binary $slowfs (sha256 $(sha256sum "$slowfs" | cut -c1-12)); bench scripts from checkout $(git -C "$repo" rev-parse --short HEAD)$dirty")
if [ -n "${PASSTHROUGH_LL:-}" ]; then
  versions+=("passthrough_ll: $("$PASSTHROUGH_LL" -V 2>&1 | grep -i 'library version' | tr -s ' ') ($PASSTHROUGH_LL)")
fi
if [ -n "${PASSTHROUGH_HP:-}" ]; then
  lib=$(ldd "$PASSTHROUGH_HP" | awk '/libfuse3/ {print $3}')
  versions+=("passthrough_hp: linked with $(basename "$(realpath "$lib")") ($PASSTHROUGH_HP)")
fi
if [ -n "${LAZYFS:-}" ]; then
  lv=$(cat "$(dirname "$LAZYFS")/VERSION" 2>/dev/null ||
       git -C "$(dirname "$LAZYFS")" describe --always 2>/dev/null || echo 'version unknown')
  versions+=("LazyFS: $lv ($LAZYFS)")
fi
versions+=("$(fio --version)" "SQLite $(python3 -c 'import sqlite3; print(sqlite3.sqlite_version)') (Python $(python3 -c 'import platform; print(platform.python_version())'))")

cold=""
[ "$drop" = 1 ] && cold=" Cold-ish: before list and before stat, \`sync -f\` of the disk and \`echo 2 > /proc/sys/vm/drop_caches\` (dentries and inodes, system-wide; the page cache stays), so the kernel has to look every name up again (through the daemon on FUSE targets)."
how=("fio (bench/peers.fio, psync, ${RUNTIME} s time-based per job, one fio run per job): seq write = 64 KiB writes to a 256 MiB file, MB/s = 10^6 bytes/s including the end fsync; rand read = 4 KiB random reads of that file (from the page cache); WAL-like = 4 KiB appends to a fresh file, fdatasync after each, one job; 4 jobs = four writers, each 4 KiB random writes + fsync after each on its own 32 MiB file, IOPS of all four.")
how+=("metadata: $files empty files in one directory (bench/peers_work.py): create (open O_CREAT|O_EXCL + close), then list (one os.listdir of the directory, µs per entry), then stat (os.lstat of each by path), then unlink; each phase is a fresh python3 process, timed inside it.$cold")
how+=("SQLite: python3's sqlite3, a fresh database per run, PRAGMA synchronous=FULL, $sqlite_tx transactions of one INSERT of a 100-byte blob each (BEGIN/INSERT/COMMIT), journal_mode=WAL and journal_mode=DELETE (rollback journal); tx/s over the loop only.")
how+=("daemon CPU: utime+stime of the daemon process (all threads; /proc/PID/stat, ${tck} ticks/s, so 10 ms resolution) before and after the workload: the WAL-like fio run per 1,000 write+fdatasync pairs, and the four metadata phases added up per 1,000 operations (4 x $files: each create, listed entry, stat and unlink counts one). native: no daemon (–).")

# Everything goes to python through the environment and argv, so no quoting matters.
INFO_DATE=$date INFO_NPROC=$(nproc) INFO_ROUNDS=$rounds INFO_LOAD_BEFORE=$load_before INFO_LOAD_AFTER=$load_after \
INFO_ELAPSED=$elapsed INFO_FILES=$files INFO_SQLITE_TX=$sqlite_tx INFO_COMMAND=$command_line \
INFO_DISK="$(findmnt -no FSTYPE,SOURCE --target "$work" | tr -s ' ') ($work)" \
python3 - "$work/info.json" "${#targets[@]}" "${targets[@]}" "${#left_out[@]}" "${left_out[@]}" \
    "${#versions[@]}" "${versions[@]}" "${how[@]}" <<'PY'
import json, os, platform, sys
path, rest = sys.argv[1], sys.argv[2:]
def take():
    global rest
    n = int(rest[0]); got, rest = rest[1:1 + n], rest[1 + n:]
    return got
targets = [dict(zip(("name", "label", "how"), t.split("|"))) for t in take()]
e = os.environ
info = {"date": e["INFO_DATE"], "kernel": platform.release(), "nproc": int(e["INFO_NPROC"]),
        "rounds": int(e["INFO_ROUNDS"]), "runtime_s": int(e["RUNTIME"]),
        "files": int(e["INFO_FILES"]), "sqlite_tx": int(e["INFO_SQLITE_TX"]),
        "disk": e["INFO_DISK"], "load_before": e["INFO_LOAD_BEFORE"],
        "load_after": e["INFO_LOAD_AFTER"], "elapsed_s": int(e["INFO_ELAPSED"]),
        "command": e["INFO_COMMAND"], "targets": targets, "left_out": take(),
        "versions": take(), "how": rest}
json.dump(info, open(path, "w"), indent=1)
PY
mkdir -p bench/results docs/results
python3 bench/peers_work.py report "$samples" "$work/info.json" "$out_json" "$out_md"
echo "(json: $out_json, page: $out_md; $((elapsed / 60)) min $((elapsed % 60)) s; load average before $load_before, after $load_after)" >&2

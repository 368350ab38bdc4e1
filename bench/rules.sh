#!/usr/bin/env bash
# The cost of rules that do not match: reads of one file through a slowfs mount
# (--passthrough never, so every read reaches the daemon) with N rules on other
# paths, for N = 0, 100, 1000, 10000. Prints µs per 4 KiB pread and the ratio to
# N = 0, and the daemon's RSS.   bench/rules.sh [READS]
source "$(dirname "$0")/lib.sh"
reads=${1:-20000}
bin=$slowfs
work=$(mktemp -d)
trap 'for m in "$work"/m*; do umount "$m" 2>/dev/null || true; done; rm -rf "$work"' EXIT
base=""
printf '%-8s %10s %8s %10s\n' rules "us/read" ratio "RSS MiB"
for n in 0 100 1000 10000; do
  mkdir -p "$work/b$n" "$work/m$n"
  head -c 65536 /dev/urandom > "$work/b$n/data"
  python3 - "$n" > "$work/rules$n.toml" <<'PY'
import sys
n = int(sys.argv[1])
print("seed = 1")
for i in range(n):
    print(f'[[rule]]\nops = "read"\npath = "other/file-{i}"\ndelay = "1ms"')
PY
  SLOWFS_RUNTIME_DIR="$work/run$n" $bin mount --background --passthrough never \
    --config "$work/rules$n.toml" --backing "$work/b$n" "$work/m$n" 2>/dev/null
  us=$(python3 - "$work/m$n/data" "$reads" <<'PY'
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT) if False else os.open(sys.argv[1], os.O_RDONLY)
n = int(sys.argv[2])
os.pread(fd, 4096, 0)
t = time.perf_counter()
for i in range(n):
    # a different offset each time, past the page cache: FUSE direct reads need
    # a rule; without one, drop the cache with posix_fadvise.
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.pread(fd, 4096, (i % 16) * 4096)
print(f"{(time.perf_counter() - t) / n * 1e6:.1f}")
PY
)
  pid=$(pgrep -f "slowfs mount --background --passthrough never --config $work/rules$n.toml" | head -1)
  rss=$(awk '/VmRSS/ {printf "%.1f", $2/1024}' /proc/"$pid"/status 2>/dev/null || echo "?")
  [[ -z $base ]] && base=$us
  printf '%-8s %10s %8s %10s\n' "$n" "$us" "$(python3 -c "print(f'{$us/$base:.2f}')")" "$rss"
  umount "$work/m$n"
done

# Memory per rule with realistic globs: 10,000 rules of the form
# `read,write,getattr path=dirN/**/*.db delay=1ms` (one per directory), loaded
# from a config; RSS before, with them, after stat/read traffic on 200 of
# those directories and 200 others from 4 threads, after `ctl clear`, and over
# three more load + clear cycles through `ctl set` (1,000 rules each).
echo
echo "memory: 10,000 rules 'read,write,getattr path=dirN/**/*.db delay=1ms'"
mkdir -p "$work/mb" "$work/mm"
for d in $(seq 0 199); do mkdir -p "$work/mb/dir$d/x" "$work/mb/other$d"; echo d > "$work/mb/dir$d/x/f.db"; echo d > "$work/mb/other$d/f.db"; done
python3 - > "$work/realistic.toml" <<'PY'
print("seed = 1")
for i in range(10000):
    print(f'[[rule]]\nops = "read,write,getattr"\npath = "dir{i}/**/*.db"\ndelay = "1ms"')
PY
rss_of() { awk '/VmRSS/ {printf "%.1f", $2/1024}' /proc/"$1"/status; }
SLOWFS_RUNTIME_DIR="$work/runm" $bin mount --background --passthrough never --backing "$work/mb" "$work/mm" 2>/dev/null
pid=$(pgrep -f "slowfs mount --background --passthrough never --backing $work/mb" | head -1)
printf '%-44s %8s MiB\n' "no rules" "$(rss_of "$pid")"
umount "$work/mm"
SLOWFS_RUNTIME_DIR="$work/runm" $bin mount --background --passthrough never --config "$work/realistic.toml" --backing "$work/mb" "$work/mm" 2>/dev/null
pid=$(pgrep -f "slowfs mount --background --passthrough never --config $work/realistic.toml" | head -1)
printf '%-44s %8s MiB\n' "10,000 rules loaded" "$(rss_of "$pid")"
traffic() {
  python3 - "$work/mm" <<'PY'
import os, sys, threading
root = sys.argv[1]
def work(k):
    for d in range(k, 200, 4):
        for top in (f"dir{d}", f"other{d}"):
            p = os.path.join(root, top, "x/f.db" if top.startswith("dir") else "f.db")
            os.stat(p); open(p, "rb").read()
ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
PY
}
traffic
printf '%-44s %8s MiB\n' "after traffic on 400 directories, 4 threads" "$(rss_of "$pid")"
SLOWFS_RUNTIME_DIR="$work/runm" $bin ctl "$work/mm" clear >/dev/null
printf '%-44s %8s MiB\n' "after ctl clear" "$(rss_of "$pid")"
for cycle in 1 2 3; do
  for i in $(seq 0 999); do echo "{\"cmd\":\"set\",\"rule\":\"read,write,getattr path=dir$i/**/*.db delay=1ms\"}"; done \
    | python3 -c "
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f = s.makefile('rwb')
for line in sys.stdin:
    f.write(line.encode()); f.flush(); f.readline()
" "$(ls "$work"/runm/*.sock)"
  traffic
  a=$(rss_of "$pid")
  SLOWFS_RUNTIME_DIR="$work/runm" $bin ctl "$work/mm" clear >/dev/null
  printf '%-44s %8s MiB (%s MiB with 1,000 rules and traffic)\n' "cycle $cycle: 1,000 ctl set, traffic, clear" "$(rss_of "$pid")" "$a"
done
umount "$work/mm"

#!/usr/bin/env bash
# The cost of rules that do not match: reads of one file through a slowfs mount
# (--passthrough never, so every read reaches the daemon) with N rules on other
# paths, for N = 0, 100, 1000, 10000. Prints µs per 4 KiB pread and the ratio to
# N = 0, and the daemon's RSS.   bench/rules.sh [READS]
set -euo pipefail
cd "$(dirname "$0")/.."
reads=${1:-20000}
bin=target/release/slowfs
[[ -x $bin ]] || cargo build --release --quiet --bin slowfs
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

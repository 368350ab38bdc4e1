#!/usr/bin/env bash
# SIGKILL of `slowfs run` while readers are parked on a `read hang` rule, RUNS
# times in a row: counts the dead mounts left behind (the unmount guard must
# leave none). Half the kills hit the daemon alone, half its whole process
# group (`kill -9 -PGID`, as a CI timeout does). BUSY busy-loop processes run
# meanwhile (the machine under load).
#   bench/sigkill_mounts.sh [RUNS=200] [BUSY=2]
source "$(dirname "$0")/lib.sh"
runs=${1:-200}
busy=${2:-2}
bin=$slowfs
work=$(mktemp -d)
loops=()
cleanup() {
  for pid in "${loops[@]}"; do kill "$pid" 2>/dev/null || true; done
  "$bin" umount --all >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq "$busy"); do
  sh -c 'while :; do :; done' &
  loops+=($!)
done
echo "bench/sigkill_mounts.sh: $runs SIGKILLs of 'slowfs run' with parked readers, $busy busy loops, $(nproc) cores"
left=0
slow=0
for i in $(seq "$runs"); do
  backing=$work/b$i
  mkdir -p "$backing"
  echo data > "$backing/f"
  setsid "$bin" run --backing "$backing" --set 'read hang' -- \
    sh -c 'cat "$SLOWFS_MOUNT/f" & cat "$SLOWFS_MOUNT/f" & cat "$SLOWFS_MOUNT/f" & sleep 60' \
    >/dev/null 2>&1 &
  pid=$!
  # Mounted (the source is the backing directory), then the readers park.
  for _ in $(seq 500); do
    grep -q "^$backing " /proc/mounts && break
    sleep 0.01
  done
  sleep "0.0$((RANDOM % 10))"
  if ((i % 2)); then kill -9 "$pid"; else kill -9 -- "-$pid"; fi
  wait "$pid" 2>/dev/null || true
  gone=0
  for _ in $(seq 500); do
    grep -q "^$backing " /proc/mounts || { gone=1; break; }
    sleep 0.01
  done
  if ((!gone)); then
    left=$((left + 1))
    echo "run $i: a mount was left behind: $(grep "^$backing " /proc/mounts)"
    "$bin" umount --all >/dev/null 2>&1 || true
  fi
  pkill -9 -f "cat $work/" 2>/dev/null || true
done
echo "$runs runs: $left mount(s) left behind"
((left == 0))

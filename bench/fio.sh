#!/usr/bin/env bash
# Benchmark (not a test): fio on native disk vs slowfs with no rules (kernel
# passthrough, and --passthrough never) vs slowfs `nfs`: one job file, one run of
# ROUNDS rounds that visit the targets in turn, so a noisy minute of the shared
# machine lands on every target alike. Prints the median MiB/s per job and target,
# its ratio to native, and the spread of that ratio over the rounds.
# Usage: [ROUNDS=3] [RUNTIME=4] bench/fio.sh [OUT.json]   (needs fio: apt-get install fio)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/fio-results.json}
rounds=${ROUNDS:-3}
export RUNTIME=${RUNTIME:-4}
cargo build --release --quiet -p fuse-slowfs
slowfs=target/release/slowfs
work=$(mktemp -d /var/tmp/slowfs-fio.XXXXXX)
mnt=""
cleanup() {
  [ -n "$mnt" ] && grep -q " $mnt " /proc/mounts && $slowfs umount "$mnt" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

run_fio() { # name dir
  rm -f "$2"/*.dat
  DIR=$2 fio --output-format=json --output="$work/$1.$round.json" bench/fio.fio >/dev/null
}

mount_slowfs() { # name [slowfs options...]
  local name=$1; shift
  mkdir -p "$work/$name-backing" "$work/$name-mnt"
  mnt="$work/$name-mnt"
  $slowfs mount --seed 1 --backing "$work/$name-backing" "$@" "$mnt" 2>"$work/$name.log" &
  pid=$!
  for _ in $(seq 50); do grep -q " $mnt " /proc/mounts && return; sleep 0.1; done
  echo "slowfs did not mount; log:" >&2; cat "$work/$name.log" >&2; exit 1
}

unmount_slowfs() {
  kill -TERM "$pid"; wait "$pid" || true; mnt=""
}

mkdir -p "$work/native"
for round in $(seq "$rounds"); do
  echo "round $round/$rounds: native" >&2; run_fio native "$work/native"
  echo "round $round/$rounds: slowfs, no rules (kernel passthrough)" >&2
  mount_slowfs norules; run_fio norules "$mnt"; unmount_slowfs
  echo "round $round/$rounds: slowfs, no rules, --passthrough never" >&2
  mount_slowfs daemon --passthrough never; run_fio daemon "$mnt"; unmount_slowfs
  echo "round $round/$rounds: slowfs --profile nfs" >&2
  mount_slowfs nfs --profile nfs; run_fio nfs "$mnt"; unmount_slowfs
done

python3 - "$work" "$out" "$rounds" <<'PY'
import json, statistics, sys
work, out, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
targets = ["native", "norules", "daemon", "nfs"]
samples = {}  # (job, target) -> [MiB/s per round]
for t in targets:
    for r in range(1, rounds + 1):
        for job in json.load(open(f"{work}/{t}.{r}.json"))["jobs"]:
            io = job["write"] if job["write"]["io_bytes"] else job["read"]
            samples.setdefault((job["jobname"], t), []).append(io["bw_bytes"] / 2**20)
jobs = list(dict.fromkeys(job for job, _ in samples))
print(f"median of {rounds} rounds; ratio = target / native in the same round, median (min-max)")
print(f"{'job':<22}" + "".join(f"{t + ' MiB/s':>15}{'x native':>18}" for t in targets))
result = []
for job in jobs:
    line = f"{job:<22}"
    for t in targets:
        mib = samples[(job, t)]
        ratios = [m / n for m, n in zip(mib, samples[(job, "native")])]
        med = statistics.median(ratios)
        spread = f"{med:.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
        line += f"{statistics.median(mib):>15.1f}{spread:>18}"
        result.append({"job": job, "target": t, "mib_per_s": mib, "ratio_to_native": ratios,
                       "median_ratio": med})
    print(line)
json.dump(result, open(out, "w"), indent=1)
print(f"(json: {out})")
PY

#!/usr/bin/env bash
# Benchmark (not a test): fio on native disk vs slowfs with no rules vs slowfs `nfs`,
# one job file, one run; prints MiB/s and IOPS per job and the ratio to native.
# Usage: bench/fio.sh [OUT.json]   (needs fio: apt-get install fio)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/fio-results.json}
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
  DIR=$2 fio --output-format=json --output="$work/$1.json" bench/fio.fio >/dev/null
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
echo "fio: native" >&2; run_fio native "$work/native"
echo "fio: slowfs, no rules (kernel passthrough)" >&2; mount_slowfs norules; run_fio norules "$mnt"; unmount_slowfs
echo "fio: slowfs, no rules, --passthrough never" >&2; mount_slowfs daemon --passthrough never; run_fio daemon "$mnt"; unmount_slowfs
echo "fio: slowfs --profile nfs" >&2; mount_slowfs nfs --profile nfs; run_fio nfs "$mnt"; unmount_slowfs

python3 - "$work" "$out" <<'PY'
import json, sys
work, out = sys.argv[1], sys.argv[2]
targets = ["native", "norules", "daemon", "nfs"]
rows = {}
for t in targets:
    for job in json.load(open(f"{work}/{t}.json"))["jobs"]:
        io = job["write"] if job["write"]["io_bytes"] else job["read"]
        rows.setdefault(job["jobname"], {})[t] = (io["bw_bytes"] / 2**20, io["iops"])
print(f"{'job':<22}" + "".join(f"{t + ' MiB/s':>16}{'x native':>10}" for t in targets))
result = []
for job, by_target in rows.items():
    base = by_target["native"][0]
    line = f"{job:<22}"
    for t in targets:
        mib, iops = by_target[t]
        line += f"{mib:>16.1f}{mib / base:>10.2f}"
        result.append({"job": job, "target": t, "mib_per_s": mib, "iops": iops, "ratio_to_native": mib / base})
    print(line)
json.dump(result, open(out, "w"), indent=1)
print(f"(json: {out})")
PY

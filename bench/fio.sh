#!/usr/bin/env bash
# Benchmark (not a test): one fio job file (bench/fio.fio) on several targets, in
# one run of ROUNDS rounds that visit the targets in turn (each round from another
# starting target, after a sync), so that a noisy minute of the shared machine lands
# on every target alike. Prints the median MiB/s per job
# and target, its ratio to native in the same round, and that ratio's spread.
#
# Usage: [ROUNDS=3] [RUNTIME=4] [PASSTHROUGH_LL=path] bench/fio.sh [table|tuning] [OUT.json]
#   table  (default) native, slowfs with no rules (kernel passthrough), the same with
#          --passthrough never (every request through the daemon), slowfs --profile nfs
#   tuning the daemon path with each FUSE setting of `slowfs mount --tune` switched
#          from its default, one at a time
#   PASSTHROUGH_LL=path/to/passthrough_ll adds libfuse's C example (default options,
#          and -o writeback) to the table, e.g. built from `apt-get source fuse3`.
# Needs fio (apt-get install fio).
source "$(dirname "$0")/lib.sh"
set_name=${1:-table}
out=${2:-target/fio-$set_name.json}
rounds=${ROUNDS:-3}
export RUNTIME=${RUNTIME:-4}

# name|how: "native", "slowfs ARGS...", or "pll ARGS..." (libfuse passthrough_ll)
case $set_name in
  table)
    targets=("native|native" "passthrough|slowfs" "daemon|slowfs --passthrough never"
             "nfs|slowfs --profile nfs")
    if [ -n "${PASSTHROUGH_LL:-}" ]; then
      targets+=("passthrough_ll|pll" "passthrough_ll-wb|pll -o writeback")
    fi ;;
  tuning)
    never="slowfs --passthrough never"
    targets=("native|native" "daemon|$never" "max-write=128KiB|$never --tune max-write=128KiB"
             "max-background=12|$never --tune max-background=12"
             "writeback-cache=off|$never --tune writeback-cache=off"
             "kill-priv-v2=off|$never --tune kill-priv-v2=off"
             "threads=1|$never --tune threads=1" "threads=2|$never --tune threads=2"
             "threads=8|$never --tune threads=8" "clone-fd=on|$never --tune clone-fd=on"
             "passthrough|slowfs" "passthrough,kill-priv-v2=off|slowfs --tune kill-priv-v2=off") ;;
  *) echo "unknown target set '$set_name' (table or tuning)" >&2; exit 2 ;;
esac

work=$(mktemp -d /var/tmp/slowfs-fio.XXXXXX)
mnt="$work/mnt"
pid=""
cleanup() {
  [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  grep -q " $mnt " /proc/mounts && umount -l "$mnt" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

start_target() { # how -> sets dir (and pid for a daemon)
  local kind=$1; shift
  rm -rf "$work/backing" "$mnt" "$work/native"
  mkdir -p "$work/backing" "$mnt" "$work/native"
  case $kind in
    native) dir="$work/native"; return ;;
    slowfs) $slowfs mount --seed 1 --backing "$work/backing" "$@" "$mnt" 2>"$work/daemon.log" & ;;
    pll) "$PASSTHROUGH_LL" -f -o source="$work/backing" "$@" "$mnt" 2>"$work/daemon.log" & ;;
  esac
  pid=$!
  dir=$mnt
  for _ in $(seq 50); do grep -q " $mnt " /proc/mounts && return; sleep 0.1; done
  echo "$kind did not mount; log:" >&2; cat "$work/daemon.log" >&2; exit 1
}

stop_target() {
  [ -z "$pid" ] && return
  kill -TERM "$pid"; wait "$pid" || true; pid=""
  grep -q " $mnt " /proc/mounts && umount "$mnt" || true
}

count=${#targets[@]}
for round in $(seq "$rounds"); do
  # Each round starts at another target, so none always follows the same one.
  for k in $(seq 0 $((count - 1))); do
    i=$(( (k + round - 1) % count ))
    name=${targets[$i]%%|*}; how=${targets[$i]#*|}
    echo "round $round/$rounds: $name" >&2
    sync # the previous target's dirty pages must not be written back on this one's time
    # shellcheck disable=SC2086 # $how is a word list on purpose
    start_target $how
    DIR=$dir fio --output-format=json --output="$work/$i.$round.json" bench/fio.fio >/dev/null
    stop_target
  done
done

names=()
for t in "${targets[@]}"; do names+=("${t%%|*}"); done
python3 - "$work" "$out" "$rounds" "${names[@]}" <<'PY'
import json, statistics, sys
work, out, rounds, targets = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
samples = {}  # (job, target) -> [MiB/s per round]
for i, t in enumerate(targets):
    for r in range(1, rounds + 1):
        for job in json.load(open(f"{work}/{i}.{r}.json"))["jobs"]:
            io = job["write"] if job["write"]["io_bytes"] else job["read"]
            samples.setdefault((job["jobname"], t), []).append(io["bw_bytes"] / 2**20)
jobs = list(dict.fromkeys(job for job, _ in samples))
print(f"fio, median of {rounds} rounds of time-based jobs; "
      "x native = target / native in the same round: median (min-max)")
width = max(len(t) for t in targets) + 2
print(f"{'target':<{width}}" + "".join(f"{job:>36}" for job in jobs))
result = []
for t in targets:
    line = f"{t:<{width}}"
    for job in jobs:
        mib = samples[(job, t)]
        ratios = [m / n for m, n in zip(mib, samples[(job, "native")])]
        med = statistics.median(ratios)
        line += f"{statistics.median(mib):>12.1f} MiB/s {med:>5.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
        result.append({"job": job, "target": t, "mib_per_s": mib, "ratio_to_native": ratios,
                       "median_ratio": med})
    print(line)
json.dump(result, open(out, "w"), indent=1)
print(f"(json: {out})")
PY

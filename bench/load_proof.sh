#!/usr/bin/env bash
# Timing verdicts under CPU oversubscription: runs the timing-based suites
# (loop-lag, cancel) for every engine the repo drives, RUNS times in a row, with
# BUSY busy-loop processes on the machine (default 14: 7x oversubscription on
# 2 cores), and counts how often each cell's status differs from the first run.
#   bench/load_proof.sh [RUNS] [BUSY]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
busy=${2:-14}
bin=target/release/slowfs-conformance
cargo build --release --quiet --bin slowfs-conformance
py=.venv/bin/python3
drv="$PWD/drivers/python/slowfs_driver.py"
engines=(--engine uring --engine aio --engine threadpool --engine tokio-fs --engine blocking)
for lib in to_thread aiofiles ayafileio; do engines+=(--engine "cmd:$py $drv --lib $lib"); done
for caio in uring linux thread python; do engines+=(--engine "cmd:$py $drv --lib aiofile --caio $caio"); done
for api in promises callbacks; do engines+=(--engine "cmd:node $PWD/drivers/node/slowfs_driver.mjs --api $api"); done
for c in blocking ignore-cancel; do engines+=(--engine "cmd:$py $PWD/drivers/python/controls.py --control $c"); done
out=$(mktemp -d)
pids=()
for _ in $(seq "$busy"); do sh -c 'while :; do :; done' & pids+=($!); done
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
echo "load: $busy busy loops on $(nproc) cores; results in $out" >&2
for i in $(seq "$runs"); do
  start=$(date +%s)
  SLOWFS_DRIVER_TIMEOUT_MS=10000 "$bin" run "${engines[@]}" --suite loop-lag --suite cancel \
    --seed "$i" --cases 8 --json "$out/run-$i.json" > "$out/run-$i.txt" 2> "$out/run-$i.err" || true
  echo "run $i: $(( $(date +%s) - start )) s, load $(cut -d' ' -f1 /proc/loadavg), $(grep '^result' "$out/run-$i.txt")" >&2
done
python3 - "$out" "$runs" <<'PY'
import json, sys
out, runs = sys.argv[1], int(sys.argv[2])
cells = {}
for i in range(1, runs + 1):
    for c in json.load(open(f"{out}/run-{i}.json"))["cells"]:
        cells.setdefault((c["suite"], c["engine"]), []).append(c)
flips = 0
print(f"{'suite':<10} {'engine':<26} {'status (every run)':<28} max lag ms (min..max)")
for (suite, engine), runs_ in sorted(cells.items()):
    statuses = {c["status"] for c in runs_}
    unexpected = sum(1 for c in runs_ if c.get("unexpected"))
    lags = [c["max_lag_ms"] for c in runs_ if c.get("max_lag_ms") is not None]
    lag = f"{min(lags):.0f}..{max(lags):.0f}" if lags else "-"
    mark = "" if len(statuses) == 1 and not unexpected else "  <-- FLIPPED/UNEXPECTED"
    flips += bool(mark)
    print(f"{suite:<10} {engine:<26} {'/'.join(sorted(statuses)) + f' x{len(runs_)}':<28} {lag}{mark}")
print(f"\n{flips} cell(s) changed verdict or were unexpected over {runs} runs")
PY

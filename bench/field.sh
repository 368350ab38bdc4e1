#!/usr/bin/env bash
# Benchmark (not a test): the field notes' measurements on local disk and slowfs.
# Needs the venv .ci/run makes (.venv with aiofiles).
source "$(dirname "$0")/lib.sh"
py=.venv/bin/python3
local=$(mktemp -d /var/tmp/slowfs-field.XXXXXX)
trap 'rm -rf "$local"' EXIT
echo "== 20,000 short lines: local disk (seconds)"
$py bench/python_field.py lines "$local"
echo "== 20,000 short lines: slowfs, every write delayed 200us (seconds)"
"$slowfs" run --quiet --set "write delay=200us" -- sh -c "$py bench/python_field.py lines \"\$SLOWFS_MOUNT\""
echo "== 4 KiB reads against concurrency: slowfs, every read delayed 100 ms"
"$slowfs" run --quiet --set "read delay=100ms" -- sh -c "$py bench/python_field.py concurrency \"\$SLOWFS_MOUNT\" 100"

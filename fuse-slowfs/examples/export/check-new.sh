#!/bin/sh
# As check.sh, and once the export has returned (the crash comes after its last
# operation) the new content must be there: success means durable.
dir=$(dirname "$0")
sh "$dir/check.sh" || exit 1
if [ "$SLOWFS_CRASH_POINT" -eq "$SLOWFS_OPS" ]; then
  [ "$(wc -c < "$SLOWFS_STATE/config.json")" -eq 10000 ] || { echo "the export returned, yet the old config.json survived"; exit 1; }
fi
exit 0

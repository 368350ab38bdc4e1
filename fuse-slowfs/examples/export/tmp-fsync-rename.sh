#!/bin/sh
# Export 3: write a temporary file, fsync it, rename it over config.json.
# Atomic (old or new), but the rename itself is not durable yet.
set -e
head -c 10000 /dev/zero | tr '\0' n > "$SLOWFS_MOUNT/config.json.tmp"
sync "$SLOWFS_MOUNT/config.json.tmp"
mv "$SLOWFS_MOUNT/config.json.tmp" "$SLOWFS_MOUNT/config.json"

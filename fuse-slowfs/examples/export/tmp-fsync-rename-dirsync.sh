#!/bin/sh
# Export 4: write a temporary file, fsync it, rename it over config.json, fsync
# the directory. Atomic and durable once the script returns.
set -e
head -c 10000 /dev/zero | tr '\0' n > "$SLOWFS_MOUNT/config.json.tmp"
sync "$SLOWFS_MOUNT/config.json.tmp"
mv "$SLOWFS_MOUNT/config.json.tmp" "$SLOWFS_MOUNT/config.json"
sync "$SLOWFS_MOUNT"

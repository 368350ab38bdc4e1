#!/bin/sh
# Once the old config is on the disk (ready says so), config is the old one or
# the new one, whole.
[ -e ready ] || exit 0
c=$(cat config)
[ "$c" = "old config v1" ] || [ "$c" = "new config v2 with more bytes" ] ||
  { echo "config is '$c' ($(stat -c %s config) bytes)"; exit 1; }

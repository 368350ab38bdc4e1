#!/bin/sh
# config is the old one or the new one, whole (absent only before the first sync).
[ -e config ] || exit 0
c=$(cat config)
[ "$c" = "old config v1" ] || [ "$c" = "new config v2 with more bytes" ] ||
  { echo "config is '$c' ($(stat -c %s config) bytes)"; exit 1; }

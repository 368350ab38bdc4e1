#!/bin/sh
# Accepts a crash state when config.json holds exactly the old export (6000 x 'o')
# or exactly the new one (10000 x 'n').
f="$SLOWFS_STATE/config.json"
[ -f "$f" ] || { echo "config.json is missing"; exit 1; }
size=$(wc -c < "$f")
[ "$size" -eq 6000 ] && [ "$(tr -d o < "$f" | wc -c)" -eq 0 ] && exit 0
[ "$size" -eq 10000 ] && [ "$(tr -d n < "$f" | wc -c)" -eq 0 ] && exit 0
echo "config.json is neither the old nor the new export ($size bytes)"
exit 1

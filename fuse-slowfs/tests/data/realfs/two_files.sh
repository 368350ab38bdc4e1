#!/bin/sh
# a written, then b written and fsynced: b's presence is taken to mean a is saved.
cd "${SLOWFS_MOUNT:-.}"
printf 'A\n' > a
printf 'B\n' > b
sync b
sleep 1.5

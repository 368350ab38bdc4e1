#!/bin/sh
# The write-temp-rename export without fsync: replaces config.
cd "${SLOWFS_MOUNT:-.}"
printf 'old config v1\n' > config; sync; touch ready; sync; sleep 1.2
printf 'new config v2 with more bytes\n' > config.tmp
mv config.tmp config
sleep 1.5

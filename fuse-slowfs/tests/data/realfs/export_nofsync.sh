#!/bin/sh
# The write-temp-rename export without fsync: replaces config.
cd "${SLOWFS_MOUNT:-.}"
printf 'old config v1\n' > config; sync; touch ready; sync; sleep 1.2
printf 'new config v2 with more bytes\n' > config.tmp
mv config.tmp config
# Three of commit=1's journal commits: the rename's must land before the
# data's write-back, also on a machine so loaded that one commit runs late.
sleep 3

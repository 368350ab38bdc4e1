#!/bin/sh
# The same export done right: the temp file fsynced before the rename, the directory after.
cd "${SLOWFS_MOUNT:-.}"
printf 'old config v1\n' > config; sync; touch ready; sync; sleep 1.2
printf 'new config v2 with more bytes\n' > config.tmp
sync config.tmp
mv config.tmp config
sync .
sleep 1.5

#!/bin/sh
# A save path on Mercurial: two commits in $SLOWFS_MOUNT/repo, a repository made
# beforehand by hg_setup.sh in the backing directory.
set -e
cd "$SLOWFS_MOUNT/repo"
echo one > a
hg add -q a
hg commit -q -m one
echo two > b
hg add -q b
hg commit -q -m two

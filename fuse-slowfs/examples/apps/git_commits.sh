#!/bin/sh
# A save path on git: two commits in $SLOWFS_MOUNT/repo, a repository made
# beforehand by git_setup.sh in the backing directory (its initial, durable state).
set -e
cd "$SLOWFS_MOUNT/repo"
echo one > a
git add a
git commit -q -m one
echo two > b
git add b
git commit -q -m two

#!/bin/sh
# Makes DIR/repo for git_commits.sh. With "fsync": core.fsync=all and
# core.fsyncMethod=fsync (git 2.36+): git then fsyncs objects, refs and the index.
set -e
git init -q --template= "$1/repo"
cd "$1/repo"
git config user.email slowfs@example.com
git config user.name slowfs
if [ "$2" = fsync ]; then
  git config core.fsync all
  git config core.fsyncMethod fsync
fi

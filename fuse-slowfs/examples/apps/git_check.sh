#!/bin/sh
# Checks a crash state of git_commits.sh: the repository passes `git fsck`, and
# HEAD, once it names a commit, resolves to one. (fsck's notices, such as an
# unborn HEAD before the first commit, are not errors.)
[ -f repo/.git/HEAD ] || { echo "repo/.git/HEAD is missing"; exit 1; }
cd repo
if ! out=$(git fsck --no-progress 2>&1); then
  echo "git fsck: $(echo "$out" | grep -v '^notice:' | head -1)"
  exit 1
fi
if git rev-parse -q --verify HEAD >/dev/null 2>&1; then
  git cat-file -e 'HEAD^{commit}' 2>/dev/null || { echo "HEAD does not resolve to a commit"; exit 1; }
fi
exit 0

#!/bin/sh
# Checks a crash state of hg_commits.sh as a user would recover it: `hg recover`
# (rolls back an interrupted transaction from its journal), then `hg verify`
# must pass (store and changelog consistent). A commit lost entirely is fine;
# a repository that stays corrupt is not.
[ -d repo/.hg ] || { echo "repo/.hg is missing"; exit 1; }
cd repo
HGRCPATH= hg recover -q >/dev/null 2>&1
if ! out=$(HGRCPATH= hg verify -q 2>&1); then
  echo "hg verify: $(echo "$out" | grep -v '^checking\|^checked\|^crosschecking' | head -1)"
  exit 1
fi
exit 0

#!/bin/sh
# Makes DIR/repo (Mercurial) for hg_commits.sh.
set -e
hg init "$1/repo"
printf '[ui]\nusername = slowfs <slowfs@example.com>\n' > "$1/repo/.hg/hgrc"

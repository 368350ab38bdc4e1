#!/bin/sh
[ -s b ] || exit 0
[ "$(cat a 2>/dev/null)" = A ] || { echo "b is saved but a is '$(cat a 2>/dev/null)'"; exit 1; }

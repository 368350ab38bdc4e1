# Sourced first by the bench scripts (`source "$(dirname "$0")/lib.sh"`):
# strict mode, the repository root as the working directory, and `$slowfs`,
# the binary to measure: $SLOWFS if set (made absolute, so a script may cd),
# else target/release/slowfs, built first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[1]}")/.."
if [[ -n ${SLOWFS:-} ]]; then
  slowfs=$(realpath "$SLOWFS")
  [[ -x $slowfs ]] || { echo "$0: SLOWFS=$SLOWFS is not an executable (unset it to build one)" >&2; exit 2; }
else
  cargo build --release --quiet -p slowfs
  slowfs=$PWD/target/release/slowfs
fi

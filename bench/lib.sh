# Sourced first by the bench scripts (`source "$(dirname "$0")/lib.sh"`):
# strict mode, the repository root as the working directory, and `$slowfs`,
# the binary to measure: $SLOWFS if set (made absolute from where the script
# was started, so scripts may cd), else target/release/slowfs, built first.
set -euo pipefail
if [[ -n ${SLOWFS:-} ]]; then
  slowfs=$(realpath "$SLOWFS")
  [[ -x $slowfs ]] || { echo "$0: SLOWFS=$SLOWFS is not an executable (unset it to build one)" >&2; exit 2; }
fi
cd "$(dirname "${BASH_SOURCE[1]}")/.."
if [[ -z ${SLOWFS:-} ]]; then
  cargo build --release --quiet -p slowfs
  slowfs=$PWD/target/release/slowfs
fi

#!/usr/bin/env bash
# Builds LazyFS (a FUSE filesystem with its own page cache that keeps unsynced data
# until fsync; not in Debian) for bench/peers.sh's LAZYFS column, as its README
# says: libs/libpcache first (cmake, cmake --build), then lazyfs (cmake
# -DLAZYFS_BUILD_TESTS=OFF, cmake --build). Like its own build.sh files, no
# CMAKE_BUILD_TYPE, which gives what a LazyFS user following the README gets:
# libpcache (the cache: where writes, reads and fsyncs go) at -O3, because spdlog's
# CMakeLists sets the build type Release when none is given, and the lazyfs
# executable (the FUSE callbacks) with no -O flag at all. BUILD_TYPE=Release
# builds both at -O3 (not what docs/results/2026-12-04-peers-lazyfs.md measured).
#
# Sources (no network here, so fetched beforehand and given as directories):
#   clone github.com/dsrhaslab/lazyfs at a47a5baea559020f29902662de77764b0cbd62ce
#     (main, 2024-06-28; the one measured in docs/results/2026-12-04-peers-lazyfs.md)
#   libpcache's CMakeLists.txt downloads two dependencies at configure time
#   (FetchContent). Offline, give their sources; they are copied to where
#   FetchContent would have put them and CMake is told not to download:
#     clone github.com/ToruNiina/toml11 at tag v3.7.1 (dcfe39a783a94e8d52c885e5883a6fbb21529019)
#     clone github.com/gabime/spdlog at tag v1.10.0 (76fb40d95455f249bd70824ecfcae7a8f0930fa3)
#   (Debian's libtoml11-dev 3.7.1 and libspdlog-dev 1.10.0 are the same versions, but
#   Debian's spdlog uses an external fmt and lazyfs's CMakeLists includes spdlog from
#   libpcache's build tree, so the sources are simpler.)
#
# Usage: bench/build_lazyfs.sh LAZYFS_SRC [TOML11_SRC SPDLOG_SRC] [PREFIX]
#   With TOML11_SRC and SPDLOG_SRC omitted, CMake downloads them (needs network).
#   PREFIX (default /opt/lazyfs) receives lazyfs, lib/libpcache.so.0 and VERSION
#   (the commit: LAZYFS_COMMIT, or `git rev-parse HEAD` of LAZYFS_SRC if it is a
#   checkout); bench/peers.sh reads VERSION beside the binary.
# Needs: cmake, g++ (C++17), libfuse3-dev. Every compile runs under
# `flock /tmp/slowfs-build.lock` with -j2 (JOBS=n changes it): the machine is shared.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2; }
src=$(realpath "$1")
toml=${2:-}
spdlog=${3:-}
prefix=${4:-/opt/lazyfs}
jobs=${JOBS:-2}
lock=/tmp/slowfs-build.lock
[ -f "$src/lazyfs/CMakeLists.txt" ] && [ -f "$src/libs/libpcache/CMakeLists.txt" ] ||
  { echo "$src is not a LazyFS source tree" >&2; exit 2; }
commit=${LAZYFS_COMMIT:-$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)}
type_arg=()
[ -n "${BUILD_TYPE:-}" ] && type_arg=(-DCMAKE_BUILD_TYPE="$BUILD_TYPE")

pc="$src/libs/libpcache"
offline=()
if [ -n "$toml" ] || [ -n "$spdlog" ]; then
  [ -f "$toml/toml.hpp" ] && [ -f "$spdlog/include/spdlog/spdlog.h" ] ||
    { echo "give both TOML11_SRC (toml11 v3.7.1) and SPDLOG_SRC (spdlog v1.10.0)" >&2; exit 2; }
  mkdir -p "$pc/build/_deps"
  rm -rf "$pc/build/_deps/toml-src" "$pc/build/_deps/spdlog-src"
  cp -a "$toml" "$pc/build/_deps/toml-src"
  cp -a "$spdlog" "$pc/build/_deps/spdlog-src"
  offline=(-DFETCHCONTENT_FULLY_DISCONNECTED=ON)
fi

# libpcache (libpcache.so.0, with toml11 and a static spdlog in it)
cmake -S "$pc" -B "$pc/build" "${offline[@]}" "${type_arg[@]}"
flock "$lock" cmake --build "$pc/build" -j "$jobs"

# lazyfs: links libpcache.so from libs/libpcache/build (its CMakeLists's
# link_directories). The run path lets the installed copy find lib/libpcache.so.0.
cmake -S "$src/lazyfs" -B "$src/lazyfs/build" -DLAZYFS_BUILD_TESTS=OFF "${type_arg[@]}" \
  -DCMAKE_BUILD_RPATH="\$ORIGIN/lib;$pc/build"
flock "$lock" cmake --build "$src/lazyfs/build" -j "$jobs"

mkdir -p "$prefix/lib"
cp "$src/lazyfs/build/lazyfs" "$prefix/lazyfs"
cp -P "$pc"/build/libpcache.so* "$prefix/lib/"
echo "$commit${BUILD_TYPE:+ (CMAKE_BUILD_TYPE=$BUILD_TYPE)}" >"$prefix/VERSION"
ldd "$prefix/lazyfs" | grep -E 'pcache|fuse'
echo "installed $prefix/lazyfs (LazyFS $(cat "$prefix/VERSION"))"

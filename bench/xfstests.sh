#!/usr/bin/env bash
# xfstests against slowfs, mounted by mount(8) through /sbin/mount.fuse.slowfs.
#
#   bench/xfstests.sh XFSTESTS_DIR SLOWFS_BIN [GROUP] [MODE] [CHECK_ARGS...]
#
# XFSTESTS_DIR: an already built xfstests-dev tree (`make`; this script builds
#   nothing). Build deps on Debian 12: xfslibs-dev uuid-dev libtool-bin e2fsprogs
#   automake gcc libuuid1 quota attr libattr1-dev make libacl1-dev libaio-dev
#   xfsprogs libgdbm-dev gawk fio dbench uuid-runtime python3 sqlite3
#   liburing-dev bc psmisc acl.
# SLOWFS_BIN: the slowfs binary to test (its `mount-helper` is what mount(8) runs).
# GROUP: an xfstests group, default quick (`./check -g GROUP`); `-` for none (name
#   the tests in CHECK_ARGS, e.g. `- auto generic/080 generic/215`).
# MODE: auto (slowfs's default: no passthrough= option given) or never
#   (`-o passthrough=never`: every read and write goes through the daemon).
# CHECK_ARGS: passed on to ./check, e.g. `-e generic/123` to skip a test that hangs.
# Environment: QUIET_MOUNT=1 mounts through a shim that silences the mount
#   helper's success lines (see below); SYNC_UMOUNT=1 makes umount wait for the
#   old daemon to exit (see below); EXTRA_OPTS=suid,dev (say) adds mount
#   options; XFST_BASE (default /opt/xfst) for the dirs.
#
# Needs root (mounts, useradd). Mounts like README.fuse's passthrough_ll setup:
# allow_other,default_permissions (so the fsgqa users can reach the mount), with
# TEST_DEV / SCRATCH_DEV the backing directories (the mounts' source).
# Results: XFSTESTS_DIR/results/slowfs-MODE-GROUP[-quiet]/, log: the same path + .log.
# Leaves nothing mounted; removes /sbin/mount.fuse.slowfs if it created it.
set -uo pipefail

xfstests=${1:?usage: $0 XFSTESTS_DIR SLOWFS_BIN [GROUP] [MODE] [CHECK_ARGS...]}
slowfs=${2:?usage: $0 XFSTESTS_DIR SLOWFS_BIN [GROUP] [MODE] [CHECK_ARGS...]}
group=${3:-quick}
mode=${4:-auto}
shift $(( $# < 4 ? $# : 4 ))
xfstests=$(readlink -f "$xfstests")
slowfs=$(readlink -f "$slowfs")
[[ -x $xfstests/check && -x $xfstests/ltp/fsstress ]] || { echo "$xfstests: not a built xfstests tree" >&2; exit 2; }
[[ -x $slowfs ]] || { echo "$slowfs: not executable" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "needs root" >&2; exit 2; }

base=${XFST_BASE:-/opt/xfst}
test_dev=$base/test-backing test_dir=$base/test-mnt
scratch_dev=$base/scratch-backing scratch_mnt=$base/scratch-mnt

case $mode in
  auto) opts="-o allow_other,default_permissions${EXTRA_OPTS:+,$EXTRA_OPTS}" ;;
  never) opts="-o allow_other,default_permissions${EXTRA_OPTS:+,$EXTRA_OPTS},passthrough=never" ;;
  *) echo "MODE must be auto or never" >&2; exit 2 ;;
esac

# mount(8) runs /sbin/mount.fuse.slowfs for -t fuse.slowfs: a symlink to SLOWFS_BIN,
# or with QUIET_MOUNT=1 a symlink to a shim that drops the two lines slowfs's
# mount-helper prints on success ("slowfs: mounted ... seed N", "slowfs: daemon
# pid N serves it until unmounted"): xfstests compares test output, so a mount
# helper that talks on success fails every test that mounts without redirecting.
helper=/sbin/mount.fuse.slowfs
made_helper=false
if [[ ${QUIET_MOUNT:-0} == 1 ]]; then
  want_helper=$base/mount.fuse.slowfs-quiet
  mkdir -p "$base"
  {
    echo '#!/bin/bash'
    echo "bin=$slowfs"
    cat <<'SHIM'
exec 3>&1
err=$("$bin" mount-helper "$@" 2>&1 1>&3 3>&-)
rc=$?
if [[ $rc == 0 ]]; then
  err=$(printf '%s\n' "$err" |
    grep -v -E '^slowfs: (mounted .* seed [0-9]+|daemon pid [0-9]+ serves it until unmounted)$')
fi
[[ -n $err ]] && printf '%s\n' "$err" >&2
exit $rc
SHIM
  } > "$want_helper"
  chmod +x "$want_helper"
else
  want_helper=$slowfs
fi
if [[ ! -e $helper && ! -L $helper ]]; then
  ln -s "$want_helper" "$helper"
  made_helper=true
elif [[ $(readlink -f "$helper") != "$want_helper" ]]; then
  echo "$helper points at $(readlink -f "$helper"), not $want_helper; fix it or remove it" >&2
  exit 2
fi

unmount_all() {
  for m in "$test_dir" "$scratch_mnt"; do
    if grep -q " $m fuse.slowfs " /proc/mounts; then umount "$m" || umount -l "$m"; fi
  done
}
cleanup() {
  unmount_all
  if $made_helper; then rm -f "$helper"; fi
}
trap cleanup EXIT

unmount_all
mkdir -p "$test_dev" "$test_dir" "$scratch_dev" "$scratch_mnt"
# A fresh start: empty backing directories (they are the "devices").
find "$test_dev" "$scratch_dev" -mindepth 1 -delete

# The users README asks for (useradd -m fsgqa also makes group fsgqa).
id fsgqa >/dev/null 2>&1 || useradd -m fsgqa
id fsgqa2 >/dev/null 2>&1 || useradd fsgqa2
id 123456-fsgqa >/dev/null 2>&1 || useradd --badname 123456-fsgqa 2>/dev/null || useradd 123456-fsgqa
getent group fsgqa >/dev/null || groupadd fsgqa

# xfstests' FSTYP=fuse expects the mount's type to read plain `fuse` (libfuse's
# lowlevel passthrough_ll, README.fuse); slowfs mounts are `fuse.slowfs`, and
# _check_mounted_on then refuses TEST_DEV ("is mounted but not a type fuse
# filesystem"). One local edit: _fs_type maps fuse$FUSE_SUBTYP to fuse.
if ! grep -q 'FUSE_SUBTYP}' "$xfstests/common/rc"; then
  sed -i "s|-e 's/fuse.ceph-fuse/ceph-fuse/'|-e 's/fuse.ceph-fuse/ceph-fuse/' -e \"s/^fuse\${FUSE_SUBTYP}\$/fuse/\"|" \
    "$xfstests/common/rc"
  grep -q 'FUSE_SUBTYP}' "$xfstests/common/rc" || { echo "could not patch _fs_type in common/rc" >&2; exit 2; }
fi

# xfstests unmounts by device (`umount $SCRATCH_DEV`). Our "device" is the backing
# directory, and util-linux 2.38's umount takes an existing directory for a
# mountpoint (lookup by statfs) and says "not mounted". This wrapper turns a
# fuse.slowfs mount's source into its (last) mountpoint; anything else passes as is.
# With SYNC_UMOUNT=1 it also waits (up to 10 s) for the daemons of the fuse.slowfs
# mounts it took down to exit: umount returns before the old daemon lets go of
# its control socket, and a mount on the same mountpoint right after then fails
# ("control socket ... is in use by another slowfs (busy)").
umount_wrapper=$base/umount-by-source
{
  echo '#!/bin/bash'
  echo "sync_umount=${SYNC_UMOUNT:-0}"
  cat <<'EOF'
args=() targets=()
for a in "$@"; do
  if [[ $a == /* && -d $a ]]; then
    if mountpoint -q "$a"; then
      t=$(awk -v s="${a%/}" '$2 == s && $3 == "fuse.slowfs" { t = $2 } END { print t }' /proc/mounts)
    else
      t=$(awk -v s="${a%/}" '$1 == s && $3 == "fuse.slowfs" { t = $2 } END { print t }' /proc/mounts)
      [[ -n $t ]] && a=$t
    fi
    [[ -n $t ]] && targets+=("$t")
  fi
  args+=("$a")
done
pids=()
if [[ $sync_umount == 1 ]]; then
  for t in "${targets[@]}"; do
    for p in /proc/[0-9]*; do
      cmd=$(tr '\0' ' ' 2>/dev/null < "$p/cmdline") || continue
      [[ $cmd == *slowfs* && " $cmd " == *" $t "* ]] && pids+=("${p#/proc/}")
    done
  done
fi
umount "${args[@]}"
rc=$?
if [[ $rc == 0 ]]; then
  for p in "${pids[@]}"; do
    for _ in {1..100}; do [[ -e /proc/$p ]] || break; sleep 0.1; done
  done
fi
exit $rc
EOF
} > "$umount_wrapper"
chmod +x "$umount_wrapper"

cat > "$xfstests/local.config" <<EOF
# written by slowfs bench/xfstests.sh (mode $mode)
export FSTYP=fuse
export FUSE_SUBTYP=.slowfs
export TEST_DEV=$test_dev
export TEST_DIR=$test_dir
export SCRATCH_DEV=$scratch_dev
export SCRATCH_MNT=$scratch_mnt
export TEST_FS_MOUNT_OPTS="$opts"
export MOUNT_OPTIONS="$opts"
export UMOUNT_PROG=$umount_wrapper
EOF

results=$xfstests/results/slowfs-$mode-${group/-/tests}$([[ ${QUIET_MOUNT:-0} == 1 ]] && echo -quiet)$([[ ${SYNC_UMOUNT:-0} == 1 ]] && echo -sync)${EXTRA_OPTS:+-${EXTRA_OPTS//,/-}}
log=$results.log
rm -rf "$results"
mkdir -p "$results"
echo "slowfs $slowfs, mode $mode, group $group, options '$opts'; log $log" >&2
start=$(date +%s)
# check mounts TEST_DEV itself; no mkfs step for fuse.
if [[ $group == - ]]; then sel=(); else sel=(-g "$group"); fi
(cd "$xfstests" && RESULT_BASE=$results ./check -T "${sel[@]}" "$@") 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
echo "wall time: $(( $(date +%s) - start )) s" | tee -a "$log"
exit "$rc"

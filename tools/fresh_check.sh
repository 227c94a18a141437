#!/usr/bin/env bash
# Runs the README's commands on a bare Debian 12: builds a minimal root with
# `debootstrap --variant=minbase bookworm`, clones this checkout's HEAD into it and runs, as root
# and with nothing installed but what tools/setup.sh installs, the main job (tools/run.sh) and,
# with --tests, the test command (tools/test.sh; --quick-tests: tools/test.sh --quick).
# Slow (the packages and a full build: 30 to 60 minutes on 2 cores), so CI runs only
# tools/check_setup.sh; run this before changing tools/setup.sh or the build's dependencies.
# The mirror is the host's first Debian source (/etc/apt), or --mirror URL.
# Usage: tools/fresh_check.sh [--root DIR] [--reuse] [--mirror URL] [--tests|--quick-tests]
# Needs root (debootstrap, chroot, mounts) and the debootstrap package.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=/var/tmp/dtc-fresh-root
reuse=0
mirror=""
tests=""
while [ $# -gt 0 ]; do
  case "$1" in
    --root) root="$2"; shift ;;
    --reuse) reuse=1 ;;
    --mirror) mirror="$2"; shift ;;
    --tests) tests="tools/test.sh" ;;
    --quick-tests) tests="tools/test.sh --quick" ;;
    *) echo "usage: tools/fresh_check.sh [--root DIR] [--reuse] [--mirror URL] [--tests|--quick-tests]" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "error: fresh_check: needs root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "error: fresh_check: install debootstrap first (apt-get install debootstrap)" >&2; exit 1; }
if [ -z "$mirror" ]; then
  mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -n 1 || true)
  [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $0 !~ /security/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
  [ -n "$mirror" ] || { echo "error: fresh_check: no Debian mirror in /etc/apt; pass --mirror URL" >&2; exit 1; }
fi

# Mounts a killed run left under the root: unmount them first, and never delete through one (a
# bind-mounted /dev or /proc under the root would be emptied by rm -rf).
unmount_under_root() {
  awk -v r="$root/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r |
    while read -r m; do umount -l "$m" || true; done
}
unmount_under_root
if awk -v r="$root/" 'index($2, r) == 1 { found = 1 } END { exit !found }' /proc/mounts; then
  echo "error: fresh_check: $root still has mounts under it; unmount them first" >&2
  exit 1
fi
if [ "$reuse" = 1 ] && [ -x "$root/bin/bash" ]; then
  echo "fresh_check: reusing the root in $root"
else
  rm -rf --one-file-system "$root"
  echo "fresh_check: debootstrap --variant=minbase bookworm $root"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 ||
    { tail -n 20 "$root.debootstrap.log" >&2; echo "error: fresh_check: debootstrap failed" >&2; exit 1; }
fi
# The host's network set-up comes along (it describes the network, not the system under test):
# DNS, the extra CA certificates of an intercepting proxy (ca-certificates, which setup
# installs, adds them to the system store) and pip's configuration (which names that store).
cp /etc/resolv.conf "$root/etc/resolv.conf"
if [ -d /usr/local/share/ca-certificates ]; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp -r /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/"
fi
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/pip.conf"
# A reused root has ca-certificates already: refresh its store (a new root's install does it).
[ -x "$root/usr/sbin/update-ca-certificates" ] && chroot "$root" /usr/sbin/update-ca-certificates >/dev/null

mounted=()
cleanup() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
for fs in proc sys dev dev/pts dev/shm; do
  mkdir -p "$root/$fs"
  mount --bind "/$fs" "$root/$fs"
  mounted+=("$root/$fs")
done

# The committed HEAD, as CI sees it (git is not in the bare root: the host clones it).
rm -rf "$root/root/dtc"
git clone -q --no-local . "$root/root/dtc"
cmd="cd /root/dtc && tools/run.sh 1"
[ -n "$tests" ] && cmd="$cmd && $tests"
echo "fresh_check: running in the bare root: $cmd"
chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/bash -c "$cmd"
echo "fresh_check: passed on a bare Debian 12 root ($root)"

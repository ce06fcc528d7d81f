#!/usr/bin/env bash
# The Debian package on a fresh Debian 12: debootstrap (minbase) into a throw-away root, then
# `apt install ./mirra_*.deb` there, `mirra --version`, and examples/consumer built with CMake and
# pkg-config (after installing cmake, g++ and pkg-config), run, and read back by `mirra eval`. About a
# minute. Needs root and the Debian archive: exits 77 (skipped, saying why) without either; any other
# failure exits 1.
#   tests/install/fresh_debian_test.sh PACKAGE.deb [MIRROR]
set -euo pipefail
deb=$(realpath "$1") mirror=${2:-http://deb.debian.org/debian}
source=$(dirname "$(realpath "$0")")/../..
root=$(mktemp -d)
cleanup() { umount "$root/proc" 2>/dev/null || true; rm -rf "$root"; }
trap cleanup EXIT

if [ "$(id -u)" -ne 0 ]; then echo "fresh_debian_test: SKIPPED (needs root for debootstrap and chroot)"; exit 77; fi
command -v debootstrap > /dev/null || apt-get install -y -qq debootstrap > /dev/null  # scripts/setup.sh installs it for CI
echo "== debootstrap bookworm (minbase) from $mirror"
log=$(mktemp)
if ! debootstrap --variant=minbase bookworm "$root" "$mirror" > "$log" 2>&1; then
  if grep -q "Failed getting release file\|Couldn't download\|Failure trying to run" "$log"; then
    tail -3 "$log"; rm -f "$log"
    echo "fresh_debian_test: SKIPPED (the Debian archive at $mirror is not reachable)"; exit 77
  fi
  tail -20 "$log"; rm -f "$log"; exit 1
fi
rm -f "$log"
cp "$deb" "$root/tmp/"
mkdir -p "$root/tmp/consumer" && cp "$source"/examples/consumer/* "$root/tmp/consumer/"
cp /etc/resolv.conf "$root/etc/"
mount -t proc proc "$root/proc"
chroot "$root" bash -euo pipefail -c "
  export DEBIAN_FRONTEND=noninteractive
  quietly() { \"\$@\" > /tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 1; }; }
  quietly apt-get update
  echo '== apt install ./$(basename "$deb")'
  quietly apt-get install -y /tmp/$(basename "$deb")
  mirra --version
  quietly apt-get install -y cmake g++ pkg-config
  cd /tmp/consumer
  echo '== find_package(mirra)'
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build build > /dev/null
  ./build/consumer /tmp/cmake.mirra 200
  mirra eval /tmp/cmake.mirra
  echo '== pkg-config'
  c++ -std=c++20 consumer.cc -o consumer-pc \$(pkg-config --cflags --libs mirra)
  ./consumer-pc /tmp/pc.mirra 20
"
echo "fresh_debian_test: PASS"

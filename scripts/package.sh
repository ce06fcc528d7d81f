#!/usr/bin/env bash
# Builds the Debian package mirra_<version>_<arch>.deb (cmake/MirraPackage.cmake): a Release build for
# the prefix /usr, without tests and without the CUDA backend (Debian has none of the CUDA libraries
# it needs), then `cpack -G DEB`. Prints the package's path as its last line.
#   scripts/package.sh [BUILD_DIR]        (default build/package; MIRRA_JOBS: build parallelism)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/package}
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr -DMIRRA_CUDA=OFF \
  -DMIRRA_BUILD_TESTS=OFF "${launcher[@]}" > "$build.configure.log" || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j "${MIRRA_JOBS:-2}" >&2
rm -f "$build"/mirra_*.deb
(cd "$build" && cpack -G DEB > cpack.log) || { cat "$build/cpack.log"; exit 1; }
ls "$build"/mirra_*.deb

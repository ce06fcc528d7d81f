#!/usr/bin/env bash
# Builds the test suites of the threaded parts (graph, runtime, training, strategies, ops) with
# ThreadSanitizer and runs them; exits non-zero on a failed test or a reported data race.
#
# oneTBB hands tasks from thread to thread inside libtbb, so a ThreadSanitizer run against Debian's
# build of it reports every value a task reads as a race. This script builds the installed oneTBB's
# own Debian source with ThreadSanitizer once (into BUILD_DIR/onetbb) and runs the suites on it.
# oneDNN's kernels run on OpenMP (libgomp), which is not instrumented either: reports with a frame in
# oneDNN or libgomp are suppressed (tests/tsan.supp). CPU only. Not part of scripts/test.sh: it takes
# about 30 minutes on 2 cores the first time.
#   scripts/tsan.sh [BUILD_DIR]        (default build/tsan)
set -euo pipefail
cd "$(dirname "$0")/.."

build="${1:-build/tsan}"
jobs="${MIRRA_JOBS:-2}"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi

tbb="$(realpath -m "$build")/onetbb"
if [ ! -f "$tbb/install/lib/cmake/TBB/TBBConfig.cmake" ]; then
  rm -rf "$tbb"
  mkdir -p "$tbb/lists/partial" "$tbb/source"
  # Debian's source of the installed libtbb-dev, fetched with a source list of this script's own.
  cat >"$tbb/onetbb.sources" <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  apt_options=(-o "Dir::Etc::SourceList=$tbb/onetbb.sources" -o Dir::Etc::SourceParts=/dev/null -o "Dir::State::Lists=$tbb/lists")
  apt-get "${apt_options[@]}" update >/dev/null
  version="$(dpkg-query -W -f '${Version}' libtbb-dev)"
  (cd "$tbb/source" && apt-get "${apt_options[@]}" source --download-only "onetbb=$version" >/dev/null)
  tar -xf "$tbb"/source/onetbb_*.orig.tar.* -C "$tbb/source" --strip-components=1
  cmake -S "$tbb/source" -B "$tbb/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTBB_SANITIZE=thread \
    -DTBB_TEST=OFF -DTBB_STRICT=OFF -DCMAKE_INSTALL_PREFIX="$tbb/install" >/dev/null
  # Its own code warns of fences ThreadSanitizer cannot model; the log keeps them out of sight.
  cmake --build "$tbb/build" -j "$jobs" >"$tbb/build.log" 2>&1 || { tail -n 40 "$tbb/build.log"; exit 1; }
  cmake --install "$tbb/build" >/dev/null
fi

suites=(graph_tests runtime_tests training_tests strategies_tests ops_tests)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" -DMIRRA_SANITIZE=thread \
  -DMIRRA_CUDA=OFF -DMIRRA_BUILD_TOOLS=OFF -DTBB_DIR="$tbb/install/lib/cmake/TBB" "${launcher[@]}" >/dev/null
cmake --build "$build" -j "$jobs" --target "${suites[@]}"

export LD_LIBRARY_PATH="$tbb/install/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp:allocator_may_return_null=1:halt_on_error=0:history_size=4"
for suite in "${suites[@]}"; do
  echo "== $suite (at $((SECONDS / 60)) min $((SECONDS % 60)) s)"
  "$build/tests/$suite"
done
echo "== no data race reported (at $((SECONDS / 60)) min $((SECONDS % 60)) s)"

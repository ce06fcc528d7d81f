#!/usr/bin/env bash
# Installs what the build needs, builds (Release with assertions on) and runs every test; builds the
# Debian package (scripts/package.sh) and tests it unpacked (tests/install/deb_test.sh) and installed
# with apt on a fresh Debian 12 root (tests/install/fresh_debian_test.sh, which reports itself
# skipped without root or the Debian archive); builds the kernels against oneDNN 3 and runs the op
# tests with it; then builds
# everything again with AddressSanitizer + UndefinedBehaviorSanitizer (clang, with libFuzzer coverage)
# and runs the tests again, all but those labelled slow (training on the real data set, minutes even
# without sanitizers), bench (timings mean nothing under sanitizers) or multi_worker (processes under
# mpirun, whose OpenMPI's allocations at exit read as leaks), with allocations that cannot be
# served returning null (so they reach mirra's out-of-memory handling); then runs each fuzzer for
# MIRRA_FUZZ_SECONDS (default 60).
# Exits non-zero on any failure. MIRRA_JOBS sets build parallelism (default: 2).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
jobs="${MIRRA_JOBS:-2}"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  # Paths inside the checkout hash as relative ones, so a clone elsewhere reuses the cached objects.
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
fi
# Each section's heading says when it began, counted from the start.
section() { echo "== $1 (at $((SECONDS / 60)) min $((SECONDS % 60)) s)"; }

# The Release build has the CUDA backend when the toolkit, cuDNN and NCCL are there (MIRRA_CUDA=AUTO):
# it always compiles, its host-side tests run, and the tests that need a GPU (label gpu) report
# themselves skipped without one. The sanitizer build is CPU-only.
section "Release build (assertions on)"
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2" "${launcher[@]}"
cmake --build build/release -j "$jobs"
section "Release tests"
ctest --test-dir build/release --output-on-failure --timeout 1800

section "Debian package"
deb=$(scripts/package.sh build/package | tail -1)
tests/install/deb_test.sh "$deb" . build/deb-test
fresh_debian=0
tests/install/fresh_debian_test.sh "$deb" || fresh_debian=$?
if [ "$fresh_debian" -ne 0 ] && [ "$fresh_debian" -ne 77 ]; then exit "$fresh_debian"; fi

# The kernels against oneDNN 3 as well (Intel's oneTBB build from PyPI, scripts/onednn-wheel.sh), so a
# build with -DMIRRA_ONEDNN_ROOT stays one command away: they build with its API and pass the op tests.
section "oneDNN 3 build and op tests"
scripts/onednn-wheel.sh build/onednn-3.2
cmake -S . -B build/with-onednn-3 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2" -DMIRRA_CUDA=OFF \
  -DMIRRA_ONEDNN_ROOT="$PWD/build/onednn-3.2" "${launcher[@]}"
cmake --build build/with-onednn-3 -j "$jobs" --target ops_tests
build/with-onednn-3/tests/ops_tests

section "AddressSanitizer + UndefinedBehaviorSanitizer build"
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
  -DCMAKE_CXX_COMPILER=clang++ -DMIRRA_SANITIZE=address,undefined -DMIRRA_FUZZ=ON -DMIRRA_CUDA=OFF "${launcher[@]}"
cmake --build build/asan -j "$jobs"
section "Sanitizer tests"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build/asan --output-on-failure --timeout 1800 --label-exclude "slow|bench|multi_worker"

section "Fuzzers (ASan + UBSan)"
scripts/fuzz.sh "${MIRRA_FUZZ_SECONDS:-60}" build/asan
section "Done"

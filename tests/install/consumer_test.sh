#!/usr/bin/env bash
# Uses an installed mirra at PREFIX as a program outside mirra's tree does: builds examples/consumer
# with CMake (find_package(mirra), the CUDA component required where the install has the backend and
# refused where it does not) and with pkg-config, runs both (each trains with Mirrored and writes a
# model file), checks that the installed `mirra eval` reads the file with the accuracy the consumer
# measured, that every installed header compiles from the install alone, and that `mirra --version`
# runs. Prints what it checks; exits non-zero on the first failure.
#   consumer_test.sh PREFIX SOURCE_DIR WORK_DIR
set -euo pipefail
prefix=$(realpath "$1") source=$(realpath "$2") work=$3
rm -rf "$work" && mkdir -p "$work" && work=$(realpath "$work")

pc_file=$(find "$prefix" -name mirra.pc -path '*/pkgconfig/*' | head -1)
[ -n "$pc_file" ] || { echo "FAIL: no mirra.pc under $prefix"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc_file")
with_cuda=$(grep -Po '(?<=set\(mirra_WITH_CUDA )\w+' "$(find "$prefix" -name mirraConfig.cmake | head -1)")

echo "== mirra --version ($prefix)"
"$prefix/bin/mirra" --version | tee "$work/version.txt"
grep -q "^mirra $(pkg-config --modversion mirra)$" "$work/version.txt"

echo "== CMake consumer (find_package(mirra), CUDA backend: $with_cuda)"
cmake_args=(-S "$source/examples/consumer" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release)
if [ "$with_cuda" = ON ]; then
  cmake "${cmake_args[@]}" -DCONSUMER_REQUIRE_CUDA=ON
else
  if cmake "${cmake_args[@]}" -DCONSUMER_REQUIRE_CUDA=ON > "$work/cuda-refused.log" 2>&1; then
    echo "FAIL: find_package(mirra COMPONENTS CUDA) succeeded on an install without the CUDA backend"; exit 1
  fi
  tr -s " \n" "  " < "$work/cuda-refused.log" | grep -q "built without the CUDA backend" || { cat "$work/cuda-refused.log"; echo "FAIL: the refusal does not say why"; exit 1; }
  cmake "${cmake_args[@]}" -DCONSUMER_REQUIRE_CUDA=OFF
fi
cmake --build "$work/cmake"
"$work/cmake/consumer" "$work/cmake.mirra" 200 | tee "$work/cmake.json"

echo "== the installed mirra eval reads the consumer's model file"
"$prefix/bin/mirra" eval "$work/cmake.mirra" --json | tee "$work/eval.json"
/usr/bin/python3 - "$work/cmake.json" "$work/eval.json" <<'PY'
import json, sys
consumer = json.loads(open(sys.argv[1]).read().splitlines()[-1])
evaluated = json.loads(open(sys.argv[2]).read().splitlines()[-1])
assert consumer["mirra"] == consumer["headers"], consumer
assert consumer["test_accuracy"] > 0.7, f"200 steps should pass 0.7 test accuracy: {consumer}"
# Mirrored over two devices against one device: the same weights, sums in another order.
assert abs(consumer["test_accuracy"] - evaluated["test_accuracy"]) <= 1e-3, (consumer, evaluated)
print(f"consumer {consumer['test_accuracy']:.4f}, mirra eval {evaluated['test_accuracy']:.4f}")
PY

echo "== pkg-config consumer ($(pkg-config --cflags --libs mirra))"
# shellcheck disable=SC2046
c++ -std=c++20 -O1 "$source/examples/consumer/consumer.cc" -o "$work/consumer-pc" $(pkg-config --cflags --libs mirra) \
  -Wl,-rpath,"$(pkg-config --variable=libdir mirra)"
"$work/consumer-pc" "$work/pc.mirra" 20 | tee "$work/pc.json"
"$prefix/bin/mirra" eval "$work/pc.mirra" > /dev/null

echo "== every installed header compiles from the install alone"
include_dir="$(pkg-config --variable=includedir mirra)/mirra"
(cd "$include_dir" && find . -name '*.h' | sort | sed 's|^\./\(.*\)|#include "\1"|') > "$work/all_headers.cc"
echo "$(wc -l < "$work/all_headers.cc") headers"
# shellcheck disable=SC2046
c++ -std=c++20 -fsyntax-only $(pkg-config --cflags mirra) "$work/all_headers.cc"
echo "consumer_test: PASS"

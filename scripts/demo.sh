#!/usr/bin/env bash
# Installs what mirra needs, builds it, and runs the main job. Until training lands, the main job
# builds the example MLP and CNN with the C++ API and runs them over the Fashion-MNIST test set, then
# measures the executor against a raw oneTBB flow graph.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2" "${launcher[@]}" >/dev/null
cmake --build build/release -j "${MIRRA_JOBS:-2}" --target mirra mirra-inference-demo

echo
build/release/examples/mirra-inference-demo "$@"
echo
echo "Executor overhead next to a raw oneTBB flow graph (ns per node; JSON):"
build/release/tools/mirra/mirra bench executor

#!/usr/bin/env bash
# Installs what mirra needs, builds it, and runs the main job: trains the MLP on Fashion-MNIST with
# MirroredStrategy over the local devices (two logical CPU devices on a machine without GPUs) for a
# few epochs: the strategy and devices, a progress line per epoch, then the test accuracy. Extra
# arguments go to mirra-train (for example --model cnn --epochs 5, or --strategy-config FILE).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2" "${launcher[@]}" >/dev/null
cmake --build build/release -j "${MIRRA_JOBS:-2}" --target mirra mirra-train

echo
build/release/examples/mirra-train --model mlp --epochs 3 "$@"

#!/usr/bin/env bash
# Installs what mirra needs, builds it, and runs the main job with the runner: writes the example MLP
# as a model file, then `mirra train` trains it on Fashion-MNIST with the default strategy (Mirrored
# over the local devices: two logical CPU devices on a machine without GPUs) for a few epochs, with a
# progress bar (a line per epoch when not on a terminal) and the test accuracy after each epoch; it
# saves checkpoints and the trained model under demo/, then evaluates the saved model.
# Extra arguments go to `mirra train` (for example --strategy central_storage, --epochs 5, --config FILE).
# MIRRA_DEMO_MODEL=cnn trains the CNN instead.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2" "${launcher[@]}" >/dev/null
cmake --build build/release -j "${MIRRA_JOBS:-2}" --target mirra mirra-examples

model="${MIRRA_DEMO_MODEL:-mlp}"
mkdir -p demo
echo
build/release/examples/mirra-examples write "$model" "demo/$model.mirra"
# Three epochs unless the arguments say how long (a flag may be given once).
length=(--epochs 3)
for arg in "$@"; do
  case "$arg" in --epochs | --epochs=* | --steps | --steps=*) length=() ;; esac
done
build/release/tools/mirra/mirra train "demo/$model.mirra" "${length[@]}" --eval \
  --checkpoint-dir "demo/checkpoints" --save "demo/$model-trained.mirra" "$@"
build/release/tools/mirra/mirra eval "demo/$model-trained.mirra"

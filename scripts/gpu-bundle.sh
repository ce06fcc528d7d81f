#!/usr/bin/env bash
# Builds mirra with the CUDA backend and packs what a machine with a GPU needs to check it, where none
# of our Debian build dependencies are installed: the runner, the GPU test binaries, scripts/gpu-check.sh,
# the GPU benchmark and its PyTorch peer, the exposed-communication reader, the files of the source
# tree the op tests read, and the shared libraries they use that such a machine lacks (mirra's own,
# oneTBB, oneDNN, OpenBLAS, the C++ and Fortran runtimes), but not the NVIDIA driver or CUDA
# libraries, which the machine has (toolkit, or NVIDIA's Python wheels). The programs in the bundle's
# bin/ find cuBLAS, cuDNN and NCCL and set their own library path; run.sh runs a command (default:
# the whole GPU check) from the bundle's folder.
#   scripts/gpu-bundle.sh OUT.tar.xz [--data]     # --data: add the Fashion-MNIST files (30 MB)
# The bundle without the data must stay within 40 MB compressed.
set -euo pipefail
out="${1:?usage: scripts/gpu-bundle.sh OUT.tar.xz [--data]}"
with_data="${2:-}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
cd "$(dirname "$0")/.."

scripts/setup.sh
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache); fi
build=build/gpu-bundle
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2" -DMIRRA_CUDA=ON "${launcher[@]}"
binaries=(tools/mirra/mirra examples/mirra-examples tests/gpu_tests tests/ops_tests)
cmake --build "$build" -j "${MIRRA_JOBS:-2}" --target mirra mirra-examples gpu_tests ops_tests

stage_root=$(mktemp -d)
trap 'rm -rf "$stage_root"' EXIT
stage="$stage_root/mirra-gpu"
mkdir -p "$stage/bin" "$stage/libexec" "$stage/lib" "$stage/scripts" "$stage/bench/peers"
cp scripts/gpu-check.sh "$stage/scripts/"
cp bench/gpu_training_vs_pytorch.py bench/exposed_communication.py "$stage/bench/"
cp bench/peers/torch_gpu_training.py bench/peers/torch_training.py bench/peers/fashion_mnist.py "$stage/bench/peers/"
# The files of the source tree the op tests read (golden texts, TensorFlow's reference values), found
# through MIRRA_SOURCE_DIR.
mkdir -p "$stage/source/tests/ops"
cp -r tests/ops/golden tests/ops/tf_reference "$stage/source/tests/ops/"

# Every library the binaries load, but the C runtime's and NVIDIA's.
ldd "${binaries[@]/#/$build/}" | awk '/=> \// { print $3 }' | sort -u | while read -r library; do
  case "$(basename "$library")" in
    libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | ld-linux*) ;;
    libcuda.so* | libcudart.so* | libcublas* | libcudnn* | libnccl* | libnvrtc* | libnvJitLink*) ;;
    *) cp -L "$library" "$stage/lib/" ;;
  esac
done

# The library path of mirra's programs alone: the bundle's libraries and this machine's CUDA libraries
# (the toolkit's, or those of NVIDIA's Python wheels: a machine with PyTorch from pip has cuBLAS, cuDNN
# and NCCL there). Other programs, PyTorch among them, keep their own, so they load their own cuBLAS.
cat > "$stage/libexec/library-path.sh" <<'PATHS'
# Sourced: prints the library path of the bundle's programs, given the bundle's folder.
mirra_library_path() {
  local paths=("$1/lib") dir
  add() { [ -d "$1" ] && [[ ":$(IFS=:; echo "${paths[*]}"):" != *":$1:"* ]] && paths+=("$1"); }
  [ -n "${CUDA_HOME:-}" ] && add "$CUDA_HOME/lib64"
  add /usr/local/cuda/lib64
  add /usr/local/cuda/lib
  if command -v python3 >/dev/null; then
    while read -r dir; do [ -n "$dir" ] && add "$dir"; done < <(python3 - <<'PY' 2>/dev/null || true
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
for root in roots:
    for lib in sorted(glob.glob(os.path.join(root, "nvidia", "*", "lib"))):
        print(lib)
PY
)
  fi
  (IFS=:; echo "${paths[*]}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
}
PATHS
# bin/NAME runs libexec/NAME with that path (found once per run.sh, else once per call).
for binary in "${binaries[@]}"; do
  name=$(basename "$binary")
  cp "$build/$binary" "$stage/libexec/"
  cat > "$stage/bin/$name" <<WRAPPER
#!/usr/bin/env bash
# The bundle's $name, with the bundle's libraries and this machine's CUDA libraries on its library path.
here="\$(cd "\$(dirname "\$0")/.." && pwd)"
if [ -z "\${MIRRA_LIBRARY_PATH:-}" ]; then
  source "\$here/libexec/library-path.sh"
  MIRRA_LIBRARY_PATH=\$(mirra_library_path "\$here")
fi
LD_LIBRARY_PATH="\$MIRRA_LIBRARY_PATH" exec "\$here/libexec/$name" "\$@"
WRAPPER
  chmod +x "$stage/bin/$name"
done

cat > "$stage/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs a command of the bundle (default: scripts/gpu-check.sh, every stage) from the bundle's folder.
# The bundle's programs in bin/ put the bundle's libraries and this machine's CUDA libraries on their
# own library path; nothing else's changes.
#   ./run.sh scripts/gpu-check.sh --stage correctness --out DIR
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/libexec/library-path.sh"
export MIRRA_BUNDLE="$here" MIRRA_LIBRARY_PATH="$(mirra_library_path "$here")"
cd "$here"
if [ $# -eq 0 ]; then set -- scripts/gpu-check.sh; fi
exec "$@"
RUN
chmod +x "$stage/run.sh"

if [ "$with_data" = "--data" ]; then
  mkdir -p "$stage/data"
  cp /usr/share/datasets/fashion-mnist/*.gz "$stage/data/"
fi

tar -C "$stage_root" -cJf "$out" mirra-gpu
size=$(stat -c %s "$out")
echo "gpu-bundle: $out, $((size / 1024 / 1024)) MiB"
if [ "$with_data" != "--data" ] && [ "$size" -gt $((40 * 1024 * 1024)) ]; then
  echo "gpu-bundle: the bundle passes 40 MB" >&2
  exit 1
fi

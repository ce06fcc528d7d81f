#!/usr/bin/env bash
# The GPU check, on a machine with a CUDA device: inside a bundle from scripts/gpu-bundle.sh (through
# its run.sh) or from a build tree (scripts/gpu-check.sh BUILD_DIR). It lists the devices, runs the
# GPU tests and the ops' conformance on the GPU with MIRRA_REQUIRE_GPU=1 (a missing device fails),
# the conformance again under compute-sanitizer's memcheck where the tool exists, trains the MLP on
# gpu:0 for an epoch and Mirrored over two logical GPUs of gpu:0 for 200 steps, the CNN on gpu:0 in
# f32 and in bf16 and fp16 mixed precision for 100 steps each, the CNN Mirrored over two logical GPUs
# traced (its exposed communication per step), Mirrored with sharded optimizer state over two
# logical GPUs for 100 steps, the MLP with its steps captured as a CUDA graph for 400, times the on-device all-reduce against the GPU's copy rate,
# measures the executor's cost per GPU kernel against raw CUDA launches, and runs the GPU training
# benchmark next to PyTorch where PyTorch with CUDA is installed (with Fashion-MNIST from data/ or
# Debian's dataset-fashion-mnist).
# Prints a JSON summary as its last line; exits non-zero when a check failed.
set -uo pipefail
if [ -n "${MIRRA_BUNDLE:-}" ]; then
  root="$MIRRA_BUNDLE"
  mirra="$root/bin/mirra" examples="$root/bin/mirra-examples" gpu_tests="$root/bin/gpu_tests" ops_tests="$root/bin/ops_tests"
else
  build="${1:-build/release}"
  root="$(pwd)"
  mirra="$build/tools/mirra/mirra" examples="$build/examples/mirra-examples"
  gpu_tests="$build/tests/gpu_tests" ops_tests="$build/tests/ops_tests"
fi
export MIRRA_REQUIRE_GPU=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
results=()
failed=0

# step NAME COMMAND...: runs it, prints its output, records its status and seconds.
step() {
  local name="$1"
  shift
  echo "== $name"
  local start=$SECONDS
  "$@"
  local code=$?
  local seconds=$((SECONDS - start))
  local status=passed
  if [ "$code" -ne 0 ]; then status="failed (exit $code)"; failed=1; fi
  echo "== $name: $status in ${seconds} s"
  results+=("\"$name\": {\"status\": \"$status\", \"seconds\": $seconds}")
}

step list_devices "$mirra" devices
"$mirra" devices --json > "$work/devices.json" 2>/dev/null || echo '{}' > "$work/devices.json"
step gpu_tests "$gpu_tests"
step conformance env MIRRA_CONFORMANCE_BACKENDS=gpu "$ops_tests"
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [ -n "$sanitizer" ]; then
  step memcheck "$sanitizer" --tool memcheck --error-exitcode 1 env MIRRA_CONFORMANCE_BACKENDS=gpu "$ops_tests" -tc='Kernels.*'
else
  results+=("\"memcheck\": {\"status\": \"not run: compute-sanitizer not found\"}")
fi

data=""
for dir in "$root/data" /usr/share/datasets/fashion-mnist; do
  if [ -f "$dir/train-images-idx3-ubyte.gz" ]; then data="$dir"; break; fi
done
train_json='"not run: no Fashion-MNIST files"'
# One epoch of the benchmark MLP on gpu:0; its --json summary line has the throughput.
train_mlp() {
  "$examples" write mlp "$work/mlp.mirra" > /dev/null &&
    "$mirra" train "$work/mlp.mirra" --devices gpu:0 --strategy one_device --data "$data" --epochs 1 --batch-size 128 \
      --json | tee "$work/train.out"
}
# Mirrored over two logical GPUs of gpu:0 (summed on the GPU), 200 steps.
train_mlp_logical() {
  "$mirra" train "$work/mlp.mirra" --devices gpu:0,gpu:1 --logical-gpus-per-gpu 2 --data "$data" --steps 200 \
    --batch-size 256 --json | tee "$work/logical.out"
}
# The CNN on gpu:0 in f32, then in bf16 and in fp16 (loss scaling on the GPU) mixed precision, 100 steps each.
train_cnn_precisions() {
  "$examples" write cnn "$work/cnn.mirra" > /dev/null &&
    "$mirra" train "$work/cnn.mirra" --devices gpu:0 --strategy one_device --data "$data" --steps 100 --batch-size 128 \
      --json | tee "$work/cnn_f32.out" &&
    "$mirra" train "$work/cnn.mirra" --devices gpu:0 --strategy one_device --data "$data" --steps 100 --batch-size 128 \
      --mixed-precision bf16 --json | tee "$work/cnn_bf16.out" &&
    "$mirra" train "$work/cnn.mirra" --devices gpu:0 --strategy one_device --data "$data" --steps 100 --batch-size 128 \
      --mixed-precision fp16 --json | tee "$work/cnn_fp16.out"
}
# The CNN Mirrored over two logical GPUs of gpu:0, 50 steps traced, and how much of each step waits
# for its all-reduces (bench/exposed_communication.py over the trace).
exposed_communication_logical() {
  "$mirra" train "$work/cnn.mirra" --devices gpu:0,gpu:1 --logical-gpus-per-gpu 2 --data "$data" --steps 50 \
    --batch-size 256 --trace "$work/logical_cnn.trace.json" > /dev/null &&
    python3 "$root/bench/exposed_communication.py" "$work/logical_cnn.trace.json" | tee "$work/exposed.out"
}
# The MLP on gpu:0 with its steps captured as a CUDA graph (its launch-bound case), 400 steps.
train_mlp_cuda_graph() {
  "$mirra" train "$work/mlp.mirra" --devices gpu:0 --strategy one_device --data "$data" --steps 400 --batch-size 128 \
    --cuda-graph --json | tee "$work/cuda_graph.out"
}
# Mirrored over two logical GPUs of gpu:0 with sharded optimizer state (reduce-scattered on the host).
train_sharded_logical() {
  "$mirra" train "$work/mlp.mirra" --devices gpu:0,gpu:1 --logical-gpus-per-gpu 2 --data "$data" --steps 100 \
    --batch-size 256 --shard-optimizer-state --json | tee "$work/sharded.out"
}
# The last line of a step's output when it is a JSON object, else null.
json_of() {
  local line
  line=$(tail -n 1 "$1" 2>/dev/null)
  case "$line" in "{"*) echo "$line" ;; *) echo null ;; esac
}
logical_json='"not run: no Fashion-MNIST files"'
cnn_f32_json='"not run: no Fashion-MNIST files"' cnn_bf16_json="$cnn_f32_json" cnn_fp16_json="$cnn_f32_json"
sharded_json="$cnn_f32_json" exposed_json="$cnn_f32_json" cuda_graph_json="$cnn_f32_json"
if [ -n "$data" ]; then
  step train_mlp_gpu train_mlp
  train_json=$(tail -n 1 "$work/train.out" 2>/dev/null)
  case "$train_json" in "{"*) ;; *) train_json=null ;; esac
  step train_mlp_logical_gpus train_mlp_logical
  logical_json=$(tail -n 1 "$work/logical.out" 2>/dev/null)
  case "$logical_json" in "{"*) ;; *) logical_json=null ;; esac
  step train_cnn_gpu_f32_bf16_fp16 train_cnn_precisions
  cnn_f32_json=$(json_of "$work/cnn_f32.out") cnn_bf16_json=$(json_of "$work/cnn_bf16.out")
  cnn_fp16_json=$(json_of "$work/cnn_fp16.out")
  step exposed_communication_logical_gpus exposed_communication_logical
  exposed_json=$(json_of "$work/exposed.out")
  step train_mlp_sharded_logical_gpus train_sharded_logical
  sharded_json=$(json_of "$work/sharded.out")
  step train_mlp_cuda_graph train_mlp_cuda_graph
  cuda_graph_json=$(json_of "$work/cuda_graph.out")
fi

# The executor's cost per GPU kernel against back-to-back raw launches.
executor_overhead() { "$mirra" bench executor --device gpu:0 --nodes 20000 | tee "$work/executor.out"; }
step executor_overhead_gpu executor_overhead
executor_json=$(tail -n 1 "$work/executor.out" 2>/dev/null)
case "$executor_json" in "{"*) ;; *) executor_json=null ;; esac

# The on-device all-reduce over 2 and 4 logical GPUs of gpu:0 against the GPU's copy rate.
on_device_all_reduce() {
  "$mirra" bench allreduce --device gpu --replicas 2 4 --sizes-mib 1 16 64 256 --repetitions 5 | tee "$work/allreduce.out"
}
step on_device_all_reduce on_device_all_reduce
all_reduce_json=$(json_of "$work/allreduce.out")

# Throughput and memory next to PyTorch on the same GPU, where PyTorch with CUDA is installed.
bench_json='"not run: no Fashion-MNIST files or no PyTorch with CUDA"'
bench_script="$root/bench/gpu_training_vs_pytorch.py"
if [ -n "$data" ] && [ -f "$bench_script" ] && python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  gpu_bench() { python3 "$bench_script" --mirra "$mirra" --data "$data" | tee "$work/bench.out"; }
  step gpu_training_vs_pytorch gpu_bench
  bench_json=$(tail -n 1 "$work/bench.out" 2>/dev/null)
  case "$bench_json" in "{"*) ;; *) bench_json=null ;; esac
fi

echo "{\"check\": \"gpu\", $(IFS=,; echo "${results[*]}"), \"devices\": $(cat "$work/devices.json"), \"train_mlp_gpu_summary\": $train_json, \"train_mlp_logical_gpus_summary\": $logical_json, \"train_cnn_f32_summary\": $cnn_f32_json, \"train_cnn_bf16_summary\": $cnn_bf16_json, \"train_cnn_fp16_summary\": $cnn_fp16_json, \"train_mlp_sharded_logical_gpus_summary\": $sharded_json, \"train_mlp_cuda_graph_summary\": $cuda_graph_json, \"exposed_communication_logical_gpus\": $exposed_json, \"executor_overhead\": $executor_json, \"on_device_all_reduce\": $all_reduce_json, \"benchmark\": $bench_json}"
exit $failed

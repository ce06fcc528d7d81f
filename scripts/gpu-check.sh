#!/usr/bin/env bash
# The GPU check, on a machine with a CUDA device, in stages that each fit a short run and keep what
# they found as they go: inside a bundle from scripts/gpu-bundle.sh (through its run.sh) or from a
# build tree (scripts/gpu-check.sh ... BUILD_DIR).
#
#   scripts/gpu-check.sh [--stage correctness|training|memcheck|benchmarks|all] [--out DIR]
#                        [--stage-seconds N] [BUILD_DIR]
#
# Stages (all: in this order, correctness first):
#   correctness  the devices, the GPU tests and the ops' conformance on the GPU, with MIRRA_REQUIRE_GPU=1
#                (a missing device fails);
#   training     end-to-end runs on Fashion-MNIST (from data/ or Debian's dataset-fashion-mnist): the MLP
#                on gpu:0 and Mirrored over two logical GPUs of it, the CNN in f32, bf16 and fp16, sharded
#                optimizer state, steps captured as a CUDA graph;
#   memcheck     compute-sanitizer's memcheck over one conformance case of each kernel family, skipped
#                with a note where the tool is missing or cannot attach to the device;
#   benchmarks   the executor's cost per GPU kernel, the on-device all-reduce against the GPU's copy
#                rate, the CNN's exposed communication over two logical GPUs, and training next to
#                PyTorch where PyTorch with CUDA is installed.
# Each stage has --stage-seconds (default 240) in all: every step runs under what is left of it, and a
# step that finds too little left is recorded as not run. Each step's result is appended to
# DIR/gpu-check.jsonl (default DIR: gpu-check-results) the moment it ends, one JSON object a line
# (stage, step, status, seconds, and the step's own JSON summary where its last line is one), and its
# output to DIR/<stage>.log, so a run cut short still leaves what it found. The last line printed
# gathers every step's result; the exit status is non-zero when a step failed or ran out of time.
set -uo pipefail

stage=all out=gpu-check-results stage_seconds=240 build=build/release
while [ $# -gt 0 ]; do
  case "$1" in
    --stage) stage="${2:?--stage needs a stage}"; shift 2 ;;
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    --stage-seconds) stage_seconds="${2:?--stage-seconds needs a number}"; shift 2 ;;
    -*) echo "gpu-check: unknown option $1" >&2; exit 2 ;;
    *) build="$1"; shift ;;
  esac
done
case "$stage" in
  correctness | training | memcheck | benchmarks) stages=("$stage") ;;
  all) stages=(correctness training memcheck benchmarks) ;;
  *) echo "gpu-check: unknown stage '$stage' (correctness, training, memcheck, benchmarks or all)" >&2; exit 2 ;;
esac
case "$stage_seconds" in '' | *[!0-9]*) echo "gpu-check: --stage-seconds must be a whole number" >&2; exit 2 ;; esac

if [ -n "${MIRRA_BUNDLE:-}" ]; then
  root="$MIRRA_BUNDLE"
  mirra="$root/bin/mirra" examples="$root/bin/mirra-examples" gpu_tests="$root/bin/gpu_tests" ops_tests="$root/bin/ops_tests"
  export MIRRA_SOURCE_DIR="$root/source"  # the golden texts and reference values the op tests read
else
  root="$(pwd)"
  mirra="$build/tools/mirra/mirra" examples="$build/examples/mirra-examples"
  gpu_tests="$build/tests/gpu_tests" ops_tests="$build/tests/ops_tests"
fi
export MIRRA_REQUIRE_GPU=1
mkdir -p "$out" || exit 2
results="$out/gpu-check.jsonl"
: > "$results"
for current in "${stages[@]}"; do : > "$out/$current.log"; done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

# record STEP STATUS SECONDS SUMMARY: one line of the results file, written at once.
record() {
  echo "{\"stage\": \"$current\", \"step\": \"$1\", \"status\": \"$2\", \"seconds\": $3, \"summary\": $4}" >> "$results"
}

# step NAME COMMAND...: runs COMMAND under what is left of the stage's time, shows its output and keeps
# it in the stage's log, and records its result.
step() {
  local name="$1"
  shift
  local left=$((stage_deadline - SECONDS))
  if [ "$left" -lt 10 ]; then
    record "$name" "not run: the stage's ${stage_seconds} s were spent" 0 null
    failed=1
    return 1
  fi
  echo "== $current/$name" | tee -a "$out/$current.log"
  local start=$SECONDS
  : > "$work/step.out"
  timeout --kill-after=10 "$left" "$@" 2>&1 | tee -a "$work/step.out" "$out/$current.log"
  local code=${PIPESTATUS[0]}
  local seconds=$((SECONDS - start)) status=passed
  if [ "$code" -eq 124 ] || [ "$code" -eq 137 ]; then
    status="timed out: the stage's ${stage_seconds} s were spent"
  elif [ "$code" -ne 0 ]; then
    status="failed (exit $code)"
  fi
  [ "$status" = passed ] || failed=1
  local summary
  summary=$(tail -n 1 "$work/step.out")
  case "$summary" in "{"*"}") ;; *) summary=null ;; esac
  echo "== $current/$name: $status in ${seconds} s" | tee -a "$out/$current.log"
  record "$name" "$status" "$seconds" "$summary"
  [ "$status" = passed ]
}

# note STEP WHY: a step left out for a reason that is not a failure (no data, no tool).
note() { record "$1" "not run: $2" 0 null; echo "== $current/$1: not run: $2"; }

data=""
for dir in "$root/data" /usr/share/datasets/fashion-mnist; do
  if [ -f "$dir/train-images-idx3-ubyte.gz" ]; then data="$dir"; break; fi
done

# The example models the training and benchmark stages run.
write_models() { step write_mlp "$examples" write mlp "$work/mlp.mirra" && step write_cnn "$examples" write cnn "$work/cnn.mirra"; }

stage_correctness() {
  step list_devices "$mirra" devices --json
  step gpu_tests "$gpu_tests"
  step conformance env MIRRA_CONFORMANCE_BACKENDS=gpu "$ops_tests"
}

stage_training() {
  if [ -z "$data" ]; then note training "no Fashion-MNIST files"; return; fi
  write_models || return
  local train=("$mirra" train --data "$data" --json)
  step mlp_one_epoch "${train[@]}" "$work/mlp.mirra" --devices gpu:0 --strategy one_device --epochs 1 --batch-size 128
  step mlp_mirrored_logical_gpus "${train[@]}" "$work/mlp.mirra" --devices gpu:0,gpu:1 --logical-gpus-per-gpu 2 \
    --steps 200 --batch-size 256
  local cnn=("${train[@]}" "$work/cnn.mirra" --devices gpu:0 --strategy one_device --steps 100 --batch-size 128)
  step cnn_f32 "${cnn[@]}"
  step cnn_bf16 "${cnn[@]}" --mixed-precision bf16
  step cnn_fp16 "${cnn[@]}" --mixed-precision fp16
  step mlp_sharded_logical_gpus "${train[@]}" "$work/mlp.mirra" --devices gpu:0,gpu:1 --logical-gpus-per-gpu 2 \
    --steps 100 --batch-size 256 --shard-optimizer-state
  step mlp_cuda_graph "${train[@]}" "$work/mlp.mirra" --devices gpu:0 --strategy one_device --steps 400 \
    --batch-size 128 --cuda-graph
}

# One conformance case of each kernel family: memcheck runs 10-100 times slower than the kernels.
memcheck_cases='Kernels.Transpose.*,Kernels.Slice_and_Pad.*,Kernels.Cast.*,Kernels.unary.match_reference,'
memcheck_cases+='Kernels.binary.match_reference_with_broadcasting,Kernels.MatMul.matches_triple_loop,'
memcheck_cases+='Kernels.Conv2D.matches_direct_convolution,Kernels.Conv2DBackprop.*,Kernels.FusedConv2D.matches*,'
memcheck_cases+='Kernels.PoolGrad.match_scatter_loops,Kernels.Softmax_and_LogSoftmax.*,'
memcheck_cases+='Kernels.SparseSoftmaxCrossEntropyWithLogits.*,Kernels.reductions.match_reference,'
memcheck_cases+='Kernels.AllReduce.*,Kernels.UpdateLossScale.*'

stage_memcheck() {
  local sanitizer
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
  if [ -z "$sanitizer" ]; then note memcheck "compute-sanitizer not found"; return; fi
  # Some GPU runtimes (sandboxes) refuse the tool: "Device not supported". Try it on a program that
  # touches the device first, and say so instead of failing the check.
  local probe
  probe=$(timeout 60 "$sanitizer" --tool memcheck --error-exitcode 1 "$mirra" devices 2>&1)
  if [ $? -ne 0 ] || grep -qi "not supported" <<< "$probe"; then
    note memcheck "compute-sanitizer cannot attach here: $(grep -i -m 1 "error\|not supported" <<< "$probe" | sed 's/^=* *//' | tr -d '"\\' | cut -c1-200)"
    return
  fi
  # --report-api-errors no: NCCL asks for kernels of every architecture it was built for and ignores
  # the refusals (error 209), which the tool would count; mirra's own CUDA calls fail its kernels.
  step memcheck "$sanitizer" --tool memcheck --report-api-errors no --error-exitcode 1 env MIRRA_CONFORMANCE_BACKENDS=gpu "$ops_tests" \
    -tc="$memcheck_cases"
}

stage_benchmarks() {
  step executor_overhead "$mirra" bench executor --device gpu:0 --nodes 20000
  step on_device_all_reduce "$mirra" bench allreduce --device gpu --replicas 2 4 --sizes-mib 1 16 64 256 --repetitions 5
  if [ -z "$data" ]; then note training_benchmarks "no Fashion-MNIST files"; return; fi
  write_models || return
  # How much of each of 50 traced steps of the CNN over two logical GPUs waits for its all-reduces.
  step cnn_logical_gpus_traced "$mirra" train "$work/cnn.mirra" --devices gpu:0,gpu:1 --logical-gpus-per-gpu 2 \
    --data "$data" --steps 50 --batch-size 256 --trace "$work/logical_cnn.trace.json" &&
    step exposed_communication python3 "$root/bench/exposed_communication.py" "$work/logical_cnn.trace.json"
  if ! python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    note training_vs_pytorch "no PyTorch with CUDA"
    return
  fi
  local model
  for model in mlp cnn; do
    step "${model}_vs_pytorch" python3 "$root/bench/gpu_training_vs_pytorch.py" --mirra "$mirra" --data "$data" --models "$model"
  done
}

for current in "${stages[@]}"; do
  stage_deadline=$((SECONDS + stage_seconds))
  echo "=== stage $current (at most ${stage_seconds} s)"
  "stage_$current"
done
echo "{\"check\": \"gpu\", \"stages\": \"${stages[*]}\", \"steps\": [$(paste -sd, "$results")]}"
exit $failed

#!/usr/bin/env bash
# scripts/gpu-check.sh's stages, without a GPU: a bundle of stand-in programs (a runner, test binaries
# and compute-sanitizer that answer as the real ones do, taking as long as they are told) shows that
# every step's result is written the moment it ends, that a step past the stage's time is stopped and
# the steps after it recorded as not run, that a compute-sanitizer which cannot attach to the device is
# a note rather than a failure, and that the last line gathers every result as JSON.
#   gpu_check_test.sh SOURCE_DIR WORK_DIR
set -euo pipefail
source_dir=$(realpath "$1") work=$2
rm -rf "$work" && mkdir -p "$work/bundle/bin" "$work/bundle/data" "$work/tools"
bundle="$work/bundle"
touch "$bundle/data/train-images-idx3-ubyte.gz"

stand_in() {  # stand_in PATH BODY: an executable shell script
  printf '#!/usr/bin/env bash\n%s\n' "$2" > "$1"
  chmod +x "$1"
}
stand_in "$bundle/bin/mirra" 'case "$1" in
  devices) echo "{\"gpus\": [{\"name\": \"stand-in\"}]}" ;;
  train) sleep "${TRAIN_SECONDS:-0}"; echo "{\"final_loss\": 0.5}" ;;
  *) echo "{\"ran\": \"$1\"}" ;;
esac'
stand_in "$bundle/bin/mirra-examples" 'touch "$3"'
stand_in "$bundle/bin/gpu_tests" 'echo "[doctest] Status: SUCCESS!"'
stand_in "$bundle/bin/ops_tests" 'sleep "${OPS_SECONDS:-0}"; echo "[doctest] Status: SUCCESS!"'
stand_in "$work/tools/compute-sanitizer" 'echo "========= Error: Device not supported"; exit 1'

check() {  # check OUT ARGS...: runs the check in the stand-in bundle; its exit status in $code
  local out="$1"
  shift
  code=0
  MIRRA_BUNDLE="$bundle" PATH="$work/tools:$PATH" "$source_dir/scripts/gpu-check.sh" --out "$out" "$@" \
    > "$out.stdout" 2>&1 || code=$?
}
status_of() {  # status_of OUT STEP: the status recorded for STEP
  python3 -c 'import json, sys
lines = [json.loads(line) for line in open(sys.argv[1] + "/gpu-check.jsonl")]
print(next(line["status"] for line in lines if line["step"] == sys.argv[2]))' "$1" "$2"
}
expect() {  # expect WHAT ACTUAL PATTERN
  if [[ ! "$2" =~ $3 ]]; then
    echo "FAILED: $1: got '$2', expected /$3/"
    exit 1
  fi
  echo "ok: $1: $2"
}

echo "== every step of a stage passes; the last line gathers them as JSON"
check "$work/pass" --stage correctness
expect "exit status" "$code" '^0$'
expect "gpu_tests" "$(status_of "$work/pass" gpu_tests)" '^passed$'
expect "the summary of list_devices" "$(python3 -c 'import json, sys
print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["steps"][0]["summary"]["gpus"][0]["name"])' "$work/pass.stdout")" \
  '^stand-in$'
expect "the stage's log" "$(grep -c '^== correctness/' "$work/pass/correctness.log")" '^6$'

echo "== a step past the stage's time is stopped; what ended before it is kept"
OPS_SECONDS=60 check "$work/slow" --stage correctness --stage-seconds 12
expect "exit status" "$code" '^1$'
expect "gpu_tests" "$(status_of "$work/slow" gpu_tests)" '^passed$'
expect "conformance" "$(status_of "$work/slow" conformance)" '^timed out'

echo "== steps that find too little of the stage's time left are recorded as not run"
TRAIN_SECONDS=4 check "$work/spent" --stage training --stage-seconds 16
expect "exit status" "$code" '^1$'
expect "mlp_one_epoch" "$(status_of "$work/spent" mlp_one_epoch)" '^passed$'
expect "cnn_f32" "$(status_of "$work/spent" cnn_f32)" "^not run: the stage's 16 s were spent"
expect "mlp_cuda_graph" "$(status_of "$work/spent" mlp_cuda_graph)" "^not run: the stage's 16 s were spent"

echo "== a compute-sanitizer that cannot attach to the device is a note, not a failure"
check "$work/memcheck" --stage memcheck
expect "exit status" "$code" '^0$'
expect "memcheck" "$(status_of "$work/memcheck" memcheck)" '^not run: compute-sanitizer cannot attach here: .*Device not supported'

echo "== an unknown stage is refused"
check "$work/unknown" --stage everything
expect "exit status" "$code" '^2$'
expect "the message" "$(cat "$work/unknown.stdout")" "unknown stage 'everything'"

#!/usr/bin/env bash
# Runs the libFuzzer targets (model/checkpoint loader, config parser, data files, a parameter-server
# task's transfers) under ASan + UBSan,
# each for SECONDS (default 60), from a seed corpus of valid files. A crash stops with a non-zero exit
# and leaves the input in BUILD_DIR/fuzz/crashes/; copy it to tests/fuzz/regressions/<model|config|data|transfer>/
# and it becomes a regression test. Reuses BUILD_DIR (default build/asan) when it was configured with
# MIRRA_FUZZ=ON, as scripts/test.sh does.
#   scripts/fuzz.sh [SECONDS] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
build="${2:-build/asan}"
jobs="${MIRRA_JOBS:-2}"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
  -DCMAKE_CXX_COMPILER=clang++ -DMIRRA_SANITIZE=address,undefined -DMIRRA_FUZZ=ON -DMIRRA_CUDA=OFF "${launcher[@]}" >/dev/null
cmake --build "$build" -j "$jobs" --target model_loader_fuzzer config_parser_fuzzer data_file_fuzzer transfer_fuzzer write_seed_corpus

work="$build/fuzz"
rm -rf "$work/corpus"
mkdir -p "$work/corpus/model" "$work/corpus/config" "$work/corpus/data" "$work/corpus/transfer" "$work/crashes"
"$build/tests/fuzz/write_seed_corpus" "$work/corpus/model" "$work/corpus/config" "$work/corpus/data" "$work/corpus/transfer"
cp examples/configs/*.json "$work/corpus/config/"
cp tests/fuzz/regressions/model/* "$work/corpus/model/" 2>/dev/null || true
cp tests/fuzz/regressions/config/* "$work/corpus/config/" 2>/dev/null || true
cp tests/fuzz/regressions/data/* "$work/corpus/data/" 2>/dev/null || true
cp tests/fuzz/regressions/transfer/* "$work/corpus/transfer/" 2>/dev/null || true

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
for pair in model_loader_fuzzer:model config_parser_fuzzer:config data_file_fuzzer:data transfer_fuzzer:transfer; do
  fuzzer="${pair%%:*}"
  kind="${pair##*:}"
  echo "== $fuzzer for ${seconds} s"
  if ! "$build/tests/fuzz/$fuzzer" "$work/corpus/$kind" -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=4096 \
      -timeout=10 -print_final_stats=1 -artifact_prefix="$work/crashes/$fuzzer-" >"$work/$fuzzer.log" 2>&1; then
    tail -n 60 "$work/$fuzzer.log"
    echo "fuzz: $fuzzer failed; the input is in $work/crashes/" >&2
    exit 1
  fi
  tail -n 6 "$work/$fuzzer.log"
done
echo "fuzz: no crashes"

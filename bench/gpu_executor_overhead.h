// The executor's per-node cost on a GPU: a chain of `nodes` Neg kernels on a one-element tensor on
// gpu:0, run by a session, next to the same kernel launched `nodes` times back to back on a CUDA
// stream with no executor (the raw launch rate, the floor), in the same run. Small models are
// launch-bound, so this is the overhead that decides their speed.
#pragma once

#include <nlohmann/json.hpp>

#include "graph/status.h"

namespace mirra::bench {

struct GpuExecutorOverheadOptions {
  int nodes = 10000;
  int threads = 2;
  int repetitions = 5;  // the best of these is reported
};

graph::Expected<nlohmann::json> run_gpu_executor_overhead(const GpuExecutorOverheadOptions& options);

}  // namespace mirra::bench

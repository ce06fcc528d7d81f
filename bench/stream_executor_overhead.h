// The executor's per-node cost on a device with streams of its own: a chain of `nodes` Neg kernels on
// a one-element tensor on the device, run by a session, next to the floor measured in the same run
// with no executor: on gpu:0 the same kernel launched `nodes` times back to back on a CUDA stream
// (the raw launch rate); on cpu_async:0, the GPU's model, the same negation run as `nodes` works
// enqueued back to back on a stream of the device's kind. Small models are launch-bound, so this is
// the overhead that decides their speed.
#pragma once

#include <nlohmann/json.hpp>

#include "graph/device_id.h"
#include "graph/status.h"

namespace mirra::bench {

struct StreamExecutorOverheadOptions {
  graph::DeviceId device{graph::DeviceKind::gpu, 0};  // gpu:0 or cpu_async:0
  int nodes = 10000;
  int threads = 2;
  int repetitions = 5;  // the best of these is reported
};

graph::Expected<nlohmann::json> run_stream_executor_overhead(const StreamExecutorOverheadOptions& options);

}  // namespace mirra::bench

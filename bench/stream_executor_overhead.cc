// run_stream_executor_overhead: the session's chain of kernels on a device with streams against the
// floor of its kind (raw CUDA launches, or raw work on a worker stream).
#include "bench/stream_executor_overhead.h"

#include <algorithm>
#include <chrono>

#include "bench/gpu_floors.h"
#include "ops/ops.h"
#include "runtime/session.h"
#include "runtime/stream.h"

namespace mirra::bench {

namespace {

using Clock = std::chrono::steady_clock;

// Seconds for `works` back-to-back one-element negations enqueued on a worker stream (a cpu_async
// device's), until the last has run, the best of `repetitions`.
double raw_stream_seconds(int works, int repetitions) {
  runtime::WorkerStream stream("floor");
  float value = 1.0f;
  double best = 1e30;
  for (int r = 0; r < repetitions; ++r) {
    const auto start = Clock::now();
    for (int i = 0; i < works; ++i) stream.enqueue([&value] { value = -value; });
    stream.record()->wait();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return best;
}

}  // namespace

graph::Expected<nlohmann::json> run_stream_executor_overhead(const StreamExecutorOverheadOptions& options) {
  if (options.nodes <= 0 || options.repetitions <= 0) return graph::invalid_argument("nodes and repetitions must be positive");
  const bool gpu = options.device.kind == graph::DeviceKind::gpu;
  if (!gpu && options.device.kind != graph::DeviceKind::cpu_async) {
    return graph::invalid_argument("the executor's cost on streams is measured on a gpu or cpu_async device, not " +
                                   options.device.to_string());
  }
  double floor = 0;
  if (gpu) {
    MIRRA_ASSIGN_OR_RETURN(floor, raw_launch_seconds(options.nodes, options.repetitions));
  } else {
    floor = raw_stream_seconds(options.nodes, options.repetitions);
  }
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  b.set_device(options.device);
  graph::ValueRef value = ops::placeholder(b, "x", graph::DType::f32, {1});
  for (int i = 0; i < options.nodes; ++i) value = ops::neg(b, value);
  MIRRA_RETURN_IF_ERROR(b.status());
  runtime::Session session(g, ops::kernels(), {.threads = options.threads});
  const runtime::Feeds feeds{{"x", runtime::Tensor::from<float>({1}, {1.0f})}};
  MIRRA_RETURN_IF_ERROR(session.run(feeds, {value}).status());  // builds the plan, fills the caches
  double best = 1e30;
  for (int r = 0; r < options.repetitions; ++r) {
    const auto start = Clock::now();
    MIRRA_RETURN_IF_ERROR(session.run(feeds, {value}).status());
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  const double mirra_ns = best / options.nodes * 1e9, floor_ns = floor / options.nodes * 1e9;
  const char* floor_name = gpu ? "raw_launch_ns" : "raw_stream_work_ns";
  return nlohmann::json{{"benchmark", "stream_executor_overhead"},
                        {"device", options.device.to_string()},
                        {"nodes", options.nodes},
                        {"threads", options.threads},
                        {"repetitions", options.repetitions},
                        {"mirra_ns_per_node", mirra_ns},
                        {floor_name, floor_ns},
                        {"ratio_mirra_over_floor", mirra_ns / floor_ns}};
}

}  // namespace mirra::bench

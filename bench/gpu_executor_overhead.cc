// run_gpu_executor_overhead: the session's chain of GPU kernels against the raw launch floor.
#include "bench/gpu_executor_overhead.h"

#include <chrono>

#include "bench/gpu_floors.h"
#include "ops/ops.h"
#include "runtime/session.h"

namespace mirra::bench {

graph::Expected<nlohmann::json> run_gpu_executor_overhead(const GpuExecutorOverheadOptions& options) {
  if (options.nodes <= 0 || options.repetitions <= 0) return graph::invalid_argument("nodes and repetitions must be positive");
  MIRRA_ASSIGN_OR_RETURN(const double raw, raw_launch_seconds(options.nodes, options.repetitions));
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  b.set_device(graph::DeviceId{graph::DeviceKind::gpu, 0});
  graph::ValueRef value = ops::placeholder(b, "x", graph::DType::f32, {1});
  for (int i = 0; i < options.nodes; ++i) value = ops::neg(b, value);
  MIRRA_RETURN_IF_ERROR(b.status());
  runtime::Session session(g, ops::kernels(), {.threads = options.threads});
  const runtime::Feeds feeds{{"x", runtime::Tensor::from<float>({1}, {1.0f})}};
  MIRRA_RETURN_IF_ERROR(session.run(feeds, {value}).status());  // builds the plan, fills the caches
  double best = 1e30;
  for (int r = 0; r < options.repetitions; ++r) {
    const auto start = std::chrono::steady_clock::now();
    MIRRA_RETURN_IF_ERROR(session.run(feeds, {value}).status());
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const double mirra_ns = best / options.nodes * 1e9, raw_ns = raw / options.nodes * 1e9;
  return nlohmann::json{{"benchmark", "gpu_executor_overhead"},
                        {"device", "gpu:0"},
                        {"nodes", options.nodes},
                        {"threads", options.threads},
                        {"repetitions", options.repetitions},
                        {"mirra_ns_per_node", mirra_ns},
                        {"raw_launch_ns", raw_ns},
                        {"ratio_mirra_over_raw", mirra_ns / raw_ns}};
}

}  // namespace mirra::bench

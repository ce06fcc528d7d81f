// The on-device all-reduce against the device's copy rate.
#include "bench/on_device_all_reduce.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "bench/gpu_floors.h"
#include "bench/streaming_bandwidth.h"
#include "ops/ops.h"
#include "runtime/session.h"

namespace mirra::bench {

namespace {

// Fills on N logical devices of device 0 and their AllReduce on the first (every rank's node there,
// sharing its memory, as the on-device plan places them): two targets.
struct FillsAndAllReduce {
  graph::Graph graph;
  graph::NodeId fills = graph::kInvalidNode;
  graph::NodeId all_reduce = graph::kInvalidNode;
};

FillsAndAllReduce fills_and_all_reduce(graph::DeviceKind kind, int replicas, int64_t elements) {
  FillsAndAllReduce g;
  graph::Builder b(g.graph, ops::registry());
  std::vector<graph::ValueRef> buffers;
  std::vector<graph::NodeId> fills;
  for (int r = 0; r < replicas; ++r) {
    b.set_device(graph::DeviceId{kind, r});
    buffers.push_back(ops::fill(b, {elements}, 1.0 + r));
    fills.push_back(buffers.back().node);
  }
  b.set_device(graph::DeviceId{kind, 0});
  std::vector<graph::NodeId> ranks;
  for (int r = 0; r < replicas; ++r) {
    ranks.push_back(ops::all_reduce(b, {buffers[static_cast<size_t>(r)]},
                                    {.group = "all_reduce", .rank = r, .ranks = replicas, .shared_memory = true})
                        .front()
                        .node);
  }
  b.set_device(std::nullopt);
  g.all_reduce = ops::no_op(b, "all_reduce", ranks);
  g.fills = ops::no_op(b, "fills", fills);
  MIRRA_CHECK(b.status().ok(), b.status().to_string());
  return g;
}

// Best seconds of `session` running `target`, over `repetitions` runs after a warm-up.
graph::Expected<double> best_seconds(runtime::Session& session, graph::NodeId target, int repetitions) {
  double best = 1e30;
  for (int rep = 0; rep <= repetitions; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    auto out = session.run({}, {}, {target});
    if (!out.ok()) return out.status();
    if (rep > 0) best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace

graph::Expected<nlohmann::json> run_on_device_all_reduce(const OnDeviceAllReduceOptions& options) {
  const bool gpu = options.kind == graph::DeviceKind::gpu;
  nlohmann::json results = nlohmann::json::array();
  for (int replicas : options.replicas) {
    for (int64_t mib : options.sizes_mib) {
      const int64_t bytes = mib << 20;
      double copy_gbps = 0;
      if (gpu) {
        MIRRA_ASSIGN_OR_RETURN(copy_gbps, device_copy_gbps(bytes, options.repetitions));
      } else {
        copy_gbps = add_inplace_gbps(options.threads, options.repetitions, replicas * bytes);
      }
      const FillsAndAllReduce g = fills_and_all_reduce(options.kind, replicas, bytes / 4);
      runtime::Session session(g.graph, ops::kernels(), {.threads = options.threads, .logical_gpus_per_gpu = replicas});
      MIRRA_ASSIGN_OR_RETURN(const double fills, best_seconds(session, g.fills, options.repetitions));
      MIRRA_ASSIGN_OR_RETURN(const double both, best_seconds(session, g.all_reduce, options.repetitions));
      const double seconds = std::max(both - fills, 1e-9);
      const double moved = 2.0 * static_cast<double>(replicas) * static_cast<double>(bytes);
      const double bound_seconds = moved / (copy_gbps * 1e9);
      results.push_back({{"replicas", replicas},
                         {"mib", mib},
                         {"ms", seconds * 1e3},
                         {"bound_ms", bound_seconds * 1e3},
                         {"copy_GBps", copy_gbps},
                         {"fraction_of_bound", bound_seconds / seconds},
                         {"GBps", moved / seconds / 1e9}});
    }
  }
  return nlohmann::json{
      {"benchmark", std::string("on-device all-reduce (sum, f32) over logical ") + (gpu ? "GPUs of gpu:0" : "cpu_async devices") +
                        " vs the device's copy rate"},
      {"bound", gpu ? "2 x replicas x size bytes at copy_GBps, a device-to-device cudaMemcpy's rate (bytes read and written)"
                    : "2 x replicas x size bytes at copy_GBps, the host's in-place a += b rate over the same working set"},
      {"timing", "the step with the all-reduce less the step of the fills that make its buffers on the devices"},
      {"results", results}};
}

}  // namespace mirra::bench

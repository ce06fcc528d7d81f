// All-reduce bandwidth against the streaming-memory bound.
#include "bench/all_reduce_bandwidth.h"

#include "bench/streaming_bandwidth.h"

#include <algorithm>
#include <string>

#include "ops/ops.h"
#include "runtime/session.h"

namespace mirra::bench {

namespace {

// Best seconds of one AllReduce over `replicas` buffers of `mib` MiB, from the executor's timeline.
double all_reduce_seconds(int replicas, int64_t mib, int threads, int repetitions) {
  const AllReduceGraph g = all_reduce_graph(replicas, mib, 1.0f);
  runtime::Session session(g.graph, ops::kernels(), {.threads = threads, .trace = true});
  double best = 1e30;
  for (int rep = 0; rep < repetitions + 1; ++rep) {
    auto out = session.run(g.feeds, {}, {g.all_reduce});
    MIRRA_CHECK(out.ok(), out.status().to_string());
    if (rep > 0) best = std::min(best, all_reduce_seconds_of(session, g));
  }
  return best;
}

}  // namespace

double all_reduce_seconds_of(const runtime::Session& session, const AllReduceGraph& g) {
  int64_t start = 0, end = 0;
  for (const runtime::NodeTiming& t : session.last_timeline()) {
    if (std::find(g.ranks.begin(), g.ranks.end(), t.node) == g.ranks.end()) continue;
    start = std::max(start, t.start_ns);
    end = std::max(end, t.end_ns);
  }
  return static_cast<double>(end - start) * 1e-9;
}

AllReduceGraph all_reduce_graph(int replicas, int64_t mib, float first_value, const ops::CollectiveOptions& collective) {
  AllReduceGraph g;
  graph::Builder b(g.graph, ops::registry());
  const int64_t elements = mib << 20 >> 2;
  g.group = "all_reduce";
  for (int r = 0; r < replicas; ++r) {
    const std::string name = "replica_" + std::to_string(r);
    const graph::ValueRef input = ops::mul(b, ops::placeholder(b, name, graph::DType::f32, {elements}), ops::scalar(b, 1.0f));
    std::vector<float> values(static_cast<size_t>(elements), first_value + static_cast<float>(r));
    g.feeds.emplace(name, runtime::Tensor::from<float>({elements}, std::span<const float>(values)));
    g.ranks.push_back(ops::all_reduce(b, {input}, {.group = g.group, .rank = r, .ranks = replicas}, "sum", collective).front().node);
  }
  g.all_reduce = ops::no_op(b, "all_reduce", g.ranks);
  MIRRA_CHECK(b.status().ok(), b.status().to_string());
  return g;
}

nlohmann::json run_all_reduce_bandwidth(const AllReduceBandwidthOptions& options) {
  nlohmann::json results = nlohmann::json::array();
  for (int replicas : options.replicas) {
    for (int64_t mib : options.sizes_mib) {
      // The bound over the bytes the all-reduce touches (every replica's buffer), measured next to it.
      const int64_t working_set = replicas * (mib << 20);
      const double bound_gbps = add_inplace_gbps(options.threads, options.repetitions, working_set);
      const double seconds = all_reduce_seconds(replicas, mib, options.threads, options.repetitions);
      const double bytes = 2.0 * static_cast<double>(working_set);
      const double bound_seconds = bytes / (bound_gbps * 1e9);
      results.push_back({{"replicas", replicas},
                         {"mib", mib},
                         {"ms", seconds * 1e3},
                         {"bound_ms", bound_seconds * 1e3},
                         {"add_inplace_GBps", bound_gbps},
                         {"fraction_of_bound", bound_seconds / seconds},
                         {"GBps", bytes / seconds / 1e9}});
    }
  }
  return {{"benchmark", "in-process all-reduce (sum, f32) vs streaming memory bound"},
          {"threads", options.threads},
          {"bound", "2 x replicas x size bytes at add_inplace_GBps, the in-place a += b rate over the same working set "
                    "(replicas x size bytes)"},
          {"results", results}};
}

}  // namespace mirra::bench

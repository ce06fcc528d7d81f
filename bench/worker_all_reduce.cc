// The cross-worker all-reduce through a Session on every worker.
#include "bench/worker_all_reduce.h"

#include <algorithm>
#include <string>

#include "ops/ops.h"
#include "runtime/collectives/worker_collective.h"
#include "runtime/session.h"

namespace mirra::bench {

namespace {

// Every worker's seconds, exchanged; the slowest counts (the all-reduce ends for all when the last
// finishes).
graph::Expected<double> slowest(runtime::WorkerCollective& workers, double seconds) {
  MIRRA_ASSIGN_OR_RETURN(const std::vector<std::string> all,
                         workers.exchange(std::to_string(seconds), runtime::deadline_after(std::chrono::minutes(5))));
  double most = 0;
  for (const std::string& s : all) most = std::max(most, std::stod(s));
  return most;
}

// Best seconds of one AllReduce over `replicas` local buffers of `mib` MiB on every worker.
graph::Expected<double> worker_all_reduce_seconds(const std::shared_ptr<runtime::WorkerCollective>& workers, int replicas,
                                                  int64_t mib, int threads, int repetitions) {
  graph::Graph g;
  graph::Builder b(g, ops::registry());
  const int64_t elements = mib << 20 >> 2;
  std::vector<graph::ValueRef> inputs;
  runtime::Feeds feeds;
  for (int r = 0; r < replicas; ++r) {
    const std::string name = "replica_" + std::to_string(r);
    inputs.push_back(ops::mul(b, ops::placeholder(b, name, graph::DType::f32, {elements}), ops::scalar(b, 1.0f)));
    std::vector<float> values(static_cast<size_t>(elements), static_cast<float>(workers->rank() + r + 1));
    feeds.emplace(name, runtime::Tensor::from<float>({elements}, std::span<const float>(values)));
  }
  const graph::NodeId reduce = ops::all_reduce(b, inputs, replicas, "sum", {.implementation = "mpi"}).front().node;
  MIRRA_RETURN_IF_ERROR(b.status());
  // A group per size: each its own communicator, as each bucket has.
  MIRRA_RETURN_IF_ERROR(workers->prepare({g.node(reduce).name}));
  runtime::Session session(g, ops::kernels(), {.threads = threads, .trace = true, .collectives = {workers}});
  double best = 1e30;
  for (int rep = 0; rep < repetitions + 1; ++rep) {
    MIRRA_RETURN_IF_ERROR(slowest(*workers, 0).status());  // a barrier
    MIRRA_RETURN_IF_ERROR(session.run(feeds, {}, {reduce}).status());
    double seconds = 0;
    for (const runtime::NodeTiming& t : session.last_timeline()) {
      if (t.node == reduce) seconds = static_cast<double>(t.end_ns - t.start_ns) * 1e-9;
    }
    MIRRA_ASSIGN_OR_RETURN(const double slowest_seconds, slowest(*workers, seconds));
    if (rep > 0) best = std::min(best, slowest_seconds);
  }
  return best;
}

}  // namespace

graph::Expected<nlohmann::json> run_worker_all_reduce(const AllReduceBandwidthOptions& options) {
  MIRRA_ASSIGN_OR_RETURN(const std::shared_ptr<runtime::WorkerCollective> workers, runtime::open_mpi_collective());
  nlohmann::json results = nlohmann::json::array();
  for (int replicas : options.replicas) {
    for (int64_t mib : options.sizes_mib) {
      MIRRA_ASSIGN_OR_RETURN(const double seconds,
                             worker_all_reduce_seconds(workers, replicas, mib, options.threads, options.repetitions));
      results.push_back({{"workers", workers->world_size()}, {"replicas_per_worker", replicas}, {"mib", mib}, {"ms", seconds * 1e3}});
    }
  }
  if (workers->rank() != 0) return nlohmann::json();
  return nlohmann::json{{"benchmark", "cross-worker all-reduce (sum, f32) through a Session, the slowest worker's time"},
                        {"threads", options.threads},
                        {"results", results}};
}

}  // namespace mirra::bench

// The cross-worker all-reduce through a Session on every worker.
#include "bench/worker_all_reduce.h"

#include <algorithm>
#include <string>

#include "ops/ops.h"
#include "runtime/collectives/worker_communicator.h"
#include "runtime/session.h"

namespace mirra::bench {

namespace {

// Every worker's seconds, exchanged; the slowest counts (the all-reduce ends for all when the last
// finishes).
graph::Expected<double> slowest(runtime::WorkerCommunicator& workers, double seconds) {
  MIRRA_ASSIGN_OR_RETURN(const std::vector<std::string> all,
                         workers.exchange(std::to_string(seconds), runtime::deadline_after(std::chrono::minutes(5))));
  double most = 0;
  for (const std::string& s : all) most = std::max(most, std::stod(s));
  return most;
}

// Best seconds of one AllReduce over `replicas` local buffers of `mib` MiB on every worker.
graph::Expected<double> worker_all_reduce_seconds(const std::shared_ptr<runtime::WorkerCommunicator>& workers, int replicas,
                                                  int64_t mib, int threads, int repetitions) {
  const AllReduceGraph g = all_reduce_graph(replicas, mib, static_cast<float>(workers->rank() + 1), {.implementation = "mpi"});
  // The group gets its communicator (every size's has the same name: prepared once).
  MIRRA_RETURN_IF_ERROR(workers->prepare({g.group}));
  runtime::Session session(g.graph, ops::kernels(), {.threads = threads, .trace = true, .communicators = {workers}});
  double best = 1e30;
  for (int rep = 0; rep < repetitions + 1; ++rep) {
    MIRRA_RETURN_IF_ERROR(slowest(*workers, 0).status());  // a barrier
    MIRRA_RETURN_IF_ERROR(session.run(g.feeds, {}, {g.all_reduce}).status());
    MIRRA_ASSIGN_OR_RETURN(const double slowest_seconds, slowest(*workers, all_reduce_seconds_of(session, g)));
    if (rep > 0) best = std::min(best, slowest_seconds);
  }
  return best;
}

}  // namespace

graph::Expected<nlohmann::json> run_worker_all_reduce(const AllReduceBandwidthOptions& options) {
  MIRRA_ASSIGN_OR_RETURN(const std::shared_ptr<runtime::WorkerCommunicator> workers, runtime::open_mpi_communicator());
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

// The all-reduce bandwidth benchmark, mirra's side: AllReduce(SUM) over N replicas' f32 buffers of
// each size, run through a Session as the strategies run it, next to the bound it is held against,
// measured in the same run: every replica's buffer read once and written once (2 x N x size bytes)
// at the streaming in-place bandwidth (a[i] += b[i], counting 3 x 4 bytes per element, as the
// membw peer does). bench/all_reduce_vs_mpi.py adds OpenMPI's MPI_Allreduce between processes.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "graph/graph.h"
#include "ops/collective_ops.h"
#include "runtime/session.h"

namespace mirra::bench {

struct AllReduceBandwidthOptions {
  std::vector<int> replicas = {2, 4};
  std::vector<int64_t> sizes_mib = {1, 4, 16, 64, 256};
  int threads = 2;
  int repetitions = 5;  // the best is reported
  bool across_workers = false;  // under mpirun: bench/worker_all_reduce.h instead
};

nlohmann::json run_all_reduce_bandwidth(const AllReduceBandwidthOptions& options);

// One AllReduce(SUM) over `replicas` f32 buffers of `mib` MiB, as a training step has it: a rank's node
// per replica on the host, each buffer made by a node (Mul by one, as the gradient scaling makes them),
// so the all-reduce may work in place. The feeds fill replica r's buffer with first_value + r.
struct AllReduceGraph {
  graph::Graph graph;
  std::string group;                  // the all-reduce's
  std::vector<graph::NodeId> ranks;   // its nodes, by rank
  graph::NodeId all_reduce = graph::kInvalidNode;  // a target that runs every rank
  runtime::Feeds feeds;
};
// The all-reduce's time in the last run of `session`: from its last rank's start (when every rank has
// arrived and the sum can run) to its last rank's end.
double all_reduce_seconds_of(const runtime::Session& session, const AllReduceGraph& g);
AllReduceGraph all_reduce_graph(int replicas, int64_t mib, float first_value, const ops::CollectiveOptions& collective = {});

}  // namespace mirra::bench

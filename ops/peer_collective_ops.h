// PeerAllReduce, PeerReduceScatter and PeerAllGather: one device's part of an all-reduce,
// reduce-scatter or all-gather among devices that meet among themselves, a node per device (NCCL
// between GPUs; on CPU devices the session's runtime::Communicator, keyed by the group and the step).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "graph/builder.h"
#include "ops/distribute_ops.h"

namespace mirra::ops {

// Rank `rank` of `ranks` devices that meet among themselves (PeerAllReduce, PeerReduceScatter,
// PeerAllGather): every rank's node names the same `group`, and each holds and receives its own
// bucket in its own device's memory (NCCL between GPUs).
struct PeerRank {
  std::string group;
  int64_t rank = 0;
  int64_t ranks = 1;
};
// Output j is the sum (or mean) over the ranks of their values[j].
std::vector<graph::ValueRef> peer_all_reduce(graph::Builder& b, const std::vector<graph::ValueRef>& values,
                                             const PeerRank& rank, std::string_view reduction = "sum",
                                             const CollectiveOptions& options = {});

// Output j is rank.rank's share of the flattened sum (or mean) over the ranks of their values[j]: a
// rank-1 tensor of replica_share(elements, ranks, rank) elements, the shares in rank order.
std::vector<graph::ValueRef> peer_reduce_scatter(graph::Builder& b, const std::vector<graph::ValueRef>& values,
                                                 const PeerRank& rank, std::string_view reduction = "sum",
                                                 const CollectiveOptions& options = {});

// Undoes peer_reduce_scatter: shares[j] is rank.rank's share of a flat tensor of elements[j] elements
// (replica_share(elements[j], ranks, rank)), and output j is every rank's share joined in rank order,
// a rank-1 tensor of elements[j] elements.
std::vector<graph::ValueRef> peer_all_gather(graph::Builder& b, const std::vector<graph::ValueRef>& shares,
                                             const PeerRank& rank, std::vector<int64_t> elements,
                                             const CollectiveOptions& options = {});

}  // namespace mirra::ops

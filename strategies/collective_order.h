// CollectiveOrder: the nodes that call a collective, chained per lane (the host's, or a device's) in
// the order the rewrite adds them, each after the previous one on its lane, so every participant
// issues the buckets in one fixed order (a participant that issued them in another could wait for
// peers that wait for it).
//
//   CollectiveOrder order(replicas);
//   order.chain(graph, all_reduce.node, /*lane=*/0);
#pragma once

#include <cstddef>
#include <vector>

#include "graph/graph.h"

namespace mirra::strategies {

class CollectiveOrder {
 public:
  explicit CollectiveOrder(size_t lanes) : last_(lanes, graph::kInvalidNode) {}

  // `node` runs after the node chained last on `lane`. REQUIRES: lane < lanes.
  void chain(graph::Graph& g, graph::NodeId node, size_t lane) {
    graph::NodeId& last = last_[lane];
    if (last != graph::kInvalidNode) g.add_control_edge(last, node);
    last = node;
  }

 private:
  std::vector<graph::NodeId> last_;
};

}  // namespace mirra::strategies

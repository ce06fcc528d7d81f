// CollectiveOrder: the nodes that call a collective, chained per lane (the host's, or a device's) in
// the order the rewrite adds them, each after the previous one on its lane, so every participant
// issues the buckets in one fixed order (a participant that issued them in another could wait for
// peers that wait for it).
//
//   CollectiveOrder order;
//   order.chain(graph, all_reduce.node, /*lane=*/replica);
#pragma once

#include <cstddef>
#include <vector>

#include "graph/graph.h"

namespace mirra::strategies {

class CollectiveOrder {
 public:
  // `node` runs after the node chained last on `lane` (lanes are numbered from 0, made when first used).
  void chain(graph::Graph& g, graph::NodeId node, size_t lane) {
    if (lane >= last_.size()) last_.resize(lane + 1, graph::kInvalidNode);
    graph::NodeId& last = last_[lane];
    if (last != graph::kInvalidNode) g.add_control_edge(last, node);
    last = node;
  }

 private:
  std::vector<graph::NodeId> last_;
};

}  // namespace mirra::strategies

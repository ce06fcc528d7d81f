// clone_per_replica and split_batch_inputs: the program's nodes copied once per replica (or once),
// then each replica's clones given their share of every batch input, cut along its batch axis.
#include "ops/ops.h"
#include "strategies/replicate_passes.h"

namespace mirra::strategies {

namespace {

using graph::Node;
using graph::NodeId;
using graph::ValueRef;

// What a copy serving `replica` reads for the original `value`: a clone reads its replica's clone (or
// the one copy); a node that exists once reads the one copy, a raw gradient's first clone (rewired to
// the aggregate by aggregate_gradients; a write of state likewise, by aggregate_state), or replica 0's
// copy of a value every replica holds alike.
// Anything else would be one replica's value read for all: an error naming the two nodes.
graph::Expected<ValueRef> input_of(const ReplicaGraph& r, ValueRef value, int replica, NodeId consumer) {
  const std::vector<NodeId>& copies = r.copies[value.node];
  if (copies.size() == 1) return ValueRef{copies[0], value.output};
  if (replica != kHost) return ValueRef{copies[static_cast<size_t>(replica)], value.output};
  for (const auto& [variable, gradient] : r.program.variables_and_gradients) {
    if (gradient == value) return ValueRef{copies[0], value.output};
  }
  if (r.classification.uniform[value.node] || r.classification.state_write[consumer]) {
    return ValueRef{copies[0], value.output};
  }
  return graph::invalid_argument("replicate: node '" + r.program.graph.node(consumer).name +
                                 "' exists once but reads the per-replica value of '" + r.program.graph.node(value.node).name +
                                 "'");
}

// The copies of `producer` a copy serving `replica` waits for: its replica's, or every copy.
std::vector<NodeId> controls_of(const ReplicaGraph& r, NodeId producer, int replica) {
  const std::vector<NodeId>& copies = r.copies[producer];
  if (copies.size() == 1 || replica == kHost) return copies;
  return {copies[static_cast<size_t>(replica)]};
}

}  // namespace

graph::Status clone_per_replica(ReplicaGraph& r) {
  r.copies.assign(r.program.graph.size(), {});
  for (NodeId id : r.order) {
    const Node& node = r.program.graph.node(id);
    std::vector<int> targets = {kHost};
    if (r.classification.replicated[id]) {
      targets.clear();
      for (int replica = 0; replica < r.replicas; ++replica) targets.push_back(replica);
    }
    for (int replica : targets) {
      std::vector<ValueRef> inputs;
      for (ValueRef input : node.inputs) {
        MIRRA_ASSIGN_OR_RETURN(const ValueRef mapped, input_of(r, input, replica, id));
        inputs.push_back(mapped);
      }
      std::vector<NodeId> control;
      for (NodeId producer : node.control_inputs) {
        for (NodeId mapped : controls_of(r, producer, replica)) control.push_back(mapped);
      }
      r.copies[id].push_back(r.add_copy(node, ReplicaGraph::clone_name(replica, node.name), replica, std::move(inputs),
                                        std::move(control)));
    }
  }
  r.copies_end = static_cast<NodeId>(r.graph.size());
  return graph::Status();
}

namespace {

// The shares of `batch` along `axis`: SplitBatch's views of dim 0, or, along another axis, of the
// batch transposed to carry it first, each share transposed back (two copies on the host).
std::vector<ValueRef> split_along(graph::Builder& b, ValueRef batch, int64_t rank, int64_t axis, int replicas) {
  if (axis == 0) return ops::split_batch(b, batch, replicas);
  std::vector<int64_t> to_front = {axis}, back(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) {
    if (d != axis) to_front.push_back(d);
  }
  for (int64_t d = 0; d < rank; ++d) back[static_cast<size_t>(to_front[static_cast<size_t>(d)])] = d;
  std::vector<ValueRef> shares = ops::split_batch(b, ops::transpose(b, batch, to_front), replicas);
  for (ValueRef& share : shares) share = ops::transpose(b, share, back);
  return shares;
}

}  // namespace

graph::Status split_batch_inputs(ReplicaGraph& r) {
  graph::Builder& b = r.builder;
  for (NodeId id : r.order) {
    if (!r.classification.batch_input[id]) continue;
    if (r.plan.replicas_feed_their_batches) {  // each replica's own placeholder is its share
      for (NodeId copy : r.copies[id]) r.shares[id].push_back({copy, 0});
      continue;
    }
    const ValueRef batch = {r.copies[id][0], 0};
    {
      auto scope = b.scope(r.program.graph.node(id).name);
      b.set_device(r.plan.host);
      r.shares[id] = split_along(b, batch, r.graph.type(batch).shape.rank(), r.classification.batch_axis[id], r.replicas);
      b.set_device(std::nullopt);
      MIRRA_RETURN_IF_ERROR(b.status());
    }
    for (NodeId clone = 0; clone < r.copies_end; ++clone) {
      const int replica = r.replica_of(clone);
      if (replica == kHost) continue;
      for (ValueRef& input : r.graph.mutable_node(clone).inputs) {
        if (input == batch) input = r.shares[id][static_cast<size_t>(replica)];
      }
    }
  }
  return graph::Status();
}

}  // namespace mirra::strategies

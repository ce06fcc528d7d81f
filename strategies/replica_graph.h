// ReplicaGraph: what replicate()'s passes (strategies/replicate_passes.h) share while they rewrite a
// one-replica program for N replicas: the program and the plan, which original nodes are cloned per
// replica, the graph being built with each original node's copies and the replica each new node
// serves, and the values one pass hands to the next. Each pass reads what the passes before it set
// and adds its own; none keeps state of its own.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "graph/builder.h"
#include "graph/graph.h"
#include "strategies/collective_order.h"
#include "strategies/replicate.h"

namespace mirra::strategies {

// The replica of a node that exists once (on the plan's host, or where the plan puts a collective).
inline constexpr int kHost = -1;

// Which nodes of the one-replica graph are cloned per replica.
struct Classification {
  // Placeholders that carry the batch: the signature's batch inputs, or those with dim 0 unknown.
  std::vector<bool> batch_input;
  std::vector<int64_t> batch_axis;  // by node: the axis a batch input carries the batch along
  std::vector<bool> from_batch;   // nodes that depend on a batch input (or on the gradients' seed)
  std::vector<bool> replicated;
  // Computed from state and aggregated gradients alone, so every replica's copy holds the same value
  // (loss scaling's "the gradients are finite", say): a node that exists once may read replica 0's.
  std::vector<bool> uniform;
  // Writes of state (a schema's updates, no gradient) from values the replicas compute each on their
  // own: aggregate_state gives them the combination their variable's aggregation names. Under
  // CentralStorage such a write exists once.
  std::vector<bool> state_write;
};

class ReplicaGraph {
 public:
  // Classifies the program's nodes (Mirrored clones everything but the step state; CentralStorage
  // what depends on the batch and precedes the gradients). REQUIRES: the program is acyclic.
  ReplicaGraph(const TrainingProgram& program, const ReplicationPlan& plan, std::vector<graph::NodeId> order);
  ReplicaGraph(const ReplicaGraph&) = delete;
  ReplicaGraph& operator=(const ReplicaGraph&) = delete;

  const TrainingProgram& program;  // one replica's
  const ReplicationPlan& plan;
  const int replicas;
  const std::vector<graph::NodeId> order;  // the program's nodes in topological order
  const Classification classification;
  graph::Graph graph;      // being built
  graph::Builder builder;  // over `graph`, in the program's registry

  // Handed on by the passes, in their order (strategies/replicate_passes.h).
  graph::NodeId batch_mean = graph::kInvalidNode;   // checks: the loss's mean over the batch (program ids)
  std::vector<std::vector<graph::NodeId>> copies;   // clone: per original node, one per replica or one
  graph::NodeId copies_end = 0;                     // clone: the first id that is no clone
  std::map<graph::NodeId, std::vector<graph::ValueRef>> shares;  // split: per batch input, replica r's
  // seeds: B in the loss's dtype, on the host (with a loss weight, the batch's: Note [Loss weights])
  graph::ValueRef global_batch;
  graph::ValueRef examples;  // seeds: B, or with accumulation the examples (or weight) since the last update
  // seeds: the replicas' seeds carry only their own shares, and the host divides the gradients' sums
  // by `examples` (replicas that feed their own batches: Note [Batch shares]).
  bool sums_divided_on_host = false;
  CollectiveOrder state_order;  // state: its collectives, on each replica's lane
  graph::NodeId synchronize = graph::kInvalidNode;  // state: the target combining on_read variables
  std::vector<graph::NodeId> accumulations, clears;  // with accumulation: the accumulate target's, train's
  // gradients (or sharding): per variable, each replica's aggregated gradient (or the one sum).
  std::vector<std::vector<graph::ValueRef>> aggregated;
  std::vector<graph::NodeId> writes;  // sharding: every replica's write of its joined shares
  TrainingProgram result;             // the signature and state, filled in by the passes

  // Original `value` as replica r reads it: its own clone, or the one copy.
  graph::ValueRef copy_on(graph::ValueRef value, int replica) const;
  // Each replica's clone of a variable's raw gradient (before aggregation): raw_gradients()[j][r].
  std::vector<std::vector<graph::ValueRef>> raw_gradients() const;
  // What the replicas' gradients of variable j sum to: gradients[j][r] is replica r's, its share of
  // the batch already in it (Note [Batch shares]); with accumulation, its accumulated gradient over
  // the examples since the last update (Note [Gradient accumulation]).
  std::vector<std::vector<graph::ValueRef>> replica_gradients();
  // `value`, a node the builder just added, placed on replica r's device (kHost: the plan's host).
  graph::ValueRef on(int replica, graph::ValueRef value);
  int replica_of(graph::NodeId id) const { return id < replica_of_.size() ? replica_of_[id] : kHost; }
  // A collective's rank node, a node the builder just added, on replica `leader`'s device (kHost: the
  // plan's host); it serves no replica of its own.
  graph::ValueRef collective_on(int leader, graph::ValueRef rank);
  // A new collective group: `base` under the builder's scopes, made unique among this rewrite's groups.
  std::string new_group(std::string_view base);
  // Every replica's rank of a new all-reduce group `base` over per_replica[r] (its values, one entry
  // per replica), on the host, each chained on its replica's lane of `order` where one is given:
  // result[r][j]. Invalid values after an error.
  std::vector<std::vector<graph::ValueRef>> all_reduce_on_host(std::string_view base,
                                                               const std::vector<std::vector<graph::ValueRef>>& per_replica,
                                                               std::string_view reduction, CollectiveOrder* order);
  // Adds a copy of the original `node` serving `replica`, with its inputs and control inputs mapped.
  graph::NodeId add_copy(const graph::Node& node, std::string name, int replica, std::vector<graph::ValueRef> inputs,
                         std::vector<graph::NodeId> control_inputs);
  // An accumulator `scope`/`name` for `value` on `replica`: the accumulate target adds value to it;
  // returns accumulator + value, which the train target reads before it clears the accumulator.
  graph::ValueRef accumulated(graph::ValueRef value, int replica, const std::string& scope, const std::string& name);
  // The variables' indices in the order their gradients become ready (the backward pass finishes the
  // last layers first).
  std::vector<size_t> ready_order() const;
  // Each variable's bytes (its gradient's), by index.
  std::vector<int64_t> variable_bytes() const;
  // Where `node`, an update, takes its gradient (its schema's update_gradient); nullopt for any other.
  std::optional<size_t> update_gradient(const graph::Node& node) const;
  // The name of replica r's clone of an original node ("replica_<r>/<name>"; the name itself for kHost).
  static std::string clone_name(int replica, const std::string& name);

 private:
  std::vector<int> replica_of_;  // per new node
  std::set<std::string> groups_;  // the collective groups made so far
};

}  // namespace mirra::strategies

// aggregate_state: the writes of state from each replica's own values (moving statistics, counters of
// examples) given the combination of the replicas' values their variable's aggregation names, at
// every write or, for variables synchronised on read, in the synchronize target.
#include <algorithm>
#include <map>

#include "ops/ops.h"
#include "strategies/replicate_passes.h"

namespace mirra::strategies {

namespace {

using graph::Node;
using graph::NodeId;
using graph::ValueRef;
using ops::VariableAggregation;
using ops::VariableSynchronization;

// What a write of state updates, and how the replicas' values of it combine.
struct WrittenState {
  std::vector<NodeId> variables;  // original ids
  VariableAggregation aggregation = VariableAggregation::none;
  VariableSynchronization synchronization = VariableSynchronization::on_write;
};

// The variables `write` updates, whose aggregations and synchronizations must agree and whose
// aggregation must not be none: an error names the variable and the write otherwise.
graph::Expected<WrittenState> state_of_write(const ReplicaGraph& r, const Node& write) {
  const graph::Graph& g = r.program.graph;
  const graph::OpSchema& schema = *r.program.ops->find(write.op);
  WrittenState state;
  for (size_t i : schema.updates) {
    if (i >= write.inputs.size()) continue;
    const Node& variable = g.node(write.inputs[i].node);
    const bool is_variable = variable.op == "Variable";
    const VariableAggregation aggregation = is_variable ? ops::variable_aggregation(variable) : VariableAggregation::none;
    const VariableSynchronization synchronization =
        is_variable ? ops::variable_synchronization(variable) : VariableSynchronization::on_write;
    if (aggregation == VariableAggregation::none) {
      return graph::invalid_argument(
          "replicate: '" + write.name + "' (" + write.op + ") writes '" + variable.name +
          "' from values each replica computes on its own; give the variable an aggregation (sum, mean or "
          "only_first_replica: ops::variable's aggregation argument, the Variable's \"aggregation\" attr) so the replicas "
          "agree on what it holds");
    }
    if (!state.variables.empty() && (state.aggregation != aggregation || state.synchronization != synchronization)) {
      return graph::invalid_argument("replicate: '" + write.name + "' (" + write.op +
                                     ") writes variables of different aggregations or synchronizations");
    }
    state.aggregation = aggregation;
    state.synchronization = synchronization;
    state.variables.push_back(variable.id);
  }
  return state;
}

// What each replica's write reads for the per-replica `value` (replica r's at [r]; one entry when the
// write exists once), by `aggregation`.
std::vector<ValueRef> combined(ReplicaGraph& r, ValueRef value, VariableAggregation aggregation, bool once) {
  graph::Builder& b = r.builder;
  std::vector<ValueRef> values;
  for (int replica = 0; replica < r.replicas; ++replica) values.push_back(r.copy_on(value, replica));
  if (aggregation == VariableAggregation::only_first_replica) {
    if (!r.plan.across_workers) return std::vector<ValueRef>(once ? 1 : values.size(), values[0]);
    const std::string group = r.new_group("broadcast");
    auto scope = b.scope("broadcast");
    std::vector<ValueRef> first;
    for (int replica = 0; replica < r.replicas; ++replica) {
      auto rank_scope = b.scope("rank_" + std::to_string(replica));
      first.push_back(r.collective_on(
          kHost, ops::broadcast(b, values[static_cast<size_t>(replica)], {.group = group, .rank = replica, .ranks = r.replicas},
                                0, r.plan.collective)));
      if (first.back().valid()) r.state_order.chain(r.graph, first.back().node, static_cast<size_t>(replica));
    }
    return first;
  }
  const char* reduction = aggregation == VariableAggregation::sum ? "sum" : "mean";
  if (once) {  // CentralStorage: a sum on the host (it spans no workers)
    ValueRef sum = values[0];
    for (size_t i = 1; i < values.size(); ++i) sum = r.on(kHost, ops::add(b, sum, values[i]));
    if (aggregation == VariableAggregation::mean && r.replicas > 1) {
      sum = r.on(kHost, ops::div(b, sum, r.on(kHost, ops::scalar_of(b, r.replicas, sum))));
    }
    return {sum};
  }
  if (r.replicas == 1 && !r.plan.across_workers) return values;
  std::vector<std::vector<ValueRef>> per_replica;
  for (ValueRef value : values) per_replica.push_back({value});
  std::vector<ValueRef> reduced;
  for (const std::vector<ValueRef>& mine : r.all_reduce_on_host("all_reduce", per_replica, reduction, &r.state_order)) {
    reduced.push_back(mine[0]);
  }
  return reduced;
}

// The synchronize target: every replica's copy of each variable in `variables` (original ids, each
// written on its own by every replica) set to their mean over the replicas of every worker, one
// all-reduce per dtype. It runs alone, outside the steps, so its collectives have an order of their
// own. None where there is nothing to combine.
graph::Status build_synchronize(ReplicaGraph& r, const std::vector<NodeId>& variables) {
  if (variables.empty() || (r.replicas == 1 && !r.plan.across_workers)) return graph::Status();
  graph::Builder& b = r.builder;
  std::map<graph::DType, std::vector<NodeId>> by_dtype;
  for (NodeId variable : variables) by_dtype[r.program.graph.node(variable).outputs[0].dtype].push_back(variable);
  CollectiveOrder order;
  std::vector<NodeId> assigns;
  for (const auto& [dtype, group] : by_dtype) {
    std::vector<std::vector<ValueRef>> per_replica(static_cast<size_t>(r.replicas));
    for (int replica = 0; replica < r.replicas; ++replica) {
      for (NodeId variable : group) per_replica[static_cast<size_t>(replica)].push_back(r.copy_on({variable, 0}, replica));
    }
    auto scope = b.scope("synchronize");
    const std::vector<std::vector<ValueRef>> means = r.all_reduce_on_host("all_reduce", per_replica, "mean", &order);
    MIRRA_RETURN_IF_ERROR(b.status());
    for (int replica = 0; replica < r.replicas; ++replica) {
      for (size_t j = 0; j < group.size(); ++j) {
        const ValueRef copy = r.copy_on({group[j], 0}, replica);
        const NodeId assign = ops::assign(b, copy, means[static_cast<size_t>(replica)][j]);
        r.on(replica, {assign, 0});
        assigns.push_back(assign);
      }
    }
  }
  r.synchronize = ops::no_op(b, "synchronize", assigns);
  r.on(kHost, {r.synchronize, 0});
  return b.status();
}

}  // namespace

graph::Status aggregate_state(ReplicaGraph& r) {
  const graph::Graph& g = r.program.graph;
  std::vector<NodeId> on_read;  // variables each replica writes on its own, combined when read
  for (NodeId id : r.order) {
    if (!r.classification.state_write[id]) continue;
    const Node& write = g.node(id);
    MIRRA_ASSIGN_OR_RETURN(const WrittenState state, state_of_write(r, write));
    const VariableAggregation aggregation = state.aggregation;
    const graph::OpSchema& schema = *r.program.ops->find(write.op);
    const bool once = !r.classification.replicated[id];  // CentralStorage: on the host
    if (!once && state.synchronization == VariableSynchronization::on_read) {
      for (NodeId variable : state.variables) {
        if (std::find(on_read.begin(), on_read.end(), variable) == on_read.end()) on_read.push_back(variable);
      }
      continue;
    }
    auto scope = r.builder.scope("aggregate/" + write.name);
    for (size_t i = 0; i < write.inputs.size(); ++i) {
      const ValueRef value = write.inputs[i];
      if (schema.updates_input(i) || r.classification.uniform[value.node]) continue;
      const std::vector<ValueRef> values = combined(r, value, aggregation, once);
      MIRRA_RETURN_IF_ERROR(r.builder.status());
      for (size_t copy = 0; copy < r.copies[id].size(); ++copy) {
        r.graph.mutable_node(r.copies[id][copy]).inputs[i] = values[copy];
      }
    }
  }
  return build_synchronize(r, on_read);
}

}  // namespace mirra::strategies

// ReplicaGraph: the classification of the program's nodes, and the helpers every pass uses.
#include "strategies/replica_graph.h"

#include <algorithm>
#include <set>

#include "ops/ops.h"

namespace mirra::strategies {

namespace {

using graph::Node;
using graph::NodeId;
using graph::ValueRef;

// Whether `node` writes a variable (its schema's updates, with no gradient) from a value the replicas
// do not all hold alike.
bool writes_state_from_replicas(const graph::OpRegistry& schemas, const Node& node, const std::vector<bool>& uniform) {
  const graph::OpSchema* schema = schemas.find(node.op);
  if (schema == nullptr || schema->updates.empty() || schema->update_gradient) return false;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (!schema->updates_input(i) && !uniform[node.inputs[i].node]) return true;
  }
  return false;
}

Classification classify(const TrainingProgram& program, const std::vector<NodeId>& order, const ReplicationPlan& plan) {
  const graph::Graph& g = program.graph;
  Classification c{std::vector<bool>(g.size(), false), std::vector<int64_t>(g.size(), 0),
                   std::vector<bool>(g.size(), false), std::vector<bool>(g.size(), false),
                   std::vector<bool>(g.size(), false), std::vector<bool>(g.size(), false)};
  std::vector<bool>& from_batch = c.from_batch;
  std::vector<bool> step_state(g.size(), false), after_gradient(g.size(), false);
  for (NodeId id : program.step_state) step_state[id] = true;
  std::set<ValueRef> gradients;
  for (const auto& [variable, gradient] : program.variables_and_gradients) gradients.insert(gradient);
  for (NodeId id : order) {
    const Node& node = g.node(id);
    if (node.op == "Placeholder") {
      const graph::Shape& shape = node.outputs[0].shape;
      const std::vector<runtime::training::BatchInput>& declared = program.signature.batch_inputs;
      const auto found = std::find_if(declared.begin(), declared.end(),
                                      [&](const runtime::training::BatchInput& input) { return input.name == node.name; });
      c.batch_input[id] = from_batch[id] = shape.rank() > 0 && (declared.empty() ? shape.dim(0) < 0 : found != declared.end());
      c.batch_axis[id] = found != declared.end() ? found->axis : 0;
      c.uniform[id] = !c.batch_input[id];
      c.replicated[id] = c.batch_input[id] && plan.replicas_feed_their_batches;
      continue;
    }
    c.uniform[id] = true;
    for (ValueRef input : node.inputs) {
      from_batch[id] = from_batch[id] || from_batch[input.node];
      after_gradient[id] = after_gradient[id] || after_gradient[input.node] || gradients.count(input) > 0;
      c.uniform[id] = c.uniform[id] && (gradients.count(input) > 0 || c.uniform[input.node]);
    }
    if (ValueRef{id, 0} == program.loss_gradient) {
      // Each replica's seed becomes its share of the batch (Note [Batch shares]).
      from_batch[id] = true;
      c.uniform[id] = false;
    }
    c.state_write[id] = writes_state_from_replicas(*program.ops, node, c.uniform);
    if (step_state[id] || id == program.signature.train) continue;
    c.replicated[id] = plan.mirror_state || (from_batch[id] && !after_gradient[id] && !c.state_write[id]);
  }
  return c;
}

}  // namespace

ReplicaGraph::ReplicaGraph(const TrainingProgram& program, const ReplicationPlan& plan, std::vector<NodeId> order)
    : program(program), plan(plan), replicas(static_cast<int>(plan.devices.size())), order(std::move(order)),
      classification(classify(program, this->order, plan)), builder(graph, *program.ops) {}

std::string ReplicaGraph::clone_name(int replica, const std::string& name) {
  return replica == kHost ? name : "replica_" + std::to_string(replica) + "/" + name;
}

ValueRef ReplicaGraph::copy_on(ValueRef value, int replica) const {
  const std::vector<NodeId>& copies_of = copies[value.node];
  return {copies_of[copies_of.size() == 1 ? 0 : static_cast<size_t>(replica)], value.output};
}

std::vector<std::vector<ValueRef>> ReplicaGraph::raw_gradients() const {
  std::vector<std::vector<ValueRef>> raw(program.variables_and_gradients.size());
  for (size_t j = 0; j < raw.size(); ++j) {
    const ValueRef gradient = program.variables_and_gradients[j].second;
    for (NodeId copy : copies[gradient.node]) raw[j].push_back({copy, gradient.output});
  }
  return raw;
}

ValueRef ReplicaGraph::on(int replica, ValueRef value) {
  if (!value.valid()) return value;
  graph.mutable_node(value.node).device = replica == kHost ? plan.host : plan.devices[static_cast<size_t>(replica)];
  replica_of_.resize(graph.size(), kHost);
  replica_of_[value.node] = replica;
  return value;
}

ValueRef ReplicaGraph::collective_on(int leader, ValueRef rank) {
  on(kHost, rank);
  if (rank.valid() && leader != kHost) graph.mutable_node(rank.node).device = plan.devices[static_cast<size_t>(leader)];
  return rank;
}

std::string ReplicaGraph::new_group(std::string_view base) {
  const std::string path = builder.scope_path();
  const std::string name = path.empty() ? std::string(base) : path + "/" + std::string(base);
  std::string group = name;
  for (int n = 1; !groups_.insert(group).second; ++n) group = name + "_" + std::to_string(n);
  return group;
}

std::vector<std::vector<ValueRef>> ReplicaGraph::all_reduce_on_host(std::string_view base,
                                                                    const std::vector<std::vector<ValueRef>>& per_replica,
                                                                    std::string_view reduction, CollectiveOrder* order) {
  const std::string group = new_group(base);
  auto scope = builder.scope(base);
  std::vector<std::vector<ValueRef>> reduced;
  const int64_t ranks = static_cast<int64_t>(per_replica.size());
  for (int64_t rank = 0; rank < ranks; ++rank) {
    auto rank_scope = builder.scope("rank_" + std::to_string(rank));
    reduced.push_back(ops::all_reduce(builder, per_replica[static_cast<size_t>(rank)],
                                      {.group = group, .rank = rank, .ranks = ranks}, reduction, plan.collective));
    const ValueRef node = collective_on(kHost, reduced.back().front());
    if (node.valid() && order != nullptr) order->chain(graph, node.node, static_cast<size_t>(rank));
  }
  return reduced;
}

NodeId ReplicaGraph::add_copy(const Node& node, std::string name, int replica, std::vector<ValueRef> inputs,
                              std::vector<NodeId> control_inputs) {
  Node copy = node;
  copy.name = std::move(name);
  copy.inputs = std::move(inputs);
  copy.control_inputs = std::move(control_inputs);
  const NodeId id = graph.add_node(std::move(copy));
  on(replica, {id, 0});
  return id;
}

// Note [Gradient accumulation]
// With accumulation, a step of the accumulate target adds each replica's gradient of its summed loss
// (g_r * b_r) to an accumulator on the replica, and the micro-batch's global size B to a count on the
// host; nothing is all-reduced or updated. The next train step reads accumulator + g_r * b_r and
// divides by count + B: summed over replicas, the gradient of the mean loss over every example since
// the last update, whatever the sizes of the micro-batches. It writes zeros into the accumulators
// (Assign) after reading them, so every update starts from zero, a checkpoint between updates holds
// zeros, and an accumulator that overflowed (fp16 loss scaling skips that update) starts clean.
// Across workers B is the all-reduced sum of the workers' batches, a scalar every step needs for its
// loss anyway; the gradients cross the network only in the train step.

ValueRef ReplicaGraph::accumulated(ValueRef value, int replica, const std::string& scope, const std::string& name) {
  graph::Builder& b = builder;
  const graph::TensorType type = b.type(value);
  auto in_scope = b.scope(scope);
  const ValueRef accumulator = on(replica, ops::variable(b, name, type.shape, ops::Initializer::zeros(), type.dtype, false));
  const NodeId add = ops::assign_add(b, accumulator, value);
  const ValueRef total = on(replica, ops::add(b, accumulator, value));
  const NodeId clear = ops::assign(b, accumulator, on(replica, ops::fill(b, type.shape, 0.0, type.dtype)));
  if (add == graph::kInvalidNode || clear == graph::kInvalidNode) return total;
  on(replica, {add, 0});
  on(replica, {clear, 0});
  graph.add_control_edge(total.node, clear);
  accumulations.push_back(add);
  clears.push_back(clear);
  return total;
}

std::vector<std::vector<ValueRef>> ReplicaGraph::replica_gradients() {
  std::vector<std::vector<ValueRef>> gradients(program.variables_and_gradients.size());
  for (int r = 0; r < replicas; ++r) {
    const std::string scope_name = clone_name(r, std::string(kAccumulatorScope));
    for (size_t j = 0; j < gradients.size(); ++j) {
      const ValueRef gradient = copy_on(program.variables_and_gradients[j].second, r);
      if (!program.accumulate_gradients) {
        gradients[j].push_back(gradient);
        continue;
      }
      const ValueRef total = accumulated(gradient, r, scope_name, program.graph.node(program.variables_and_gradients[j].first.node).name);
      auto scope = builder.scope(scope_name);
      gradients[j].push_back(on(r, ops::div(builder, total, examples)));
    }
  }
  return gradients;
}

std::vector<size_t> ReplicaGraph::ready_order() const {
  std::vector<size_t> position(program.graph.size());
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  std::vector<size_t> ready(program.variables_and_gradients.size());
  for (size_t j = 0; j < ready.size(); ++j) ready[j] = j;
  std::stable_sort(ready.begin(), ready.end(), [&](size_t a, size_t b) {
    return position[program.variables_and_gradients[a].second.node] < position[program.variables_and_gradients[b].second.node];
  });
  return ready;
}

std::vector<int64_t> ReplicaGraph::variable_bytes() const {
  std::vector<int64_t> bytes;
  for (const auto& [variable, gradient] : program.variables_and_gradients) {
    const graph::TensorType& type = program.graph.type(variable);
    bytes.push_back(type.shape.num_elements().value_or(0) * static_cast<int64_t>(graph::dtype_size(type.dtype)));
  }
  return bytes;
}

std::optional<size_t> ReplicaGraph::update_gradient(const Node& node) const {
  const graph::OpSchema* schema = program.ops->find(node.op);
  return schema != nullptr ? schema->update_gradient : std::nullopt;
}

}  // namespace mirra::strategies

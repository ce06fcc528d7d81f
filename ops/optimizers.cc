// minimize: trainable variables, gradients, slots, update ops and their ordering.
#include "ops/optimizers.h"

#include "graph/gradients.h"
#include "ops/optimizer_ops.h"
#include "ops/source_ops.h"

namespace mirra::ops {

namespace {

// Every node that reads `variable`, directly or through other nodes (a buffer may be forwarded by
// Identity or Reshape, so direct readers are not enough).
std::vector<graph::NodeId> readers_of(const graph::Graph& g, graph::NodeId variable) {
  std::vector<std::vector<graph::NodeId>> consumers(g.size());
  for (const graph::Node& node : g.nodes()) {
    for (graph::ValueRef input : node.inputs) consumers[input.node].push_back(node.id);
  }
  std::vector<bool> seen(g.size(), false);
  std::vector<graph::NodeId> stack = {variable}, readers;
  while (!stack.empty()) {
    const graph::NodeId id = stack.back();
    stack.pop_back();
    for (graph::NodeId consumer : consumers[id]) {
      if (seen[consumer]) continue;
      seen[consumer] = true;
      readers.push_back(consumer);
      stack.push_back(consumer);
    }
  }
  return readers;
}

}  // namespace

graph::Expected<TrainOp> minimize(graph::Builder& b, graph::ValueRef loss, const Optimizer& optimizer) {
  if (optimizer.kind != "sgd" && optimizer.kind != "momentum") {
    return graph::invalid_argument("optimizer '" + optimizer.kind + "' is not known (sgd, momentum)");
  }
  if (!(optimizer.learning_rate > 0)) return graph::invalid_argument("learning rate must be positive");
  graph::Graph& g = b.graph();
  std::vector<graph::ValueRef> variables;
  for (const graph::Node& node : g.nodes()) {
    const bool* trainable = node.attrs.get<bool>("trainable");
    if (node.op == "Variable" && trainable != nullptr && *trainable) variables.push_back({node.id, 0});
  }
  if (variables.empty()) return graph::invalid_argument("minimize: the graph has no trainable variables");
  MIRRA_ASSIGN_OR_RETURN(const std::vector<graph::ValueRef> gradients, graph::gradients(b, loss, variables));

  TrainOp result;
  const graph::DType dtype = b.type(loss).dtype;
  {
    auto scope = b.scope("optimizer");
    result.learning_rate = variable(b, "learning_rate", graph::Shape{}, Initializer::constant(optimizer.learning_rate),
                                    dtype, /*trainable=*/false);
  }
  std::vector<graph::NodeId> updates;
  for (size_t i = 0; i < variables.size(); ++i) {
    const graph::ValueRef v = variables[i];
    const std::vector<graph::NodeId> readers = readers_of(g, v.node);
    const graph::Node& node = g.node(v.node);
    const std::string name = node.name;
    const graph::TensorType type = node.outputs[0];
    graph::NodeId update;
    if (optimizer.kind == "sgd") {
      update = apply_gradient_descent(b, v, gradients[i], result.learning_rate);
    } else {
      const graph::ValueRef slot = variable(b, name + "/momentum", type.shape, Initializer::zeros(), type.dtype, false);
      update = apply_momentum(b, v, slot, gradients[i], result.learning_rate, optimizer.momentum, optimizer.nesterov);
    }
    if (update == graph::kInvalidNode) return b.status();
    for (graph::NodeId reader : readers) g.add_control_edge(reader, update);
    updates.push_back(update);
    result.variables_and_gradients.emplace_back(v, gradients[i]);
  }
  result.train = no_op(b, "train", updates);
  MIRRA_RETURN_IF_ERROR(b.status());
  return result;
}

}  // namespace mirra::ops

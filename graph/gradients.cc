// gradients: path finding, reverse traversal, summing of gradient contributions.
#include "graph/gradients.h"

#include <algorithm>
#include <map>

namespace mirra::graph {

namespace {

// Adds the contributions with a chain of Add nodes (invalid when there are none).
ValueRef sum_contributions(Builder& b, const std::vector<ValueRef>& terms) {
  if (terms.empty()) return {};
  ValueRef total = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) total = b.add_value({.op = "Add", .inputs = {total, terms[i]}, .name = "AddN"});
  return total;
}

ValueRef zeros_like(Builder& b, ValueRef x) { return b.add_value({.op = "ZerosLike", .inputs = {x}}); }

}  // namespace

ValueRef ones_like(Builder& b, ValueRef y) {
  const TensorType& type = b.type(y);
  if (type.shape.is_fully_defined()) {
    return b.add_value({.op = "Fill", .attrs = {{"dtype", type.dtype}, {"shape", type.shape}, {"value", 1.0}}, .name = "OnesLike"});
  }
  auto one = b.add_value({.op = "Fill", .attrs = {{"dtype", type.dtype}, {"shape", Shape{}}, {"value", 1.0}}, .name = "One"});
  return b.add_value({.op = "Add", .inputs = {zeros_like(b, y), one}, .name = "OnesLike"});
}

Expected<std::vector<ValueRef>> gradients(Builder& b, ValueRef y, std::span<const ValueRef> xs, ValueRef dy) {
  MIRRA_RETURN_IF_ERROR(b.status());
  Graph& graph = b.graph();
  const size_t n = graph.size();
  if (!y.valid() || y.node >= n) return invalid_argument("gradients: y is not a value of this graph");
  for (ValueRef x : xs) {
    if (!x.valid() || x.node >= n) return invalid_argument("gradients: an x is not a value of this graph");
    if (!is_floating(graph.type(x).dtype)) {
      return invalid_argument("gradients: '" + graph.node(x.node).name + "' is not floating point");
    }
  }
  MIRRA_ASSIGN_OR_RETURN(const std::vector<NodeId> order, graph.topological_order());

  // Nodes on a path from some x to y: reachable from an x (forward) and reaching y (backward).
  std::vector<bool> from_x(n, false), to_y(n, false);
  for (ValueRef x : xs) from_x[x.node] = true;
  for (NodeId id : order) {
    for (ValueRef input : graph.node(id).inputs) {
      if (from_x[input.node] && is_floating(graph.type(input).dtype)) from_x[id] = true;
    }
  }
  to_y[y.node] = true;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (!to_y[*it]) continue;
    for (ValueRef input : graph.node(*it).inputs) to_y[input.node] = true;
  }
  auto on_path = [&](NodeId id) { return from_x[id] && to_y[id]; };

  auto scope = b.scope("gradients");
  std::map<ValueRef, std::vector<ValueRef>> contributions;
  contributions[y].push_back(dy.valid() ? dy : ones_like(b, y));
  std::vector<bool> is_x(n, false);
  for (ValueRef x : xs) is_x[x.node] = true;

  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const NodeId id = *it;
    if (!on_path(id) || (is_x[id] && graph.node(id).inputs.empty())) continue;
    const Node node = graph.node(id);  // a copy: the graph grows below
    std::vector<ValueRef> output_grads(node.outputs.size());
    bool any = false;
    for (uint16_t k = 0; k < node.outputs.size(); ++k) {
      auto found = contributions.find(ValueRef{id, k});
      if (found == contributions.end()) continue;
      auto node_scope = b.scope(node.name + "_grad");
      output_grads[k] = sum_contributions(b, found->second);
      any = true;
    }
    if (!any) continue;
    std::vector<bool> needed;
    for (ValueRef input : node.inputs) needed.push_back(from_x[input.node] && is_floating(graph.type(input).dtype));
    if (std::find(needed.begin(), needed.end(), true) == needed.end()) continue;
    const OpSchema* schema = b.registry().find(node.op);
    if (schema == nullptr || !schema->gradient) {
      return invalid_argument("gradients: cannot differentiate through node '" + node.name + "' (" + node.op + "): " +
                              (schema ? schema->no_gradient : std::string("unknown op")));
    }
    GradientContext context{b, node, {}, output_grads, {}, std::move(needed)};
    for (uint16_t k = 0; k < node.outputs.size(); ++k) context.outputs.push_back({id, k});
    for (ValueRef input : node.inputs) context.input_types.push_back(graph.type(input));
    std::vector<ValueRef> input_grads;
    {
      auto node_scope = b.scope(node.name + "_grad");
      input_grads = schema->gradient(context);
    }
    MIRRA_RETURN_IF_ERROR(b.status());
    for (size_t i = 0; i < node.inputs.size() && i < input_grads.size(); ++i) {
      const ValueRef input = node.inputs[i];
      if (input_grads[i].valid() && context.needs(i)) contributions[input].push_back(input_grads[i]);
    }
  }

  std::vector<ValueRef> result;
  for (ValueRef x : xs) {
    auto found = contributions.find(x);
    result.push_back(found == contributions.end() ? zeros_like(b, x) : sum_contributions(b, found->second));
  }
  MIRRA_RETURN_IF_ERROR(b.status());
  return result;
}

}  // namespace mirra::graph

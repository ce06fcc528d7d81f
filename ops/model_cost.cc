// forward_cost: bound shapes at one example, then the products of each Conv2D, FusedConv2D, MatMul,
// BatchMatMulV2 and attention, as their schemas' cost rules count them.
#include "ops/model_cost.h"

#include <algorithm>
#include <string>

#include "runtime/memory_estimate.h"

namespace mirra::ops {

namespace {

// Multiply-adds of one node by its op's cost rule (graph::OpSchema::cost: half its flops), or -1 when
// a shape it counts is unknown.
int64_t multiply_adds(const graph::Node& node, const std::vector<std::vector<graph::TensorType>>& types,
                      const graph::OpRegistry& schemas) {
  std::vector<graph::TensorType> inputs;
  for (const graph::ValueRef input : node.inputs) {
    const graph::TensorType& type = types[input.node][input.output];
    if (!type.shape.num_elements()) return -1;
    inputs.push_back(type);
  }
  for (const graph::TensorType& output : types[node.id]) {
    if (!output.shape.num_elements()) return -1;
  }
  const graph::OpCost cost = graph::op_cost(*schemas.find(node.op), {.node = node, .inputs = inputs, .outputs = types[node.id]});
  return static_cast<int64_t>(cost.flops / 2);
}

}  // namespace

graph::Expected<ForwardCost> forward_cost(const graph::Graph& graph, std::span<const graph::NodeId> roots,
                                          const graph::OpRegistry& schemas) {
  MIRRA_ASSIGN_OR_RETURN(std::vector<graph::NodeId> order, graph.topological_order());
  const std::vector<bool> needed = graph.needed_for(roots);
  std::erase_if(order, [&](graph::NodeId id) { return !needed[id]; });
  const auto types = runtime::bound_types(graph, {.batch_size = 1, .schemas = &schemas}, order);
  ForwardCost cost;
  for (const graph::NodeId id : order) {
    const graph::Node& node = graph.node(id);
    const bool convolution = node.op == "Conv2D" || node.op == "FusedConv2D";
    const bool attention = node.op == "ScaledDotProductAttention";
    if (!convolution && !attention && node.op != "MatMul" && node.op != "BatchMatMulV2") continue;
    const int64_t count = multiply_adds(node, types, schemas);
    if (count < 0) {
      return graph::invalid_argument("forward cost: the shapes of '" + node.name + "' (" + node.op +
                                     ") stay unknown at one example");
    }
    cost.multiply_adds += count;
    if (attention) {
      cost.attention_multiply_adds += count;
      ++cost.attentions;
    } else {
      ++(convolution ? cost.convolutions : cost.matrix_products);
    }
  }
  return cost;
}

}  // namespace mirra::ops

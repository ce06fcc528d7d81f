// forward_cost: bound shapes at one example, then each Conv2D's, FusedConv2D's, MatMul's and
// BatchMatMulV2's products, and each attention's two.
#include "ops/model_cost.h"

#include <algorithm>
#include <string>

#include "runtime/memory_estimate.h"

namespace mirra::ops {

namespace {

// Multiply-adds of one node from its input and output types, or -1 when a shape is unknown.
int64_t multiply_adds(const graph::Node& node, const std::vector<std::vector<graph::TensorType>>& types) {
  const graph::Shape& out = types[node.id][0].shape;
  const std::optional<int64_t> outputs = out.num_elements();
  if (!outputs) return -1;
  const graph::ValueRef second = node.inputs[1];
  const graph::Shape& operand = types[second.node][second.output].shape;
  if (node.op == "BatchMatMulV2") {  // each output sums the shared dim of its matrices
    const graph::ValueRef first = node.inputs[0];
    const graph::Shape& x = types[first.node][first.output].shape;
    const bool* adjoint = node.attrs.get<bool>("adj_x");
    const int64_t shared = x.dim(x.rank() - (adjoint != nullptr && *adjoint ? 2 : 1));
    return shared < 0 ? -1 : *outputs * shared;
  }
  if (node.op == "ScaledDotProductAttention") {  // q k^T: T x S x d, then P v: T x S x e, per head
    const graph::ValueRef first = node.inputs[0];
    const graph::Shape& q = types[first.node][first.output].shape;
    const int64_t d = q.dim(3), s = operand.dim(2);
    return d < 0 || s < 0 ? -1 : *outputs / std::max<int64_t>(out.dim(3), 1) * s * (d + out.dim(3));
  }
  if (node.op == "MatMul") {  // each output sums the shared dim: a's columns (rows when transposed)
    const graph::ValueRef first = node.inputs[0];
    const graph::Shape& a = types[first.node][first.output].shape;
    const bool* transposed = node.attrs.get<bool>("transpose_a");
    const int64_t shared = a.rank() == 2 ? a.dim(transposed != nullptr && *transposed ? 0 : 1) : -1;
    return shared < 0 ? -1 : *outputs * shared;
  }
  // A convolution's filter [kh, kw, in, out]: each output sums kh x kw x in products.
  if (operand.rank() != 4 || operand.dim(0) < 0 || operand.dim(1) < 0 || operand.dim(2) < 0) return -1;
  return *outputs * operand.dim(0) * operand.dim(1) * operand.dim(2);
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
    const int64_t count = multiply_adds(node, types);
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

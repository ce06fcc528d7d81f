// l2_regularization and kernel_variables.
#include "ops/regularizers.h"

#include "ops/elementwise_ops.h"
#include "ops/optimizers.h"
#include "ops/reduce_ops.h"
#include "ops/source_ops.h"

namespace mirra::ops {

graph::ValueRef l2_regularization(graph::Builder& b, const std::vector<graph::ValueRef>& weights, double factor) {
  if (weights.empty()) {
    b.fail(graph::invalid_argument("l2_regularization: no weights"));
    return {};
  }
  auto scope = b.scope("l2_regularization");
  graph::ValueRef sum;
  for (const graph::ValueRef& w : weights) {
    const graph::ValueRef squares = reduce_sum(b, square(b, w));
    sum = sum.valid() ? add(b, sum, squares) : squares;
  }
  return mul(b, scalar_of(b, factor, sum), sum);
}

std::vector<graph::ValueRef> kernel_variables(const graph::Graph& g, const std::vector<std::string>& excluded) {
  std::vector<graph::ValueRef> out;
  for (const graph::Node& node : g.nodes()) {
    if (is_trainable_variable(node) && !contains_any(node.name, excluded)) out.push_back({node.id, 0});
  }
  return out;
}

}  // namespace mirra::ops
